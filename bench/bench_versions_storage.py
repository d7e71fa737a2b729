"""Benchmark: the storage a rebuild adds when one recording changes (issue 25), on a local
folder and on S3, against the bytes of that recording's shards, in the same run.

Issue 25, "Done when": "The storage added by a rebuild that changes one recording is within
1.5x the bytes of that recording's shards (measured in a bench, local and S3)."

Two corpora (``--corpora``), each ``--sources`` recordings (default 40), every recording in
a fixed split (every tenth in val, the next in test, the rest in train, as a stable split
extension keeps it) and every span admitted:

- **frames**: ``bench_write_dataset.py``'s adapter and tensors (64-step npz shards of
  ``pos``, ``battery``, a uint8 150x280x3 ``frame``, ``label`` and the mask: 8.07 MB a
  shard), recordings of 1 drone x 128 ticks: 2 shards a recording, 80 shards, 645 MB a
  version. The changed recording is revised in memory: other positions, batteries, labels
  and frames, and a fingerprint that names the revision.
- **demo**: the demo landing zone (``write_demo_landing_zone``, 8 sites x round(sources /
  8) recordings of 2-4 minutes, 2-4 drones each; the demo's schema, strategy, output spec
  with 12x16 frames, 10 s / 5 s windows, 60 s spans): about 97 shards of 41.7 kB a
  recording. The changed recording's parquet file is rewritten with every battery value
  scaled by 0.999, so its content hash (its identity) changes.

For each corpus and backend, in a fresh dataset root:

1. **v1**: ``write_planned_dataset`` of every recording (timed: the first write).
2. One recording is *changed* (above): the one with the fewest shard bytes in v1 (the
   version's metadata is about the same whichever changes, so this is the largest ratio).
   Its strong identity, and with it its shards' content keys, change; every other
   recording is untouched. The JSON also estimates the ratio had the median or the largest
   recording changed (``ratio_estimate_by_recording``: from this run's metadata and copies).
3. **v2**: the rebuild the ``shards`` asset runs (``resume=True, on_other_run="replace"``,
   timed). It keeps every shard whose content key matches a verified shard of v1:
   locally a hard link (``LocalDestination.share_file``); on an object store the shard
   already lies in the root's shard pool (``ROOT/shards/<content key>.npz``,
   ``kuration.output.shard_pool``) and v2's manifest names the same object, so nothing
   is copied; it writes the changed recording's shards and v2's metadata.

Measured (the storage before v2 and after it):

- **local**: the bytes of the distinct inodes under the root (a hard-linked file counts
  once, as the filesystem stores it once);
- **S3**: the sizes of the objects in the bucket (an object whose key, ETag or size is new
  counts whole; a server-side copy would be a new object, billed as one). The endpoint is
  moto's ``ThreadedMotoServer`` on 127.0.0.1 (a free port), reached through
  ``kuration.storage.use_s3_options`` (endpoint and credentials), as on a deployment.
- **Ceph** (``--backends ceph``, or by default when ``KURATION_CEPH_ENDPOINT`` is set): the
  same on the radosgw ``scripts/ceph_rgw.sh`` starts (user TESTKEY), in a fresh bucket.

``added_bytes`` is every byte that is new after v2 (nothing is reclaimed: v1 is kept), split
into the changed recording's shards (``written_shard_bytes``), the kept shards' new copies
(``adopted_copy_bytes``: 0 where they are hard links) and everything else
(``metadata_bytes``: v2's manifest, config, commit record, budget tables, spec marker and
the publish record). The raw baseline is ``changed_recording_shard_bytes``: the bytes v2's
manifest records for the changed recording's shards. ``ratio`` = added / baseline, target
<= 1.5. The rebuild's time is reported against the first write's (one run each: the
storage figures are exact, the times single-run).

Output: one JSON object; its ``report`` holds the figures ``bench/run_all`` collects.

Run from the repo root:  .venv/bin/python bench/bench_versions_storage.py   (~2.5 min, ~1.7 GB
disk and ~1.3 GB held by the S3 server). ``--sources 10`` is the quick size;
``--backends local`` skips S3; the demo corpus runs on S3 only with ``--demo-s3`` (its
thousands of small shards take minutes on moto); ``--tmp`` says where to write. On Ceph:
``EP=$(scripts/ceph_rgw.sh start /tmp/ceph); KURATION_CEPH_ENDPOINT=$EP .venv/bin/python
bench/bench_versions_storage.py --backends ceph --corpora frames``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import timed  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402
from _report import figure, ratio  # noqa: E402
from bench_write_dataset import (  # noqa: E402
    SCHEMA, SEGMENTER, SPAN_STEPS, STRATEGY, BenchAdapter, corpus, spec_for,
)

from kuration import storage  # noqa: E402
from kuration.budget import BudgetOptions, plan_budget  # noqa: E402
from kuration.demo.corpus import DEMO_OUTPUT_SPEC, DEMO_STRATEGY, demo_schema, write_demo_landing_zone  # noqa: E402
from kuration.demo.corpus import SAMPLE_HZ as DEMO_SAMPLE_HZ  # noqa: E402
from kuration.output import OutputSpec  # noqa: E402
from kuration.output.write_dataset import WriteOptions, write_planned_dataset  # noqa: E402
from kuration.scoring import score_sources  # noqa: E402
from kuration.scoring.segments import Segmenter  # noqa: E402
from kuration.scoring.strategy import Strategy  # noqa: E402
from kuration.sources.parquet import ParquetTickAdapter  # noqa: E402
from kuration.sources.protocol import SourceIdentity  # noqa: E402
from kuration.sources.schema import Schema  # noqa: E402

SOURCES = 40
DRONES, TICKS = 1, 128  # frames corpus: 2 shards of 64 steps a recording
#: Demo recordings last 2-4 minutes here (the demo's own 3-15 minutes take ~4x longer to write).
DEMO_MINUTES = (2, 4)
DEMO_SEGMENTER = Segmenter(10, 5, unit="seconds", sample_hz=DEMO_SAMPLE_HZ)  # the curation config's defaults
DEMO_SPAN_SECONDS = 60.0
TARGET = "<= 1.5"
HOURS_ALL = 1e6  # per split: more than any corpus here, so every span is admitted
S3_KEY, S3_SECRET, S3_REGION = "kuration-bench-key", "kuration-bench-secret", "us-east-1"
REBUILD = WriteOptions(resume=True, on_other_run="replace")


class RevisableAdapter(BenchAdapter):
    """``BenchAdapter`` whose recordings can be revised: a revised recording has other
    values and frames, and an identity that names its revision (as a recording file
    rewritten with other content gets a new content hash)."""

    def __init__(self, sources: dict[str, tuple[int, int]], seed: int = 0,
                 revisions: Mapping[str, int] | None = None) -> None:
        super().__init__(sources, seed)
        self.revisions = dict(revisions or {})

    def raw_columns(self, source_id: str) -> dict[str, Any]:
        columns = super().raw_columns(source_id)
        revision = self.revisions.get(source_id, 0)
        if revision:
            rng = np.random.default_rng([self.seed, revision, len(source_id)])
            columns["pos"] = columns["pos"] + rng.normal(size=columns["pos"].shape).astype(np.float32)
            columns["battery"] = rng.random(len(columns["battery"]), dtype=np.float32)
            columns["label"] = rng.integers(0, 10, len(columns["label"]), dtype=np.int64)
            columns["frame"] = [f"{ref}@r{revision}" for ref in columns["frame"]]  # other frames
        return columns

    def identity(self, source_id: str) -> SourceIdentity:
        base = super().identity(source_id).token()
        revision = self.revisions.get(source_id, 0)
        return SourceIdentity("fingerprint", hashlib.sha256(f"{base}:r{revision}".encode()).hexdigest())


def stable_splits(sources: list[str]) -> pa.Table:
    """Every tenth source in val, the next in test, the rest in train: fixed per source."""
    stages = ["val" if i % 10 == 8 else "test" if i % 10 == 9 else "train" for i in range(len(sources))]
    return pa.table({"stage": stages, "source": sources, "group": sources})


def plan_everything(adapter: Any, segmenter: Segmenter, strategy: Strategy, spec: OutputSpec, **span: Any):
    """Every span of every recording admitted, each recording in its fixed split."""
    scored = score_sources(adapter, segmenter=segmenter, strategy=strategy, workers=1, cache=None)
    options = BudgetOptions(train_hours=HOURS_ALL, val_hours=HOURS_ALL, test_hours=HOURS_ALL, chunking=spec.chunking,
                            **span)
    return plan_budget(scored.segments, options, strategy=strategy,
                       split_assignments=stable_splits(adapter.list_sources()))


@dataclass
class Corpus:
    """A workload: ``current()`` is the plan and adapter of its recordings as they are now,
    ``revise(source_id)`` changes one recording's content (so its identity)."""

    name: str
    schema: Schema
    spec: OutputSpec
    current: Callable[[], tuple[Any, Any]]
    revise: Callable[[str], None]


def frames_corpus(n_sources: int, seed: int, scratch: Path) -> Corpus:
    """``bench_write_dataset.py``'s adapter and 8.07 MB shards, ``n_sources`` recordings of
    1 drone x 128 ticks; a recording is revised in memory."""
    spec = spec_for("npz")
    sources = corpus(n_sources, DRONES, TICKS)
    revisions: dict[str, int] = {}

    def current() -> tuple[Any, Any]:
        adapter = RevisableAdapter(sources, seed, revisions)
        return plan_everything(adapter, SEGMENTER, STRATEGY, spec, span_steps=SPAN_STEPS), adapter

    return Corpus("frames", SCHEMA, spec, current, lambda source_id: revisions.update({source_id: 1}))


def demo_corpus(n_sources: int, seed: int, scratch: Path) -> Corpus:
    """The demo landing zone (``write_demo_landing_zone``: parquet recordings, 12x16 frames
    in .npy files, the demo's output spec), ``n_sources / 8`` recordings a site; a revised
    recording's parquet file is rewritten with every battery value scaled by 0.999."""
    zone = write_demo_landing_zone(scratch / "landing", seed=seed, recordings_per_site=max(1, round(n_sources / 8)),
                                   minutes=DEMO_MINUTES)
    schema, spec, strategy = demo_schema(), OutputSpec.from_dict(DEMO_OUTPUT_SPEC), Strategy.from_dict(DEMO_STRATEGY)

    def current() -> tuple[Any, Any]:
        adapter = ParquetTickAdapter(zone.recordings_root, schema)
        return plan_everything(adapter, DEMO_SEGMENTER, strategy, spec, span_seconds=DEMO_SPAN_SECONDS), adapter

    def revise(source_id: str) -> None:
        path = Path(zone.recordings_root) / source_id
        table = pq.read_table(path)
        battery = table.column("battery")
        scaled = pc.multiply(battery, pa.scalar(0.999, battery.type))
        pq.write_table(table.set_column(table.schema.get_field_index("battery"), "battery", scaled), path)

    return Corpus("demo", schema, spec, current, revise)


CORPORA: dict[str, Callable[[int, int, Path], Corpus]] = {"frames": frames_corpus, "demo": demo_corpus}


# --------------------------------------------------------------------------- storage views

#: path under the root -> (what the storage holds it as, its bytes). Two paths with the same
#: holder are one stored copy (a hard link); a holder new after the rebuild is new storage.
Snapshot = dict[str, tuple[Hashable, int]]


def local_snapshot(root: Path) -> Snapshot:
    """Every file under ``root``, held as its inode."""
    found: Snapshot = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            found[path.relative_to(root).as_posix()] = ((stat.st_dev, stat.st_ino), stat.st_size)
    return found


def s3_snapshot(fs, url: str) -> Snapshot:
    """Every object under ``url``, held as itself (key, ETag, size): no two objects share bytes."""
    prefix = url.split("://", 1)[1].rstrip("/")
    fs.invalidate_cache()
    found: Snapshot = {}
    for key, info in fs.find(prefix, detail=True).items():
        relative = key[len(prefix) + 1:]
        found[relative] = ((relative, info.get("ETag"), info["size"]), int(info["size"]))
    return found


def storage_added(before: Snapshot, after: Snapshot, written: set[str], adopted: set[str]) -> dict[str, int]:
    """The bytes new in ``after``, by what holds them: the written shards, the kept shards'
    copies, the rest (metadata); and the bytes ``before`` held that are gone."""
    old = {holder for holder, _ in before.values()}
    new: dict[Hashable, tuple[int, set[str]]] = {}
    for path, (holder, size) in after.items():
        if holder not in old:
            new.setdefault(holder, (size, set()))[1].add(path)
    kept = {holder for holder, _ in after.values()}
    gone = {holder: size for holder, size in before.values() if holder not in kept}
    by_kind = {"written_shard_bytes": 0, "adopted_copy_bytes": 0, "metadata_bytes": 0}
    for size, paths in new.values():
        kind = ("written_shard_bytes" if paths & written else "adopted_copy_bytes" if paths & adopted
                else "metadata_bytes")
        by_kind[kind] += size
    return {"added_bytes": sum(size for size, _ in new.values()), **by_kind, "new_files": len(new),
            "removed_bytes": sum(gone.values())}


# --------------------------------------------------------------------------- one backend


def bytes_by_recording(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for e in entries:
        found[e["source_id"]] = found.get(e["source_id"], 0) + e["bytes"]
    return found


def rebuild_one_change(url: str, snapshot: Callable[[], Snapshot], corpus: Corpus) -> dict[str, Any]:
    """v1 of ``corpus`` at ``url``, then v2 after one recording was revised: the storage v2
    added, against the bytes of the changed recording's shards. The recording changed is
    the one with the fewest shard bytes in v1 (first by name among equals): the version's
    metadata is about the same whichever changes, so that is the largest ratio."""
    write = functools.partial(write_planned_dataset, url, schema=corpus.schema, spec=corpus.spec)
    plan, adapter = corpus.current()
    first_seconds, v1 = timed(functools.partial(write, plan, adapter=adapter))
    before = snapshot()
    changed = min(sorted(bytes_by_recording(v1.manifest["entries"]).items()), key=lambda item: item[1])[0]
    corpus.revise(changed)
    plan, adapter = corpus.current()
    rebuild_seconds, v2 = timed(functools.partial(write, plan, adapter=adapter, options=REBUILD))
    after = snapshot()
    entries = v2.manifest["entries"]
    here = f"versions/{v2.version}"

    def stored(e: Mapping[str, Any]) -> str:  # where the shard's bytes lie under the root
        return e.get("stored_at") or f"{here}/{e['path']}"

    written = {stored(e) for e in entries if e["source_id"] == changed}
    adopted = {stored(e) for e in entries if e["source_id"] != changed}
    per_recording = bytes_by_recording(entries)
    baseline = per_recording[changed]
    added = storage_added(before, after, written, adopted)
    # Were recording r the changed one: its shards, the same metadata, and copies of the
    # other recordings' shards in the share this backend copied them (1 on S3, 0 locally),
    # over r's shards. An estimate from this run, not a run of its own.
    version = sum(per_recording.values())
    copied = added["adopted_copy_bytes"] / (version - baseline) if version > baseline else 0.0
    estimate = sorted((added["metadata_bytes"] + copied * (version - b) + b) / b for b in per_recording.values())
    return {
        "versions": [v1.version, v2.version], "changed_recording": changed,
        "recordings": len(per_recording), "shards": len(entries),
        "shards_written": v2.written, "shards_kept": v2.reused,
        "layout": "shard pool" if any("stored_at" in e for e in entries) else "version folders",
        "changed_recording_shards": len(written), "changed_recording_shard_bytes": baseline,
        **added, "ratio": added["added_bytes"] / baseline, "target": TARGET,
        "met": added["added_bytes"] <= 1.5 * baseline,
        "ratio_estimate_by_recording": {"largest_recording": estimate[0], "median": estimate[len(estimate) // 2],
                                        "smallest_recording": estimate[-1]},
        "recording_shard_bytes": {"smallest": min(per_recording.values()), "largest": max(per_recording.values()),
                                  "mean": sum(per_recording.values()) / len(per_recording)},
        "version_shard_bytes": version,
        "mean_shard_bytes": sum(per_recording.values()) / len(entries),
        "metadata_bytes_per_shard": added["metadata_bytes"] / len(entries),
        "first_write_seconds": first_seconds, "rebuild_seconds": rebuild_seconds,
        "rebuild_over_first_write": rebuild_seconds / first_seconds,
    }


CEPH_KEY, CEPH_SECRET = "TESTKEY", "TESTSECRET"  # the user scripts/ceph_rgw.sh creates


@contextmanager
def endpoint_bucket(endpoint: str, key: str, secret: str) -> Iterator[tuple[Any, str]]:
    """A fresh bucket on the S3 endpoint ``endpoint``, as ``(s3fs filesystem, "s3://<bucket>")``;
    s3fs reaches it through ``use_s3_options``, as a deployment would."""
    import boto3
    import fsspec

    options = {"endpoint_url": endpoint, "region_name": S3_REGION}
    bucket = f"kuration-bench-{uuid.uuid4().hex[:12]}"
    # boto3, as tests/remote does: s3fs's mkdir sends us-east-1 as a location constraint, which S3 refuses
    boto3.client("s3", aws_access_key_id=key, aws_secret_access_key=secret, **options).create_bucket(Bucket=bucket)
    restore = storage.use_s3_options({"key": key, "secret": secret, "client_kwargs": options})
    try:
        yield fsspec.filesystem("s3"), f"s3://{bucket}"
    finally:
        restore()


@contextmanager
def s3_bucket() -> Iterator[tuple[Any, str]]:
    """A moto S3 server on loopback (a free port) and a fresh bucket on it, as
    ``(s3fs filesystem, "s3://<bucket>")``; s3fs reaches it through ``use_s3_options``."""
    from moto.server import ThreadedMotoServer

    werkzeug_log = logging.getLogger("werkzeug")
    old_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        with endpoint_bucket(f"http://{host}:{port}", S3_KEY, S3_SECRET) as found:
            yield found
    finally:
        server.stop()
        werkzeug_log.setLevel(old_level)


def s3_missing() -> str | None:
    """Why S3 cannot be measured here, or None."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as exc:
        return f"S3 not measured: {exc} (moto[server], boto3 and s3fs come with the [dev] extra)"
    return None


def run(corpus_name: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """One corpus on one backend, in fresh scratch space (the revision changes the corpus)."""
    if backend in ("s3", "ceph") and s3_missing():
        return {"error": s3_missing()}
    ceph = os.environ.get("KURATION_CEPH_ENDPOINT")
    if backend == "ceph" and not ceph:
        return {"error": "Ceph not measured: KURATION_CEPH_ENDPOINT is not set (scripts/ceph_rgw.sh start DIR)"}
    with tempfile.TemporaryDirectory(prefix="bench_versions_storage_", dir=args.tmp) as scratch:
        corpus = CORPORA[corpus_name](args.sources, args.seed, Path(scratch))
        if backend == "local":
            root = Path(scratch) / "dataset"
            return rebuild_one_change(str(root), lambda: local_snapshot(root), corpus)
        buckets = endpoint_bucket(ceph, CEPH_KEY, CEPH_SECRET) if backend == "ceph" and ceph else s3_bucket()
        with buckets as (fs, bucket):
            url = f"{bucket}/dataset"
            return rebuild_one_change(url, lambda: s3_snapshot(fs, url), corpus)


# --------------------------------------------------------------------------- report


def report_figures(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    baseline = "the bytes of the changed recording's shards in v2's manifest, same run"
    figures = []
    for corpus_name, backends in results.items():
        for backend, r in backends.items():
            name = f"{corpus_name}, {backend}: storage added by a one-recording rebuild / that recording's shard bytes"
            if "error" in r:
                figures.append(figure(name, None, "x", baseline, target=TARGET, note=r["error"]))
                continue
            figures.append(ratio(
                name, r["added_bytes"], r["changed_recording_shard_bytes"], baseline, target=TARGET,
                note=f"{r['layout']}; {r['added_bytes'] / 1e6:.2f} MB added: {r['written_shard_bytes'] / 1e6:.2f} MB "
                     f"written shards ({r['changed_recording_shards']}), "
                     f"{r['adopted_copy_bytes'] / 1e6:.1f} MB copies of the {r['shards_kept']} kept shards, "
                     f"{r['metadata_bytes'] / 1e6:.3f} MB metadata "
                     f"({r['metadata_bytes_per_shard']:.0f} B a shard); {r['recordings']} recordings, "
                     f"{r['shards']} shards of {r['mean_shard_bytes'] / 1e3:.1f} kB; the recording changed is the "
                     f"smallest ({r['changed_recording_shards']} shards); were the median one changed, about "
                     f"{r['ratio_estimate_by_recording']['median']:.2f}x (estimate)"))
    for corpus_name, backends in results.items():
        for backend, r in backends.items():
            if "error" in r:
                continue
            figures.append(ratio(
                f"{corpus_name}, {backend}: rebuild time / first write time", r["rebuild_seconds"],
                r["first_write_seconds"], "the first write (v1) of the same corpus at the same backend, same run",
                note=f"rebuild {r['rebuild_seconds']:.2f} s (keeps {r['shards_kept']} shards, each verified by its "
                     f"SHA-256, writes {r['shards_written']}), first write {r['first_write_seconds']:.2f} s; one run "
                     "each"))
    return figures


def _names(text: str, known: Sequence[str], flag: str, ap: argparse.ArgumentParser) -> list[str]:
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(chosen) - set(known))
    if unknown or not chosen:
        ap.error(f"{flag}: unknown {unknown}; choose from {', '.join(known)}")
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=SOURCES,
                    help=f"recordings (default {SOURCES}; the demo corpus has 8 sites x round(sources / 8))")
    ap.add_argument("--corpora", default="frames,demo", help="frames, demo or both (default)")
    ap.add_argument("--backends", default=None,
                    help="local, s3 (moto), ceph (KURATION_CEPH_ENDPOINT), comma-separated (default: local,s3, and "
                         "ceph when KURATION_CEPH_ENDPOINT is set)")
    ap.add_argument("--demo-s3", action="store_true",
                    help="the demo corpus on S3 too (slow on moto: ~3 min at --sources 10, far longer at 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", default="/tmp", help="where the local dataset roots and the demo landing zone go")
    args = ap.parse_args()
    if args.sources < 2:
        ap.error("--sources: at least 2 (one changes, the others are kept)")
    corpora = _names(args.corpora, list(CORPORA), "--corpora", ap)
    default = "local,s3,ceph" if os.environ.get("KURATION_CEPH_ENDPOINT") else "local,s3"
    backends = _names(args.backends or default, ["local", "s3", "ceph"], "--backends", ap)
    started = time.perf_counter()
    tree = kuration_tree_state()
    # The demo's thousands of 42 kB shards are one S3 request each (several, with the move):
    # minutes on moto, so it runs on S3 only when asked.
    matrix = {name: [b for b in backends if b == "local" or name != "demo" or args.demo_s3] for name in corpora}
    endpoint = {"s3": "moto ThreadedMotoServer on 127.0.0.1",
                "ceph": os.environ.get("KURATION_CEPH_ENDPOINT") or "not set"}
    results = {name: {backend: run(name, backend, args) for backend in chosen} for name, chosen in matrix.items()}
    print(json.dumps({
        "bench": "versions_storage",
        "report": report_figures(results),
        "corpora": results,
        "parameters": {"sources": args.sources, "seed": args.seed, "runs": matrix,
                       "frames": {"drones_per_source": DRONES, "ticks_per_drone": TICKS, "container": "npz"},
                       "demo": {"minutes": list(DEMO_MINUTES), "segment_seconds": [10, 5],
                                "span_seconds": DEMO_SPAN_SECONDS, "output_spec": DEMO_OUTPUT_SPEC},
                       "rebuild_options": "resume=True, on_other_run='replace'",
                       "endpoints": {b: endpoint[b] for b in backends if b in endpoint}},
        "total_bench_seconds": time.perf_counter() - started,
        "python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(), "tree": tree,
    }, indent=2))


if __name__ == "__main__":
    main()
