"""Benchmark: the per-write media cache, on frames in ``.npz`` archives.

Corpus (synthetic, on local disk): ``--sources`` runs of 3 vehicles x ``--ticks`` ticks at
10 Hz, each with one uncompressed ``.npz`` archive holding one uint8 48x64x3 frame array
per vehicle (references ``<run>.frames.npz#<vehicle>/<row>``), read by the built-in
``npy_index`` provider through ``ParquetTickAdapter``. Every span is admitted (budgets of
10^6 h), in 20-step shards: 30 shards per vehicle per 600 ticks.

Timed, best of ``--repeats``, interleaved: ``write_planned_dataset`` of one plan into a new
folder, with the default per-write cache (``cached``), and inside ``media_cache(max_bytes=0)``
(``uncached``: nothing kept, so every shard's batch reads its archive again, which is what
the provider did before the cache). Both runs count ``storage.read_bytes`` calls on the
archives and check the datasets' manifests are identical. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import timed  # noqa: E402
from _report import ratio  # noqa: E402

from kuration import storage  # noqa: E402
from kuration.budget import BudgetOptions, plan_budget  # noqa: E402
from kuration.sources.media import media_cache  # noqa: E402
from kuration.output import OutputSpec  # noqa: E402
from kuration.output.write_dataset import write_planned_dataset  # noqa: E402
from kuration.sources.schema import Schema  # noqa: E402
from kuration.scoring import score_sources  # noqa: E402
from kuration.scoring.segments import Segmenter  # noqa: E402
from kuration.sources import ParquetTickAdapter  # noqa: E402
from kuration.scoring.strategy import Strategy  # noqa: E402

FRAME = (48, 64, 3)
VEHICLES = ("bus_1", "car_7", "truck_2")
SCHEMA = Schema.from_dict({
    "sample_hz": 10, "time": "tick", "entity": "vehicle", "fields": {"speed": {"dtype": "float32"}},
    "media": {"cam": {"dtype": "uint8", "shape": list(FRAME), "provider": "npy_index"}},
})
SPEC = OutputSpec.from_dict({"shard_length": 20, "short_policy": "pad", "container": "npz", "modalities": {
    "speed": {"dtype": "float32", "shape": [], "source": "field:speed"},
    "cam": {"dtype": "uint8", "shape": list(FRAME), "source": "media:cam"},
}})


def write_corpus(root: Path, sources: int, ticks: int) -> None:
    rng = np.random.default_rng(0)
    for s in range(sources):
        name = f"run_{s:02d}"
        np.savez(root / f"{name}.frames.npz",
                 **{v: rng.integers(0, 255, (ticks, *FRAME), dtype=np.uint8) for v in VEHICLES})
        pq.write_table(pa.table({
            "tick": np.repeat(np.arange(ticks), len(VEHICLES)), "vehicle": list(VEHICLES) * ticks,
            "speed": rng.random(ticks * len(VEHICLES)).astype(np.float32),
            "cam": [f"{name}.frames.npz#{v}/{t}" for t in range(ticks) for v in VEHICLES],
        }), root / f"{name}.parquet")


def tree() -> dict[str, object]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=False).stdout.strip()
    return {"commit": git("rev-parse", "HEAD"), "dirty": git("status", "--porcelain", "kuration").splitlines()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--ticks", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-media-cache-"))
    try:
        corpus = work / "recordings"
        corpus.mkdir()
        write_corpus(corpus, args.sources, args.ticks)
        adapter = ParquetTickAdapter(corpus, SCHEMA)
        strategy = Strategy.from_dict({"method": "inclusion", "priority": {"speed.mean": 1.0}})
        scored = score_sources(adapter, segmenter=Segmenter(4, 4, unit="seconds"), strategy=strategy)
        plan = plan_budget(scored.segments, BudgetOptions(train_hours=1e6, test_hours=1e6, span_seconds=20.0,
                                                          chunking=SPEC.chunking), strategy=strategy)
        runs: dict[str, list[float]] = {"cached": [], "uncached": []}
        read_counts: dict[str, int] = {}
        manifests = {}
        reader = mock.patch.object(storage, "read_bytes", wraps=storage.read_bytes)
        read_bytes = reader.start()
        for repeat in range(args.repeats):
            for mode in ("uncached", "cached"):
                out = work / f"out-{mode}-{repeat}"
                read_bytes.reset_mock()

                def write(out=out, mode=mode):
                    if mode == "cached":
                        return write_planned_dataset(out, plan, adapter=adapter, schema=SCHEMA, spec=SPEC)
                    with media_cache(max_bytes=0):
                        return write_planned_dataset(out, plan, adapter=adapter, schema=SCHEMA, spec=SPEC)

                seconds, result = timed(write)
                runs[mode].append(round(seconds, 4))
                read_counts[mode] = sum(str(call.args[0]).endswith(".npz") for call in read_bytes.call_args_list)
                manifests[mode] = result.manifest
                shutil.rmtree(out)
        reader.stop()
        assert manifests["cached"] == manifests["uncached"], "the cache changed what was written"
        shards = len(manifests["cached"]["entries"])
        archive_mb = sum(p.stat().st_size for p in corpus.glob("*.npz")) / 1e6
        report = [ratio("write with the media cache: speedup", min(runs["uncached"]), min(runs["cached"]),
                        "the same write inside media_cache(max_bytes=0) (its seconds / cached seconds)",
                        note=f"{shards} shards; archive reads {read_counts['uncached']} uncached, "
                             f"{read_counts['cached']} cached")]
        print(json.dumps({
            "bench": "media_cache", "report": report,
            "sources": args.sources, "ticks": args.ticks, "vehicles": len(VEHICLES),
            "frame": list(FRAME), "shards": shards, "archives_mb": round(archive_mb, 1),
            "seconds": {mode: min(times) for mode, times in runs.items()}, "runs": runs,
            "archive_reads": read_counts,
            "speedup": round(min(runs["uncached"]) / min(runs["cached"]), 2), "tree": tree(),
        }, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
