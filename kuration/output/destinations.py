"""Where a dataset lives: one protocol, a local folder and an fsspec object store.

Everything the writer and the reader do to a dataset directory goes through a
:class:`Destination`: read a file (``read_buffer``: into a writable buffer, which a shard's
decoded arrays view instead of copying), publish metadata atomically, stage a shard and seal it
(hashed and moved into place), check a shard against its recorded size and SHA-256, list and remove files,
and hold the exclusive writer lease.

- :class:`LocalDestination`: temp file in the same directory, ``os.replace`` (with an fsync
  of the file and of the directory for metadata); a shard's SHA-256 is taken from its
  temp file before the replace (a pool shard is hard-linked to its name instead, which
  never replaces a file); kept shards are shared by hard links (``shares_by_link``); the
  lease is an ``flock`` the kernel drops when the writer's process exits; metadata and
  shards that are symlinks are refused.
- :class:`FsspecDestination` (``s3://`` and other object stores): a shard is uploaded whole as
  an attempt object next to its final name, then moved into place by the backend; a pool
  shard (:mod:`.shard_pool`: its name is its content key, known before the bytes) is put
  under its final name with an if-none-match put, never overwriting one; metadata is one
  ``put`` (all or nothing). The lease is an object created with an exclusive
  (if-none-match) put; a crashed writer leaves it behind, and the error says how to clear
  it. Native atomic rename differs between backends: the checksummed commit record keeps
  readers fail-closed either way. FTP and SFTP are refused (no reliable move or exclusive
  create).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import secrets
import shutil
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from kuration import storage
from kuration.errors import CommitError, InputError, LeaseError
from kuration.output.containers.protocol import ShardArrays, ShardContainer
from kuration.output.lease import LEASE_FILE, DestinationLease
from kuration.output.shard_files import HashingWriter, StagedShard, WrittenShard, stage_shard_local

UNSUPPORTED_PROTOCOLS = ("ftp", "sftp", "ssh")


def _checked(relative: str) -> PurePosixPath:
    return PurePosixPath(*storage.relative_parts(relative, where="dataset", error=CommitError))


class Destination(Protocol):
    url: str
    #: Whether a kept shard is shared into a new version by a hard link (a local disk); False
    #: on an object store, where a copy is a new object: the writer then uses the root's
    #: shard pool (:mod:`.shard_pool`).
    shares_by_link: bool

    def where(self, relative: str) -> str: ...
    def top_level(self) -> list[str]: ...
    def read(self, relative: str) -> bytes | None: ...
    def read_buffer(self, relative: str, allocate: Callable[[int], bytearray] = bytearray) -> bytearray | None: ...
    def change_stamp(self, relative: str) -> tuple[int, ...] | None: ...
    def write_metadata(self, relative: str, data: bytes, *, durable: bool = True) -> None: ...
    def stage_shard(self, relative: str, container: ShardContainer, shard: ShardArrays) -> Staged: ...
    def put_pooled(self, relative: str, container: ShardContainer, shard: ShardArrays) -> Staged: ...
    def shard_matches(self, relative: str, entry: Mapping[str, Any]) -> bool: ...
    def files_under(self, folder: str) -> list[str]: ...
    def check_folders(self, folders: set[str]) -> None: ...
    def remove(self, relative: str) -> None: ...
    def remove_tree(self, folder: str) -> None: ...
    def lease(self): ...
    def children(self, folder: str) -> list[str]: ...
    def create_new(self, relative: str, data: bytes) -> bool: ...
    def share_file(self, source: str, relative: str) -> None: ...


class Staged(Protocol):
    """A shard written but maybe not yet hashed and published: ``seal`` finishes it (on any
    thread), ``discard`` drops it."""

    def seal(self) -> WrittenShard: ...
    def discard(self) -> None: ...


@dataclass(frozen=True)
class _Published:
    """An object-store shard: uploaded, hashed and moved into place when staged."""

    written: WrittenShard

    def seal(self) -> WrittenShard:
        return self.written

    def discard(self) -> None:
        pass


def _same(size: int, digest: str | None, entry: Mapping[str, Any]) -> bool:
    return size == entry.get("bytes") and digest == entry.get("sha256")


def _check_taken(destination: Destination, relative: str, written: WrittenShard) -> None:
    """A pool object's name was taken already: it must hold the bytes just made, which are
    then not stored again; other bytes are never overwritten, and fail the write."""
    if destination.shard_matches(relative, {"bytes": written.bytes, "sha256": written.sha256}):
        return
    raise CommitError(
        f"{destination.where(relative)}: the shard pool already holds an object under this content key, with other "
        f"bytes than this write made ({written.bytes} bytes, sha256 {written.sha256[:12]}...); a pool object is "
        "never overwritten. It was changed after it was written (check it, and delete it if it is damaged; the "
        "versions naming it fail verification), or the writer is not deterministic. Then write again with "
        "resume=True")


@dataclass(frozen=True)
class _PooledLocal:
    """A local pool object staged in a temp file: ``seal`` links it to its name only if the
    name is free (:func:`_check_taken` when it is not)."""

    staged: StagedShard
    destination: LocalDestination
    relative: str

    def seal(self) -> WrittenShard:
        written, taken = self.staged.seal_new()
        if taken:
            _check_taken(self.destination, self.relative, written)
        return written

    def discard(self) -> None:
        self.staged.discard()


class LocalDestination:
    def __init__(self, path: str | os.PathLike[str], *, shares_by_link: bool = True) -> None:
        self.root = storage.local_path(os.fspath(path))
        self.url = str(self.root)
        # False writes the object-store layout (the root's shard pool) on a local disk: for
        # tests of that layout; versions then need their root, as on an object store.
        self.shares_by_link = shares_by_link

    def _path(self, relative: str) -> Path:
        return self.root.joinpath(*_checked(relative).parts)

    def where(self, relative: str) -> str:
        return str(self._path(relative))

    def top_level(self) -> list[str]:
        if not self.root.exists():
            return []
        if not self.root.is_dir():
            raise InputError(f"{self.root}: exists and is not a directory")
        return sorted(p.name for p in self.root.iterdir() if p.name != LEASE_FILE)

    # Reads open every component from the root through no symlink, and only regular files
    # (storage.open_inside): a split folder swapped for a link to elsewhere must fail a reader
    # and must not let a resume reuse, or write into, what lies behind the link.
    def read(self, relative: str) -> bytes | None:
        return storage.read_inside(self.root, relative, error=CommitError)

    def read_buffer(self, relative: str, allocate: Callable[[int], bytearray] = bytearray) -> bytearray | None:
        """:meth:`read` into a writable buffer from ``allocate(size)``: a shard's decoded
        arrays view it, no copy."""
        return storage.read_buffer_inside(self.root, relative, error=CommitError, allocate=allocate)

    def change_stamp(self, relative: str) -> tuple[int, ...] | None:
        """What changes when the file is rewritten, replaced or touched (``storage.change_stamp_inside``);
        None when it is missing. ``verify="once"`` trusts a shard again while this stays the same."""
        return storage.change_stamp_inside(self.root, relative, error=CommitError)

    def write_metadata(self, relative: str, data: bytes, *, durable: bool = True) -> None:
        path = self._path(relative)
        storage.write_bytes_atomic(str(path), data, fsync=durable)
        if durable:
            storage.fsync_directory(path.parent)

    def stage_shard(self, relative: str, container: ShardContainer, shard: ShardArrays) -> StagedShard:
        return stage_shard_local(self._path(relative), container, shard)

    def put_pooled(self, relative: str, container: ShardContainer, shard: ShardArrays) -> _PooledLocal:
        """Stage a pool object; sealing links it to its name, never replacing a file there."""
        return _PooledLocal(stage_shard_local(self._path(relative), container, shard), self, relative)

    def shard_matches(self, relative: str, entry: Mapping[str, Any]) -> bool:
        found = storage.sha256_inside(self.root, relative, error=CommitError, expected_size=entry.get("bytes"))
        return found is not None and _same(*found, entry)

    def check_folders(self, folders: set[str]) -> None:
        """Every folder that holds shards is a real folder inside the dataset."""
        for folder in sorted(folders):
            storage.folder_inside(self.root, folder, error=CommitError)

    def files_under(self, folder: str) -> list[str]:
        base = self._path(folder)
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root).as_posix()) for p in base.rglob("*") if p.is_file()
                      or p.is_symlink())

    def remove(self, relative: str) -> None:
        path = self._path(relative)
        path.unlink(missing_ok=True)
        self._remove_emptied_parents(path)  # folders emptied by the removal go too

    def remove_tree(self, folder: str) -> None:
        """``folder``, every file and folder under it, and the folders its removal empties;
        a missing folder is fine. A folder reached through a symlink is refused (what lies
        behind the link is not the dataset's); links inside are unlinked, never followed.
        Unlinking a name leaves the file's other hard links whole."""
        if not storage.folder_inside(self.root, folder, error=CommitError):
            return
        shutil.rmtree(self._path(folder))  # unlinks the names: a kept version's hard links stay
        self._remove_emptied_parents(self._path(folder))

    def _remove_emptied_parents(self, path: Path) -> None:
        # Object stores have no folders to leave behind.
        for parent in path.parents:
            if parent == self.root or self.root not in parent.parents:
                break
            try:
                parent.rmdir()
            except OSError:
                break

    def lease(self) -> DestinationLease:
        return DestinationLease(self.root)

    def children(self, folder: str) -> list[str]:
        base = self._path(folder)
        return sorted(p.name for p in base.iterdir()) if base.is_dir() else []

    def create_new(self, relative: str, data: bytes) -> bool:
        """Write ``relative`` whole, only if it does not exist (False when it did): a temp
        file made durable, then hard-linked to its name (``link`` fails on an existing
        name, atomically, where ``rename`` would replace it)."""
        path = self._path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(storage.temp_name(path.name, secrets.token_hex(6)))
        try:
            with open(temp, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temp, path)
        except FileExistsError:
            return False
        finally:
            temp.unlink(missing_ok=True)
        storage.fsync_directory(path.parent)
        return True

    def share_file(self, source: str, relative: str) -> None:
        """``relative`` becomes a hard link to ``source`` (no bytes copied); a copy where the
        filesystem has no hard links."""
        src, dst = self._path(source), self._path(relative)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            storage.write_bytes_atomic(str(dst), src.read_bytes())


class FsspecDestination:
    #: An object store has no hard link: kept shards are shared through the root's pool.
    shares_by_link = False

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        # Checked on the URL, before a filesystem is built (building one may connect).
        protocols = {part.split("://", 1)[0] for part in self.url.split("::") if "://" in part}
        bad = sorted(protocols & set(UNSUPPORTED_PROTOCOLS))
        if bad:
            raise InputError(
                f"{url}: {bad[0]} cannot publish a dataset safely (no reliable atomic move or exclusive create); write "
                "to a local folder or an object store (s3://...) instead"
            )
        self.fs, self.path = storage.url_to_fs(self.url)

    def _key(self, relative: str) -> str:
        return f"{self.path.rstrip('/')}/{_checked(relative).as_posix()}"

    def where(self, relative: str) -> str:
        return f"{self.url}/{_checked(relative).as_posix()}"

    def top_level(self) -> list[str]:
        key = storage.fresh_path(self.fs, self.path)
        if not self.fs.exists(key):
            return []
        names = {str(p).rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(key, detail=False)}
        return sorted(n for n in names if n != LEASE_FILE)

    def read(self, relative: str) -> bytes | None:
        key = storage.fresh_path(self.fs, self._key(relative))
        try:
            return self.fs.cat_file(key)
        except FileNotFoundError:
            return None

    def read_buffer(self, relative: str, allocate: Callable[[int], bytearray] = bytearray) -> bytearray | None:
        """:meth:`read` into a writable buffer from ``allocate(size)`` (one copy in memory,
        next to a network read)."""
        data = self.read(relative)
        if data is None:
            return None
        buffer = allocate(len(data))
        buffer[:] = data
        return buffer

    def change_stamp(self, relative: str) -> None:
        """None: an object store gives no change signal without one more request per read,
        so ``verify="once"`` verifies every read of its shards."""
        return None

    def write_metadata(self, relative: str, data: bytes, *, durable: bool = True) -> None:
        self.fs.pipe_file(self._key(relative), data)  # one put: the object is whole or absent

    def stage_shard(self, relative: str, container: ShardContainer, shard: ShardArrays) -> _Published:
        data, written = _encoded(relative, container, shard)
        final = self._key(relative)
        folder, name = final.rsplit("/", 1)
        attempt = f"{folder}/{storage.temp_name(name, f'attempt-{secrets.token_hex(6)}')}"
        self.fs.pipe_file(attempt, data)  # a complete attempt object first
        try:
            # a copy and a delete, as fs.mv makes them, without the listings mv runs first to
            # find out whether either path is a folder (three per shard on an object store)
            self.fs.cp_file(attempt, final)
            self.fs.rm_file(attempt)
        except BaseException:
            self.fs.rm_file(attempt)
            raise
        storage.fresh_path(self.fs, final)
        return _Published(written)

    def put_pooled(self, relative: str, container: ShardContainer, shard: ShardArrays) -> _Published:
        """A pool object, put under its final name only if no object has it (a conditional,
        if-none-match put: a put is whole or absent, so no attempt object is needed); when
        one has, :func:`_check_taken`."""
        data, written = _encoded(relative, container, shard)
        key = self._key(relative)
        try:
            self.fs.pipe_file(key, data, mode="create")
        except OSError:
            # FileExistsError on some stores, a bare OSError (failed precondition) on Ceph radosgw
            if not self.fs.exists(storage.fresh_path(self.fs, key)):
                raise
            _check_taken(self, relative, written)
        storage.fresh_path(self.fs, key)
        return _Published(written)

    def check_folders(self, folders: set[str]) -> None:
        """Every folder is a path inside the dataset; there are no links to check, since
        object stores have none."""
        for folder in sorted(folders):
            _checked(folder)

    def shard_matches(self, relative: str, entry: Mapping[str, Any]) -> bool:
        key = storage.fresh_path(self.fs, self._key(relative))
        try:
            info = self.fs.info(key)
        except FileNotFoundError:
            return False
        if info.get("size") != entry.get("bytes"):
            return False
        with self.fs.open(key, "rb") as f:
            return _same(*storage.sha256_of_stream(f), entry)

    def files_under(self, folder: str) -> list[str]:
        # Hidden too: the attempt objects a killed writer left are hidden.
        return [f"{folder}/{rel}" for rel in storage.list_files(self.where(folder), include_hidden=True)]

    def remove(self, relative: str) -> None:
        try:
            self.fs.rm_file(self._key(relative))
        except FileNotFoundError:
            pass

    def remove_tree(self, folder: str) -> None:
        """Every object under ``folder/`` (a batch delete); none is fine."""
        prefix = self._key(folder)
        keys = [f"{prefix}/{name}" for name in storage.list_files(self.where(folder), include_hidden=True)]
        if keys:
            self.fs.rm(keys)
        storage.fresh_path(self.fs, prefix)

    def children(self, folder: str) -> list[str]:
        key = storage.fresh_path(self.fs, self._key(folder))
        try:
            found = self.fs.ls(key, detail=False)
        except FileNotFoundError:
            return []
        return sorted({str(p).rstrip("/").rsplit("/", 1)[-1] for p in found} - {""})

    def create_new(self, relative: str, data: bytes) -> bool:
        """Put ``relative`` only if no object has its name (a conditional, if-none-match put;
        False when one did), then read it back: a store that ignores the condition shows
        whose object won."""
        key = self._key(relative)
        try:
            self.fs.pipe_file(key, data, mode="create")
        except OSError:
            if self.read(relative) is None:
                raise
            return False
        return self.read(relative) == data

    def share_file(self, source: str, relative: str) -> None:
        """``relative`` becomes a server-side copy of ``source`` (no bytes through this machine)."""
        self.fs.copy(self._key(source), self._key(relative))
        storage.fresh_path(self.fs, self._key(relative))

    def _held(self, current: bytes) -> LeaseError:
        return LeaseError(_held_message(self.url, self.where(LEASE_FILE), current))

    @contextmanager
    def lease(self) -> Iterator[FsspecDestination]:
        key = self._key(LEASE_FILE)
        token = secrets.token_hex(8)
        holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": token,
                             "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}).encode()
        try:
            self.fs.pipe_file(key, holder, mode="create")  # if-none-match: fails when the object exists
        except OSError as exc:
            # s3fs reports a failed precondition as FileExistsError on some stores and as a bare
            # OSError on others (Ceph radosgw): the object's presence decides.
            current = self.read(LEASE_FILE)
            if current is None:
                raise
            raise self._held(current) from exc
        current = self.read(LEASE_FILE)
        if current is None or token.encode() not in current:
            # A store that ignores if-none-match let another writer overwrite the object.
            raise self._held(current or b"{}")
        try:
            yield self
        finally:
            self.remove(LEASE_FILE)


def _encoded(relative: str, container: ShardContainer, shard: ShardArrays) -> tuple[bytes, WrittenShard]:
    """``shard``'s bytes in ``container``, hashed as they are written."""
    buffer = io.BytesIO()
    writer = HashingWriter(buffer)
    container.write(writer, shard)
    return buffer.getvalue(), WrittenShard(Path(relative), writer.bytes_written, writer.sha256)


def _held_message(url: str, lock: str, current: bytes) -> str:
    return (f"{url}: another writer holds this destination ({current.decode(errors='replace')}). If that writer "
            f"crashed, confirm no writer still owns the destination, then delete {lock} by hand")


def open_destination(url: str | os.PathLike[str] | Destination) -> Destination:
    """The destination at ``url`` (a local folder, or an object-store URL); a destination
    already opened is itself (with its settings, e.g. ``shares_by_link``)."""
    if not isinstance(url, (str, os.PathLike)):
        return url
    text = os.fspath(url)
    return FsspecDestination(text) if storage.is_remote(text) else LocalDestination(text)


__all__ = ["Destination", "FsspecDestination", "LocalDestination", "Staged",
           "UNSUPPORTED_PROTOCOLS",
           "open_destination"]
