"""Benchmark: the rollout store writer and reader (``kuration.rollouts``) at about 1M
candidate rows, as ratios measured in the same run. Prints one JSON object.

Data (seeded): ``--chains`` chains of ``--steps`` steps, shells of 1..``--width`` candidates
(mean about width/2 + 1), P = 3, D_s = 8, a quarter of the candidates invalid (reason bit 0,
NaN label), 5% NaN labels on valid candidates. They are built as ``RolloutChainBatch``es of
``--chains-per-batch`` chains of one source each (whole-array numpy, as a vectorised recipe
holds them) and as the same chains in ``RolloutWriteRecord``s (``to_records()``), before
timing starts; the two give byte-identical stores (checked).

* **write**: ``write_rollout_zarr_store`` (normalize + q_h + zarr + sidecar) from the records
  and from the batches, against plain zarr writes of the very same arrays (all of them,
  ``q_h/`` included, read back from the store) with the same chunks, shards, codec, fill
  value and ``write_empty_chunks``, one array after another; ratio = plain / writer
  (throughput), one per input path, each against its own interleaved plain run (the batch
  pair before the records are built); the target >= 0.8 applies to the batch path;
* **array_rows**: ``reader.array_rows("candidates/position", 256 random rows)`` against
  ``zarr_array.oindex[rows]`` on the same array; ratio = reader / direct (target <= 2);
* **q_h rebuild**: ``reader.q_h_view(discount_gamma=0.9)`` against reading the factual
  arrays it needs (``Q_H_INPUT_PATHS``) through ``reader.array``; ratio = rebuild / read
  (target <= 3);
* **validate**: ``validate_rollout_zarr_store`` on the written store against one full read
  of it (every array once, ``zarr_array[...]``); ratio = validate / read (target <= 2).

Each pair is timed interleaved (A, B, A, B, ...) and each side's figure is its best of
``--repeats`` runs, so a burst of load on the shared machine hits both sides alike.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import ratio  # noqa: E402
from kuration.rollouts import (  # noqa: E402
    RolloutZarrStoreReader,
    validate_rollout_zarr_store,
    write_rollout_zarr_store,
)
from kuration.rollouts.qh import Q_H_INPUT_PATHS  # noqa: E402
from kuration.rollouts.records import RolloutChainBatch, RolloutSourceRef  # noqa: E402
from kuration.rollouts.schema import ARRAYS  # noqa: E402


def make_batches(chains: int, steps: int, width: int, seed: int, chains_per_batch: int = 2
                 ) -> list[RolloutChainBatch]:
    """The benchmark chains as batches of ``chains_per_batch`` chains of one source each, built
    with whole-array numpy calls (as a vectorised recipe holds its output)."""
    rng = np.random.default_rng(seed)
    batches = []
    for b in range(-(-chains // chains_per_batch)):
        c = min(chains_per_batch, chains - b * chains_per_batch)
        s = c * steps
        counts = rng.integers(1, width + 1, s)
        n = int(counts.sum())
        starts = np.cumsum(counts) - counts
        valid = rng.random(n) >= 0.25
        valid[starts] = True  # the selected (first) candidate is valid
        labels = rng.normal(size=n).astype(np.float32)
        labels[~valid] = np.nan
        labels[rng.random(n) < 0.05] = np.nan
        batches.append(RolloutChainBatch(
            source=RolloutSourceRef(shard_path=f"train/shard_{b % 97:06d}.npz", shard_sha256=f"{b % 97 + 1:064x}",
                                    entity="e", split="train", n_states=steps),
            strategy_id="recorded", mixture_id="m", target_kind="future_position",
            target_values=rng.normal(size=(c, 3)).astype(np.float32), target_label_valid=np.ones(c, bool),
            chain_lengths=np.full(c, steps), termination_reasons=["horizon"] * c,
            source_rows=np.tile(np.arange(steps), c), states=rng.normal(size=(s, 8)).astype(np.float32),
            shell_counts=counts, selected_shell_index=np.zeros(s, np.int64), rewards=rng.normal(size=s),
            action_ids=np.arange(n) - np.repeat(starts, counts), positions=rng.normal(size=(n, 3)).astype(np.float32),
            valid_action=valid, reason_bits=np.where(valid, 0, 1).astype(np.uint32), labels=labels,
            label_valid=valid & np.isfinite(labels),
            audit_valid_candidates=np.add.reduceat(valid, starts).astype(np.int64)))
    return batches


def interleaved_best(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Each callable's best time over ``repeats`` rounds, the callables taking turns within a
    round (a GC before each run)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            gc.collect()
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def plain_write(store: Path, dest: Path) -> Callable[[], None]:
    """A run writing every array of ``store`` to ``dest`` with plain zarr, one after another,
    with each array's chunks, shards, fill value and the writer's codec."""
    import zarr
    from zarr.codecs import ZstdCodec

    source = zarr.open_group(str(store), mode="r")
    arrays = [(spec, source[spec.path]) for spec in ARRAYS if spec.path in source]
    data = [(spec, a.chunks, a.shards, a.fill_value, a[...]) for spec, a in arrays]

    def run() -> None:
        shutil.rmtree(dest, ignore_errors=True)
        root = zarr.open_group(str(dest), mode="w", zarr_format=3)
        groups: dict[str, Any] = {}
        for spec, chunks, shards, fill, values in data:
            group = groups.get(spec.group) or groups.setdefault(spec.group, root.create_group(spec.group))
            out = group.create_array(spec.name, shape=values.shape, dtype=values.dtype, chunks=chunks, shards=shards,
                                     compressors=ZstdCodec(level=0, checksum=False), fill_value=fill,
                                     config={"write_empty_chunks": True})
            out[...] = values

    return run


def store_bytes(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def read_everything(store: Path) -> Callable[[], None]:
    """A run reading every array of ``store`` once with zarr (a fresh open, as validate does)."""
    import zarr

    def run() -> None:
        root = zarr.open_group(str(store), mode="r")
        for spec in ARRAYS:
            if spec.path in root:
                root[spec.path][...]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--width", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chains-per-batch", type=int, default=2)
    args = parser.parse_args()
    batches = make_batches(args.chains, args.steps, args.width, seed=0, chains_per_batch=args.chains_per_batch)
    with tempfile.TemporaryDirectory() as tmp:
        store, plain = Path(tmp) / "store", Path(tmp) / "plain"
        write_rollout_zarr_store(store, batches)
        batch_bytes = store_bytes(store)
        # The batch pair is timed before the records exist: their ~600k objects would lengthen
        # every full GC pass on both sides, which is the records' cost, not the batches'.
        batch_write = interleaved_best({"batches": lambda: write_rollout_zarr_store(store, batches),
                                        "plain": plain_write(store, plain)}, args.repeats)
        records = [record for batch in batches for record in batch.to_records()]
        result = write_rollout_zarr_store(store, records)
        if store_bytes(store) != batch_bytes:
            raise SystemExit("the same chains as records and as batches gave different stores")
        record_write = interleaved_best({"records": lambda: write_rollout_zarr_store(store, records),
                                         "plain": plain_write(store, plain)}, args.repeats)

        import zarr

        reader = RolloutZarrStoreReader(store)
        direct = zarr.open_array(str(store / "candidates" / "position"), mode="r")
        rng = np.random.default_rng(1)
        rows = rng.integers(0, result.num_candidates, 256)
        reader.array_rows("candidates/position", rows)  # warm the node cache, as a reused reader has it
        lookup = interleaved_best({"array_rows": lambda: reader.array_rows("candidates/position", rows),
                                   "oindex": lambda: direct.oindex[rows]}, 7 * args.repeats)
        rebuild = interleaved_best({"rebuild": lambda: reader.q_h_view(0.9),
                                    "read": lambda: [reader.array(p) for p in Q_H_INPUT_PATHS]}, args.repeats)
        outcome = validate_rollout_zarr_store(store)
        if not outcome.ok:
            raise SystemExit(f"the benchmark store fails validation: {outcome.errors[:3]}")
        validation = interleaved_best({"validate": lambda: validate_rollout_zarr_store(store),
                                       "read": read_everything(store)}, args.repeats)
        files = sum(1 for p in store.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    plain = "plain zarr writes of the same arrays, same chunks, shards and codecs (its seconds / the writer's)"
    report = [
        ratio("write from RolloutChainBatch: plain zarr / writer", batch_write["plain"], batch_write["batches"],
              plain, target=">= 0.8", note=f"{len(batches)} batches; the columnar path the pipeline uses"),
        ratio("write from RolloutWriteRecord: plain zarr / writer", record_write["plain"], record_write["records"],
              plain, note="the per-step records path; the target applies to the batch path"),
        ratio("array_rows of 256 random rows / oindex", lookup["array_rows"], lookup["oindex"],
              "zarr oindex of the same rows on the same array", target="<= 2"),
        ratio("q_h_view(0.9) rebuild / reading its inputs", rebuild["rebuild"], rebuild["read"],
              "reading the factual arrays the rebuild needs through the same reader", target="<= 3"),
        ratio("validate_rollout_zarr_store / one full read", validation["validate"], validation["read"],
              "every array of the store read once, fresh open", target="<= 2"),
    ]
    print(json.dumps({
        "bench": "rollout_store", "report": report,
        "candidates": result.num_candidates, "steps": result.num_steps, "rollouts": result.num_rollouts,
        "store_files": files, "store_mb": round(size / 1e6, 1),
        "batches": len(batches),
        "write_batches_s": round(batch_write["batches"], 3), "plain_zarr_write_s": round(batch_write["plain"], 3),
        "write_ratio_batches": round(batch_write["plain"] / batch_write["batches"], 3),
        "write_records_s": round(record_write["records"], 3),
        "plain_zarr_write_with_records_s": round(record_write["plain"], 3),
        "write_ratio_records": round(record_write["plain"] / record_write["records"], 3),
        "array_rows_256_s": round(lookup["array_rows"], 5), "oindex_256_s": round(lookup["oindex"], 5),
        "array_rows_ratio": round(lookup["array_rows"] / lookup["oindex"], 3),
        "q_h_rebuild_s": round(rebuild["rebuild"], 3), "read_factual_s": round(rebuild["read"], 3),
        "q_h_rebuild_ratio": round(rebuild["rebuild"] / rebuild["read"], 3),
        "validate_s": round(validation["validate"], 3), "read_store_s": round(validation["read"], 3),
        "validate_ratio": round(validation["validate"] / validation["read"], 3),
    }, indent=1))


if __name__ == "__main__":
    main()
