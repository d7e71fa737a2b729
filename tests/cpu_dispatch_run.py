"""One run of the CPU-dispatch determinism test (``tests/test_cpu_dispatch.py``), meant to be
started in a fresh process whose ``NPY_DISABLE_CPU_FEATURES`` picks numpy's SIMD kernels.

``python -m tests.cpu_dispatch_run RECORDINGS OUT`` plans every case of
``tests/budget/pinned_pools.py`` (whose digests ``tests/budget/test_plan_digest.py`` pins),
then scores, plans and writes a small dataset from the recordings :func:`write_recordings`
made into ``OUT``, and prints one JSON object: the plan digests and the numpy CPU features
this process saw.

The recordings are made to hit what differs between kernels: zeros of both signs (a window
of ``-0.0`` next to one of ``0.0``, so a span's ``max`` of their maxima may be either),
NaNs with a sign and a payload, absent ticks, and tracks whose length is not a multiple of
the stride.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.output import OutputSpec
from kuration.output.write_dataset import write_dataset
from kuration.sources.schema import Schema
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.scoring.strategy import Strategy
from tests.budget.pinned_pools import CASES, plan_digest, run_case

SCHEMA = {"sample_hz": 10, "time": "tick", "entity": "drone",
          "fields": {"speed": {"dtype": "float32"}, "pos": {"dtype": "float32", "shape": [3]}}}
STRATEGY = {"method": "inclusion", "priority": {"speed.max": 1.0, "pos[2].min": 0.5}}
SPEC = {"shard_length": 16, "short_policy": "pad", "container": "npz", "modalities": {
    "speed": {"dtype": "float32", "shape": [], "source": "field:speed"},
    "speed_max": {"dtype": "float32", "shape": [], "source": "segment:speed.max"},
    "pos_min": {"dtype": "float32", "shape": [], "source": "segment:pos[2].min"},
}}
#: A quiet NaN with the sign bit and a payload: what 0/0 gives on x86, and more.
SIGNED_NAN = np.array([0xFFC00001], np.uint32).view(np.float32)[0]


def write_recordings(root: Path) -> None:
    """Three sources of two drones; blocks of ``-0.0``, ``0.0``, mixed zeros and motion."""
    rng = np.random.default_rng(7)
    for s in range(3):
        ticks = 237 + 11 * s  # not a multiple of the stride
        blocks = []
        for _ in range(2):
            speed = np.zeros(ticks, np.float32)
            for a in range(0, ticks, 20):
                kind = rng.integers(0, 4)
                if kind == 0:
                    speed[a:a + 20] = -0.0
                elif kind == 1:
                    speed[a:a + 20] = np.where(rng.random(min(20, ticks - a)) < 0.5, -0.0, 0.0)
                elif kind == 2:
                    speed[a:a + 20] = rng.random(min(20, ticks - a)).astype(np.float32)
            if s == 1:
                speed[100] = SIGNED_NAN
            blocks.append(speed)
        present = rng.random((ticks, 2)) > 0.05
        present[0] = present[-1] = True  # every drone spans the whole recording
        rows = [(t, d) for t in range(ticks) for d in range(2) if present[t, d]]
        pos = np.where(np.asarray([blocks[d][t] for t, d in rows])[:, None] > 0,
                       rng.normal(size=(len(rows), 3)), -0.0).astype(np.float32)
        table = pa.table({
            "tick": pa.array([t for t, _ in rows], pa.int64()),
            "drone": pa.array([f"d{d}" for _, d in rows]),
            "speed": pa.array(np.asarray([blocks[d][t] for t, d in rows], np.float32)),
            "pos": pa.FixedSizeListArray.from_arrays(pa.array(pos.reshape(-1)), 3),
        })
        root.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / f"rec_{s}.parquet")


def run(recordings: Path, out: Path) -> dict:
    digests = {}
    for name in sorted(CASES):
        with pytest.MonkeyPatch.context() as mp:
            digests[name] = plan_digest(run_case(name, mp))
    schema = Schema.from_dict(SCHEMA)
    result = write_dataset(
        out, schema=schema, adapter=ParquetTickAdapter(recordings, schema), strategy=Strategy.from_dict(STRATEGY),
        segmenter=Segmenter(10, 5, unit="steps"), spec=OutputSpec.from_dict(SPEC), train_hours=1.0, test_hours=1.0,
        span_steps=40, seed=3,
    )
    from numpy._core._multiarray_umath import __cpu_features__

    return {"plan_digests": digests, "written_plan": plan_digest(result.budget_plan),
            "cpu_features": {k: bool(v) for k, v in __cpu_features__.items()}}


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]), Path(sys.argv[2]))))
