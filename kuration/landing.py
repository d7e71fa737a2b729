"""Watching a landing zone: which recordings are there, and which are new or changed.

A change token is what a listing gives for free: an object store's ETag or version, or a
local file's size and modification time. It is not a source identity (that may hash the
content) but it is enough to notice that a file appeared or was rewritten, which is all
a sensor polling every few seconds can afford.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import fsspec

from kuration import storage


def list_recordings(url: str | os.PathLike[str], *, pattern: str = "*.parquet") -> dict[str, str]:
    """``{source_id: change token}`` for files under ``url`` whose name matches ``pattern``.

    Source ids are posix paths relative to ``url`` (what ``ParquetTickAdapter`` lists);
    hidden files and folders are skipped. A missing folder is empty."""
    return {rel: change_token(info) for rel, info in storage.list_files(url, pattern=pattern).items()}


def change_token(info: Mapping) -> str:
    for key in ("VersionId", "ETag", "etag", "md5Hash"):
        if info.get(key):
            return f"{key}:{str(info[key]).strip(chr(34))}"
    mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
    return f"size:{info.get('size')}:mtime:{mtime}"


@dataclass(frozen=True)
class LandingDiff:
    new: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def to_score(self) -> tuple[str, ...]:
        return tuple(sorted(self.new + self.changed))


def diff_recordings(previous: Mapping[str, str], current: Mapping[str, str]) -> LandingDiff:
    return LandingDiff(
        new=tuple(sorted(set(current) - set(previous))),
        changed=tuple(sorted(s for s in current if s in previous and previous[s] != current[s])),
        removed=tuple(sorted(set(previous) - set(current))),
    )


def file_token(url: str | os.PathLike[str]) -> str | None:
    """The change token of one file, or None when it does not exist."""
    fs, path = fsspec.core.url_to_fs(os.fspath(url))
    try:
        # fresh: s3fs would answer from a listing cached earlier (list_recordings caches
        # one), which may predate another writer's rewrite
        return change_token(fs.info(storage.fresh_path(fs, path)))
    except FileNotFoundError:
        return None
