"""Reading a dataset directory, fail closed: only a committed, checksum-consistent dataset
is accepted, and every shard is checked against its recorded size and SHA-256.

:func:`load_committed` refuses a directory (local or an object-store URL) whose commit
record is missing, not ``committed``, torn or edited, or whose manifest or config does not
hash to what the record pins; it also refuses duplicate JSON keys, NaN/Infinity,
symlinked metadata and shard paths that leave the directory. :func:`verify_dataset` checks
every shard and returns a structured result (what the ``dataset_integrity`` check
reports). It never repairs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kuration.hashing import sha256_hex
from kuration.output.commit_protocol import (
    COMMIT_FILE, CONFIG_FILE, MANIFEST_FILE, CommitError, CommitRecord, read_commit, strict_json,
)
from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import Destination, open_destination
from kuration.output.spec import OutputSpec


class DatasetIntegrityError(CommitError):
    """A shard is missing, or its bytes do not match what the manifest records."""


@dataclass(frozen=True)
class CommittedDataset:
    destination: Destination
    record: CommitRecord
    manifest: Mapping[str, Any]
    config: Mapping[str, Any]
    spec: OutputSpec

    @property
    def root(self) -> str:
        return self.destination.url

    @property
    def entries(self) -> list[Mapping[str, Any]]:
        return list(self.manifest["entries"])

    def shard_path(self, entry: Mapping[str, Any]) -> str:
        return self.destination.where(entry["path"])


def _required(destination: Destination, name: str) -> bytes:
    data = destination.read(name)
    if data is None:
        raise CommitError(f"{destination.where(name)}: missing; the dataset is incomplete")
    return data


def load_committed(out: str | os.PathLike[str]) -> CommittedDataset:
    """The committed dataset at ``out`` (a directory or URL, or the path of its manifest)."""
    text = os.fspath(out).rstrip("/")
    if text.endswith("/" + MANIFEST_FILE) or text == MANIFEST_FILE:
        text = text[: -len(MANIFEST_FILE)].rstrip("/") or "."
    destination = open_destination(text)
    record = read_commit(destination)
    if record is None:
        raise CommitError(f"{destination.url}: no {COMMIT_FILE}, so this is not a committed dataset (a writer may have "
                          "stopped before its first commit); write it again, with resume=True to keep finished shards")
    if record.state != "committed":
        raise CommitError(f"{destination.url}: {COMMIT_FILE} says state={record.state!r}: a writer is running or was "
                          "interrupted. Readers reject it until the writer commits; re-run the write with resume=True "
                          "to finish it")
    manifest_bytes = _required(destination, MANIFEST_FILE)
    config_bytes = _required(destination, CONFIG_FILE)
    if sha256_hex(manifest_bytes) != record.manifest_sha256:
        raise CommitError(f"{destination.where(MANIFEST_FILE)}: does not match the SHA-256 pinned by {COMMIT_FILE} "
                          "(changed after the commit); do not trust this dataset")
    if sha256_hex(config_bytes) != record.config_sha256:
        raise CommitError(f"{destination.where(CONFIG_FILE)}: does not match the SHA-256 pinned by {COMMIT_FILE}")
    manifest = strict_json(manifest_bytes, where=destination.where(MANIFEST_FILE))
    config = strict_json(config_bytes, where=destination.where(CONFIG_FILE))
    if not isinstance(manifest, dict) or not isinstance(manifest.get("entries"), list):
        raise CommitError(f"{destination.where(MANIFEST_FILE)}: has no entries list")
    spec = OutputSpec.from_dict(manifest["output"])
    return CommittedDataset(destination, record, manifest, config, spec)


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
    splits: dict[str, dict[str, int]] = {}
    for entry in dataset.entries:
        try:
            matches = dataset.destination.shard_matches(entry["path"], entry)
        except CommitError as exc:
            errors.append(str(exc))
            continue
        if not matches:
            bad.append(entry["path"])
            errors.append(f"{entry['path']}: missing, or its size or SHA-256 differs (manifest: {entry.get('bytes')} "
                          f"bytes, sha256 {str(entry.get('sha256'))[:12]}...)")
        total += int(entry.get("bytes", 0))
        s = splits.setdefault(entry["split"], {"shards": 0, "steps": 0})
        s["shards"] += 1
        s["steps"] += int(entry["n_steps"])
    return DatasetVerification(not errors, tuple(errors), len(dataset.entries), total, tuple(bad), {"splits": splits})


def read_shard(dataset: CommittedDataset, entry: Mapping[str, Any], *, verify: bool = True) -> ShardArrays:
    """One shard's arrays, restored to the declared dtypes and shapes (size and SHA-256
    checked first unless ``verify=False``)."""
    data = dataset.destination.read(entry["path"])
    where = dataset.shard_path(entry)
    if data is None:
        raise DatasetIntegrityError(f"{where}: missing; re-run the write with resume=True to rebuild it")
    if verify and (len(data) != entry["bytes"] or sha256_hex(data) != entry["sha256"]):
        raise DatasetIntegrityError(f"{where}: size or SHA-256 differs from the manifest; the shard was changed or is "
                                    "corrupt. Re-run the write with resume=True to rebuild it")
    container = get_container(entry.get("container", dataset.spec.container))
    return container.read(data, dataset.spec.modalities, presence=dataset.spec.presence_mask)


__all__ = ["CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "load_committed", "read_shard",
           "verify_dataset"]
