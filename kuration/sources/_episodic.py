"""Shared by the episode-store adapters (robomimic HDF5, diffusion_policy Zarr).

Both stores hold one robot's episodes as arrays indexed by step, with no time column and
no entity column. The rules here are the same for both, so they live once:

* The schema must be single-entity (no ``entity``).
* Every declared column is read from an array found by the ``columns`` mapping
  (``{schema column: array path}``), or by the adapter's default rule when unmapped.
* The time column is read only when ``columns`` maps it; otherwise the adapter fills it
  with the step index (``0..T-1`` ticks, or ``k / sample_hz`` seconds).
* A media column over a numeric array is read lazily: its references are
  ``<array path>#<row>`` and the adapter's own provider decodes them. A media column over
  a string array holds references for whichever provider the schema names.
* Identity is a sha256 over exactly the bytes a source contributes (each mapped array's
  rows for that episode, with names, paths, dtypes and shapes), so appending or editing
  another episode never changes it.
* The media provider of each store (``hdf5_rows``, ``zarr_rows``) is one
  :class:`ArrayRowsProvider`: only how to open the store and find an array differs.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from kuration.canonical.hashing import canonical_json, canonical_state
from kuration.sources.media import MediaError, MediaSpec, fill_rows, group_row_refs
from kuration.sources.schema import Schema, SchemaError
from kuration.sources.ticks import SourceError, TickDataError

#: Bytes per read while hashing, so identity never holds a whole image stream in memory.
HASH_BLOCK_BYTES = 16 << 20


def check_schema(schema: Schema, adapter: str, columns: Mapping[str, str]) -> dict[str, str]:
    """Reject what an episode store cannot hold; return the checked column mapping."""
    if schema.entity is not None:
        raise SchemaError(
            f"schema.entity: {adapter} reads single-entity episodes; remove 'entity' "
            f"(got {schema.entity!r}), or convert the store to one Parquet file per source"
        )
    declared = declared_columns(schema)
    out = {}
    for name, path in dict(columns).items():
        if name not in declared:
            raise SchemaError(f"columns.{name}: not a column of the schema; declared: {sorted(declared)}")
        if not isinstance(path, str) or not path.strip("/"):
            raise SchemaError(f"columns.{name}: must be an array path inside the store, got {path!r}")
        out[name] = path.strip("/")
    return out


def declared_columns(schema: Schema) -> list[str]:
    """Every column a source must provide, time first."""
    names = [schema.time, *schema.all_fields(), *schema.media]
    return names + ([schema.tags] if schema.tags else [])


def synthesized_time(schema: Schema, n: int) -> np.ndarray:
    steps = np.arange(n, dtype=np.int64)
    return steps if schema.time_unit == "ticks" else steps / schema.sample_hz


def as_strings(values: Any) -> list[Any]:
    """A string array (bytes, numpy str, object) as Python ``str`` per row."""
    return [v.decode() if isinstance(v, bytes) else (None if v is None else str(v))
            for v in np.asarray(values).tolist()]


def is_numeric(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "biuf"


def media_refs(source_id: str, column: str, provider: str, own_provider: str, ref_path: str, start: int, stop: int,
               dtype: np.dtype) -> list[str]:
    """References ``<ref_path>#<row>`` for rows ``start..stop-1`` of a numeric media array."""
    if provider != own_provider:
        raise TickDataError(
            f"{source_id}: column {column!r}, row 0: {ref_path} holds {np.dtype(dtype)} arrays, not references; "
            f"declare provider {own_provider!r} for it (got {provider!r}), or store reference strings"
        )
    return [f"{ref_path}#{row}" for row in range(start, stop)]


class Fingerprint:
    """sha256 over named array slices, read in bounded blocks."""

    def __init__(self, tag: str) -> None:
        self._digest = hashlib.sha256(tag.encode() + b"\0")

    def add_meta(self, **meta: Any) -> None:
        self._digest.update(canonical_json(canonical_state(meta)) + b"\0")

    def add_array(self, name: str, path: str, array: Any, start: int, stop: int) -> None:
        dtype = np.dtype(array.dtype)
        row_shape = tuple(int(d) for d in array.shape[1:])
        self.add_meta(column=name, path=path, dtype=dtype.str, row_shape=list(row_shape), rows=stop - start)
        row_bytes = max(1, dtype.itemsize * int(np.prod(row_shape)))
        step = max(1, HASH_BLOCK_BYTES // row_bytes)
        for lo in range(start, stop, step):
            block = np.asarray(array[lo: min(stop, lo + step)])
            if block.dtype.kind in "OT":  # variable-length strings: no stable buffer, hash the text
                self._digest.update(canonical_json(as_strings(block)))
            else:
                self._digest.update(np.ascontiguousarray(block).tobytes())

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


class ArrayRowsProvider(ABC):
    """References ``<array path>#<row>`` into the one store at ``root``; reads only the rows
    (and so the chunks) a batch names, with one open of the store per batch.

    A subclass says how references and arrays are called in its messages (``form``,
    ``node``), which class an array in its store is (``array_type``; the store's
    ``get(path)`` finds it), and opens the store (``open``: a context manager that raises
    :class:`SourceError` naming the store when there is none)."""

    form: str
    node: str
    array_type: type

    def __init__(self, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})

    @abstractmethod
    def open(self, root: str) -> AbstractContextManager[Any]:
        """The store at ``root``, opened for reading; :class:`SourceError` naming it when there is none."""

    def decode(self, refs: Sequence[str | None], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray:
        out, by_path = group_row_refs(refs, spec, source_id=source_id, form=self.form)
        if not by_path:
            return out
        first = min(i for wanted in by_path.values() for i, _ in wanted)  # the reference that opens the store
        try:
            with self.open(root) as store:
                for path, wanted in by_path.items():
                    array = store.get(path)
                    if not isinstance(array, self.array_type):
                        raise MediaError(f"{source_id}: media {spec.name!r}: no {self.node} {path} in {root}",
                                         reference=wanted[0][0])
                    fill_rows(out, array, wanted, spec, source_id, f"{root}:{path}")
        except SourceError as exc:
            raise MediaError(f"{source_id}: media {spec.name!r}: {exc}", reference=first) from None
        return out
