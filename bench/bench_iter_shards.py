"""Benchmark: reading a dataset back with ``iter_shards`` against ``np.load`` of the same
npz files (no hash), and against MosaicML Streaming reading the same tensors, in one run.

Workload: a committed npz dataset of ``--shards`` shards (default 160), each 64 steps of
``frame`` uint8 96x96x3, ``pos`` float32[3] and ``label`` int64, plus ``_present``: 1.77 MB
a shard, 283 MB in all. It is built once through the commit protocol and read once before
timing, so the page cache is warm for every run.

Timed, interleaved, best of ``--repeats``:

- ``np_load``: for each shard file, ``np.load(path)`` and every member read (what a plain
  numpy consumer of the same files does; no hash, no checks);
- ``iter_shards_verify``: ``for arrays in iter_shards(out)`` (every shard's size and
  SHA-256 checked before it is yielded, hashed on a helper thread while the previous one
  decodes);
- ``iter_shards_no_verify``: the same with ``verify=False``;
- ``iter_shards_once``: the same with ``verify="once"``, the epochs after the first (the
  untimed warm-up read hashed every shard once; each timed pass trusts them while their
  files are unchanged, as ``ShardDataset`` does by default);
- ``sha256``: SHA-256 of every shard's bytes, already in memory, on one thread. With
  ``np_load`` it gives the verified read's bound, ``1 / max(t np.load, t sha256)``
  (``verified_read_vs_hash_bound``, target >= 0.85): the reader hashes on helper threads, so
  on two cores it can beat the bound's slower side.

Every reader, the peer's too, reads one byte of each 4 KiB page of every array it hands out
(``touch``), so a reader returning lazy views of a memory map pays for bringing the tensors
in, as the eager readers do. ``ratio`` = np_load seconds / iter_shards seconds (1.0: as fast
as np.load; the targets are >= 0.75 with verify, >= 0.95 without and for the later epochs of
"once"). The machine's SHA-256 throughput is measured in the run too: on two cores, a
verified read is bound by ``max(read + decode, hash)``.

The peer: MosaicML Streaming (``mosaicml-streaming==0.13.0``) in its own virtualenv,
``bench/.venv-streaming`` (it pins ``numpy<2.2`` and needs torch and torchvision;
``torch==2.13.0`` is installed first, and pinned again while streaming is installed so
torchvision comes in the release that matches it). The same tensors, one sample per shard with the trimmed arrays as
``ndarray`` columns, are written once with its ``MDSWriter`` (uncompressed); its
``StreamingDataset(local=...)`` and its plain ``LocalDataset`` then read every sample, one
timed pass each a round in a fresh peer process after its own warm-up read, the rounds
interleaved with the kuration candidates' (so load drift hits the peer alike), best of
``--repeats``; the faster of the two is the peer figure. ``ratio_vs_streaming`` divides
best passes, ``ratio_vs_streaming_of_medians`` the medians. ``import streaming`` imports torchvision (for its
vision datasets), and torchvision's PyPI wheel is built for CUDA torch: with the CPU torch
it fails to load its operators. The peer script then stubs the three torchvision names
``streaming.vision`` imports (the MDS reader never calls them) and says so in
``torchvision_stubbed``. When the venv cannot be built the JSON says
why under ``peer`` and no peer figure is reported. ``STREAMING_PEER=off`` skips it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _measure import best_of  # noqa: E402
from _reference_env import ensure_peer_python, kuration_tree_state  # noqa: E402
from _report import ratio  # noqa: E402

from kuration.canonical.hashing import readable_json  # noqa: E402
from kuration.output.commit_protocol import publish_committed  # noqa: E402
from kuration.output.containers import get_container  # noqa: E402
from kuration.output.containers.protocol import ShardArrays  # noqa: E402
from kuration.output.destinations import LocalDestination  # noqa: E402
from kuration.output.spec import OutputSpec  # noqa: E402
from kuration.read import iter_shards  # noqa: E402

PEER_VENV = BENCH_DIR / ".venv-streaming"
# torch first (the CPU build pip finds locally), then streaming with torch pinned again in the
# same resolve: streaming imports torchvision, whose newest release would pull another torch.
PEER_PINS = (("torch==2.13.0",), ("mosaicml-streaming==0.13.0", "torch==2.13.0"))
# installed, not imported: importing streaming needs the torchvision stub (_streaming_import.py)
STREAMING_PROBE = "import torch, importlib.metadata as m; m.version('mosaicml-streaming')"
TARGETS = {"verify": 0.75, "no_verify": 0.95, "once": 0.95}  # against np.load of the same files
STEPS, FRAME = 64, (96, 96, 3)


def spec(container: str = "npz", frame: tuple[int, ...] = FRAME) -> OutputSpec:
    return OutputSpec.from_dict({"shard_length": STEPS, "short_policy": "keep", "container": container, "modalities": {
        "frame": {"dtype": "uint8", "shape": list(frame), "source": "media:frame"},
        "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
        "label": {"dtype": "int64", "shape": [], "source": "field:label"}}})


def shard_arrays(i: int, steps: int = STEPS, frame: tuple[int, ...] = FRAME) -> ShardArrays:
    rng = np.random.default_rng(i)
    return ShardArrays({"frame": rng.integers(0, 255, (steps, *frame), dtype=np.uint8),
                        "pos": rng.standard_normal((steps, 3)).astype(np.float32),
                        "label": np.arange(steps, dtype=np.int64) + i}, np.ones(steps, bool), steps)


def build(out: Path, shards: int, container: str = "npz", steps: int = STEPS, frame: tuple[int, ...] = FRAME) -> Path:
    """A committed dataset of ``shards`` train shards, built through the commit protocol."""
    the_spec = spec(container, frame)
    destination, box = LocalDestination(out), get_container(container)
    entries = []
    for i in range(shards):
        path = f"train/src{i:05d}_shard0000{box.extension}"
        written = destination.stage_shard(path, box, shard_arrays(i, steps, frame)).seal()
        entries.append({"path": path, "split": "train", "source_id": f"src{i:05d}", "entity_id": "int:0",
                        "span_index": None, "shard_index": 0, "n_steps": steps, "rows": steps, "padded": False,
                        "container": container, "bytes": written.bytes, "sha256": written.sha256})
    manifest = {"format": 1, "output": the_spec.to_dict(), "entries": entries}
    publish_committed(destination, run_fingerprint="b" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json({"job": {}}))
    return out


def touch(arrays: dict[str, np.ndarray]) -> int:
    """Read one byte of every 4 KiB page of every array, so a reader that hands out lazy views
    (a memory map) pays for bringing the tensors in, as an eager reader does; the rows."""
    for a in arrays.values():
        int(np.ascontiguousarray(a).reshape(-1).view(np.uint8)[::4096].sum())
    return len(arrays["frame"])


def np_load_all(paths: list[Path]) -> int:
    rows = 0
    for path in paths:
        with np.load(path) as z:
            rows += touch({k: z[k] for k in z.files})
    return rows


def iter_all(out: Path, verify: bool | str) -> int:
    return sum(touch(a) for a in iter_shards(out, verify=verify))


def hash_all(data: list[bytes], rows: int) -> int:
    """SHA-256 of every shard's bytes, held in memory, one after the other: the hash side of
    the verified read's bound."""
    for d in data:
        hashlib.sha256(d).digest()
    return rows


def hash_bound_figure(name: str, t_np_load: float, t_sha256: float, t_verified: float) -> dict:
    """The verified read against its bound, ``1 / max(t np.load, t sha256)``: the one figure
    of the verified read that does not depend on the workload's mix of hash and decode work
    (``bench_peers.py`` reports it from the same three timings of its own workload)."""
    return ratio(name, max(t_np_load, t_sha256), t_verified,
                 "1 / max(t np.load, t sha256 of the same bytes in memory, one thread), same run (its seconds / ours)",
                 target=">= 0.85", note=f"bound: {'sha256' if t_sha256 > t_np_load else 'np.load'}")


def sha256_throughput(paths: list[Path]) -> float:
    data = [p.read_bytes() for p in paths[:40]]
    t0 = time.perf_counter()
    for d in data:
        hashlib.sha256(d).digest()
    return sum(map(len, data)) / (time.perf_counter() - t0) / 1e6


# -- the MosaicML Streaming peer, in its own venv -----------------------------------------------

_PEER_SCRIPT = textwrap.dedent('''
    import json, sys, time, gc
    import numpy as np
    from _streaming_import import import_streaming  # on PYTHONPATH: bench/
    streaming, stubbed = import_streaming()
    from streaming import LocalDataset, MDSWriter, StreamingDataset
    src, mds, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    files = sorted(__import__("glob").glob(src + "/train/*.npz"))
    # MDS ndarrays have no bool dtype: the mask travels as uint8
    columns = {"frame": "ndarray:uint8", "pos": "ndarray:float32", "label": "ndarray:int64", "present": "ndarray:uint8"}
    if repeats == 0:  # write the MDS copy only; the timed rounds read it
        with MDSWriter(out=mds, columns=columns, compression=None, size_limit=1 << 28) as w:
            for f in files:
                with np.load(f) as z:
                    w.write({"frame": z["frame"], "pos": z["pos"], "label": z["label"],
                             "present": z["_present"].astype(np.uint8)})
        print(json.dumps({"version": streaming.__version__, "torchvision_stubbed": stubbed}))
        sys.exit(0)
    def touch(sample):  # the same page-touch as the kuration side (see touch() there)
        for a in sample.values():
            int(np.ascontiguousarray(a).reshape(-1).view(np.uint8)[::4096].sum())
        return len(sample["frame"])
    def streaming_dataset():
        ds = StreamingDataset(local=mds, remote=None, shuffle=False, batch_size=1)
        return sum(touch(sample) for sample in ds)
    def local_dataset():
        ds = LocalDataset(local=mds)
        return sum(touch(ds[i]) for i in range(len(ds)))
    out = {}
    for name, fn in (("StreamingDataset", streaming_dataset), ("LocalDataset", local_dataset)):
        fn()  # warm-up: its index and cache files, the page cache
        times = []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            rows = fn()
            times.append(time.perf_counter() - t0)
        out[name] = {"seconds": min(times), "runs": times, "rows": rows}
    print(json.dumps(out))
''')


def peer_python() -> tuple[str | None, str]:
    """The MosaicML Streaming venv (see the module docstring), or None and why."""
    return ensure_peer_python(PEER_VENV, [list(pins) for pins in PEER_PINS], STREAMING_PROBE,
                              off_variable="STREAMING_PEER")


def peer_env() -> dict[str, str]:
    """The environment of a peer process: bench/ on its path for the peer helpers."""
    return {**os.environ, "PYTHONPATH": str(BENCH_DIR)}


def _peer(python: str, out: Path, mds: Path, repeats: int) -> dict:
    done = subprocess.run([python, "-c", _PEER_SCRIPT, str(out), str(mds), str(repeats)], capture_output=True,
                          text=True, timeout=3600, env=peer_env())
    if done.returncode != 0:
        raise RuntimeError("the peer failed: " + " | ".join(done.stderr.strip().splitlines()[-3:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_peer(out: Path, work: Path) -> dict:
    """The peer's venv found (or built) and the MDS copy written: what :func:`peer_round` takes."""
    python, how = peer_python()
    if python is None:
        return {"available": False, "reason": how}
    mds = work / "mds"
    shutil.rmtree(mds, ignore_errors=True)
    try:
        written = _peer(python, out, mds, 0)
    except RuntimeError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "venv": how, **written, "python": python, "mds": str(mds), "readers": {}}


def peer_round(peer: dict, out: Path) -> None:
    """One timed pass of each peer reader, in a fresh peer process after its own warm-up
    read, added to ``peer["readers"]``; a failure makes the peer unavailable."""
    if not peer["available"]:
        return
    try:
        timed = _peer(peer["python"], out, Path(peer["mds"]), 1)
    except RuntimeError as exc:
        peer.clear()
        peer.update(available=False, reason=str(exc))
        return
    for name, got in timed.items():
        reader = peer["readers"].setdefault(name, {"runs": [], "rows": got["rows"]})
        reader["runs"].append(got["seconds"])


def peer_result(peer: dict) -> dict:
    """The peer's figures: each reader's best and median pass, and the faster reader's."""
    if not peer["available"]:
        return peer
    for reader in peer["readers"].values():
        reader["seconds"], reader["median"] = min(reader["runs"]), statistics.median(reader["runs"])
    fastest = min(peer["readers"], key=lambda k: peer["readers"][k]["seconds"])
    return {**{k: v for k, v in peer.items() if k not in ("python", "mds")}, "fastest": fastest,
            "seconds": peer["readers"][fastest]["seconds"], "median": peer["readers"][fastest]["median"]}


def report(best: dict[str, float], peer: dict) -> list[dict]:
    """The uniform figures (see _report.py): each read against np.load, and against the peer
    (at least Streaming is the verified read's target)."""
    np_load = "np.load of every shard file, every member read (no hash)"
    streaming = "MosaicML Streaming (MDS copy of the same tensors), its faster reader (its seconds / ours)"
    missing = "" if peer.get("available") else f"no peer: {peer.get('reason')}"
    figures = []
    for key, label in (("verify", "iter_shards (verify)"), ("no_verify", "iter_shards(verify=False)"),
                       ("once", "iter_shards(verify='once'), epochs after the first")):
        seconds = best[f"iter_shards_{key}"]
        figures.append(ratio(f"{label} / np.load", best["np_load"], seconds, np_load + " (its seconds / ours)",
                             target=f">= {TARGETS[key]:g}"))
        if key == "once":
            continue
        if key == "verify":
            figures.append(hash_bound_figure("iter_shards (verify) / hash bound", best["np_load"], best["sha256"],
                                             seconds))
        figures.append(ratio(f"{label} / Streaming", peer.get("seconds"), seconds, streaming,
                             target=">= 1" if key == "verify" else None, note=missing))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-iter-shards-"))
    try:
        out = build(work / "out", args.shards)
        paths = sorted((out / "train").glob("*.npz"))
        payload = sum(p.stat().st_size for p in paths)
        expected = args.shards * STEPS
        shard_bytes = [p.read_bytes() for p in paths]
        candidates = {"np_load": lambda: np_load_all(paths), "iter_shards_verify": lambda: iter_all(out, True),
                      "iter_shards_no_verify": lambda: iter_all(out, False),
                      "iter_shards_once": lambda: iter_all(out, "once"),
                      "sha256": lambda: hash_all(shard_bytes, expected)}
        runs: dict[str, list[float]] = {name: [] for name in candidates}
        for fn in candidates.values():  # warm the page cache and imports
            assert fn() == expected
        peer = start_peer(out, work)
        for _ in range(args.repeats):  # interleaved, the peer too: drift in machine load hits every candidate alike
            for name, fn in candidates.items():
                best, _, rows = best_of(fn, 1)
                assert rows == expected
                runs[name].append(best)
            peer_round(peer, out)
        best = {name: min(times) for name, times in runs.items()}
        median = {name: statistics.median(times) for name, times in runs.items()}
        peer = peer_result(peer)
        result = {
            "bench": "iter_shards", "shards": args.shards, "steps_per_shard": STEPS, "bytes": payload,
            "seconds": {k: round(v, 4) for k, v in best.items()},
            "MB_per_s": {k: round(payload / v / 1e6, 1) for k, v in best.items()},
            "ratio_vs_np_load": {key: round(best["np_load"] / best[f"iter_shards_{key}"], 3) for key in TARGETS},
            "verified_read_vs_hash_bound": round(max(best["np_load"], best["sha256"]) / best["iter_shards_verify"], 3),
            "targets": TARGETS,
            "sha256_MB_per_s": round(sha256_throughput(paths), 1),
            "runs": {k: [round(t, 4) for t in v] for k, v in runs.items()},
            "peer": peer, "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "tree": kuration_tree_state(),
        }
        if peer.get("available"):
            result["ratio_vs_streaming"] = {
                "verify": round(peer["seconds"] / best["iter_shards_verify"], 3),
                "no_verify": round(peer["seconds"] / best["iter_shards_no_verify"], 3)}
            result["ratio_vs_streaming_of_medians"] = {
                "verify": round(peer["median"] / median["iter_shards_verify"], 3),
                "no_verify": round(peer["median"] / median["iter_shards_no_verify"], 3)}
        result["report"] = report(best, peer)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
