"""What the write-worker tests send to worker processes (so it lives in an importable
module): an encoder that fails or kills its worker process while a trigger file exists,
and output specs over the shared corpus with an encoder modality and another container."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import numpy as np

from tests.output.corpus import SPEC

#: The worker's exit status when :class:`TriggeredEncoder` kills it.
KILLED_EXIT = 7


class TriggeredEncoder:
    """``encoder:tick_parity``: each record's tick modulo 2. While ``trigger`` exists, in a
    worker process (never in the test's own), for source ``source``: ``mode="raise"``
    raises a plain ``ValueError``, ``mode="exit"`` ends the worker with ``os._exit``. The
    trigger is a file, not an attribute, so the encoder (and the run fingerprint) stays the
    same when the test removes it and resumes."""

    def __init__(self, trigger: str | os.PathLike[str], source: str, mode: str) -> None:
        self.trigger = str(trigger)
        self.source = source
        self.mode = mode

    def timestep(self, record: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        if (ctx["track"]["source_id"] == self.source and multiprocessing.parent_process() is not None
                and Path(self.trigger).exists()):
            if self.mode == "exit":
                os._exit(KILLED_EXIT)
            raise ValueError(f"tick {record['_tick']}: the encoder's model is not loaded")
        return {"tick_parity": np.int64(record["_tick"] % 2)}


class HookLessEncoder:
    """Returns no value for its hook: ``encode_rows`` raises an ``EncoderError`` (a
    Kuration error), in a worker as in the test's process."""

    def timestep(self, record: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return {}


def spec_dict(container: str = "npz", *, encoded: bool = False) -> dict[str, Any]:
    """The shared corpus's spec (media, a segment feature) in ``container``; with
    ``encoded``, plus the ``encoder:tick_parity`` modality."""
    modalities = dict(SPEC["modalities"])
    if encoded:
        modalities["parity"] = {"dtype": "int64", "shape": [], "source": "encoder:tick_parity"}
    return {**SPEC, "container": container, "modalities": modalities}
