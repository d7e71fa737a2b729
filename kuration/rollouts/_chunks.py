"""Which stored chunks of a zarr v3 array are missing, from its metadata and a listing of the store.

zarr 3.1 reads a chunk that is not there as the fill value, silently: a deleted chunk file
looks like a run of zeros (or NaN). The rollout writer writes every chunk
(``write_empty_chunks=True``), so every cell of an array's chunk grid must have its key in
the store. For a sharded array the grid cells are shards (one file each) and a shard holds an
index of its inner chunks: an inner chunk that lies inside the array but whose index entry
is the "empty" marker (offset and length ``2**64 - 1``) is missing as well.

What this does not do: decode chunk bytes (a corrupt chunk is found when the array is read)
or read a remote store (the rollout stores are local directories).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec
from zarr.codecs.sharding import ShardingCodecIndexLocation

#: The index entry zarr writes for an inner chunk a shard does not hold.
_EMPTY = np.uint64(2**64 - 1)
_CRC32C_BYTES = 4


def list_store_files(store_dir: Path) -> set[str]:
    """Every file below ``store_dir`` as a ``/``-separated path relative to it (the store keys)."""
    keys: set[str] = set()
    root = str(store_dir)
    for folder, _dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        keys.update(prefix + name for name in files)
    return keys


def _grid(shape: tuple[int, ...], cell: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    counts = [math.ceil(size / step) if step else 0 for size, step in zip(shape, cell, strict=True)]
    return itertools.product(*(range(count) for count in counts))


#: Grid cells past the stored chunk files beyond which the missing keys are not enumerated
#: (hostile metadata can declare trillions of chunks; walking them would never end).
MAX_ENUMERATED_MISSING = 10_000


def grid_cell_count(array: zarr.Array) -> int:
    """How many chunks (shards, for a sharded array) the array's regular chunk grid has:
    plain integer arithmetic on the metadata, whatever size it declares."""
    metadata = array.metadata
    grid: Any = metadata.chunk_grid
    cells = 1
    for size, step in zip(metadata.shape, grid.chunk_shape, strict=True):
        cells *= -(-int(size) // int(step)) if int(step) > 0 else 0
    return cells


def stored_chunk_files(listed: set[str], path: str) -> int:
    """How many files below the array at ``path`` are not its ``zarr.json``: its chunk files."""
    prefix = f"{path}/"
    return sum(1 for key in listed if key.startswith(prefix)) - (f"{prefix}zarr.json" in listed)


def implausible_grid(array: zarr.Array, path: str, stored: int) -> str | None:
    """Why the array's declared chunk grid cannot be the stored one (``stored`` chunk files
    below it, every chunk written), or None. The writer writes every chunk, so a grid with
    more cells than files has a missing chunk or altered metadata; it is refused before
    anything walks or reads the grid."""
    cells = grid_cell_count(array)
    if cells <= stored:
        return None
    return (f"{path}: the chunk grid declares {cells} chunk(s) (shape {list(array.metadata.shape)}) but {stored} "
            "chunk file(s) are stored; a chunk is missing or the array metadata was altered")


def missing_chunk_keys(store_dir: Path, path: str, array: zarr.Array, listed: set[str]) -> tuple[list[str], list[str]]:
    """``(missing_keys, notes)`` for the array at ``path``: the store keys of grid cells (chunks,
    or shards for a sharded array) absent from ``listed``, then each shard whose index marks an
    in-bounds inner chunk as not stored, as ``"<key> inner chunk <coords>"``. ``notes`` says
    what could not be checked (a shard index in a layout this module does not decode, or a
    grid declaring more than :data:`MAX_ENUMERATED_MISSING` cells beyond the stored files,
    which is named by its counts instead of walked)."""
    metadata = array.metadata
    shape = tuple(int(n) for n in metadata.shape)
    grid: Any = metadata.chunk_grid  # a RegularChunkGrid: zarr 3.1 writes no other kind
    cell = tuple(int(n) for n in grid.chunk_shape)
    sharding = next((codec for codec in metadata.codecs if isinstance(codec, ShardingCodec)), None)  # type: ignore[union-attr]
    missing: list[str] = []
    notes: list[str] = []
    stored = stored_chunk_files(listed, path)
    if grid_cell_count(array) > stored + MAX_ENUMERATED_MISSING:
        notes.append(str(implausible_grid(array, path, stored)).removeprefix(f"{path}: "))
        return missing, notes
    for coords in _grid(shape, cell):
        key = f"{path}/{metadata.encode_chunk_key(coords)}"
        if key not in listed:
            missing.append(key)
        elif sharding is not None:
            missing.extend(f"{key} {what}" for what in _empty_inner_chunks(store_dir / key, coords, shape, cell,
                                                                           sharding, notes))
    return missing, notes


def _empty_inner_chunks(file: Path, shard: tuple[int, ...], shape: tuple[int, ...], cell: tuple[int, ...],
                        sharding: ShardingCodec, notes: list[str]) -> list[str]:
    """``"inner chunk <coords>"`` for each inner chunk (coordinates within the shard) that lies
    inside the array and is not stored."""
    inner = tuple(int(n) for n in sharding.chunk_shape)
    per_shard = tuple(outer // step for outer, step in zip(cell, inner, strict=True))
    codecs = tuple(sharding.index_codecs)
    if not (len(codecs) in (1, 2) and isinstance(codecs[0], BytesCodec)
            and all(isinstance(codec, Crc32cCodec) for codec in codecs[1:])):
        notes.append(f"{file.name}: shard index codecs {codecs!r} are not decoded here; inner chunks not checked")
        return []
    index_bytes = 16 * math.prod(per_shard)
    stored_bytes = index_bytes + (_CRC32C_BYTES if len(codecs) == 2 else 0)
    try:
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < stored_bytes:
                return [f"(truncated: {size} bytes, shorter than its {stored_bytes}-byte index)"]
            at_end = sharding.index_location == ShardingCodecIndexLocation.end
            handle.seek(size - stored_bytes if at_end else 0)
            raw = handle.read(index_bytes)
    except OSError as exc:
        notes.append(f"{file}: shard index unreadable ({exc.strerror})")
        return []
    byte_order = getattr(codecs[0], "endian", None)
    endian = "<" if byte_order is None or byte_order.value == "little" else ">"
    index = np.frombuffer(raw, dtype=f"{endian}u8").reshape(*per_shard, 2)
    empty = (index[..., 0] == _EMPTY) & (index[..., 1] == _EMPTY)
    found = []
    for local in map(tuple, np.argwhere(empty)):
        start = [s * c + i * step for s, c, i, step in zip(shard, cell, local, inner, strict=True)]
        if all(begin < extent for begin, extent in zip(start, shape, strict=True)):
            found.append(f"inner chunk {tuple(int(i) for i in local)}")
    return found


__all__ = ["MAX_ENUMERATED_MISSING", "grid_cell_count", "implausible_grid", "list_store_files", "missing_chunk_keys",
           "stored_chunk_files"]
