"""Are the shards there? Every shard a committed manifest lists, present at its recorded size.

:func:`check_shard_presence` loads the commit chain (the record, and the manifest and config
it pins), lists the dataset folder once (and the root's shard pool once, for a pooled
version: :mod:`kuration.output.shard_pool`) and compares each entry's ``bytes`` with the size
the listing reports: no shard is opened, so it costs one listing of the folder (one LIST a
thousand objects on an object store) however large the shards are. A shard that is missing,
of another size, or a symbolic link (readers open regular files only) fails it. What it does
not do: read or hash a shard, or decode one (a shard of the right size with other bytes
passes here; :func:`kuration.read.verify_dataset` checks every SHA-256).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kuration import storage
from kuration.checks import CheckResult, count
from kuration.numbers import format_bytes
from kuration.read.committed import load_for_check, locate_shard


@dataclass(frozen=True)
class ShardPresence(CheckResult):
    """``shards`` the manifest lists and ``bytes`` they record; ``absent`` the paths of those
    missing, of another size or not a regular file, in manifest order."""

    shards: int = 0
    bytes: int = 0
    absent: tuple[str, ...] = ()


def check_shard_presence(out: str | os.PathLike[str], *,
                         write_hint: str = "write the dataset there first") -> ShardPresence:
    """Whether every shard the committed dataset at ``out`` lists is in its folder at its
    recorded size. Never raises for what it finds; reads only the commit chain and a listing.
    ``write_hint`` says how to commit a dataset, for the verdict when none is committed."""
    dataset = load_for_check(out, write_hint, ShardPresence)
    if isinstance(dataset, ShardPresence):
        return dataset
    listings: dict[str, dict[str, dict]] = {}  # one listing a folder: the version's, and the pool's
    errors: list[str] = []
    absent: list[str] = []
    missing = resized = 0
    for entry in dataset.entries:
        location = locate_shard(dataset, entry)
        # the version folder, or only the pool's folder of the root (not the other versions)
        base, name = location.relative.split("/", 1) if location.pooled else ("", location.relative)
        folder = location.destination.where(base) if base else location.destination.url
        if folder not in listings:
            listings[folder] = storage.list_files(folder)
        info = listings[folder].get(name)
        problem = None
        if info is None:
            missing += 1
            problem = f"missing (the manifest records {entry['bytes']:,} bytes)"
        elif info.get("islink") or info.get("type") not in ("file", None):
            resized += 1
            problem = "not a regular file (a link or a special file); readers open regular files only"
        elif info.get("size") != entry["bytes"]:
            resized += 1
            problem = f"{info.get('size'):,} bytes, the manifest records {entry['bytes']:,}"
        if problem is not None:
            absent.append(entry["path"])
            errors.append(f"{location.describe()}: {problem}")
    shards = len(dataset.entries)
    total = sum(entry["bytes"] for entry in dataset.entries)
    if errors:
        verdict = f"{len(errors):,} of {count(shards, 'shard')} absent or of another size; first: {errors[0]}"
    else:
        verdict = (f"all {count(shards, 'shard')} the manifest lists are present at their recorded sizes "
                   f"({format_bytes(total)}); sizes only, the contents are not read")
    figures = {"shards": shards, "bytes": total, "missing_shards": missing, "wrong_size_shards": resized}
    return ShardPresence(verdict, tuple(errors), figures=figures, shards=shards, bytes=total, absent=tuple(absent))


__all__ = ["ShardPresence", "check_shard_presence"]
