"""Garbage collection of a dataset root's shard pool (:mod:`.shard_pool`): the objects no
version left at the root names.

A pool object belongs to no version folder, so removing a version cannot remove its shards:
:func:`sweep_pool` runs after :mod:`.version_gc` has removed the versions, under the same
lease (no writer adds a version, or adopts an object, meanwhile). It marks every object the
version folders still at the root name, then deletes the rest, one object at a time:

- what a version names: the ``stored_at`` of every entry of its ``dataset_manifest.json``
  (committed, staged, or a folder a killed gc half removed) and of its resume records (an
  interrupted build's finished and adopted shards, which ``resume=True`` keeps);
- the marks are taken before the first deletion, from the folders that exist then: a
  SIGKILL at any moment leaves every object a kept version names, and the next gc deletes
  the rest;
- a manifest that cannot be read (torn, edited) means what its version names is unknown:
  nothing is deleted, and the result says why;
- the temp files of killed local pool writes go too.

What it does not do: decide which versions go (:mod:`.version_gc` does), or delete an
object any version folder names, whatever that version's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kuration.errors import CommitError
from kuration.output.commit_protocol import MANIFEST_FILE, RESUME_DIR, is_writer_leftover, strict_json
from kuration.output.destinations import Destination
from kuration.output.shard_pool import POOL_DIR, pool_references


@dataclass(frozen=True)
class PoolSweep:
    """What a sweep of the pool did (or, dry, would do): ``removed`` objects (relative to the
    root), ``kept`` how many are named by a version, ``refused`` why nothing was removed ("")."""

    removed: tuple[str, ...] = ()
    kept: int = 0
    refused: str = ""


def _records(destination: Destination, folder: str) -> list[Any]:
    """The entries a version's resume records hold (a torn record authorizes nothing: skipped)."""
    entries: list[Any] = []
    for name in destination.files_under(f"{folder}/{RESUME_DIR}"):
        try:
            item = strict_json(destination.read(name) or b"", where=destination.where(name), what="resume record")
        except CommitError:
            continue
        if isinstance(item, dict):
            entries.extend([item["entry"]] if isinstance(item.get("entry"), dict) else item.get("entries") or [])
    return entries


def referenced(destination: Destination, folders: Iterable[str]) -> set[str]:
    """The pool objects the dataset folders ``folders`` (relative to the root ``destination``;
    "" is the root itself) name; :class:`CommitError` naming a manifest that cannot be read."""
    names: set[str] = set()
    for folder in folders:
        relative = f"{folder}/{MANIFEST_FILE}".lstrip("/")
        data = destination.read(relative)
        if data is not None:
            manifest = strict_json(data, where=destination.where(relative), what="manifest")
            entries = manifest.get("entries") if isinstance(manifest, dict) else None
            if not isinstance(entries, list):
                raise CommitError(f"{destination.where(relative)}: holds no entries list")
            names |= pool_references(entries)
        if folder:
            names |= pool_references(_records(destination, folder))
    return names


def sweep_pool(destination: Destination, folders: Iterable[str], *, dry_run: bool = False) -> PoolSweep:
    """Remove the pool objects of the root ``destination`` that none of ``folders`` (every
    dataset folder left at the root) names; see the module docstring. Call it under the
    root's lease, after the versions were removed."""
    objects = destination.files_under(POOL_DIR)
    if not objects:
        return PoolSweep()
    try:
        named = referenced(destination, folders)
    except CommitError as exc:
        return PoolSweep(kept=len(objects), refused=f"the shard pool was left as it is: {exc}, so which objects "
                                                    "its version names is unknown")
    garbage = tuple(name for name in objects if name not in named or is_writer_leftover(name.rsplit("/", 1)[-1]))
    if not dry_run:
        for name in garbage:
            destination.remove(name)
    return PoolSweep(garbage, len(objects) - len(garbage))


__all__ = ["PoolSweep", "referenced", "sweep_pool"]
