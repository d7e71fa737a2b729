"""Shard files: portable names, and a local write that publishes the file atomically: the
container writes a temp file in the same directory, the SHA-256 is taken by reading that
file back, then ``os.replace`` moves it into place.

The local write has two halves, so a caller can overlap them: :func:`stage_shard_local`
writes the temp file (on the caller's thread, which also assembled the shard), and
:meth:`StagedShard.seal` hashes and publishes it, on any thread. Hashing the file rather
than the buffers that went into it makes the digest the file's exact bytes whatever the
container did, and leaves the shard's arrays free the moment the file is written.

Names: ``<source>_<entity>[_spanNNN]_<hash12>_shardNNNN<ext>``. The readable prefix keeps
only ``[A-Za-z0-9._-]`` (anything else becomes ``_``) and is cut to a bounded length, so it
is portable to every filesystem and object store; the 12-hex-digit hash of the exact
(source, entity) pair tells apart ids that flatten to the same prefix (``a/b`` and ``a_b``).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kuration import storage
from kuration.output.containers.protocol import ShardArrays, ShardContainer

PREFIX_PART_MAX = 48
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _portable(text: str) -> str:
    cleaned = _UNSAFE.sub("_", text).strip("._") or "x"
    return cleaned[:PREFIX_PART_MAX]


def shard_stem(source_id: str, entity: str, span_index: int | None) -> str:
    """``<source>_<entity>[_spanNNN]_<hash12>``; ``entity`` is the type-tagged entity key."""
    digest = hashlib.sha256(f"{source_id}\0{entity}".encode()).hexdigest()[:12]
    span = "" if span_index is None else f"_span{span_index:03d}"
    return f"{_portable(source_id)}_{_portable(entity)}{span}_{digest}"


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
                size, digest = storage.sha256_of_stream(f)
            os.replace(self.temp, self.path)
        except BaseException:
            self.discard()
            raise
        return WrittenShard(self.path, size, digest)

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


__all__ = ["HashingWriter", "PREFIX_PART_MAX", "StagedShard", "WrittenShard", "shard_name", "shard_stem",
           "stage_shard_local", "write_shard_local"]
