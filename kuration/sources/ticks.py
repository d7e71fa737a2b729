"""``Ticks``: one source's rows, validated against the schema, as numpy columns.

Every adapter ends here, whatever its storage: ``Ticks.from_columns`` checks that each
declared column exists with the right dtype kind and shape, that rows are sorted by
tick with no tick repeated for an entity, and that globals agree across the entities of
a tick. Each error names the source, the column and the row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.errors import KurationError
from kuration.schema import FieldSpec, Schema

#: How far a time in seconds may sit off the sample grid and still count as on it.
GRID_TOLERANCE = 1e-3


class TickDataError(KurationError, ValueError):
    """A source's rows do not match the schema."""


@dataclass(frozen=True)
class Ticks:
    """Rows of one source: ``tick`` (int64 tick number), ``entity`` (per row, or None for a
    single-entity schema), declared ``columns`` (fields and globals, ``(N, *shape)`` in the
    declared dtype), lazy ``media`` references and per-row ``tags``."""

    source_id: str
    tick: np.ndarray
    entity: np.ndarray | None
    columns: Mapping[str, np.ndarray]
    media: Mapping[str, np.ndarray]
    tags: list[tuple[str, ...]] | None

    def __len__(self) -> int:
        return len(self.tick)

    @classmethod
    def from_columns(cls, schema: Schema, source_id: str, raw: Mapping[str, Any]) -> Ticks:
        """Validate raw columns (numpy arrays or lists, one entry per row) against ``schema``."""
        n = _row_count(schema, source_id, raw)
        tick = _ticks(schema, source_id, raw[schema.time], n)
        entity = None
        if schema.entity:
            entity = np.asarray(_required(raw, schema.entity, source_id), dtype=object)
            nulls = np.flatnonzero(np.asarray([e is None for e in entity], dtype=bool))
            if len(nulls):
                raise TickDataError(f"{source_id}: column {schema.entity!r}, row {int(nulls[0])}: entity id is null")
        _check_order(source_id, schema, tick, entity)
        columns = {name: _numeric(source_id, spec, _required(raw, name, source_id), n) for name, spec in schema.all_fields().items()}
        for name in schema.globals:
            _check_global(source_id, name, tick, columns[name])
        media = {}
        for name in schema.media:
            refs = np.asarray(_required(raw, name, source_id), dtype=object)
            if len(refs) != n:
                raise TickDataError(f"{source_id}: column {name!r}: {len(refs)} rows, expected {n}")
            media[name] = refs
        tags = None
        if schema.tags:
            tags = _tags(source_id, schema.tags, _required(raw, schema.tags, source_id), n)
        return cls(source_id, tick, entity, columns, media, tags)


def _required(raw: Mapping[str, Any], name: str, source_id: str) -> Any:
    if name not in raw:
        raise TickDataError(
            f"{source_id}: missing column {name!r}; the source has {sorted(raw)}. Fix the file or the schema."
        )
    return raw[name]


def _row_count(schema: Schema, source_id: str, raw: Mapping[str, Any]) -> int:
    return len(_required(raw, schema.time, source_id))


def _ticks(schema: Schema, source_id: str, values: Any, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise TickDataError(f"{source_id}: column {schema.time!r}: must be numeric, one value per row (got dtype {arr.dtype})")
    if schema.time_unit == "ticks":
        if arr.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))
            if len(bad):
                raise TickDataError(f"{source_id}: column {schema.time!r}, row {int(bad[0])}: tick {arr[bad[0]]!r} is not a whole number")
        return arr.astype(np.int64)
    scaled = arr.astype(np.float64) * schema.sample_hz
    ticks = np.round(scaled)
    off = np.flatnonzero(~np.isfinite(scaled) | (np.abs(scaled - ticks) > GRID_TOLERANCE * max(1.0, schema.sample_hz)))
    if len(off):
        r = int(off[0])
        raise TickDataError(
            f"{source_id}: column {schema.time!r}, row {r}: time {arr[r]!r} s is not on the {schema.sample_hz:g} Hz sample grid"
        )
    return ticks.astype(np.int64)


def _check_order(source_id: str, schema: Schema, tick: np.ndarray, entity: np.ndarray | None) -> None:
    if len(tick) < 2:
        return
    back = np.flatnonzero(tick[1:] < tick[:-1])
    if len(back):
        r = int(back[0]) + 1
        raise TickDataError(
            f"{source_id}: column {schema.time!r}, row {r}: tick {tick[r]} comes after tick {tick[r - 1]}; "
            "rows must be sorted by time"
        )
    if entity is None:
        same = np.flatnonzero(tick[1:] == tick[:-1])
        if len(same):
            r = int(same[0]) + 1
            raise TickDataError(f"{source_id}: column {schema.time!r}, row {r}: tick {tick[r]} repeats row {r - 1}")
        return
    seen: dict[tuple[int, Any], int] = {}
    for row, key in enumerate(zip(tick.tolist(), entity.tolist())):
        if key in seen:
            raise TickDataError(
                f"{source_id}: column {schema.entity!r}, row {row}: entity {key[1]!r} appears twice at tick {key[0]} "
                f"(rows {seen[key]} and {row})"
            )
        seen[key] = row


def _numeric(source_id: str, spec: FieldSpec, values: Any, n: int) -> np.ndarray:
    try:
        arr = np.asarray(values)
        if arr.dtype == object:  # list column: ragged or nested Python lists
            arr = np.asarray([np.asarray(v) for v in values])
    except ValueError:
        arr = None
    if arr is None or arr.dtype == object:
        lengths = [np.size(v) for v in values]
        want = spec.size
        bad = next((i for i, k in enumerate(lengths) if k != want), 0)
        raise TickDataError(
            f"{source_id}: column {spec.name!r}, row {bad}: expected shape {list(spec.shape)} ({want} values), got {lengths[bad]}"
        )
    if len(arr) != n:
        raise TickDataError(f"{source_id}: column {spec.name!r}: {len(arr)} rows, expected {n}")
    kind_ok = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}[spec.numpy_dtype.kind]
    if arr.dtype.kind not in kind_ok:
        raise TickDataError(
            f"{source_id}: column {spec.name!r}: dtype {arr.dtype} cannot hold declared {spec.dtype}"
        )
    row_shape = arr.shape[1:]
    if row_shape != spec.shape:
        if n and int(np.prod(row_shape)) == spec.size:
            arr = arr.reshape((n, *spec.shape))
        else:
            raise TickDataError(
                f"{source_id}: column {spec.name!r}, row 0: expected shape {list(spec.shape)}, got {list(row_shape)}"
            )
    return arr.astype(spec.numpy_dtype, copy=False)


def _check_global(source_id: str, name: str, tick: np.ndarray, values: np.ndarray) -> None:
    if len(tick) < 2:
        return
    same_tick = tick[1:] == tick[:-1]
    flat = values.reshape(len(values), -1)
    later, earlier = flat[1:], flat[:-1]
    equal = later == earlier
    if flat.dtype.kind == "f":
        equal |= np.isnan(later) & np.isnan(earlier)  # a missing global is missing for everyone
    bad = np.flatnonzero(same_tick & ~equal.all(axis=1))
    if len(bad):
        r = int(bad[0]) + 1
        raise TickDataError(
            f"{source_id}: column {name!r}, row {r}: global differs from row {r - 1} at the same tick {tick[r]}; "
            "globals are shared by every entity at a tick"
        )


def _tags(source_id: str, name: str, values: Any, n: int) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for row, value in enumerate(values):
        if value is None:
            out.append(())
        elif isinstance(value, str):
            out.append((value,) if value else ())
        elif isinstance(value, (Sequence, np.ndarray)) and all(isinstance(t, str) for t in value):
            out.append(tuple(value))
        else:
            raise TickDataError(f"{source_id}: column {name!r}, row {row}: tags must be a string or a list of strings, got {value!r}")
    if len(out) != n:
        raise TickDataError(f"{source_id}: column {name!r}: {len(out)} rows, expected {n}")
    return out
