"""The ``hdf5`` container: one HDF5 file per shard, read with h5py (the ``[array]`` extra).

At the root: one dataset per modality (``(rows, *shape)`` of its dtype, contiguous,
uncompressed), the ``_present`` dataset when the spec has a mask, and two attributes,
``format`` (``kuration-shard-hdf5/1``) and ``_n_steps`` (int64). HDF5 must seek while it
writes, so for a stream the file is built in memory (HDF5's core driver) and handed over in
one write; a local shard is written by HDF5 itself as a file (``write_path``), the same
bytes without the two in-memory copies. Creation times are not tracked, so the same shard
gives the same bytes. h5py stores ``bool`` as an
HDF5 enum of ``FALSE``/``TRUE`` and reads it back as ``bool``. h5py is imported only when a
shard is written or read.

Reading refuses, before any data is read, a dataset of another dtype, a chunked or filtered
one, one with more values than ``max_rows`` rows of the declared shape, and one whose stored
bytes are not exactly its shape's: a crafted shape cannot make the reader allocate more than
the declared shapes and the file allow. Every failure of h5py on damaged bytes, whichever
exception it surfaces as, becomes a :class:`ShardFormatError`. What this cannot bound is
time: libhdf5 parses the file's metadata itself, and crafted metadata can keep it busy
indefinitely (a flipped byte in a global-heap object size did, holding the GIL). The
container is therefore not safe for untrusted bytes (``safe_for_untrusted = False``);
readers decode such shards in a child process with a time limit when asked to
(:mod:`kuration.read.isolated`).
"""

from __future__ import annotations

import io
import math
import os
import uuid
from collections.abc import Mapping

import numpy as np

from kuration.output.containers._common import (
    assemble, check_n_steps, check_names, check_shard, check_size, require, value_limit,
)
from kuration.output.containers.protocol import ShardArrays, ShardFormatError, ShardStream
from kuration.output.spec import DTYPES, N_STEPS, PRESENT, Modality

FORMAT = "kuration-shard-hdf5/1"


def _h5py():
    return require("h5py", "array", "hdf5")


#: File settings both writers share, so a file and an in-memory image hold the same bytes.
_LAYOUT = {"libver": "earliest", "track_order": False}
#: What h5py raises for a damaged file: the HDF5 error stack is mapped onto whichever
#: Python exception h5py picked for the call (a missing-object KeyError, a RuntimeError from
#: link iteration, an OverflowError for a size beyond ssize_t, a TypeError for a bad type...).
_H5_ERRORS = (OSError, ValueError, KeyError, RuntimeError, TypeError, OverflowError, IndexError, MemoryError)


def _fill(f, arrays: dict[str, np.ndarray], present: np.ndarray | None, n_steps: int) -> None:
    f.attrs["format"] = FORMAT
    f.attrs[N_STEPS] = n_steps
    for name, a in ({**arrays, PRESENT: present} if present is not None else arrays).items():
        f.create_dataset(name, data=a, track_times=False)  # no chunks, no filters: contiguous


class Hdf5Container:
    """HDF5 via h5py, built in memory, written once."""

    name = "hdf5"
    extension = ".h5"
    #: libhdf5 parses the metadata and can loop on crafted bytes: decode untrusted shards isolated
    safe_for_untrusted = False

    def write(self, stream: ShardStream, shard: ShardArrays) -> None:
        h5py = _h5py()
        arrays, present, n_steps = check_shard(shard, self.name)
        # HDF5's in-memory ("core") driver: C writes into its own buffer, three times faster
        # than h5py calling back into a Python file object; the name is never a file.
        payload = sum(a.nbytes for a in arrays.values()) + (present.nbytes if present is not None else 0)
        # One block for the whole image: the core driver otherwise grows it 64 KiB at a time.
        f = h5py.File(f"kuration-shard-{uuid.uuid4().hex}.h5", "w", driver="core", backing_store=False,
                      block_size=payload + (1 << 16), **_LAYOUT)
        try:
            _fill(f, arrays, present, n_steps)
            f.flush()
            image = f.id.get_file_image()
        finally:
            f.close()
        stream.write(image)

    def write_path(self, path: str | os.PathLike[str], shard: ShardArrays) -> None:
        h5py = _h5py()
        arrays, present, n_steps = check_shard(shard, self.name)
        # No lock: the caller's temp file is private to it, and some filesystems refuse locks.
        with h5py.File(path, "w", locking=False, **_LAYOUT) as f:
            _fill(f, arrays, present, n_steps)

    def read(self, data: bytes | bytearray, modalities: Mapping[str, Modality], *, presence: bool,
             max_rows: int | None = None, verified: bool = False) -> ShardArrays:
        h5py = _h5py()
        try:
            f = h5py.File(io.BytesIO(data), "r")
        except _H5_ERRORS as exc:
            raise ShardFormatError(f"hdf5 shard: not a readable HDF5 file ({exc}); is the file truncated?") from None
        try:
            with f:
                n_steps, found = _read_root(h5py, f, modalities, presence, max_rows, len(data))
        except _H5_ERRORS as exc:
            raise ShardFormatError(f"hdf5 shard: damaged HDF5 structure ({type(exc).__name__}: {exc})") from None
        present = found.pop(PRESENT, None)
        return assemble("hdf5", found, present, n_steps, modalities, max_rows)

    def __repr__(self) -> str:
        return "Hdf5Container()"


def _read_root(h5py, f, modalities: Mapping[str, Modality], presence: bool, max_rows: int | None,
               size: int) -> tuple[int, dict[str, np.ndarray]]:
    if f.attrs.get("format") != FORMAT:
        raise ShardFormatError(f"hdf5 shard: root attribute format is {f.attrs.get('format')!r:.80}, expected "
                               f"{FORMAT!r}")
    if N_STEPS not in f.attrs:
        raise ShardFormatError(f"hdf5 shard: no root attribute {N_STEPS} (the real step count)")
    n_steps = check_n_steps("hdf5", f.attrs[N_STEPS])
    names = list(f.keys())
    check_names("hdf5", names, modalities, presence=presence, what="dataset")
    found = {}
    for name in names:
        node = f[name]
        if not isinstance(node, h5py.Dataset):
            raise ShardFormatError(f"hdf5 shard: {name!r} is a {type(node).__name__}, expected a dataset")
        _check_dataset(name, node, value_limit(name, modalities, max_rows), size)
        found[name] = np.asarray(node[()])  # a 0-d dataset reads as a scalar
    return n_steps, found


def _check_dataset(name: str, node, limit: int | None, size: int) -> None:
    """What reading ``node`` would allocate is its stored bytes, within the file, before it is read."""
    where = f"hdf5 shard: dataset {name!r}"
    dtype = node.dtype
    if dtype.fields is not None or dtype.subdtype is not None or dtype.name not in DTYPES:
        raise ShardFormatError(f"{where} has dtype {dtype}, not one of {list(DTYPES)}")
    if node.chunks is not None or node.id.get_create_plist().get_nfilters():
        raise ShardFormatError(f"{where} is chunked or filtered; shards are written contiguous and unfiltered")
    check_size("hdf5", name, node.shape, limit)
    nbytes = math.prod(node.shape) * dtype.itemsize
    stored = node.id.get_storage_size()
    if stored != nbytes or nbytes > size:
        raise ShardFormatError(
            f"{where} declares shape {node.shape} ({nbytes} bytes) but stores {stored} bytes in a {size}-byte file"
        )


__all__ = ["FORMAT", "Hdf5Container"]
