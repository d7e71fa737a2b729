"""Reading and committing files by fsspec URL: local paths, ``file://``, ``s3://``, ...

Every artifact Kuration writes goes through :func:`write_bytes_atomic`, so a reader never
sees half a file: on a local filesystem the bytes go to a temporary file in the target's
own directory and are moved into place with ``os.replace``; on an object store a single
``put`` is already all-or-nothing.

Point lookups (``exists``, ``read_bytes``, :func:`fresh_path`) never trust a filesystem's
cached listings: s3fs answers ``info``/``exists``/``open`` from the listings an earlier
``find``/``ls`` cached in this process, so in a long-lived process (a sensor, a notebook,
a Dagster run scoring many sources) an object another writer added, rewrote or deleted
since would look missing, unchanged or present (or fail to read: the cached ETag no
longer matches).

Files inside a local artifact (a dataset's metadata and shards) are opened with
:func:`open_inside`: component by component from the artifact's root, following no symlink
at any level and opening nothing but regular files, so a folder replaced by a link to
elsewhere, a fifo or a device is refused, never read.
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import posixpath
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from kuration.errors import KurationError
from kuration.canonical.strict_json import parse_strict_json

if TYPE_CHECKING:
    import fsspec


def url_to_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """``(filesystem, path)`` of an fsspec URL. fsspec is imported here, on the first URL:
    a process that reads only local datasets (a training node) never loads it."""
    import fsspec.core

    return fsspec.core.url_to_fs(url)


def _is_local_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def use_s3_options(options: dict) -> Callable[[], None]:
    """Make ``options`` (s3fs keyword arguments: ``key``, ``secret``, ``token``, ``profile``,
    ``anon``, ``client_kwargs``) the defaults for every ``s3://`` URL in this process, and
    return the function that restores the previous ones. Cached s3fs instances are dropped
    both ways, so no filesystem built with the other settings is reused."""
    import fsspec.config

    before = copy.deepcopy(fsspec.config.conf.get("s3"))
    merged = {**(before or {}), **options}
    if "client_kwargs" in options and before and "client_kwargs" in before:
        merged["client_kwargs"] = {**before["client_kwargs"], **options["client_kwargs"]}
    fsspec.config.conf["s3"] = merged
    _forget_s3_instances()

    def restore() -> None:
        if before is None:
            fsspec.config.conf.pop("s3", None)
        else:
            fsspec.config.conf["s3"] = before
        _forget_s3_instances()

    return restore


def _forget_s3_instances() -> None:
    try:
        import s3fs
    except ImportError:
        return
    s3fs.S3FileSystem.clear_instance_cache()


_READ_BUFFERS = threading.local()


def sha256_of_stream(handle: IO[bytes], *, chunk: int = 1 << 20) -> tuple[int, str]:
    """``(bytes, SHA-256 hex)`` of everything left in a binary file object, read in chunks.

    A handle with ``readinto`` (local files) is read into one buffer per thread, reused
    from call to call: a fresh buffer per call or per chunk costs a page fault per 4 KiB,
    which in a VM is as slow as the hash itself."""
    digest, size = hashlib.sha256(), 0
    readinto = getattr(handle, "readinto", None)
    if readinto is None:
        while block := handle.read(chunk):
            digest.update(block)
            size += len(block)
        return size, digest.hexdigest()
    buffer = getattr(_READ_BUFFERS, "view", None)
    if buffer is None or len(buffer) != chunk:
        buffer = _READ_BUFFERS.view = memoryview(bytearray(chunk))
    while n := readinto(buffer):
        digest.update(buffer[:n])
        size += n
    return size, digest.hexdigest()


#: Path components that do not name a file or folder inside the root.
_NOT_A_NAME = frozenset({"", ".", ".."})


def relative_parts(relative: Any, *, where: str, error: type[Exception] = ValueError) -> list[str]:
    """``relative``, a ``/``-separated path that stays inside its root, as its components;
    ``error`` naming ``where`` for anything else (absolute, ``..``, ``.``, empty components,
    backslashes, NUL, not a string)."""
    if not isinstance(relative, str):
        raise error(f"{where}: a path must be a string, got {type(relative).__name__}")
    parts = relative.split("/")
    if relative.startswith("/") or not _NOT_A_NAME.isdisjoint(parts) or "\\" in relative or "\0" in relative:
        raise error(f"{where}: path {relative[:200]!r} must be relative, with no empty, '.' or '..' component, no "
                    "backslash and no NUL, so that it stays inside the dataset")
    return parts


def open_inside(root: str | os.PathLike[str], relative: str, *, error: type[Exception] = ValueError,
                folder: bool = False) -> int | None:
    """A read-only descriptor of the regular file (with ``folder=True``, the folder)
    ``relative`` below the folder ``root`` (``root`` itself may be a link; nothing below it
    may), or None when it does not exist. A symlink at any component, a component that is not
    a folder, or a final file that is not regular (a fifo, a device, a socket, a folder)
    raises ``error`` naming the path, as does a folder or file that cannot be opened (no
    permission)."""
    parts = relative_parts(relative, where=str(root), error=error)
    cloexec = getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | cloexec)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise error(f"{root}: cannot be opened ({exc.strerror})") from None
    try:
        for depth, part in enumerate(parts):
            where = os.path.join(os.fspath(root), *parts[: depth + 1])
            last = depth == len(parts) - 1 and not folder
            try:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise error(f"{where}: cannot be examined ({exc.strerror})") from None
            if stat.S_ISLNK(mode):
                raise error(f"{where}: is a symlink; every folder and file of a dataset must be a real one inside it "
                            "(a link can lead outside)")
            wanted = stat.S_ISREG if last else stat.S_ISDIR
            if not wanted(mode):
                raise error(f"{where}: is {_kind(mode)}, expected {'a regular file' if last else 'a folder'}")
            # O_NOFOLLOW and the second check on the open file: a swap after the stat is refused too
            flags = os.O_RDONLY | os.O_NOFOLLOW | cloexec | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise error(f"{where}: cannot be opened safely ({exc.strerror})") from None
            os.close(fd)
            fd = child
            if not wanted(os.fstat(fd).st_mode):
                raise error(f"{where}: changed while being opened; expected {'a regular file' if last else 'a folder'}")
        opened, fd = fd, -1
        return opened
    finally:
        if fd >= 0:
            os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file"), (stat.S_ISFIFO, "a fifo"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def folder_inside(root: str | os.PathLike[str], relative: str, *, error: type[Exception] = ValueError) -> bool:
    """Whether the folder ``relative`` exists below ``root``, reached through no symlink
    (:func:`open_inside`); ``error`` when a component is a link or not a folder."""
    fd = open_inside(root, relative, error=error, folder=True)
    if fd is None:
        return False
    os.close(fd)
    return True


_T = TypeVar("_T")


def _read_inside(root: str | os.PathLike[str], relative: str, error: type[Exception],
                 read: Callable[[io.FileIO], _T]) -> _T | None:
    """``read`` applied to ``relative`` below ``root``, opened by :func:`open_inside` (unbuffered);
    None when missing, ``error`` naming the path when reading fails."""
    fd = open_inside(root, relative, error=error)
    if fd is None:
        return None
    with open(fd, "rb", buffering=0, closefd=True) as handle:
        try:
            return read(handle)
        except OSError as exc:
            raise error(f"{os.path.join(os.fspath(root), relative)}: cannot be read ({exc.strerror})") from None


def read_inside(root: str | os.PathLike[str], relative: str, *, error: type[Exception] = ValueError) -> bytes | None:
    """The bytes of ``relative`` below ``root``, opened by :func:`open_inside`; None when missing."""
    return _read_inside(root, relative, error, io.FileIO.readall)


def read_buffer_inside(root: str | os.PathLike[str], relative: str, *, error: type[Exception] = ValueError,
                       allocate: Callable[[int], bytearray] = bytearray) -> bytearray | None:
    """:func:`read_inside` into a writable buffer of the opened file's size, from
    ``allocate(size)`` (a new one by default): arrays decoded from it can view it instead of
    copying it."""

    def read_all(handle: io.FileIO) -> bytearray:
        buffer = allocate(os.fstat(handle.fileno()).st_size)
        view, filled = memoryview(buffer), 0
        while filled < len(buffer) and (n := handle.readinto(view[filled:])):
            filled += n
        view.release()
        if filled < len(buffer):  # shrank since the fstat
            del buffer[filled:]
        else:  # grew since the fstat: the rest, so the caller sees what a plain read would
            buffer += handle.readall()
        return buffer

    return _read_inside(root, relative, error, read_all)


def change_stamp_inside(root: str | os.PathLike[str], relative: str, *,
                        error: type[Exception] = ValueError) -> tuple[int, ...] | None:
    """What changes when ``relative`` below ``root`` (opened by :func:`open_inside`) is
    rewritten, replaced or touched: its device, inode, size, mtime and ctime in nanoseconds
    (ctime cannot be set back the way ``touch -d`` sets an mtime); None when missing."""

    def stamp(handle: io.FileIO) -> tuple[int, ...]:
        found = os.fstat(handle.fileno())
        return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns

    return _read_inside(root, relative, error, stamp)


def sha256_inside(root: str | os.PathLike[str], relative: str, *, error: type[Exception] = ValueError,
                  expected_size: int | None = None) -> tuple[int, str | None] | None:
    """``(bytes, SHA-256)`` of ``relative`` below ``root``, opened by :func:`open_inside`;
    None when missing. With ``expected_size``, a file of another size (``os.fstat`` on the
    opened descriptor) is not read: its SHA-256 is reported as None."""

    def digest(handle: io.FileIO) -> tuple[int, str | None]:
        size = os.fstat(handle.fileno()).st_size
        if expected_size is not None and size != expected_size:
            return size, None
        return sha256_of_stream(handle)

    return _read_inside(root, relative, error, digest)


def is_remote(url: str | os.PathLike[str]) -> bool:
    text = os.fspath(url)
    return "://" in text and not text.startswith("file://")


def local_path(url: str | os.PathLike[str]) -> Path:
    """The local filesystem path of a local URL or path."""
    text = os.fspath(url)
    return Path(text[len("file://"):] if text.startswith("file://") else text)


def join_url(base: str | os.PathLike[str], *parts: str) -> str:
    """Join path parts onto a local path or a URL, with ``/`` for URLs."""
    text = os.fspath(base)
    if is_remote(text):
        return posixpath.join(text.rstrip("/"), *parts)
    return str(local_path(text).joinpath(*parts))


def parent_url(url: str | os.PathLike[str]) -> str:
    text = os.fspath(url)
    if is_remote(text):
        return posixpath.dirname(text.rstrip("/"))
    return str(local_path(text).parent)


def fresh_path(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """``path``, after dropping what ``fs`` cached from earlier listings about it and its
    parent folders, so the next ``info``/``exists``/``open`` asks the store. Call it before
    every point lookup whose answer decides something (identity, existence, a read)."""
    fs.invalidate_cache(path)
    return path


def read_bytes(url: str | os.PathLike[str]) -> bytes:
    text = os.fspath(url)
    if not is_remote(text):
        return local_path(text).read_bytes()
    fs, path = url_to_fs(text)
    return fs.cat_file(fresh_path(fs, path))  # one GET; no size or ETag taken from a cached listing


def exists(url: str | os.PathLike[str]) -> bool:
    text = os.fspath(url)
    if not is_remote(text):
        return local_path(text).exists()
    fs, path = url_to_fs(text)
    return fs.exists(fresh_path(fs, path))


def read_json(url: str | os.PathLike[str], *, what: str, error: type[KurationError] = KurationError) -> dict:
    """The JSON object in ``url``, read strictly (:mod:`kuration.canonical.strict_json`); anything
    else (missing, unreadable, not JSON, not an object) raises ``error`` naming the file."""
    where = os.fspath(url)
    if not exists(where):
        raise error(f"{what} not found: {where}")
    try:
        raw = read_bytes(where)
    except OSError as exc:  # a folder, no permission, a store that failed the read
        raise error(f"{where}: cannot read the {what}: {exc}") from None
    data = parse_strict_json(raw, where=where, what=f"{what}: not valid JSON", error=error)
    if not isinstance(data, dict):
        raise error(f"{where}: {what} must be a JSON object, found {type(data).__name__}")
    return data


def remove_tree(url: str | os.PathLike[str]) -> None:
    """Remove a folder and everything under it; a missing folder is not an error."""
    text = os.fspath(url)
    if not is_remote(text):
        try:
            shutil.rmtree(local_path(text))
        except FileNotFoundError:
            pass
        return
    fs, path = url_to_fs(text)
    if fs.exists(fresh_path(fs, path)):
        fs.rm(path, recursive=True)


#: Every temporary file and attempt object Kuration writes is named ``TEMP_PREFIX + <final
#: name> + ...``: hidden (listings skip it), and recognisable, so a writer holding a
#: destination's lease can remove what a killed predecessor left without touching a file
#: it did not write.
TEMP_PREFIX = ".kuration-tmp."


def temp_name(final_name: str, token: str) -> str:
    """The name of a temporary file for ``final_name`` (``token`` tells attempts apart)."""
    return f"{TEMP_PREFIX}{final_name}.{token}.tmp"


def is_temp_name(name: str) -> bool:
    """Whether ``name`` (a base name) is one of Kuration's temporary files."""
    return name.startswith(TEMP_PREFIX)


def write_bytes_atomic(url: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> str:
    """Write ``data`` to ``url`` so that readers see the old file or the new one, never a mix.
    ``fsync=False`` skips flushing the file to disk (still atomic; not durable across a
    power cut), for records whose loss costs only a recomputation."""
    text = os.fspath(url)
    if is_remote(text):
        fs, path = url_to_fs(text)
        if _is_local_filesystem(fs):  # e.g. "local://" style URLs
            return write_bytes_atomic(path, data)
        fs.pipe_file(path, data)
        return text
    target = local_path(text)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return str(target)


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make renames in the local folder ``path`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def list_files(url: str | os.PathLike[str], *, pattern: str = "*", recursive: bool = True,
               include_hidden: bool = False) -> dict[str, dict]:
    """``{relative posix path: fsspec info}`` of the files under ``url`` whose name matches
    ``pattern``, sorted. Hidden files and folders (a leading ``.``) are skipped unless
    ``include_hidden``: that is where temporary files of atomic writes and tool metadata
    live. A missing folder is empty."""
    import fnmatch

    fs, root = url_to_fs(os.fspath(url))
    if not fs.exists(fresh_path(fs, root)):  # fresh: also makes the non-recursive ls list anew
        return {}
    root = str(root).replace("\\", "/").rstrip("/")
    # s3fs: find (no maxdepth) always lists anew; a cached listing could be stale
    found = fs.find(root, detail=True) if recursive else {i["name"]: i for i in fs.ls(root, detail=True)}
    out: dict[str, dict] = {}
    for path, info in found.items():
        path = str(path).replace("\\", "/")
        if not path.startswith(root + "/") or info.get("type") == "directory":
            continue
        rel = path[len(root) + 1:]
        hidden = any(part.startswith(".") for part in rel.split("/"))
        if (hidden and not include_hidden) or not fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern):
            continue
        out[rel] = info
    return dict(sorted(out.items()))
