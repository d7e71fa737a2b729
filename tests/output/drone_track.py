"""One drone's track and the schema it follows, for the output tests: a position, a
battery, a gear and the wind, a camera frame by reference, and rows where the drone is
absent; with a media decoder that makes each frame from its row, and encoders that serve an
``encoder:act`` hook (gear and tick) record by record or in one batch."""

from __future__ import annotations

import numpy as np

from kuration.sources.schema import Schema
from kuration.sources.tracks import Track

SCHEMA = Schema.from_dict({
    "sample_hz": 10, "time": "t", "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "battery": {"dtype": "float64"},
               "gear": {"dtype": "int16"}},
    "globals": {"wind": {"dtype": "float32"}},
    "media": {"frame": {"dtype": "uint8", "shape": [4, 5, 3], "provider": "npy_index"}},
})


def make_track(n=6, absent=(2,), meta=None) -> Track:
    """``n`` rows of drone_1 of src/a, absent at ``absent``; ``meta`` defaults to {"label": 7}."""
    present = np.ones(n, bool)
    present[list(absent)] = False
    pos = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    pos[~present] = 0
    refs = np.array([None if not p else f"frames.npy#{i}" for i, p in enumerate(present)], dtype=object)
    return Track("src/a", "drone_1", np.arange(10, 10 + n), present,
                 {"pos": pos, "battery": np.linspace(1, 0, n), "gear": np.arange(n, dtype=np.int16),
                  "wind": np.full(n, 3.5, np.float32)},
                 {"frame": refs}, [()] * n, 10.0, meta if meta is not None else {"label": 7})


class FakeMedia:
    """Decodes ``frames.npy#<row>`` to a frame of ``row + 1``; remembers every batch."""

    def __init__(self):
        self.calls = []

    def decode_media(self, column, refs, *, source_id):
        self.calls.append(list(refs))
        return np.stack([np.full((4, 5, 3), int(r.split("#")[1]) + 1, np.uint8) for r in refs])


class StepEncoder:
    """``act``: the record's gear and tick, one record at a time (for :func:`make_track`'s track)."""

    def timestep(self, record, ctx):
        assert ctx["track"]["source_id"] == "src/a" and ctx["track"]["label"] == 7
        return {"act": np.array([record["gear"], record["_tick"]])}


class BatchEncoder(StepEncoder):
    """:class:`StepEncoder` with ``encode_batch``, counting its calls."""

    calls = 0

    def encode_batch(self, records, ctx):
        BatchEncoder.calls += 1
        return {"act": np.array([[r["gear"], r["_tick"]] for r in records])}
