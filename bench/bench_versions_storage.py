"""Benchmark: the storage a rebuild adds when one recording changes (issue 25), on a local
folder and on S3, against the bytes of that recording's shards, in the same run.

Issue 25, "Done when": "The storage added by a rebuild that changes one recording is within
1.5x the bytes of that recording's shards (measured in a bench, local and S3)."

Workload: ``bench_write_dataset.py``'s tensors and adapter (64-step npz shards of ``pos``,
``battery``, a uint8 150x280x3 ``frame``, ``label`` and the mask: 8.07 MB a shard), over
``--sources`` recordings (default 40) of 1 drone x 128 ticks: 2 shards a recording, 80
shards, 645 MB a version. Every source has a fixed split (every tenth in val, the next in
test, the rest in train), as a stable split extension keeps it.

For each backend, in a fresh dataset root:

1. **v1**: ``write_planned_dataset`` of every recording (timed: the first write).
2. One recording (the middle one) is *changed*: its content is revised (other positions,
   batteries, labels and frames), so its strong identity, and with it its shards' content
   keys, change; every other recording is untouched.
3. **v2**: the rebuild the ``shards`` asset runs (``resume=True, on_other_run="replace"``,
   timed). It keeps every shard whose content key matches a verified shard of v1 (the
   other 39 recordings' 78 shards): locally a hard link (``LocalDestination.share_file``),
   on an object store a server-side copy (``FsspecDestination.share_file``: ``fs.copy``);
   it writes the changed recording's 2 shards and v2's metadata.

Measured (the storage before v2 and after it):

- **local**: the bytes of the distinct inodes under the root (a hard-linked file counts
  once, as the filesystem stores it once);
- **S3**: the sizes of the objects in the bucket (an object whose key, ETag or size is new
  counts whole; a server-side copy is a new object, billed as one). The endpoint is moto's
  ``ThreadedMotoServer`` on 127.0.0.1 (a free port), reached through
  ``kuration.storage.use_s3_options`` (endpoint and credentials), as on a deployment.

``added_bytes`` is every byte that is new after v2 (nothing is reclaimed: v1 is kept), split
into the changed recording's shards (``written_shard_bytes``), the kept shards' new copies
(``adopted_copy_bytes``: 0 where they are hard links) and everything else
(``metadata_bytes``: v2's manifest, config, commit record, budget tables, spec marker and
the publish record). The raw baseline is ``changed_recording_shard_bytes``: the bytes v2's
manifest records for the changed recording's shards. ``ratio`` = added / baseline, target
<= 1.5. The rebuild's time is reported against the first write's (one run each: the
storage figures are exact, the times single-run).

Output: one JSON object; its ``report`` holds the figures ``bench/run_all`` collects.

Run from the repo root:  .venv/bin/python bench/bench_versions_storage.py   (~2 min, ~1.3 GB
disk and ~1.3 GB held by the S3 server). ``--sources 10`` is the quick size;
``--backends local`` skips S3; ``--tmp`` says where to write.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import timed  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402
from _report import figure, ratio  # noqa: E402
from bench_write_dataset import (  # noqa: E402
    SCHEMA, SEGMENTER, SPAN_STEPS, STRATEGY, BenchAdapter, corpus, spec_for,
)

from kuration import storage  # noqa: E402
from kuration.budget import BudgetOptions, plan_budget  # noqa: E402
from kuration.output.write_dataset import WriteOptions, write_planned_dataset  # noqa: E402
from kuration.scoring import score_sources  # noqa: E402
from kuration.sources.protocol import SourceIdentity  # noqa: E402

SOURCES = 40
DRONES, TICKS = 1, 128  # 2 shards of 64 steps a recording
TARGET = "<= 1.5"
HOURS_ALL = 1e6  # per split: more than the corpus, so every span is admitted
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


def make_plan(adapter: RevisableAdapter, spec):
    scored = score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, workers=1, cache=None)
    options = BudgetOptions(train_hours=HOURS_ALL, val_hours=HOURS_ALL, test_hours=HOURS_ALL,
                            span_steps=SPAN_STEPS, chunking=spec.chunking)
    return plan_budget(scored.segments, options, strategy=STRATEGY,
                       split_assignments=stable_splits(adapter.list_sources()))


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


def rebuild_one_change(url: str, snapshot: Callable[[], Snapshot], n_sources: int, seed: int) -> dict[str, Any]:
    """v1 of ``n_sources`` recordings at ``url``, then v2 after one recording changed: the
    storage v2 added, against the bytes of the changed recording's shards."""
    spec = spec_for("npz")
    sources = corpus(n_sources, DRONES, TICKS)
    changed = sorted(sources)[n_sources // 2]
    first = RevisableAdapter(sources, seed)
    second = RevisableAdapter(sources, seed, revisions={changed: 1})
    write = functools.partial(write_planned_dataset, url, schema=SCHEMA, spec=spec)
    first_seconds, v1 = timed(functools.partial(write, make_plan(first, spec), adapter=first))
    before = snapshot()
    rebuild_seconds, v2 = timed(functools.partial(write, make_plan(second, spec), adapter=second, options=REBUILD))
    after = snapshot()
    entries = v2.manifest["entries"]
    here = f"versions/{v2.version}"
    written = {f"{here}/{e['path']}" for e in entries if e["source_id"] == changed}
    adopted = {f"{here}/{e['path']}" for e in entries if e["source_id"] != changed}
    baseline = sum(e["bytes"] for e in entries if e["source_id"] == changed)
    added = storage_added(before, after, written, adopted)
    return {
        "url_kind": url.split("://", 1)[0] if "://" in url else "local",
        "versions": [v1.version, v2.version], "changed_recording": changed,
        "shards": len(entries), "shards_written": v2.written, "shards_kept": v2.reused,
        "changed_recording_shards": len(written), "changed_recording_shard_bytes": baseline,
        **added, "ratio": added["added_bytes"] / baseline, "target": TARGET,
        "met": added["added_bytes"] <= 1.5 * baseline,
        "version_bytes": sum(e["bytes"] for e in entries),
        "metadata_bytes_per_shard": added["metadata_bytes"] / len(entries),
        "first_write_seconds": first_seconds, "rebuild_seconds": rebuild_seconds,
        "rebuild_over_first_write": rebuild_seconds / first_seconds,
    }


@contextmanager
def s3_bucket() -> Iterator[tuple[Any, str]]:
    """A moto S3 server on loopback (a free port) and a fresh bucket on it, as
    ``(s3fs filesystem, "s3://<bucket>")``; s3fs reaches it through ``use_s3_options``."""
    import boto3
    import fsspec
    from moto.server import ThreadedMotoServer

    werkzeug_log = logging.getLogger("werkzeug")
    old_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    restore = None
    try:
        host, port = server.get_host_and_port()
        endpoint = {"endpoint_url": f"http://{host}:{port}", "region_name": S3_REGION}
        bucket = f"kuration-bench-{uuid.uuid4().hex[:12]}"
        # boto3, as tests/remote does: s3fs's mkdir sends us-east-1 as a location constraint, which S3 refuses
        boto3.client("s3", aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET, **endpoint).create_bucket(
            Bucket=bucket)
        restore = storage.use_s3_options({"key": S3_KEY, "secret": S3_SECRET, "client_kwargs": endpoint})
        yield fsspec.filesystem("s3"), f"s3://{bucket}"
    finally:
        if restore is not None:
            restore()
        server.stop()
        werkzeug_log.setLevel(old_level)


def run_local(tmp: str, n_sources: int, seed: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench_versions_storage_", dir=tmp))
    try:
        root = work / "dataset"
        return rebuild_one_change(str(root), lambda: local_snapshot(root), n_sources, seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_s3(n_sources: int, seed: int) -> dict[str, Any]:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as exc:
        return {"error": f"S3 not measured: {exc} (moto[server], boto3 and s3fs come with the [dev] extra)"}
    with s3_bucket() as (fs, bucket):
        url = f"{bucket}/dataset"
        return rebuild_one_change(url, lambda: s3_snapshot(fs, url), n_sources, seed)


# --------------------------------------------------------------------------- report


def report_figures(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    baseline = "the bytes of the changed recording's shards in v2's manifest, same run"
    figures = []
    for backend, r in results.items():
        name = f"{backend}: storage added by a one-recording rebuild / that recording's shard bytes"
        if "error" in r:
            figures.append(figure(name, None, "x", baseline, target=TARGET, note=r["error"]))
            continue
        figures.append(ratio(
            name, r["added_bytes"], r["changed_recording_shard_bytes"], baseline, target=TARGET,
            note=f"{r['added_bytes'] / 1e6:.1f} MB added: {r['written_shard_bytes'] / 1e6:.1f} MB written shards "
                 f"({r['changed_recording_shards']}), {r['adopted_copy_bytes'] / 1e6:.1f} MB copies of the "
                 f"{r['shards_kept']} kept shards, {r['metadata_bytes'] / 1e3:.1f} kB metadata; the version is "
                 f"{r['version_bytes'] / 1e6:.0f} MB of shards"))
    for backend, r in results.items():
        if "error" in r:
            continue
        figures.append(ratio(
            f"{backend}: rebuild time / first write time", r["rebuild_seconds"], r["first_write_seconds"],
            "the first write (v1) of the same corpus at the same backend, same run",
            note=f"rebuild {r['rebuild_seconds']:.2f} s (keeps {r['shards_kept']} shards, each verified by its "
                 f"SHA-256, writes {r['shards_written']}), first write {r['first_write_seconds']:.2f} s; one run each"))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=SOURCES, help=f"recordings (default {SOURCES})")
    ap.add_argument("--backends", default="local,s3", help="local, s3 or both (default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", default="/tmp", help="where the local dataset root goes")
    args = ap.parse_args()
    if args.sources < 2:
        ap.error("--sources: at least 2 (one changes, the others are kept)")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - {"local", "s3"})
    if unknown or not backends:
        ap.error(f"--backends: unknown {unknown}; choose from local, s3")
    started = time.perf_counter()
    tree = kuration_tree_state()
    results: dict[str, dict[str, Any]] = {}
    if "local" in backends:
        results["local"] = run_local(args.tmp, args.sources, args.seed)
    if "s3" in backends:
        results["s3"] = run_s3(args.sources, args.seed)
    print(json.dumps({
        "bench": "versions_storage",
        "report": report_figures(results),
        "backends": results,
        "parameters": {"sources": args.sources, "drones_per_source": DRONES, "ticks_per_drone": TICKS,
                       "container": "npz", "seed": args.seed, "rebuild_options": "resume=True, on_other_run='replace'",
                       "s3_endpoint": "moto ThreadedMotoServer on 127.0.0.1"},
        "total_bench_seconds": time.perf_counter() - started,
        "python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(), "tree": tree,
    }, indent=2))


if __name__ == "__main__":
    main()
