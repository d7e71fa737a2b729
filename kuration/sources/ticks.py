"""``Ticks``: one source's rows, validated against the schema, as numpy columns.

Every adapter ends here, whatever its storage: ``Ticks.from_columns`` checks that each
declared column exists with the right dtype kind, value range and shape, that no value is
null, that rows are sorted by tick with no tick repeated for an entity, that times in
seconds sit on the sample grid, and that globals agree across the entities of a tick.
Each error names the source, the column and the row.

It does not fill gaps, reorder rows or coerce strings to numbers: a file that needs
that is a file to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration.sources.entities import canonical_entity, entity_key
from kuration.errors import RecordingError
from kuration.sources.schema import FieldSpec, Schema

#: How far a time in seconds may sit off the sample grid, as a fraction of one sample
#: period, and still count as on it (absorbs float rounding of ``k / sample_hz``).
GRID_TOLERANCE = 1e-3

class SourceError(RecordingError):
    """A source store cannot be listed or read (not there, not the expected layout)."""


class TickDataError(SourceError):
    """A source's rows do not match the schema."""


@dataclass(frozen=True)
class Ticks:
    """Rows of one source: ``tick`` (int64 tick number), ``entity`` (per row, plain Python
    values in an object array, or None for a single-entity schema), declared ``columns``
    (fields and globals, ``(N, *shape)`` in the declared dtype), lazy ``media`` references
    (str) and per-row ``tags``."""

    source_id: str
    tick: np.ndarray
    entity: np.ndarray | None
    columns: Mapping[str, np.ndarray]
    media: Mapping[str, np.ndarray]
    tags: list[tuple[str, ...]] | None
    #: Per-row code of ``entity`` (one code per distinct entity), or None without entities.
    entity_codes: np.ndarray | None = None
    #: Rows whose ``tags`` are not empty (event tags are rare: most rows carry none).
    tagged_rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tick)

    @classmethod
    def from_columns(cls, schema: Schema, source_id: str, raw: Mapping[str, Any]) -> Ticks:
        """Validate raw columns (numpy arrays or lists, one entry per row) against ``schema``.

        Columns the schema does not declare are ignored."""
        n = len(_required(raw, schema.time, source_id))
        tick = _ticks(schema, source_id, raw[schema.time], n)
        entities = None
        if schema.entity:
            entities = _entities(source_id, schema.entity, _required(raw, schema.entity, source_id), n)
        entity, codes = entities if entities is not None else (None, None)
        _check_order(source_id, schema, tick, entities)
        columns = {name: _numeric(source_id, spec, _required(raw, name, source_id), n)
                   for name, spec in schema.all_fields().items()}
        for name in schema.globals:
            _check_global(source_id, name, tick, columns[name])
        media = {name: _refs(source_id, name, _required(raw, name, source_id), n) for name in schema.media}
        tags = tagged = None
        if schema.tags:
            tags = _tags(source_id, schema.tags, _required(raw, schema.tags, source_id), n)
            tagged = np.flatnonzero(np.fromiter(map(bool, tags), dtype=bool, count=n))
        return cls(source_id, tick, entity, columns, media, tags, codes, tagged)


def _required(raw: Mapping[str, Any], name: str, source_id: str) -> Any:
    if name not in raw:
        raise TickDataError(
            f"{source_id}: missing column {name!r}; the source has {sorted(raw)}. Fix the file or the schema."
        )
    return raw[name]


def _check_length(source_id: str, name: str, got: int, n: int) -> None:
    if got != n:
        raise TickDataError(
            f"{source_id}: column {name!r}, row {min(got, n)}: column has {got} rows, "
            f"the time column has {n}; every column needs one value per row"
        )


def _first_non_numeric(values: Any) -> tuple[int, Any]:
    for row, value in enumerate(values):
        if value is None or isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind not in "biuf":
            return row, value.item() if isinstance(value, np.generic) else value
    return 0, values[0] if len(values) else None


def _ticks(schema: Schema, source_id: str, values: Any, n: int) -> np.ndarray:
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype == object or arr.dtype.kind not in "iuf" or arr.ndim != 1:
        if arr.ndim > 1:
            raise TickDataError(f"{source_id}: column {schema.time!r}, row 0: one time value per row expected, got "
                                f"shape {list(arr.shape[1:])}")
        row, value = _first_non_numeric(values)
        raise TickDataError(
            f"{source_id}: column {schema.time!r}, row {row}: time must be a number ({schema.time_unit}), got {value!r}"
        )
    if schema.time_unit == "ticks":
        if arr.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))
            if len(bad):
                raise TickDataError(f"{source_id}: column {schema.time!r}, row {int(bad[0])}: tick "
                                    f"{arr[bad[0]].item()!r} is not a whole number")
        return arr.astype(np.int64)
    scaled = arr.astype(np.float64) * schema.sample_hz
    ticks = np.round(scaled)
    off = np.flatnonzero(~np.isfinite(scaled) | (np.abs(scaled - ticks) > GRID_TOLERANCE))
    if len(off):
        r = int(off[0])
        raise TickDataError(
            f"{source_id}: column {schema.time!r}, row {r}: time {arr[r].item()!r} s is not on the "
            f"{schema.sample_hz:g} Hz sample grid (nearest sample {float(ticks[r]) / schema.sample_hz!r} s); resample "
            "the recording or fix sample_hz"
        )
    return ticks.astype(np.int64)


def _entities(source_id: str, name: str, values: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(canonical entity per row, code per row). Canonical forms are computed once per
    distinct value; only a column mixing Python types (where ``1`` and ``True`` would hash
    alike) falls back to a per-row key."""
    _check_length(source_id, name, len(values), n)
    if isinstance(values, pa.DictionaryArray):
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise TickDataError(f"{source_id}: column {name!r}, row {row}: entity id is null")
        codes = values.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        uniques = values.dictionary.to_pylist()
    else:
        array = values if isinstance(values, np.ndarray) else np.asarray(list(values) + [None], dtype=object)[:-1]
        codes = uniques = None
        if array.dtype != object:
            if array.dtype.kind == "f" and n and np.isnan(array).any():
                row = int(np.flatnonzero(np.isnan(array))[0])
                raise TickDataError(f"{source_id}: column {name!r}, row {row}: {_entity_problem(array[row].item())}")
            found, codes = np.unique(array, return_inverse=True)
            uniques = found.tolist()
        elif len({type(v) for v in array.tolist()} - {type(None)}) == 1 and not any(v is None for v in array.tolist()):
            try:  # one Python type, so == cannot merge 1 with True: sorting is safe
                found, codes = np.unique(array, return_inverse=True)
                uniques = list(found)
            except TypeError:  # values of that type that do not order (e.g. frozensets)
                codes = None
        if codes is None:
            keys: dict[str, int] = {}
            codes = np.empty(n, dtype=np.int64)
            uniques = []
            for row, value in enumerate(array.tolist()):
                try:
                    key = entity_key(canonical_entity(value))
                except ValueError as exc:
                    raise TickDataError(f"{source_id}: column {name!r}, row {row}: {exc}") from None
                if key not in keys:
                    keys[key] = len(uniques)
                    uniques.append(value)
                codes[row] = keys[key]
        codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    canonical = []
    for code, value in enumerate(uniques):
        try:
            canonical.append(canonical_entity(value))
        except ValueError as exc:
            row = int(np.flatnonzero(codes == code)[0])
            raise TickDataError(f"{source_id}: column {name!r}, row {row}: {exc}") from None
    # Two raw values can be one entity (a dictionary holding both 0.0 and -0.0): one code each.
    first: dict[str, int] = {}
    merged = np.array([first.setdefault(entity_key(value), code) for code, value in enumerate(canonical)], np.int64)
    if len(first) < len(canonical):
        codes = merged[codes]
    table = np.empty(len(canonical), dtype=object)
    table[:] = canonical if canonical else []
    return table[codes] if n else np.empty(0, dtype=object), codes


def _entity_problem(value: Any) -> str:
    try:
        canonical_entity(value)
    except ValueError as exc:
        return str(exc)
    return f"entity id {value!r} is missing"


def _check_order(
    source_id: str, schema: Schema, tick: np.ndarray, entities: tuple[np.ndarray, np.ndarray] | None
) -> None:
    """Ticks ascending; one row per tick, or with ``entities`` (the entity column and its
    codes) one row per entity and tick."""
    if len(tick) < 2:
        return
    back = np.flatnonzero(tick[1:] < tick[:-1])
    if len(back):
        r = int(back[0]) + 1
        raise TickDataError(
            f"{source_id}: column {schema.time!r}, row {r}: tick {tick[r]} comes after tick {tick[r - 1]}; "
            "rows must be sorted by time"
        )
    if entities is None:
        same = np.flatnonzero(tick[1:] == tick[:-1])
        if len(same):
            r = int(same[0]) + 1
            raise TickDataError(
                f"{source_id}: column {schema.time!r}, row {r}: tick {tick[r]} repeats row {r - 1}; "
                "a single-entity schema has one row per tick (declare 'entity' if rows are per entity)"
            )
        return
    entity, codes = entities
    order = np.lexsort((codes, tick))
    same = (tick[order][1:] == tick[order][:-1]) & (codes[order][1:] == codes[order][:-1])
    if same.any():
        first, second = sorted(int(r) for r in order[np.flatnonzero(same)[0]: np.flatnonzero(same)[0] + 2])
        raise TickDataError(
            f"{source_id}: column {schema.entity!r}, row {second}: entity {entity[second]!r} appears twice at tick "
            f"{tick[second]} (rows {first} and {second})"
        )


def _numeric(source_id: str, spec: FieldSpec, values: Any, n: int) -> np.ndarray:
    where = f"{source_id}: column {spec.name!r}"
    _check_length(source_id, spec.name, len(values), n)
    if n == 0:
        return np.zeros((0, *spec.shape), dtype=spec.numpy_dtype)
    if isinstance(values, np.ndarray) and values.dtype != object:
        arr = values
        if arr.dtype.kind not in "biuf":
            raise TickDataError(f"{where}, row 0: value {arr[0].item()!r} ({arr.dtype}) is not a number; declared "
                                f"{spec.dtype}")
    else:
        arr = _stack_rows(where, spec, values)
    target = spec.numpy_dtype
    kind_ok = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}[target.kind]
    if arr.dtype.kind not in kind_ok:
        row = 0
        if arr.dtype.kind == "f" and target.kind in "iu":  # name a row that is not a whole number, if any
            frac = np.flatnonzero(~(np.isfinite(arr) & (arr == np.round(arr))).reshape(n, -1).all(axis=1))
            row = int(frac[0]) if len(frac) else 0
        raise TickDataError(
            f"{where}, row {row}: dtype {arr.dtype} cannot hold declared {spec.dtype} "
            f"(value {arr[row].tolist()!r}); cast in the file or declare a wider dtype"
        )
    row_shape = arr.shape[1:]
    if row_shape != spec.shape:
        # a flat list column (N, size) is reshaped; any other layout is a real mismatch
        if len(row_shape) <= 1 and int(np.prod(row_shape)) == spec.size:
            arr = arr.reshape((n, *spec.shape))
        else:
            raise TickDataError(f"{where}, row 0: expected shape {list(spec.shape)}, got {list(row_shape)}")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, by row
        out = arr.astype(target, copy=False)
    flat_in, flat_out = arr.reshape(n, -1), out.reshape(n, -1)
    if target.kind in "iu" and arr.dtype.kind in "iu" and not np.can_cast(arr.dtype, target):
        info = np.iinfo(target)
        bad = np.flatnonzero(((flat_in < info.min) | (flat_in > info.max)).any(axis=1))
        if len(bad):
            r = int(bad[0])
            raise TickDataError(
                f"{where}, row {r}: value {arr[r].tolist()!r} does not fit declared {spec.dtype} [{info.min}, "
                f"{info.max}]"
            )
    if target.kind == "f" and target.itemsize < arr.dtype.itemsize:
        bad = np.flatnonzero((np.isfinite(flat_in) & ~np.isfinite(flat_out)).any(axis=1))
        if len(bad):
            r = int(bad[0])
            raise TickDataError(f"{where}, row {r}: value {arr[r].tolist()!r} overflows declared {spec.dtype}")
    return out


def _stack_rows(where: str, spec: FieldSpec, values: Any) -> np.ndarray:
    """Rows given one by one (a list, or an object array of lists): check each, then stack."""
    rows = []
    for row, value in enumerate(values):
        if value is None:
            raise TickDataError(f"{where}, row {row}: null value; every present row needs a value")
        if isinstance(value, (str, bytes)):
            raise TickDataError(f"{where}, row {row}: value {value!r} is not a number; declared {spec.dtype}")
        a = np.asarray(value)
        if a.dtype.kind not in "biuf":
            raise TickDataError(f"{where}, row {row}: value {value!r} is not numeric; declared {spec.dtype} "
                                f"{list(spec.shape)}")
        if a.shape != spec.shape and not (a.ndim <= 1 and a.size == spec.size):
            raise TickDataError(
                f"{where}, row {row}: expected shape {list(spec.shape)} ({spec.size} values), got {list(a.shape)} "
                f"({a.size} values)"
            )
        rows.append(a.reshape(spec.shape))
    return np.stack(rows)


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


def _refs(source_id: str, name: str, values: Any, n: int) -> np.ndarray:
    _check_length(source_id, name, len(values), n)
    out = np.empty(n, dtype=object)
    for row, value in enumerate(values):
        if isinstance(value, bytes):
            value = value.decode()
        if not isinstance(value, str) or not value:
            raise TickDataError(
                f"{source_id}: column {name!r}, row {row}: media reference must be a non-empty string, got {value!r}"
            )
        out[row] = str(value)
    return out


def _tags(source_id: str, name: str, values: Any, n: int) -> list[tuple[str, ...]]:
    _check_length(source_id, name, len(values), n)
    if isinstance(values, (pa.ListArray, pa.LargeListArray)) and pa.types.is_string(values.type.value_type):
        # Event tags are rare: touch only the rows that have any.
        lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(values).to_pylist()
        out: list[tuple[str, ...]] = [()] * n
        ends = np.cumsum(lengths)
        for row in np.flatnonzero(lengths).tolist():
            tags = flat[ends[row] - lengths[row]: ends[row]]
            if any(t is None for t in tags):
                raise TickDataError(f"{source_id}: column {name!r}, row {row}: a tag is null")
            out[row] = tuple(tags)
        return out
    if isinstance(values, pa.Array):
        values = values.to_pylist()
    out = []
    for row, value in enumerate(values):
        if isinstance(value, bytes):
            value = value.decode()
        if value is None:
            out.append(())
        elif isinstance(value, str):
            out.append((str(value),) if value else ())
        elif isinstance(value, (Sequence, np.ndarray)) and all(isinstance(t, str) for t in value):
            out.append(tuple(str(t) for t in value))
        else:
            raise TickDataError(f"{source_id}: column {name!r}, row {row}: tags must be a string or a list of strings, "
                                f"got {value!r}")
    return out
