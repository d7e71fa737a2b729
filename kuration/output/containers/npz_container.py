"""The ``npz`` container: an uncompressed ``np.savez``-style zip, the tensor default.

One ``<name>.npy`` member per modality (``(rows, *shape)`` of its dtype), ``_present.npy``
(bool, when the spec has a mask) and ``_n_steps.npy`` (a 0-d int64), so plain
``np.load(path)`` reads a shard. The zip is written front to back straight to the caller's
stream: members carry data descriptors instead of sizes patched in afterwards, so nothing
seeks, and every array goes out as one flat view of its own memory (no copy, no
compression). Members get a fixed timestamp and are always written the sequential way, so
the same shard gives the same bytes whatever stream it is written to.

Reading is safe for untrusted bytes: only stored (uncompressed, unencrypted) members are
read, each ``.npy`` header is checked (a declared dtype, no pickled objects, no more values
than ``max_rows`` rows of the declared shape, exactly as many data bytes as its shape needs)
before its data is touched, so a decode never allocates more than the declared shapes and
the shard's own size allow, and its work is linear in them. Each member's array is a view of
the shard's bytes (writable when they are a bytearray, as the readers pass them), not a copy;
its CRC-32 is checked unless the caller says it verified the whole shard's SHA-256
(``verified=True``).
"""

from __future__ import annotations

import io
import math
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from kuration.output.containers._common import (
    assemble, check_n_steps, check_names, check_shard, check_size, raw_bytes, value_limit,
)
from kuration.output.containers.protocol import ShardArrays, ShardFormatError, ShardStream
from kuration.output.spec import DTYPES, N_STEPS, PRESENT, Modality

#: The earliest time a zip header can hold: members carry no wall-clock time.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
#: What zipfile raises for a damaged archive: besides BadZipFile, a bad header field can
#: surface as any of these (struct.error for a short record, NotImplementedError for an
#: unknown method or strong encryption, RuntimeError for a password-protected member).
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, KeyError, NotImplementedError,
               RuntimeError, struct.error, OverflowError)
_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


class _Sequential:
    """Hides ``tell``/``seek`` from zipfile so it always writes data descriptors, the same
    bytes for a seekable file as for the caller's hashing stream."""

    def __init__(self, stream: ShardStream) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        """Nothing: the caller owns the stream (zipfile never closes a stream it was given)."""

    def flush(self) -> None:
        flush = getattr(self._stream, "flush", None)
        if flush is not None:
            flush()


def _member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = 3  # unix, on every platform, so the bytes do not depend on it
    info.external_attr = 0o600 << 16  # what ZipFile.open(name, "w") gives a member
    return info


def _write_npy(zf: zipfile.ZipFile, name: str, a: np.ndarray) -> None:
    # force_zip64 as np.savez does (gh-10776): the size is unknown when the header is written
    with zf.open(_member(name), "w", force_zip64=True) as fid:
        npy_format.write_array_header_1_0(fid, npy_format.header_data_from_array_1_0(a))
        if a.nbytes:
            fid.write(raw_bytes(a))


class _ReadOnlyView(io.RawIOBase):
    """A seekable binary file over ``data`` without copying it (``io.BytesIO`` copies a
    bytearray), for zipfile to read the directory from."""

    def __init__(self, data: bytes | bytearray) -> None:
        self._view = memoryview(data).cast("B")
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._at = base + offset
        return self._at

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._at: self._at + len(buffer)]
        n = len(chunk)
        memoryview(buffer).cast("B")[:n] = chunk
        self._at += n
        return n


class NpzContainer:
    """``np.savez``-compatible, uncompressed, written sequentially."""

    name = "npz"
    extension = ".npz"
    #: stored members only, each header checked against the declared shapes before its data is read
    safe_for_untrusted = True

    def write(self, stream: ShardStream, shard: ShardArrays) -> None:
        arrays, present, n_steps = check_shard(shard, self.name)
        with zipfile.ZipFile(_Sequential(stream), "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, a in arrays.items():
                _write_npy(zf, name, a)
            if present is not None:
                _write_npy(zf, PRESENT, present)
            _write_npy(zf, N_STEPS, np.array(n_steps, dtype=np.int64))

    def read(self, data: bytes | bytearray, modalities: Mapping[str, Modality], *, presence: bool,
             max_rows: int | None = None, verified: bool = False) -> ShardArrays:
        try:
            zf = zipfile.ZipFile(_ReadOnlyView(data))
        except _ZIP_ERRORS as exc:
            raise ShardFormatError(f"npz shard: not a readable zip archive ({exc}); is the file truncated?") from None
        with zf:
            members = zf.infolist()
            names = [m.filename[: -len(".npy")] if m.filename.endswith(".npy") else m.filename for m in members]
            if names.count(N_STEPS) != 1:
                raise ShardFormatError(
                    f"npz shard: expected one {N_STEPS}.npy member (the real step count), found "
                    f"{names.count(N_STEPS)}; it holds {[m.filename for m in members]}"
                )
            check_names("npz", [n for n in names if n != N_STEPS], modalities, presence=presence)
            found = {name: _load(data, member, name, value_limit(name, modalities, max_rows), verified)
                     for name, member in zip(names, members, strict=True)}
        n_steps = check_n_steps("npz", found.pop(N_STEPS))
        present = found.pop(PRESENT, None)
        return assemble("npz", found, present, n_steps, modalities, max_rows)

    def __repr__(self) -> str:
        return "NpzContainer()"


#: zipfile's local file header (``structFileHeader``): signature, versions, flags, method,
#: time, date, CRC, sizes, then the lengths of the name and the extra field.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
#: Bytes a member's .npy header is parsed from: numpy writes a shard's header in well under
#: this; a longer one is refused (by the header reader running out of bytes).
_MAX_HEADER = 1 << 16


def _load(data: bytes | bytearray, member: zipfile.ZipInfo, name: str, limit: int | None, verified: bool) -> np.ndarray:
    """One member as an array viewing ``data`` (no copy; writable when ``data`` is a
    bytearray), its header checked before its data is touched, and its CRC-32 unless
    ``verified`` (the whole shard's SHA-256 was checked)."""
    what = f"npz shard: member {member.filename!r}"
    if member.compress_type != zipfile.ZIP_STORED or member.flag_bits & 0x1:
        raise ShardFormatError(
            f"{what} is compressed or encrypted (zip method {member.compress_type}, flags {member.flag_bits:#x}); npz "
            "shards are written stored, so this one was not written by Kuration or was altered"
        )
    what += " cannot be read as a .npy array"
    start = _member_start(data, member, what)
    end = start + member.file_size
    if member.compress_size != member.file_size or end > len(data):
        raise ShardFormatError(f"{what}: its {member.file_size} bytes run past the end of the {len(data)}-byte shard; "
                               "is the file truncated?")
    available = min(member.file_size, _MAX_HEADER)
    key = _header_key(data, start, available, name, limit)
    parsed = _PARSED_HEADERS.get(key) if key is not None else None
    if parsed is None:
        parsed = _parse_header(data, start, available, what, name, limit)
        if key is not None and key[0] == bytes(data[start: start + parsed[4]]):  # what was parsed is what is keyed
            if len(_PARSED_HEADERS) >= _PARSED_HEADERS_KEPT:
                _PARSED_HEADERS.clear()
            _PARSED_HEADERS[key] = parsed
    shape, fortran, dtype, count, offset = parsed
    if offset + count * dtype.itemsize != member.file_size:  # short, or trailing bytes: damage either way
        raise ShardFormatError(f"{what}: it holds {member.file_size - offset} bytes of data, its header declares "
                               f"{count * dtype.itemsize}")
    if not verified and zlib.crc32(memoryview(data)[start:end]) != member.CRC:
        raise ShardFormatError(f"{what}: its CRC-32 does not match the zip directory's; the member is damaged")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=start + offset) if count else np.empty(0, dtype)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


#: Parsed ``.npy`` headers by their exact bytes (with the member name and row limit they
#: were checked against): a dataset's shards repeat a handful of headers, and parsing one
#: (numpy's ``ast.literal_eval``) costs more than the rest of a member's decode. The same
#: bytes parse to the same result, so a hit is what parsing them again would return.
_PARSED_HEADERS: dict[tuple[bytes, str, int | None], tuple[tuple[int, ...], bool, np.dtype, int, int]] = {}
_PARSED_HEADERS_KEPT = 1024
_NPY_MAGIC = b"\x93NUMPY"
#: Bytes of a header's length field, by format version.
_LENGTH_FIELD = {(1, 0): struct.Struct("<H"), (2, 0): struct.Struct("<I")}


def _header_key(data: bytes | bytearray, start: int, available: int, name: str,
                limit: int | None) -> tuple[bytes, str, int | None] | None:
    """The bytes a member's header occupies (magic, version, length and the header text),
    with what it is checked against; None when they do not look like a header of a version
    shards are written in, or run past ``available`` (then only a full parse says why)."""
    if available < 10 or data[start: start + 6] != _NPY_MAGIC:
        return None
    field = _LENGTH_FIELD.get((data[start + 6], data[start + 7]))
    if field is None or available < 8 + field.size:
        return None
    end = 8 + field.size + field.unpack_from(data, start + 8)[0]
    return (bytes(data[start: start + end]), name, limit) if end <= available else None


def _parse_header(data: bytes | bytearray, start: int, available: int, what: str, name: str,
                  limit: int | None) -> tuple[tuple[int, ...], bool, np.dtype, int, int]:
    """``(shape, fortran, dtype, count, data offset)`` of the member header at ``start``,
    parsed by numpy and checked against what the member may hold; else raise."""
    header = io.BytesIO(data[start: start + available])
    try:
        version = npy_format.read_magic(header)
        if version not in _HEADER_READERS:
            raise ShardFormatError(f"{what}: format version {version} is not one a shard is written in")
        shape, fortran, dtype = _HEADER_READERS[version](header)
    except ShardFormatError:
        raise
    except (*_ZIP_ERRORS, SyntaxError, tokenize.TokenError) as exc:  # numpy tokenizes a header it must repair
        raise ShardFormatError(f"{what}: {exc}") from None
    count = _checked_header(what, name, shape, dtype, limit)
    return shape, fortran, dtype, count, header.tell()


def _member_start(data: bytes | bytearray, member: zipfile.ZipInfo, what: str) -> int:
    """Where ``member``'s data starts in ``data``: after its local header, whose signature and
    name must agree with the zip directory (what zipfile checks when it opens a member)."""
    at = member.header_offset
    if not 0 <= at <= len(data) - _LOCAL_HEADER.size:
        raise ShardFormatError(f"{what}: its local header at byte {at} is outside the {len(data)}-byte shard")
    fields = _LOCAL_HEADER.unpack_from(data, at)
    name_end = at + _LOCAL_HEADER.size + fields[10]
    if fields[0] != _LOCAL_SIGNATURE or data[at + _LOCAL_HEADER.size: name_end] != member.orig_filename.encode(
            "utf-8" if member.flag_bits & 0x800 else "cp437", errors="replace"):
        raise ShardFormatError(f"{what}: its local header at byte {at} is not the one the zip directory describes")
    return name_end + fields[11]


def _checked_header(what: str, name: str, shape: tuple[int, ...], dtype: np.dtype, limit: int | None) -> int:
    """The element count of a header that a shard member may have; else raise."""
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.name not in DTYPES:
        raise ShardFormatError(f"{what}: dtype {dtype} is not one of {list(DTYPES)}")
    if name == N_STEPS:
        if shape != ():
            raise ShardFormatError(f"{what}: {N_STEPS} must be a single integer, found shape {shape}")
        return 1
    if not shape:
        raise ShardFormatError(f"{what}: is 0-d; expected (rows, *shape) with a leading row axis")
    if any(d < 0 for d in shape):
        raise ShardFormatError(f"{what}: shape {shape} has a negative dimension")
    check_size("npz", name, shape, limit)
    return math.prod(shape)


__all__ = ["NpzContainer"]
