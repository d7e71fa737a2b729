"""Small committed datasets built directly through the commit protocol (no corpus, no scoring),
and the tamperer's tool: rewriting a shard or the manifest together with every checksum above
it, so the chain is consistent again and only what is inside can give the change away."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kuration.canonical.hashing import readable_json, sha256_hex
from kuration.output.commit_protocol import MANIFEST_FILE, publish_committed
from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import LocalDestination
from kuration.output.spec import OutputSpec

SHARD_LENGTH = 8


def spec_for(container: str) -> OutputSpec:
    return OutputSpec.from_dict({"shard_length": SHARD_LENGTH, "short_policy": "keep", "container": container,
                                 "modalities": {
                                     "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                                     "label": {"dtype": "int64", "shape": [], "source": "segment:speed.max"},
                                     "frame": {"dtype": "uint8", "shape": [2, 2], "source": "media:frame"}}})


def shard(rows: int, seed: int = 0) -> ShardArrays:
    rng = np.random.default_rng(seed)
    return ShardArrays({"pos": rng.standard_normal((rows, 3)).astype(np.float32), "label": np.arange(rows) * 3,
                        "frame": rng.integers(0, 255, (rows, 2, 2), dtype=np.uint8)},
                       np.arange(rows) % 3 != 1, rows)


def build(out: Path, container: str = "npz", *, rows: tuple[int, ...] = (8, 5)) -> Path:
    """A committed dataset: one train shard per entry of ``rows``, then a test shard."""
    spec = spec_for(container)
    destination = LocalDestination(out)
    box = get_container(container)
    entries = []
    for i, n in enumerate([*rows, 3]):
        split = "test" if i == len(rows) else "train"
        path = f"{split}/src_{i}_shard0000{box.extension}"
        written = destination.stage_shard(path, box, shard(n, seed=i)).seal()
        entries.append({"path": path, "split": split, "source_id": f"src{i}", "entity_id": "int:0", "span_index": None,
                        "shard_index": 0, "n_steps": n, "rows": n, "padded": False, "container": container,
                        "bytes": written.bytes, "sha256": written.sha256})
    manifest = {"format": 1, "output": spec.to_dict(), "entries": entries}
    publish_committed(destination, run_fingerprint="f" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json({"job": {}}))
    return out


def manifest_of(out: Path) -> dict[str, Any]:
    return json.loads((out / MANIFEST_FILE).read_bytes())


def recommit(out: Path, manifest: dict[str, Any] | bytes) -> None:
    """Replace the manifest and re-publish a commit record consistent with it."""
    data = manifest if isinstance(manifest, bytes) else readable_json(manifest)
    config = (out / "config.json").read_bytes()
    publish_committed(LocalDestination(out), run_fingerprint="f" * 64, marker=b"{}", manifest=data, config=config)


def rechain_shard(out: Path, index: int, data: bytes) -> dict[str, Any]:
    """Replace entry ``index``'s shard with ``data`` and rewrite its size and SHA-256 and the
    records above them: the checksum chain holds again. Returns the new entry."""
    manifest = manifest_of(out)
    entry = manifest["entries"][index]
    (out / entry["path"]).write_bytes(data)
    entry.update(bytes=len(data), sha256=sha256_hex(data))
    recommit(out, manifest)
    return entry
