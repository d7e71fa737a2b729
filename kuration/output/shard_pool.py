"""The shard pool of a dataset root on an object store, and where a manifest entry's bytes lie.

An object store has no hard link: a server-side copy is a new object, stored and billed in
full, so a version folder holding its own object for every shard makes each rebuild store a
whole version again. On a destination that cannot share a file by a link
(:attr:`~kuration.output.destinations.Destination.shares_by_link` False: an object store),
every shard with a content key (:mod:`.shard_reuse`) is therefore stored once, in the
root's pool, and every version that holds it names it::

    ROOT/shards/<content key><container extension>    e.g. shards/3f2a...9c.npz

- The name is known before the bytes (the content key covers everything they are made of),
  so the writer puts the object under its final name with a create-only put and never
  overwrites one: an object already there must hold exactly the bytes this write made
  (:meth:`~kuration.output.destinations.Destination.put_pooled`).
- A version folder then holds its metadata; each pooled manifest entry keeps its seed
  fields (``path``, the seed's ``<split>/<shard name>``, ``bytes``, ``sha256``, ...) and
  names its object in ``stored_at``, relative to the dataset root and inside ``shards/``.
  The commit record pins the manifest, so it still pins every byte a version reads.
- A kept shard needs no copy at all: the new manifest names the same object.
- Shards without a content key (a source with a weak identity) are written into the version
  folder, as on a local disk.

Local destinations share kept shards by hard links and keep self-contained version folders;
their readers still read a pooled version (a root whose ``shards/`` exists).

:func:`shard_location` is the one place that says where an entry's bytes are: every reader
(:func:`kuration.read.load_committed` and what reads through it, the presence check,
re-curation) and shard reuse ask it. A version folder opened alone (not through its root)
has no pool: a pooled entry there is refused, naming ``ROOT@vN`` to open instead.

Retention (:mod:`.version_gc`) removes a pool object once no version left at the root names
it, after the versions themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kuration import storage
from kuration.errors import CommitError, shown
from kuration.output.destinations import Destination

#: The pool's folder in a dataset root.
POOL_DIR = "shards"
#: The manifest entry field naming a pooled shard's object, relative to the dataset root.
STORED_AT = "stored_at"


def pool_name(content_key: str, extension: str) -> str:
    """The pool object of the shard whose content key is ``content_key``: ``shards/<key><ext>``."""
    return f"{POOL_DIR}/{content_key}{extension}"


def stored_at_problem(value: Any) -> str | None:
    """What is wrong with a manifest entry's ``stored_at`` (the rest of an error message after
    ``.stored_at``), or None: it must be a relative path inside ``shards/`` with no ``..``."""
    try:
        parts = storage.relative_parts(value, where="", error=CommitError)
    except CommitError as exc:
        return str(exc)
    if len(parts) < 2 or parts[0] != POOL_DIR:
        return f": {shown(value)} is not inside the dataset root's shard pool {POOL_DIR + '/'!r}"
    return None


def is_pooled(entry: Mapping[str, Any]) -> bool:
    return STORED_AT in entry


def pool_references(entries: Iterable[Any]) -> set[str]:
    """The pool objects ``entries`` name (anything that is not a pooled entry is left out)."""
    return {e[STORED_AT] for e in entries if isinstance(e, dict) and isinstance(e.get(STORED_AT), str)}


@dataclass(frozen=True)
class ShardLocation:
    """Where the bytes of the manifest entry ``path`` of the version folder ``folder`` lie:
    ``relative`` inside ``destination`` (the folder itself, or the dataset root's pool)."""

    destination: Destination
    relative: str
    folder: Destination
    path: str
    pooled: bool = False

    @property
    def where(self) -> str:
        """The full path or URL of the bytes."""
        return self.destination.where(self.relative)

    def describe(self) -> str:
        """For messages: the shard's path, and for a pooled one the version and pool object too."""
        if not self.pooled:
            return self.where
        return f"{self.folder.url}: entry {self.path} (pool object {self.relative}, {self.where})"


def open_through_root(folder_url: str) -> str:
    """What to open instead of a bare version folder: ``ROOT@vN`` when ``folder_url`` is
    ``ROOT/versions/vN``."""
    head, _, version = folder_url.rstrip("/").rpartition("/")
    root, _, versions = head.rpartition("/")
    return f"{root}@{version}" if versions == "versions" and root else "ROOT@vN (the version through its dataset root)"


def pooled_outside(folder: Destination, path: str, stored_at: str) -> CommitError:
    """The error for a pooled entry read from a version folder opened without its root."""
    return CommitError(
        f"{folder.url}: entry {path} is stored in its dataset root's shard pool ({stored_at}), outside this version "
        f"folder, which was opened alone; open {open_through_root(folder.url)} instead (a pooled version needs its "
        f"root's {POOL_DIR}/)")


def shard_location(dataset_root: Destination | None, folder: Destination, entry: Mapping[str, Any]) -> ShardLocation:
    """Where the bytes of ``entry`` (a checked manifest entry of the version in ``folder``)
    lie: in the dataset root's pool when the entry is pooled (``stored_at``), else in
    ``folder``. ``dataset_root`` is None when the folder was opened alone; a pooled entry
    then raises :class:`CommitError` saying to open ``ROOT@vN``."""
    stored = entry.get(STORED_AT)
    if stored is None:
        return ShardLocation(folder, entry["path"], folder, entry["path"])
    if dataset_root is None:
        raise pooled_outside(folder, entry["path"], stored)
    return ShardLocation(dataset_root, stored, folder, entry["path"], pooled=True)


__all__ = ["POOL_DIR", "STORED_AT", "ShardLocation", "is_pooled", "open_through_root", "pool_name",
           "pool_references", "pooled_outside", "shard_location", "stored_at_problem"]
