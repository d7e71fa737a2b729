"""The ``npz`` container: an uncompressed ``np.savez``-style zip, the tensor default.

One ``<name>.npy`` member per modality (``(rows, *shape)`` of its dtype), ``_present.npy``
(bool, when the spec has a mask) and ``_n_steps.npy`` (a 0-d int64), so plain
``np.load(path)`` reads a shard. The zip is written front to back straight to the caller's
stream: members carry data descriptors instead of sizes patched in afterwards, so nothing
seeks, and every array goes out as one flat view of its own memory (no copy, no
compression). Members get a fixed timestamp and are always written the sequential way, so
the same shard gives the same bytes whatever stream it is written to. It does not read
pickled (object) arrays.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from kuration.output.containers._common import assemble, check_n_steps, check_names, check_shard, raw_bytes
from kuration.output.containers.protocol import ShardArrays, ShardFormatError
from kuration.output.spec import N_STEPS, PRESENT, Modality

#: The earliest time a zip header can hold: members carry no wall-clock time.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class _Sequential:
    """Hides ``tell``/``seek`` from zipfile so it always writes data descriptors, the same
    bytes for a seekable file as for the caller's hashing stream."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def write(self, data) -> int:
        return self._stream.write(data)

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


class NpzContainer:
    """``np.savez``-compatible, uncompressed, written sequentially."""

    name = "npz"
    extension = ".npz"

    def write(self, stream: BinaryIO, shard: ShardArrays) -> None:
        arrays, present, n_steps = check_shard(shard, self.name)
        with zipfile.ZipFile(_Sequential(stream), "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, a in arrays.items():
                _write_npy(zf, name, a)
            if present is not None:
                _write_npy(zf, PRESENT, present)
            _write_npy(zf, N_STEPS, np.array(n_steps, dtype=np.int64))

    def read(self, data: bytes, modalities: Mapping[str, Modality], *, presence: bool) -> ShardArrays:
        try:
            zf = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise ShardFormatError(f"npz shard: not a readable zip archive ({exc}); is the file truncated?") from None
        with zf:
            members = zf.namelist()
            names = [m[: -len(".npy")] if m.endswith(".npy") else m for m in members]
            if names.count(N_STEPS) != 1:
                raise ShardFormatError(
                    f"npz shard: expected one {N_STEPS}.npy member (the real step count), found "
                    f"{names.count(N_STEPS)}; it holds {members}"
                )
            check_names("npz", [n for n in names if n != N_STEPS], modalities, presence=presence)
            found = {name: self._load(zf, name) for name in names}
        n_steps = check_n_steps("npz", found.pop(N_STEPS))
        present = found.pop(PRESENT, None)
        return assemble("npz", found, present, n_steps, modalities)

    @staticmethod
    def _load(zf: zipfile.ZipFile, name: str) -> np.ndarray:
        try:
            with zf.open(name + ".npy") as fid:
                a = npy_format.read_array(fid, allow_pickle=False)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
            raise ShardFormatError(f"npz shard: member {name + '.npy'!r} cannot be read as a .npy array: {exc}") from None
        return a

    def __repr__(self) -> str:
        return "NpzContainer()"


__all__ = ["NpzContainer"]
