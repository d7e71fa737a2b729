"""The peer side of ``bench_peers.py``: runs inside a peer's own virtualenv (numpy and the
peer library only; never kuration) and prints one JSON object on its last stdout line.

    python _peer_shards.py <peer> write <handoff_dir> <out_dir> <size_limit_bytes>
    python _peer_shards.py <peer> read <out_dir>

``<peer>`` is ``mds`` (MosaicML Streaming: ``MDSWriter`` with ``hashes=["sha256"]``, read back
with ``StreamingDataset(local=...)``) or ``wds`` (WebDataset: ``ShardWriter``, then a SHA-256
of every tar it wrote, since WebDataset has no hash of its own; read back with
``WebDataset(urls).decode()``).

``write`` loads every ``*.npz`` of the handoff folder (one per kuration shard, the very
arrays the kuration side writes) into memory first, untimed; then it flushes dirty pages
(``os.sync``) and times the write of all of them, one sample per shard. ``read`` times one
pass over every sample after a warm-up pass (page cache, index files), reading one byte of
every 4 KiB page of every array it gets (as the kuration side does, so lazy views pay for
bringing the tensors in).
"""

from __future__ import annotations

import gc
import glob
import hashlib
import json
import os
import sys
import time

import numpy as np

# MDS ndarray columns have no bool dtype: the mask travels as uint8 on both peers alike.
PRESENT = "_present"
# WebDataset takes a member whose name starts with "_" for metadata (strings only).
WDS_NAMES = {PRESENT: "present"}


def load_handoff(folder: str) -> list[tuple[str, dict[str, np.ndarray]]]:
    shards = []
    for path in sorted(glob.glob(os.path.join(folder, "*.npz"))):
        with np.load(path) as z:
            arrays = {name: z[name] for name in z.files if name != "_n_steps"}
        arrays[PRESENT] = arrays[PRESENT].astype(np.uint8)
        shards.append((os.path.splitext(os.path.basename(path))[0], arrays))
    return shards


def touch(arrays: dict[str, np.ndarray]) -> int:
    """Read one byte of every 4 KiB page of every array; the rows (steps) of the sample."""
    for a in arrays.values():
        int(np.ascontiguousarray(a).reshape(-1).view(np.uint8)[::4096].sum())
    return len(arrays[PRESENT])


def _mds_columns(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    return {name: f"ndarray:{a.dtype.name}" for name, a in arrays.items()}


def write_mds(shards: list, out: str, size_limit: int) -> dict:
    from _streaming_import import import_streaming

    streaming, stubbed = import_streaming()
    t0 = time.perf_counter()
    with streaming.MDSWriter(out=out, columns=_mds_columns(shards[0][1]), compression=None, hashes=["sha256"],
                             size_limit=size_limit) as writer:
        for _, arrays in shards:
            writer.write(arrays)
    seconds = time.perf_counter() - t0
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    files = [s["raw_data"] for s in index["shards"]]
    return {"seconds": seconds, "version": streaming.__version__, "torchvision_stubbed": stubbed,
            "files": len(files), "bytes": sum(f["bytes"] for f in files),
            "hashed": all("sha256" in f.get("hashes", {}) for f in files)}


def write_wds(shards: list, out: str) -> dict:
    import webdataset as wds

    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxcount=1, verbose=0) as writer:
        for key, arrays in shards:
            writer.write({"__key__": key, **{f"{WDS_NAMES.get(name, name)}.npy": a for name, a in arrays.items()}})
    written = time.perf_counter() - t0
    digests = {}
    for path in sorted(glob.glob(os.path.join(out, "*.tar"))):
        with open(path, "rb") as f:
            digests[os.path.basename(path)] = hashlib.file_digest(f, "sha256").hexdigest()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "write_seconds": written, "sha256_seconds": seconds - written,
            "version": wds.__version__ if hasattr(wds, "__version__") else None, "files": len(digests),
            "bytes": sum(os.path.getsize(os.path.join(out, name)) for name in digests), "hashed": True}


def read_mds(out: str) -> tuple[int, dict]:
    from _streaming_import import import_streaming

    streaming, _ = import_streaming()
    dataset = streaming.StreamingDataset(local=out, remote=None, shuffle=False, batch_size=1)
    return sum(touch(sample) for sample in dataset), {"version": streaming.__version__}


def read_wds(out: str) -> tuple[int, dict]:
    import webdataset as wds

    urls = sorted(glob.glob(os.path.join(out, "*.tar")))
    dataset = wds.WebDataset(urls, shardshuffle=False, empty_check=False).decode()
    back = {f"{wds_name}.npy": name for name, wds_name in WDS_NAMES.items()}
    rows = 0
    for sample in dataset:
        rows += touch({back.get(k, k[:-len(".npy")]): v for k, v in sample.items() if k.endswith(".npy")})
    return rows, {}


def main() -> None:
    peer, action = sys.argv[1], sys.argv[2]
    if action == "write":
        shards = load_handoff(sys.argv[3])
        gc.collect()
        os.sync()
        result = write_mds(shards, sys.argv[4], int(sys.argv[5])) if peer == "mds" else write_wds(shards, sys.argv[4])
        result["steps"] = sum(len(a[PRESENT]) for _, a in shards)
    elif action == "read":
        read = read_mds if peer == "mds" else read_wds
        read(sys.argv[3])  # warm-up
        gc.collect()
        t0 = time.perf_counter()
        rows, info = read(sys.argv[3])
        result = {"seconds": time.perf_counter() - t0, "steps": rows, **info}
    else:
        raise SystemExit(f"unknown action {action!r}: write or read")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
