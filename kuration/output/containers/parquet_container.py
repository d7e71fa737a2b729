"""The ``parquet`` container: one Parquet file per shard, one row per timestep, via pyarrow
(the ``[parquet]`` extra).

Columns, sorted by name: each scalar modality (``shape: []``) is a plain column of its
Arrow type (``float16`` is Arrow ``halffloat``, Parquet ``FLOAT16``); each tensor modality
is a ``fixed_size_list<item: type>[prod(shape)]`` column holding the row's values flattened
in C order, with the declared shape also in the field metadata (``kuration.shape``, a JSON
list) and reshaped on read with the shape the spec declares. ``_present`` is a ``bool``
column when the spec has a mask. The schema's key-value metadata holds
``kuration.format`` (``kuration-shard-parquet/1``) and ``kuration.n_steps`` (decimal).
Nothing is compressed; integer and bool columns are dictionary-encoded (Parquet stores
``uint8`` as a 4-byte ``INT32``, and the dictionary brings a frame back to about a byte a
value), float columns are plain-encoded so they keep every bit, ``-0.0`` and NaN payloads
included. No column may hold nulls. The reader also accepts
variable-size ``list``/``large_list`` tensor columns whose rows all hold ``prod(shape)``
values. pyarrow is imported only when a shard is written or read.

Reading checks the footer before any column is decoded (the format key, the column names,
at most ``max_rows`` rows), and every failure of pyarrow on damaged bytes, whichever
exception it surfaces as, becomes a :class:`ShardFormatError`. Decoding itself is pyarrow's
native code, whose run-length and dictionary encodings can expand a few bytes into many
values: the container is not counted safe for untrusted bytes (``safe_for_untrusted =
False``), and readers decode such shards in a child process when asked to
(:mod:`kuration.read.isolated`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

import numpy as np

from kuration.output.containers._common import assemble, check_names, check_rows, check_shard, require
from kuration.output.containers.protocol import ShardArrays, ShardFormatError, ShardStream
from kuration.output.spec import PRESENT, Modality

FORMAT = "kuration-shard-parquet/1"
FORMAT_KEY, N_STEPS_KEY, SHAPE_KEY = b"kuration.format", b"kuration.n_steps", b"kuration.shape"


def _pyarrow():
    pa = require("pyarrow", "parquet", "parquet")
    pq = require("pyarrow.parquet", "parquet", "parquet")
    return pa, pq


class ParquetContainer:
    """Parquet via pyarrow: one row per timestep, tensors as fixed-size list columns."""

    name = "parquet"
    extension = ".parquet"
    #: pyarrow's native decoders expand encoded pages: decode untrusted shards isolated
    safe_for_untrusted = False

    def write(self, stream: ShardStream, shard: ShardArrays) -> None:
        _, pq = _pyarrow()
        table, dictionary = self.table(shard)
        # pyarrow keeps its own offset: it writes the file front to back and never seeks
        pq.write_table(table, stream, compression="none", use_dictionary=dictionary)

    def table(self, shard: ShardArrays):
        """The Arrow table a shard is stored as (zero-copy of number arrays), and the columns
        to dictionary-encode."""
        pa, _ = _pyarrow()
        arrays, present, n_steps = check_shard(shard, self.name)
        columns, fields, dictionary = [], [], []
        for name, a in ({**arrays, PRESENT: present} if present is not None else arrays).items():
            flat = pa.array(a.reshape(-1))  # zero-copy for numbers; bool is bit-packed
            if a.dtype.kind != "f":
                # Parquet has no 8/16-bit physical type (a uint8 takes an INT32): a dictionary
                # brings a frame back to ~1 byte a value. Floats stay plain, bit for bit
                dictionary.append(name if a.ndim == 1 else f"{name}.list.element")
            if a.ndim == 1:
                columns.append(flat)
                fields.append(pa.field(name, flat.type, nullable=False))
            else:
                size = math.prod(a.shape[1:])
                column = pa.FixedSizeListArray.from_arrays(flat, size)
                columns.append(column)
                fields.append(pa.field(name, column.type, nullable=False,
                                       metadata={SHAPE_KEY: json.dumps(list(a.shape[1:])).encode()}))
        schema = pa.schema(fields, metadata={FORMAT_KEY: FORMAT.encode(), N_STEPS_KEY: str(n_steps).encode()})
        return pa.Table.from_arrays(columns, schema=schema), dictionary

    def read(self, data: bytes | bytearray, modalities: Mapping[str, Modality], *, presence: bool,
             max_rows: int | None = None, verified: bool = False) -> ShardArrays:
        pa, pq = _pyarrow()
        # pyarrow surfaces damage as ArrowException, OSError, or a plain ValueError, TypeError,
        # KeyError, IndexError (a bad footer field) or UnicodeDecodeError (a name in the footer)
        errors = (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError)
        try:
            file = pq.ParquetFile(pa.BufferReader(data))
            n_steps = _footer(file.schema_arrow, file.metadata.num_rows, modalities, presence, max_rows)
            table = file.read()  # only now are pages decoded
            present = _column(pa, table, PRESENT, ()) if presence else None
            found = {name: _column(pa, table, name, m.shape) for name, m in modalities.items()}
        except ShardFormatError:
            raise
        except errors as exc:
            raise ShardFormatError(f"parquet shard: not a readable Parquet file ({exc}); is the file "
                                   "truncated?") from None
        return assemble("parquet", found, present, n_steps, modalities, max_rows)

    def __repr__(self) -> str:
        return "ParquetContainer()"


def _footer(schema, rows: int, modalities: Mapping[str, Modality], presence: bool, max_rows: int | None) -> int:
    """The real step count, after checking what the footer declares: the format, the row
    count and the column names."""
    meta = schema.metadata or {}
    if meta.get(FORMAT_KEY) != FORMAT.encode():
        raise ShardFormatError(
            f"parquet shard: schema metadata {FORMAT_KEY.decode()} is {meta.get(FORMAT_KEY)!r:.80}, expected {FORMAT!r}"
        )
    raw = meta.get(N_STEPS_KEY)
    n_steps = int(raw) if raw is not None and re.fullmatch(rb"-?[0-9]{1,19}", raw) else None
    if n_steps is None:
        raise ShardFormatError(
            f"parquet shard: schema metadata {N_STEPS_KEY.decode()} must be a decimal integer (the real step "
            f"count), found {raw!r:.80}"
        )
    check_rows("parquet", rows, max_rows)
    check_names("parquet", schema.names, modalities, presence=presence, what="column")
    return n_steps


def _column(pa, table, name: str, shape: tuple[int, ...]) -> np.ndarray:
    what = f"parquet shard: {'the ' + PRESENT + ' column' if name == PRESENT else f'column {name!r}'}"
    column = table.column(name)
    if column.null_count:
        raise ShardFormatError(f"{what} holds {column.null_count} null(s); every row needs a value")
    values = column.combine_chunks()
    is_list = pa.types.is_list(values.type) or pa.types.is_large_list(values.type) or pa.types.is_fixed_size_list(
        values.type)
    if not shape:
        if is_list:
            raise ShardFormatError(f"{what} is a list column ({values.type}), expected scalars (declared shape [])")
        return values.to_numpy(zero_copy_only=False)
    size = math.prod(shape)
    if not is_list:
        raise ShardFormatError(
            f"{what} is {values.type}, expected a list column of {size} values per row (declared shape {list(shape)}, "
            "flattened)"
        )
    stored = (table.schema.field(name).metadata or {}).get(SHAPE_KEY)
    if stored is not None and stored != json.dumps(list(shape)).encode():
        raise ShardFormatError(
            f"{what} was written with shape {stored.decode(errors='replace')}, but the spec declares {list(shape)}"
        )
    if pa.types.is_fixed_size_list(values.type):
        if values.type.list_size != size:
            raise ShardFormatError(
                f"{what} holds {values.type.list_size} values per row, expected {size} (declared shape {list(shape)})"
            )
    else:
        lengths = values.value_lengths().to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths != size).any():
            row = int(np.flatnonzero(lengths != size)[0])
            raise ShardFormatError(
                f"{what} row {row} holds {int(lengths[row])} values, expected {size} (declared shape {list(shape)})"
            )
    flat = values.flatten()
    if pa.types.is_nested(flat.type):
        raise ShardFormatError(f"{what} holds lists of {flat.type}, expected lists of numbers")
    if flat.null_count:
        raise ShardFormatError(f"{what} holds {flat.null_count} null value(s) inside its lists")
    return flat.to_numpy(zero_copy_only=False).reshape(len(values), *shape)


__all__ = ["FORMAT", "ParquetContainer"]
