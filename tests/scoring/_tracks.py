"""Small track builders for the scoring tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuration.sources.schema import Schema
from kuration.sources.tracks import Track

SCHEMA = Schema.from_dict({
    "sample_hz": 10,
    "time": "t",
    "entity": "agent",
    "fields": {
        "speed": {"dtype": "float32"},
        "pos": {"dtype": "float64", "shape": [3]},
        "grid": {"dtype": "int16", "shape": [2, 2]},
        "braking": {"dtype": "bool"},
    },
    "globals": {"temp": {"dtype": "float64"}},
    "media": {"frame": {"dtype": "uint8", "shape": [4, 4, 3], "provider": "npy_index"}},
    "tags": "events",
})


def make_track(
    present: Sequence[bool],
    *,
    values: dict[str, Any] | None = None,
    tags: Sequence[Sequence[str]] | None = None,
    ticks: Sequence[int] | None = None,
    sample_hz: float = 10.0,
    source_id: str = "src",
    entity_id: Any = "a",
) -> Track:
    """A track with zero-filled absent rows, as ``tracks_from_ticks`` builds them."""
    present_arr = np.asarray(present, dtype=bool)
    n = len(present_arr)
    vals = {k: np.array(v) for k, v in (values or {}).items()}
    for name, arr in vals.items():
        if name != "temp":  # globals are known at absent ticks; fields are zero-filled there
            arr[~present_arr] = 0
    tick_arr = np.arange(n, dtype=np.int64) if ticks is None else np.asarray(ticks, dtype=np.int64)
    tag_list = [tuple(t) for t in tags] if tags is not None else [()] * n
    return Track(source_id, entity_id, tick_arr, present_arr, vals, {}, tag_list, sample_hz)
