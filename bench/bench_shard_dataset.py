"""Benchmark: ``kuration.torch.ShardDataset`` through a ``DataLoader`` with two worker
processes against the same loader with none (``num_workers=0``), in one run.

Workload: a committed dataset of ``--shards`` json shards (default 48), each 64 steps of
``pos`` float32[3], ``label`` int64 and ``frame`` uint8 48x48x3 plus ``_present``: decoding
a shard is real work (parsing about 1.7 MB of JSON text and restoring the declared dtypes),
the kind of per-item cost worker processes exist to spread. Built once, read once before
timing.

Timed, interleaved, best of ``--repeats``: one full pass over the loader (``batch_size=4``,
the default collate, ``persistent_workers=False``) with ``num_workers=0`` and with
``num_workers=2``; the two-worker pass includes starting its workers (fork). ``speedup`` =
seconds with 0 workers / seconds with 2 (the target is >= 1.6 on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _measure import best_of  # noqa: E402
from _report import ratio  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402
from bench_iter_shards import STEPS, build  # noqa: E402

FRAME = (48, 48, 3)
TARGET_SPEEDUP = 1.6  # on two cores

from torch.utils.data import DataLoader  # noqa: E402

from kuration.torch import ShardDataset  # noqa: E402


def one_pass(out: Path, workers: int) -> int:
    loader = DataLoader(ShardDataset(out, split="train"), batch_size=4, num_workers=workers)
    return sum(len(batch["label"]) for batch in loader)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-shard-dataset-"))
    try:
        out = build(work / "out", args.shards, container="json", frame=FRAME)
        size = sum(p.stat().st_size for p in (out / "train").iterdir())
        runs: dict[str, list[float]] = {"workers_0": [], "workers_2": []}
        for workers in (0, 2):  # warm: page cache, imports
            assert one_pass(out, workers) == args.shards
        for _ in range(args.repeats):
            for workers in (0, 2):
                seconds, _, items = best_of(lambda w=workers: one_pass(out, w), 1)
                assert items == args.shards
                runs[f"workers_{workers}"].append(seconds)
        best = {k: min(v) for k, v in runs.items()}
        report = [ratio("DataLoader num_workers=2 speedup", best["workers_0"], best["workers_2"],
                        "the same loader with num_workers=0 (its seconds / the 2-worker seconds)",
                        target=f">= {TARGET_SPEEDUP:g}",
                        note=f"{args.shards} json shards; workers started in the pass")]
        print(json.dumps({
            "bench": "shard_dataset", "report": report,
            "container": "json", "shards": args.shards, "steps_per_shard": STEPS,
            "frame": list(FRAME),
            "bytes": size, "seconds": {k: round(v, 3) for k, v in best.items()},
            "shards_per_s": {k: round(args.shards / v, 1) for k, v in best.items()},
            "speedup": round(best["workers_0"] / best["workers_2"], 3), "target": TARGET_SPEEDUP,
            "runs": {k: [round(t, 3) for t in v] for k, v in runs.items()},
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "tree": kuration_tree_state(),
        }, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
