"""The stage names of a split, defined once for every module that names them.

A ``splits.json`` assigns samples to four stages. ``train``, ``val`` and ``test`` are
pairwise exclusive: leakage is checked across them, a budget fills each, and a dataset's
shards sit in one folder per each. ``predict`` is inference-only: it may overlap them, and
it is never budgeted or written.

This module imports nothing, so the budget and the writer can name the stages without
reaching into the split machinery.
"""

#: Every stage of a ``splits.json``, in file order.
STAGES = ("train", "val", "test", "predict")
#: The stages that must not share samples: the splits a budget fills and a dataset holds.
EXCLUSIVE_STAGES = STAGES[:3]

__all__ = ["EXCLUSIVE_STAGES", "STAGES"]
