"""Reading a dataset directory, fail closed: only a committed, checksum-consistent dataset
is accepted, and every shard is checked against its recorded size and SHA-256.

:func:`load_committed` refuses a directory whose commit record is missing, not
``committed``, torn or edited, or whose manifest or config does not hash to what the
record pins; it also refuses duplicate JSON keys, NaN/Infinity, symlinked metadata and
shard paths that leave the directory. :func:`verify_dataset` checks every shard and returns
a structured result (what the ``dataset_integrity`` check reports). It never repairs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kuration.output.commit_protocol import (
    COMMIT_FILE, CONFIG_FILE, MANIFEST_FILE, CommitError, CommitRecord, read_commit, sha256_hex, strict_json,
)
from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.spec import OutputSpec

_CHUNK = 1 << 22


class DatasetIntegrityError(CommitError):
    """A shard is missing, or its bytes do not match what the manifest records."""


@dataclass(frozen=True)
class CommittedDataset:
    root: Path
    record: CommitRecord
    manifest: Mapping[str, Any]
    config: Mapping[str, Any]
    spec: OutputSpec

    @property
    def entries(self) -> list[Mapping[str, Any]]:
        return list(self.manifest["entries"])

    def shard_path(self, entry: Mapping[str, Any]) -> Path:
        return _inside(self.root, entry["path"])


def _regular(path: Path) -> bytes:
    if path.is_symlink():
        raise CommitError(f"{path}: is a symlink; dataset metadata and shards must be regular files")
    if not path.is_file():
        raise CommitError(f"{path}: missing or not a regular file")
    return path.read_bytes()


def _inside(root: Path, relative: str) -> Path:
    parts = PurePosixPath(relative)
    if parts.is_absolute() or ".." in parts.parts or not parts.parts:
        raise CommitError(f"{root / MANIFEST_FILE}: shard path {relative!r} must be relative and stay inside the dataset")
    return root.joinpath(*parts.parts)


def load_committed(out: str | os.PathLike[str]) -> CommittedDataset:
    """The committed dataset at ``out`` (a directory, or the path of its manifest)."""
    root = Path(out)
    if root.name == MANIFEST_FILE:
        root = root.parent
    record = read_commit(root)
    if record is None:
        raise CommitError(f"{root}: no {COMMIT_FILE}, so this is not a committed dataset (a writer may have stopped "
                          "before its first commit); write it again, with resume=True to keep finished shards")
    if record.state != "committed":
        raise CommitError(f"{root}: {COMMIT_FILE} says state={record.state!r}: a writer is running or was interrupted. "
                          "Readers reject it until the writer commits; re-run the write with resume=True to finish it")
    manifest_bytes = _regular(root / MANIFEST_FILE)
    config_bytes = _regular(root / CONFIG_FILE)
    if sha256_hex(manifest_bytes) != record.manifest_sha256:
        raise CommitError(f"{root / MANIFEST_FILE}: does not match the SHA-256 pinned by {COMMIT_FILE} (changed after "
                          "the commit); do not trust this dataset")
    if sha256_hex(config_bytes) != record.config_sha256:
        raise CommitError(f"{root / CONFIG_FILE}: does not match the SHA-256 pinned by {COMMIT_FILE}")
    manifest = strict_json(manifest_bytes, where=str(root / MANIFEST_FILE))
    config = strict_json(config_bytes, where=str(root / CONFIG_FILE))
    if not isinstance(manifest, dict) or not isinstance(manifest.get("entries"), list):
        raise CommitError(f"{root / MANIFEST_FILE}: has no entries list")
    spec = OutputSpec.from_dict(manifest["output"])
    return CommittedDataset(root, record, manifest, config, spec)


def _hash_file(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def shard_matches(path: Path, entry: Mapping[str, Any]) -> bool:
    """Whether ``path`` is a regular file of the entry's recorded size and SHA-256."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size != entry.get("bytes"):
        return False
    return _hash_file(path) == (entry["bytes"], entry.get("sha256"))


@dataclass(frozen=True)
class DatasetVerification:
    ok: bool
    errors: tuple[str, ...]
    shards: int
    bytes: int
    bad_shards: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)


def verify_dataset(out: str | os.PathLike[str]) -> DatasetVerification:
    """The commit chain and every shard's size and SHA-256; names each bad shard."""
    try:
        dataset = load_committed(out)
    except CommitError as exc:
        return DatasetVerification(False, (str(exc),), 0, 0)
    bad, errors, total = [], [], 0
    for entry in dataset.entries:
        try:
            path = dataset.shard_path(entry)
        except CommitError as exc:
            errors.append(str(exc))
            continue
        if not shard_matches(path, entry):
            bad.append(entry["path"])
            state = "missing" if not path.exists() else "size or SHA-256 differs"
            errors.append(f"{entry['path']}: {state} (manifest: {entry.get('bytes')} bytes, sha256 {str(entry.get('sha256'))[:12]}...)")
        total += int(entry.get("bytes", 0))
    splits = {}
    for entry in dataset.entries:
        s = splits.setdefault(entry["split"], {"shards": 0, "steps": 0})
        s["shards"] += 1
        s["steps"] += int(entry["n_steps"])
    return DatasetVerification(not errors, tuple(errors), len(dataset.entries), total, tuple(bad), {"splits": splits})


def read_shard(dataset: CommittedDataset, entry: Mapping[str, Any], *, verify: bool = True) -> ShardArrays:
    """One shard's arrays, restored to the declared dtypes and shapes (size and SHA-256
    checked first unless ``verify=False``)."""
    path = dataset.shard_path(entry)
    data = _regular(path)
    if verify and (len(data) != entry["bytes"] or sha256_hex(data) != entry["sha256"]):
        raise DatasetIntegrityError(f"{path}: size or SHA-256 differs from the manifest; the shard was changed or is "
                                    "corrupt. Re-run the write with resume=True to rebuild it")
    container = get_container(entry.get("container", dataset.spec.container))
    return container.read(data, dataset.spec.modalities, presence=dataset.spec.presence_mask)


__all__ = [
    "CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "load_committed", "read_shard",
    "shard_matches", "verify_dataset",
]
