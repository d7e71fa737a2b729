"""Benchmark: Kuration's write and read paths next to two peers, on the same tensors, each
as a ratio against the same in-run raw baseline.

Workload: ``bench_write_dataset.py``'s (imported, not copied): 64-step shards of ``pos``
float32[3], ``battery`` float32, ``frame`` uint8 150x280x3 and ``label`` int64 plus the
presence mask, 8.07 MB a shard; ``--sources`` sources of 2 drones x 640 ticks, 20 shards a
source (default 4: 80 shards, 645 MB; ``--quick``: 1 source, 20 shards, 161 MB). The plan
comes from that bench's ``make_workload`` (``score_sources`` + ``plan_budget``), and so do
the shard arrays, built once with numpy from the adapter's raw columns.

Hand-over: each shard's arrays are written once, untimed, as one ``np.savez`` file per
shard into a hand-over folder. A peer process loads them all into memory before it times
anything, so both sides write the very same tensors.

Write, interleaved, best of ``--repeats`` (``os.sync()`` before every timed write):

- ``raw``: ``np.savez`` of each shard's arrays, one file per shard (no hash, no fsync): the
  baseline every write figure is a ratio against (raw seconds / side seconds);
- ``kuration``: ``write_planned_dataset`` of the plan into a new folder, npz container (it
  assembles each shard from the adapter, writes it, fsyncs it and records its SHA-256 in
  the manifest);
- ``mds``: MosaicML Streaming's ``MDSWriter(compression=None, hashes=["sha256"])``, one
  sample per shard (``size_limit`` set so a file holds one shard, as Kuration's do);
- ``wds``: WebDataset's ``ShardWriter(maxcount=1)`` (one tar per shard, arrays as ``.npy``
  members), then a SHA-256 of each tar, inside the timing: WebDataset has no hash.

Neither peer fsyncs its files; Kuration does (a shard is durable before it is recorded).

Read, interleaved, best of ``--repeats``, page cache warm (every reader reads one byte of
every 4 KiB page of every array it gets, as in ``bench_iter_shards.py``):

- ``raw``: ``np.load`` of each hand-over file, every member read (the baseline: raw seconds
  / side seconds);
- ``kuration``: ``iter_shards(out)`` (each shard's size and SHA-256 checked before it is
  yielded) and ``iter_shards(out, verify=False)``;
- ``sha256``: SHA-256 of Kuration's shard files' bytes, held in memory, one thread. With
  ``raw`` it gives the verified read's bound, reported by the same function and under the
  same definition as ``bench_iter_shards.py`` (``hash_bound_figure``): against ``np.load``
  the two benches differ (0.64 here, 0.93 there) because this workload's large uint8 frames
  make ``np.load`` cheap next to the hash; against the hash bound they measure one thing;
- ``mds``: ``StreamingDataset(local=..., remote=None, shuffle=False)`` over the MDS copy;
- ``wds``: ``WebDataset(urls, shardshuffle=False).decode()`` over the tars.

Each peer pass runs in a fresh process of the peer's venv, after its own warm-up pass.

Peers' venvs, built by this script on first use (gitignored ``bench/.venv-*``): MosaicML
Streaming shares ``bench/.venv-streaming`` with ``bench_iter_shards.py`` (``torch==2.13.0``
first, then ``mosaicml-streaming==0.13.0``, which pins ``numpy<2.2``); WebDataset gets
``bench/.venv-webdataset`` (``webdataset==1.0.2``). A venv that cannot be built, or a peer
run that fails, gives that peer's figures as null with the reason; ``STREAMING_PEER=off`` /
``WEBDATASET_PEER=off`` skip a peer.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from _measure import timed  # noqa: E402
from _reference_env import ensure_peer_python, kuration_tree_state  # noqa: E402
from _report import ratio  # noqa: E402
from bench_iter_shards import hash_all, hash_bound_figure, np_load_all, peer_env, peer_python, touch  # noqa: E402
from bench_write_dataset import RAW_WRITERS, corpus, make_workload, payload_bytes, run_writer, spec_for  # noqa: E402

from kuration.read import iter_shards, shard_entries  # noqa: E402

WEBDATASET_VENV = BENCH_DIR / ".venv-webdataset"
WEBDATASET_PINS = (("webdataset==1.0.2",),)
WEBDATASET_PROBE = "import webdataset, numpy"
PEER_SCRIPT = BENCH_DIR / "_peer_shards.py"
PEERS = {"mds": "MosaicML Streaming", "wds": "WebDataset"}
# The same floors the write and read benches hold these two figures to (bench/README.md).
KURATION_WRITE_TARGET = 0.8   # bench_write_dataset.py: npz >= 0.8x np.savez
KURATION_READ_TARGETS = {"no_verify": 0.95}  # bench_iter_shards.py, vs np.load (the verified read: its hash bound)


def webdataset_python() -> tuple[str | None, str]:
    return ensure_peer_python(WEBDATASET_VENV, [list(p) for p in WEBDATASET_PINS], WEBDATASET_PROBE,
                              off_variable="WEBDATASET_PEER", timeout=600)


def write_handoff(folder: Path, shards: list[dict[str, Any]]) -> list[Path]:
    """One ``np.savez`` file per shard: what the peers load, and what the raw read reads."""
    raw_write(folder, shards)
    return sorted(folder.glob("*.npz"))


def run_peer(python: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([python, str(PEER_SCRIPT), *args], capture_output=True, text=True, timeout=3600,
                          env=peer_env())
    if done.returncode != 0:
        raise RuntimeError("the peer failed: " + " | ".join(done.stderr.strip().splitlines()[-3:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def raw_write(folder: Path, shards: list[dict[str, Any]]) -> None:
    """The raw write baseline: ``np.savez`` per shard, as bench_write_dataset.py times it."""
    folder.mkdir(parents=True)
    for s in shards:
        RAW_WRITERS["npz"](folder / f"{s['name']}.npz", s)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def _settle() -> None:
    os.sync()
    gc.collect()


class Peer:
    """One peer: its interpreter (or why there is none), its output folder and its runs."""

    def __init__(self, key: str, python: str | None, how: str, out: Path) -> None:
        self.key, self.python, self.out = key, python, out
        self.reason = None if python else how
        self.venv = how if python else None
        self.runs: dict[str, list[float]] = {"write": [], "read": []}
        self.info: dict[str, Any] = {}

    def round(self, action: str, *args: str) -> None:
        if self.python is None:
            return
        try:
            got = run_peer(self.python, self.key, action, *args)
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            self.python, self.reason = None, f"{action}: {exc}"
            return
        self.runs[action].append(got.pop("seconds"))
        self.info.setdefault(action, {}).update(got)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": PEERS[self.key], "available": self.reason is None, "venv": self.venv,
                               "reason": self.reason, "runs": self.runs, **self.info}
        for action, runs in self.runs.items():
            out[f"{action}_seconds"] = min(runs) if runs and self.reason is None else None
        return out


def report(sides: dict[str, dict[str, Any]], payload: int, steps: int) -> list[dict[str, Any]]:
    """The uniform figures (see _report.py): every side as a ratio against the raw baseline,
    and Kuration against each peer."""
    mb = payload / 1e6
    savez = "np.savez of the same arrays, one file per shard, no hash, no fsync (its seconds / the side's)"
    npload = "np.load of the hand-over npz files, every member read, no hash (its seconds / the side's)"
    raw_w, raw_r = sides["raw"]["write_seconds"], sides["raw"]["read_seconds"]

    def speed(seconds: float | None) -> str:
        return "" if seconds is None else f"{seconds:.3f} s, {mb / seconds:,.0f} MB/s, {steps / seconds:,.0f} steps/s"

    k = sides["kuration"]
    figures = [
        ratio("write: Kuration write_planned_dataset (SHA-256 + fsync per shard) / np.savez", raw_w,
              k["write_seconds"], savez, target=f">= {KURATION_WRITE_TARGET:g}",
              note=speed(k["write_seconds"]) + "; the target is bench_write_dataset.py's for the same figure"),
        ratio("read: Kuration iter_shards (SHA-256 verified) / np.load", raw_r, k["read_seconds"], npload,
              note=speed(k["read_seconds"]) + "; no target here: on this workload np.load is cheap next to the hash, "
              "so the verified read is judged against its hash bound (next figure), as in bench_iter_shards.py"),
        hash_bound_figure("read: Kuration iter_shards (SHA-256 verified) / hash bound", raw_r,
                          sides["raw"]["sha256_seconds"], k["read_seconds"]),
        ratio("read: Kuration iter_shards(verify=False) / np.load", raw_r, k["read_no_verify_seconds"], npload,
              target=f">= {KURATION_READ_TARGETS['no_verify']:g}",
              note=speed(k["read_no_verify_seconds"]) + "; the target is bench_iter_shards.py's"),
    ]
    for key, name in PEERS.items():
        peer = sides[key]
        why = "" if peer["available"] else f"no figure: {peer['reason']}"
        hashed = ("MDSWriter(hashes=['sha256'])" if key == "mds" else "ShardWriter + SHA-256 of each tar")
        reader = ("StreamingDataset(local=..., remote=None)" if key == "mds" else "WebDataset(urls).decode()")
        figures += [
            ratio(f"write: {name} {hashed} / np.savez", raw_w, peer["write_seconds"], savez,
                  note=why or speed(peer["write_seconds"]) + "; no fsync"),
            ratio(f"read: {name} {reader} / np.load", raw_r, peer["read_seconds"], npload,
                  note=why or speed(peer["read_seconds"]) + "; no hash checked"),
            ratio(f"write: Kuration / {name} (its seconds / Kuration's)", peer["write_seconds"], k["write_seconds"],
                  f"{name}'s verified write of the same tensors, this run", note=why),
            ratio(f"read, verified: Kuration / {name} (its seconds / Kuration's)", peer["read_seconds"],
                  k["read_seconds"], f"{name}'s read of the same tensors, this run",
                  target=">= 1" if key == "mds" else None,
                  note=why or ("bench_iter_shards.py's target: at least Streaming" if key == "mds" else "")),
        ]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 source (20 shards, 161 MB), 2 repeats")
    parser.add_argument("--sources", type=int, default=None, help="sources (default 4; 1 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="best of (default 3; 2 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", default="/tmp", help="where the temp folder goes")
    args = parser.parse_args()
    n_sources = args.sources or (1 if args.quick else 4)
    repeats = args.repeats or (2 if args.quick else 3)
    tree = kuration_tree_state()
    work = Path(tempfile.mkdtemp(prefix="bench_peers_", dir=args.tmp))
    try:
        workload = make_workload(corpus(n_sources), args.seed)
        adapter, plan, shards = workload["adapter"], workload["plan"], workload["shards"]
        spec = spec_for("npz")
        payload = payload_bytes(shards)
        steps = sum(s["n_steps"] for s in shards)
        handoff = write_handoff(work / "handoff", shards)
        size_limit = int(1.5 * max(p.stat().st_size for p in handoff))  # one shard a file, not two
        peers = {"mds": Peer("mds", *peer_python(), work / "mds"), "wds": Peer("wds", *webdataset_python(),
                                                                               work / "wds")}
        runs: dict[str, list[float]] = {"raw_write": [], "kuration_write": [], "raw_read": [],
                                        "kuration_read": [], "kuration_read_no_verify": [], "sha256": []}
        kuration_out = work / "kuration"
        for _ in range(repeats):  # interleaved: drifting load on the shared machine hits every side alike
            _settle()
            runs["raw_write"].append(timed(functools.partial(raw_write, _fresh(work / "raw"), shards))[0])
            _settle()
            seconds, result = timed(functools.partial(run_writer, _fresh(kuration_out), plan, adapter, spec))
            runs["kuration_write"].append(seconds)
            for peer in peers.values():
                peer.round("write", str(work / "handoff"), str(_fresh(peer.out)), str(size_limit))
        entries = result.manifest["entries"]
        del result
        shutil.rmtree(work / "raw", ignore_errors=True)
        expected = steps
        shard_bytes = [Path(e.meta()["location"]).read_bytes() for e in shard_entries(kuration_out)]
        for fn in (lambda: np_load_all(handoff), lambda: sum(touch(a) for a in iter_shards(kuration_out))):
            assert fn() == expected  # warm the page cache and imports
        for _ in range(repeats):
            for name, fn in (("raw_read", lambda: np_load_all(handoff)),
                             ("kuration_read", lambda: sum(touch(a) for a in iter_shards(kuration_out))),
                             ("kuration_read_no_verify",
                              lambda: sum(touch(a) for a in iter_shards(kuration_out, verify=False))),
                             ("sha256", lambda: hash_all(shard_bytes, expected))):
                seconds, rows = timed(fn)
                assert rows == expected, (name, rows, expected)
                runs[name].append(seconds)
            for peer in peers.values():
                peer.round("read", str(peer.out))
        for peer in peers.values():
            got = peer.info.get("read", {}).get("steps")
            if peer.reason is None and got != expected:
                peer.python, peer.reason = None, f"read {got} steps, expected {expected}"
        best = {name: min(times) for name, times in runs.items()}
        sides: dict[str, dict[str, Any]] = {
            "raw": {"write_seconds": best["raw_write"], "read_seconds": best["raw_read"],
                    "sha256_seconds": best["sha256"]},
            "kuration": {"write_seconds": best["kuration_write"], "read_seconds": best["kuration_read"],
                         "read_no_verify_seconds": best["kuration_read_no_verify"], "files": len(entries),
                         "bytes": sum(e["bytes"] for e in entries), "hashed": all(e.get("sha256") for e in entries)},
            **{key: peer.result() for key, peer in peers.items()},
        }
        print(json.dumps({
            "bench": "peers", "quick": args.quick,
            "report": report(sides, payload, steps),
            "sides": sides, "runs": runs,
            "workload": {"sources": n_sources, "shards": len(shards), "steps": steps, "payload_mb": payload / 1e6,
                         "from": "bench_write_dataset.make_workload", "repeats": repeats, "seed": args.seed,
                         "peer_size_limit_bytes": size_limit},
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()], "tree": tree,
        }, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
