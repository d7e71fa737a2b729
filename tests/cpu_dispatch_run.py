"""One run of the CPU-dispatch determinism test (``tests/test_cpu_dispatch.py``), meant to be
started in a fresh process whose ``NPY_DISABLE_CPU_FEATURES`` picks numpy's SIMD kernels.

``python -m tests.cpu_dispatch_run RECORDINGS OUT ROLLOUTS`` plans every case of
``tests/budget/pinned_pools.py`` (whose digests ``tests/budget/test_plan_digest.py`` pins),
then scores, plans and writes a small dataset from the recordings :func:`write_recordings`
made into ``OUT`` (and again with ``write_workers=2`` beside it, :func:`write_workers_out`),
writes a small rollout store (:func:`rollout_records`) into ``ROLLOUTS``,
and prints one JSON object: the plan digests and the numpy CPU features this process saw.

The recordings are made to hit what differs between kernels: zeros of both signs (a window
of ``-0.0`` next to one of ``0.0``, so a span's ``max`` of their maxima may be either),
NaNs with a sign and a payload, absent ticks, and tracks whose length is not a multiple of
the stride. The rollout records carry the same: ``-0.0`` and signed NaNs with a payload in
states, positions, labels, rewards and audit margins, ragged shells, invalid candidates.
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
from kuration.rollouts import write_rollout_zarr_store
from kuration.rollouts.records import (
    CandidateShell,
    RolloutSourceRef,
    RolloutStepRecord,
    RolloutTargetRecord,
    RolloutWriteRecord,
)
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


def _with_odd_floats(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` (float32) with about a fifth of the entries ``-0.0`` and a tenth a signed NaN."""
    out = values.astype(np.float32).copy()
    odd = rng.random(out.shape)
    out[odd < 0.2] = -0.0
    out[odd > 0.9] = SIGNED_NAN
    return out


def rollout_records(seed: int = 11) -> list[RolloutWriteRecord]:
    """Twelve hand-built chains of 1..5 steps over three sources, shells of 1..6 candidates."""
    rng = np.random.default_rng(seed)
    records = []
    for c in range(12):
        steps = []
        for s in range(int(rng.integers(1, 6))):
            width = int(rng.integers(1, 7))
            valid = rng.random(width) < 0.7
            valid[0] = True
            labels = _with_odd_floats(rng.normal(size=width), rng)
            labels[~valid] = SIGNED_NAN
            positions = _with_odd_floats(rng.normal(size=(width, 3)), rng)
            steps.append(RolloutStepRecord(
                source_row=s, state=_with_odd_floats(rng.normal(size=4), rng),
                shell=CandidateShell(action_ids=np.arange(width), positions=positions, valid_action=valid,
                                     reason_bits=np.where(valid, 0, 1 << 1).astype(np.uint32),
                                     labels=labels, label_valid=valid & np.isfinite(labels)),
                selected_shell_index=0, reward=float(-0.0 if s % 2 else rng.normal()),
                audit_valid_candidates=int(valid.sum()) if c % 3 else None,
                audit_selected_margin=[None, -0.0, float(SIGNED_NAN), float(rng.normal())][(c + s) % 4]))
        records.append(RolloutWriteRecord(
            source=RolloutSourceRef(shard_path=f"train/shard_{c % 3:06d}.npz", shard_sha256=f"{c % 3 + 1:064x}",
                                    entity=f"d{c % 2}", split="train", n_states=8),
            target=RolloutTargetRecord(kind="future_position", value=_with_odd_floats(rng.normal(size=3), rng),
                                       label_valid=c % 5 != 4),
            strategy_id=["recorded", "greedy"][c % 2], mixture_id="m", steps=tuple(steps),
            termination_reason="horizon"))
    return records


def write_workers_out(out: Path) -> Path:
    """Where the run writes the same dataset again with ``write_workers=2``: beside ``out``.
    Its workers fork from this process's forkserver, so they run the same SIMD dispatch."""
    return out.with_name(out.name + "_write_workers")


def run(recordings: Path, out: Path, rollouts: Path) -> dict:
    digests = {}
    for name in sorted(CASES):
        with pytest.MonkeyPatch.context() as mp:
            digests[name] = plan_digest(run_case(name, mp))
    schema = Schema.from_dict(SCHEMA)
    for where, write_workers in ((out, 1), (write_workers_out(out), 2)):
        result = write_dataset(
            where, schema=schema, adapter=ParquetTickAdapter(recordings, schema),
            strategy=Strategy.from_dict(STRATEGY), segmenter=Segmenter(10, 5, unit="steps"),
            spec=OutputSpec.from_dict(SPEC), train_hours=1.0, test_hours=1.0, span_steps=40, seed=3,
            write_workers=write_workers,
        )
    write_rollout_zarr_store(rollouts, rollout_records(), discount_gamma=0.87, q_h_chunk_states=8)
    from numpy._core._multiarray_umath import __cpu_features__

    return {"plan_digests": digests, "written_plan": plan_digest(result.budget_plan),
            "cpu_features": {k: bool(v) for k, v in __cpu_features__.items()}}


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))))
