"""Shard files: portable names, and a local write that publishes the file atomically: the
container writes a temp file in the same directory, the SHA-256 is taken by reading that
file back, then ``os.replace`` moves it into place.

The local write has two halves, so a caller can overlap them: :func:`stage_shard_local`
writes the temp file (on the caller's thread, which also assembled the shard), and
:meth:`StagedShard.seal` hashes and publishes it, on any thread. Hashing the file rather
than the buffers that went into it makes the digest the file's exact bytes whatever the
container did (a ``write_path`` container writes the file itself, and an adapter may reuse
the memory it decoded into once the next shard is assembled), and leaves the shard's arrays
free the moment the file is written. The file is hashed in place through a read-only memory
map of its pages, so the seal costs the SHA-256 alone, not a copy of the file besides.

Names: ``<recording>_<entity>[_spanNNN]_<hash12>_shardNNNN<ext>``, e.g.
``airfield_north__flight_001_drone_07_span006_a59a1d9bb2cc_shard0000.npz``. The prefix is
for people: the recording's stem (its source id without the recording extension, folders
joined with ``__``) and the entity's plain value (``drone_07``, ``5``, ``veh_3`` for the
tuple ``("veh", 3)``; no type tag, no quotes). Each part keeps only ASCII ``[A-Za-z0-9._-]``
(every other run of characters becomes one ``_``), never starts or ends with ``.`` or
``_``, and is cut to :data:`PREFIX_PART_MAX` characters (a recording keeps its end, where
the file name is; an entity its start); an empty part is left out. The 12-hex-digit hash
is what identifies the shard: it covers the exact source id, the type-tagged entity key and
the span index, so ``int:1`` and ``str:'1'``, ``a/b`` and ``a_b``, or two values that
sanitise alike, get different names (split and shard index are the folder and the
``_shardNNNN`` suffix). Nothing here depends on the Python version, the locale or the CPU:
no Unicode database, no ``hash()``, no set order.
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuration import storage
from kuration.landing.recordings import recording_name
from kuration.output.containers.protocol import ShardArrays, ShardContainer
from kuration.sources.entities import entity_key, parse_entity_key

#: The longest a readable part (the recording, the entity) of a shard name gets.
PREFIX_PART_MAX = 48
#: What joins the folders of a nested recording's stem: portable, and unlike ``/`` no path.
FOLDER_JOIN = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Windows opens a device, not a file, for a name that is one of these up to its first dot.
_WINDOWS_DEVICE = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])\.", re.IGNORECASE)


def _portable(text: str, *, keep_end: bool = False) -> str:
    cleaned = _UNSAFE.sub("_", text).strip("._")
    if len(cleaned) > PREFIX_PART_MAX:
        cleaned = cleaned[-PREFIX_PART_MAX:] if keep_end else cleaned[:PREFIX_PART_MAX]
    return cleaned.strip("._")


def recording_stem(source_id: str) -> str:
    """The recording part of a shard name: ``site_a/flight_001.parquet`` ->
    ``site_a__flight_001``. The source id's last extension goes, its folders are joined with
    :data:`FOLDER_JOIN`, and every folder is made portable (``..`` and empty ones vanish)."""
    folders = recording_name(source_id.replace("\\", "/")).split("/")
    return _portable(FOLDER_JOIN.join(part for part in map(_portable, folders) if part), keep_end=True)


def _plain(value: Any) -> str:
    if isinstance(value, tuple):
        return "_".join(_plain(v) for v in value)
    if isinstance(value, frozenset):  # in key order: a set's own order varies with PYTHONHASHSEED
        return "_".join(_plain(v) for v in sorted(value, key=entity_key))
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return repr(value) if isinstance(value, float) else str(value)


def entity_plain(entity: str) -> str:
    """The entity part of a shard name: the plain value of the type-tagged key ``entity``
    (``str:'drone 07'`` -> ``drone_07``, ``int:-3`` -> ``-3``, ``tuple:(str:'veh',int:3)`` ->
    ``veh_3``). Raises :class:`~kuration.sources.entities.EntityIdError` for a string that
    is not an entity key."""
    return _portable(_plain(parse_entity_key(entity)))


def shard_name_hash(source_id: str, entity: str, span_index: int | None) -> str:
    """12 hex digits of the SHA-256 of the exact (source id, entity key, span index). ASCII
    JSON, so a source id with any character (even a lone surrogate from an undecodable file
    name) hashes the same everywhere."""
    identity = json.dumps([source_id, entity, span_index], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(identity.encode("ascii")).hexdigest()[:12]


def shard_stem(source_id: str, entity: str, span_index: int | None) -> str:
    """``<recording>_<entity>[_spanNNN]_<hash12>``; ``entity`` is the type-tagged entity key.
    Never empty, never starts with ``.``, ``-`` or ``_`` (the hash is always there)."""
    span = None if span_index is None else f"span{span_index:03d}"
    parts = (recording_stem(source_id), entity_plain(entity), span, shard_name_hash(source_id, entity, span_index))
    stem = "_".join(part for part in parts if part).lstrip("-_")
    if device := _WINDOWS_DEVICE.match(stem):  # ``nul.v2_...``: the name would open the device
        stem = f"{device.group(1)}_{stem[device.end():]}"
    return stem


def shard_name(stem: str, shard_index: int, extension: str) -> str:
    return f"{stem}_shard{shard_index:04d}{extension}"


#: Writes at least this large are hashed on a helper thread while the sink writes them:
#: hashlib and file writes both release the GIL, so on two cores the hash costs no time.
OVERLAP_BYTES = 1 << 20
_HASHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kuration-sha256")


class HashingWriter(io.RawIOBase):
    """A write-only, unseekable stream that forwards to ``sink`` and keeps the SHA-256 and
    the byte count of everything written (so no second read of the file is needed). Large
    writes are hashed concurrently with the sink's write; each write returns only when both
    are done, so the caller may reuse its buffer."""

    def __init__(self, sink) -> None:
        self._sink = sink
        self._hash = hashlib.sha256()
        self.bytes_written = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        if len(view) >= OVERLAP_BYTES:
            pending = _HASHER.submit(self._hash.update, view)
            try:
                self._sink.write(view)
            finally:
                pending.result()
        else:
            self._hash.update(view)
            self._sink.write(view)
        self.bytes_written += len(view)
        return len(view)

    def tell(self) -> int:  # zipfile asks; answering it would invite a seek back
        raise io.UnsupportedOperation("HashingWriter is sequential: no tell")

    def seek(self, *args) -> int:
        raise io.UnsupportedOperation("HashingWriter is sequential: no seek")

    def readinto(self, *args) -> int:
        raise io.UnsupportedOperation("HashingWriter is write-only")

    def truncate(self, *args) -> int:
        raise io.UnsupportedOperation("HashingWriter is sequential: no truncate")

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def sha256_of_own_file(handle: io.FileIO) -> tuple[int, str]:
    """``(bytes, SHA-256)`` of a local file this writer made and alone uses (a shard's temp
    file: a random name, under the lease), hashed through a read-only memory map.

    The map hashes the page cache's pages in place: a read would first copy every byte into
    a buffer, about a tenth of the hash's own time, and would hand the GIL back and forth
    once per chunk. It is meant for the writer's own files only: a file truncated while
    mapped stops the process (SIGBUS) instead of raising, which nobody else's file may
    cause; an I/O error while paging in does the same, which leaves the dataset uncommitted
    like any crash (resume rebuilds the shard). A file that cannot be mapped (an empty one,
    a filesystem without mmap) is read in chunks instead."""
    if os.fstat(handle.fileno()).st_size:
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            pass
        else:
            with mapped:
                return len(mapped), hashlib.sha256(mapped).hexdigest()
    return storage.sha256_of_stream(handle)


@dataclass(frozen=True)
class WrittenShard:
    path: Path
    bytes: int
    sha256: str


@dataclass(frozen=True)
class StagedShard:
    """A shard whose bytes are complete in ``temp``, next to ``path``; not yet published."""

    temp: Path
    path: Path

    def seal(self) -> WrittenShard:
        """Hash the temp file and move it into place; on any failure the temp file goes."""
        try:
            with open(self.temp, "rb", buffering=0) as f:
                size, digest = sha256_of_own_file(f)
            os.replace(self.temp, self.path)
        except BaseException:
            self.discard()
            raise
        return WrittenShard(self.path, size, digest)

    def seal_new(self) -> tuple[WrittenShard, bool]:
        """Hash the temp file and give it its name only if that name is free (a hard link,
        which never replaces a file); the temp file goes either way. The flag says the name
        was taken already: its file is left as it was, for the caller to compare."""
        try:
            with open(self.temp, "rb", buffering=0) as f:
                size, digest = sha256_of_own_file(f)
            try:
                os.link(self.temp, self.path)
                taken = False
            except FileExistsError:
                taken = True
        finally:
            self.discard()
        return WrittenShard(self.path, size, digest), taken

    def discard(self) -> None:
        self.temp.unlink(missing_ok=True)


def stage_shard_local(path: str | os.PathLike[str], container: ShardContainer, shard: ShardArrays, *,
                      fsync: bool = False) -> StagedShard:
    """Write ``shard`` to a temp file in ``path``'s directory; :meth:`StagedShard.seal`
    publishes it.

    Not fsync'd by default: the commit protocol makes the manifest and config durable, and
    a shard a power cut lost is caught by its recorded size and SHA-256 (readers reject it,
    resume rebuilds it); per-shard fsync would cost more than the write itself."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / storage.temp_name(path.name, f"{os.getpid()}.{secrets.token_hex(4)}")
    write_path = getattr(container, "write_path", None)
    try:
        if write_path is not None:
            write_path(temp, shard)
        else:
            with open(temp, "wb") as f:
                container.write(f, shard)
        if fsync:
            fd = os.open(temp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return StagedShard(temp, path)


def write_shard_local(path: str | os.PathLike[str], container: ShardContainer, shard: ShardArrays, *,
                      fsync: bool = False) -> WrittenShard:
    """Write ``shard`` to ``path`` atomically: readers see the old file or the whole new one."""
    return stage_shard_local(path, container, shard, fsync=fsync).seal()


__all__ = ["FOLDER_JOIN", "HashingWriter", "PREFIX_PART_MAX", "StagedShard", "WrittenShard", "entity_plain",
           "recording_stem", "sha256_of_own_file", "shard_name", "shard_name_hash", "shard_stem", "stage_shard_local",
           "write_shard_local"]
