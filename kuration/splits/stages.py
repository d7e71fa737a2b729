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

#: What each stage is for, in a few words beside its counts (a table of the stages shows them).
_PURPOSES = {
    "train": "fits the model",
    "val": "chooses between models",
    "test": "held-out measure",
    "predict": "inference only, may overlap the others; not in the dataset",
}


def stage_purpose(stage: str, *, predict_is_everything: bool = False) -> str:
    """What ``stage`` is for, for a person reading its counts. ``predict_is_everything``: the
    split names no ``predict`` samples, which the seed reads as the whole universe (so the
    predict row counts every sample, train, val and test ones included)."""
    if stage not in _PURPOSES:
        raise ValueError(f"unknown stage {stage!r}; the stages are {list(STAGES)}")
    if stage == "predict" and predict_is_everything:
        return "the whole universe (the split lists no predict samples): inference only; not in the dataset"
    return _PURPOSES[stage]


__all__ = ["EXCLUSIVE_STAGES", "STAGES", "stage_purpose"]
