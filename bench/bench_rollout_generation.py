"""Benchmark: rollout generation (``rollout_records_from_dataset`` with the built-in
``MotionDirectionRecipe``) against reading the same shards, in one run. Prints one JSON
object.

Workload (seeded): a committed npz dataset shaped like the demo's train split, built once
through the commit protocol in a temp dir: ``--shards`` shards (default 2,410) of 64 rows,
with the demo's modalities (``pos`` float32[3], ``vel`` float32[3], ``battery``,
``near_miss``, ``wind`` float32[2], ``frame`` uint8 12x16x3) and a presence mask. Each shard
is one drone's flight at 10 Hz: a smoothed random velocity (horizontal and vertical), a
battery draining from 0.1..1 (some shards fly under the reserve), a site of +-160 m (some
flights leave it), one shard in 20 with absent rows and one in 10 shorter than 64 rows.
Read once before timing, so the page cache is warm.

Timed, interleaved, best of ``--repeats``:

- ``read``: ``for arrays, meta in iter_shards(dataset, split="train", with_meta=True,
  verify=True)`` (every shard's size and SHA-256 checked), the raw baseline;
- ``generate``: ``rollout_records_from_dataset(dataset, MotionDirectionRecipe())``, which
  reads the same way and runs the recipe on every shard;
- ``recipe``: ``records_for_shard`` alone on every shard, arrays read before timing;
- ``write``: ``write_rollout_store_atomically`` of the generation's ``records`` (what the
  recipe returned: one ``RolloutChainBatch`` per shard, or one record per chain before the
  recipe emitted batches) into a fresh directory, with ``writer_options()``: the rest of
  ``build_rollout_store``.

``ratio`` = generate seconds / read seconds: how much generation costs over reading the
shards. ``steps_per_s`` = recorded steps generated per second of ``generate``. Counts are
taken from records or batches alike, so the script also runs on code whose recipe returns
records.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._measure import best_of  # noqa: E402
from bench._report import figure, ratio  # noqa: E402
from kuration.canonical.hashing import readable_json  # noqa: E402
from kuration.output.commit_protocol import publish_committed  # noqa: E402
from kuration.output.containers import get_container  # noqa: E402
from kuration.output.containers.protocol import ShardArrays  # noqa: E402
from kuration.output.destinations import LocalDestination  # noqa: E402
from kuration.output.spec import PRESENT, OutputSpec  # noqa: E402
from kuration.read import iter_shards  # noqa: E402
from kuration.read.committed import load_committed  # noqa: E402
from kuration.rollouts import (  # noqa: E402
    MotionDirectionRecipe, RolloutChainBatch, RolloutGeneration, RolloutSourceRef, rollout_records_from_dataset,
    write_rollout_store_atomically,
)

ROWS, FRAME, HZ = 64, (12, 16, 3), 10.0
SPEC = OutputSpec.from_dict({"shard_length": ROWS, "short_policy": "pad", "container": "npz", "presence_mask": True,
                             "modalities": {
                                 "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
                                 "frame": {"dtype": "uint8", "shape": list(FRAME), "source": "media:frame"},
                                 "near_miss": {"dtype": "float32", "shape": [], "source": "segment:tag.near_miss"},
                                 "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                                 "vel": {"dtype": "float32", "shape": [3], "source": "field:vel"},
                                 "wind": {"dtype": "float32", "shape": [2], "source": "field:wind"}}})


def flight(i: int) -> ShardArrays:
    """One drone's shard: a smoothed random flight, padded to ROWS when shorter."""
    rng = np.random.default_rng(i)
    n = int(rng.integers(8, ROWS)) if i % 10 == 9 else ROWS
    kicks = rng.normal(0, [1.5, 1.5, 0.4], (n, 3))
    vel = np.cumsum(kicks, axis=0) / np.sqrt(np.arange(1, n + 1))[:, None] * 3
    vel[rng.random(n) < 0.1] = 0.0  # hovering now and then
    start = np.array([rng.uniform(-150, 150), rng.uniform(-150, 150), rng.uniform(2, 40)])
    pos = start + np.cumsum(vel / HZ, axis=0)
    battery = rng.uniform(0.1, 1.0) - np.arange(n) * 0.002
    present = np.ones(ROWS, bool)
    present[n:] = False
    if i % 20 == 7:
        present[rng.integers(0, n, 3)] = False

    def padded(values: np.ndarray, dtype: type) -> np.ndarray:
        out = np.zeros((ROWS, *values.shape[1:]), dtype)
        out[:n] = values
        return out

    arrays = {"pos": padded(pos, np.float32), "vel": padded(vel, np.float32), "battery": padded(battery, np.float32),
              "near_miss": padded(rng.random(n) < 0.05, np.float32),
              "wind": padded(rng.normal(0, 2, (n, 2)), np.float32),
              "frame": rng.integers(0, 255, (ROWS, *FRAME), dtype=np.uint8)}
    return ShardArrays(arrays, present, n)


def build(out: Path, shards: int) -> Path:
    """A committed dataset of ``shards`` train shards, built through the commit protocol."""
    destination, box = LocalDestination(out), get_container("npz")
    entries = []
    for i in range(shards):
        path = f"train/flight{i:05d}_shard0000{box.extension}"
        shard = flight(i)
        written = destination.stage_shard(path, box, shard).seal()
        entries.append({"path": path, "split": "train", "source_id": f"flight{i:05d}", "entity_id": "str:'drone'",
                        "span_index": None, "shard_index": 0, "n_steps": shard.n_steps, "rows": ROWS,
                        "padded": shard.n_steps < ROWS, "container": "npz", "bytes": written.bytes,
                        "sha256": written.sha256})
    manifest = {"format": 1, "output": SPEC.to_dict(), "entries": entries}
    publish_committed(destination, run_fingerprint="c" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json({"job": {}}))
    return out


def counts(items: Any) -> tuple[int, int, int]:
    """Chains, steps and candidates of a generation's items, records or batches."""
    chains = steps = candidates = 0
    for item in items:
        if isinstance(item, RolloutChainBatch):
            chains, steps = chains + len(item.chain_lengths), steps + int(np.sum(item.chain_lengths))
            candidates += int(np.sum(item.shell_counts))
        else:
            chains, steps = chains + 1, steps + len(item.steps)
            candidates += sum(len(step.shell) for step in item.steps)
    return chains, steps, candidates


def write_store(generation: RolloutGeneration, store: Path) -> None:
    """What ``build_rollout_store`` does after generating: the atomic write."""
    write_rollout_store_atomically(store, generation.records, **generation.writer_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=2410)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_rollout_generation_"))
    try:
        dataset = load_committed(build(work / "dataset", args.shards))
        recipe = MotionDirectionRecipe()

        def read() -> int:
            return sum(len(arrays["pos"]) for arrays, _ in iter_shards(dataset, split="train", with_meta=True,
                                                                        verify=True))

        shards = []
        for arrays, meta in iter_shards(dataset, split="train", with_meta=True, verify=True):  # also warms the cache
            source = RolloutSourceRef(meta["path"], meta["sha256"], str(meta["entity_id"]), "train", meta["n_steps"])
            shards.append(({name: arrays[name] for name in (*SPEC.modalities, PRESENT) if name in arrays}, source))

        runs: dict[str, list[float]] = {"read": [], "generate": [], "recipe": [], "write": []}
        generation = None
        for repeat in range(args.repeats):  # interleaved, so drifting load hits every figure alike
            runs["read"] += best_of(read, 1)[1]
            seconds, _, generation = best_of(lambda: rollout_records_from_dataset(dataset, recipe), 1)
            runs["generate"].append(seconds)
            runs["recipe"] += best_of(lambda: [recipe.records_for_shard(a, s) for a, s in shards], 1)[1]
            store = work / f"store{repeat}"
            runs["write"] += best_of(partial(write_store, generation, store), 1)[1]
            shutil.rmtree(store)
        assert generation is not None
        chains, steps, candidates = counts(generation.records)
        best = {name: min(times) for name, times in runs.items()}
        read_baseline = "iter_shards(dataset, split='train', verify=True) over the same shards"
        report = [
            ratio("rollout_records_from_dataset / reading the shards", best["generate"], best["read"], read_baseline,
                  note=f"time over time; {chains:,} chains, {steps:,} steps from {args.shards} shards"),
            ratio("the recipe alone / reading the shards", best["recipe"], best["read"], read_baseline,
                  note="records_for_shard on arrays read beforehand"),
            ratio("write_rollout_store_atomically / reading the shards", best["write"], best["read"], read_baseline),
            figure("generation throughput", steps / best["generate"], "steps/s", "absolute (no ratio)"),
        ]
        print(json.dumps({
            "bench": "rollout_generation", "report": report,
            "shards": args.shards, "rows": sum(len(a["pos"]) for a, _ in shards),
            "bytes": sum(int(e["bytes"]) for e in json.loads((work / "dataset" / "dataset_manifest.json").read_text())
                         ["entries"]),
            "items": len(generation.records), "chains": chains, "steps": steps, "candidates": candidates,
            "read_s": round(best["read"], 3), "generate_s": round(best["generate"], 3),
            "recipe_s": round(best["recipe"], 3), "write_s": round(best["write"], 3),
            "ratio": round(best["generate"] / best["read"], 2),
            "steps_per_s": round(steps / best["generate"]),
            "runs_s": {name: [round(t, 3) for t in times] for name, times in runs.items()},
        }, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
