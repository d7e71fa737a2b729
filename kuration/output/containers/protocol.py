"""The shard container boundary: one protocol, four implementations with identical semantics.

A container turns one shard's arrays into bytes on a stream and back. Every container
stores each modality as shaped ``(rows, *shape)`` (Parquet flattens tensors into list
columns and reshapes them on read), the boolean ``_present`` mask when the spec asks for
it, and the real (pre-pad) step count ``_n_steps`` in-band. Reading restores the declared
dtype and shape whatever the container widened on disk (JSON keeps numbers as float64 or
int64), so a ``uint8`` frame comes back ``uint8`` and float32 values bit-exact. The one
exception is JSON's NaN token: a NaN comes back as NaN, but not with its sign or payload bits.

``write`` gets a write-only, sequential stream: it must not seek or read back, because an
object-store upload hashes the bytes as they pass. A container that needs a seekable file
builds the shard in memory and writes it once. Its bytes depend on the shard alone, never
on the stream. A container may also have ``write_path(path, shard)``, which writes the
same bytes as the new file ``path``; local shards use it when it exists (HDF5 writes its
own file directly instead of building an image in memory). ``read`` gets the shard's
complete bytes, after the caller has checked their size and hash, and ``max_rows``, the most
rows the spec allows: a shard that claims more is refused before its arrays are decoded.
Whatever the bytes, ``read`` raises only :class:`ShardFormatError` (or
``MissingDependencyError``). ``verified=True`` says the caller has checked the bytes against
the SHA-256 the manifest records, so a container may skip its own weaker checksums (the
npz members' CRC-32s, about a quarter of an npz read); it never skips a structural check.

``safe_for_untrusted`` says whether ``read`` is bounded in time and memory by the shard's
size and the declared shapes for any bytes at all, as for an artifact from someone else
whose checksums were rewritten to match (the commit chain is integrity, not
authentication). ``npz`` and ``json`` are (pure Python and numpy, every size checked before
it is allocated); ``hdf5`` and ``parquet`` are not (their native decoders parse the file's
own metadata), and :mod:`kuration.read` decodes them in a child process with a time limit
when a dataset is loaded with ``untrusted=True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kuration.errors import OutputError
from kuration.output.spec import Modality


class ShardFormatError(OutputError, ValueError):
    """Shard bytes cannot be read back as the declared modalities."""


@dataclass(frozen=True)
class ShardArrays:
    """One shard's payload: each modality as ``(rows, *shape)`` of its declared dtype,
    ``present`` as ``(rows,)`` bool (None when the spec has no presence mask), and
    ``n_steps``, the real steps (``rows`` minus padding)."""

    arrays: Mapping[str, np.ndarray]
    present: np.ndarray | None
    n_steps: int

    @property
    def rows(self) -> int:
        if self.present is not None:
            return len(self.present)
        return len(next(iter(self.arrays.values()))) if self.arrays else self.n_steps


class ShardStream(Protocol):
    """Where a container writes a shard: front to back, never seeking or reading back, so
    a hashing stream, a file or a BytesIO can take it alike."""

    def write(self, data: bytes, /) -> int: ...


class ShardContainer(Protocol):
    """``name`` is what ``OutputSpec.container`` says; ``extension`` includes the dot."""

    name: str
    extension: str
    safe_for_untrusted: bool

    def write(self, stream: ShardStream, shard: ShardArrays) -> None: ...

    def read(self, data: bytes | bytearray, modalities: Mapping[str, Modality], *, presence: bool,
             max_rows: int | None = None, verified: bool = False) -> ShardArrays: ...


__all__ = ["ShardArrays", "ShardContainer", "ShardFormatError", "ShardStream"]
