"""``Schema``: what one recording's ticks hold, declared once and validated.

A recording is a table of ticks at ``sample_hz``: one row per (tick, entity). The schema
names the time column (tick counter, or seconds), the entity column (absent: a single
entity), the per-entity ``fields`` (each a dtype and a shape; a vector field is a
fixed-size list column), the tick-level ``globals`` every entity shares at that tick,
lazy ``media`` columns (references a registered provider decodes in bounded batches)
and an optional ``tags`` column of event labels.

Every error names the key it is about (``fields.pos.shape``) and what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.errors import InputError, check_keys, shown
from kuration.canonical.hashing import canonical_digest
from kuration.numbers import finite_float
from kuration.sources.media import MediaSpec, media_provider_names


class SchemaError(InputError):
    """A schema declaration is invalid."""


NUMERIC_DTYPES = frozenset({
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
})
TIME_UNITS = ("ticks", "seconds")
_SCHEMA_KEYS = ("sample_hz", "time", "time_unit", "entity", "fields", "globals", "media", "tags")
#: Sample rates a recording may declare, in Hz: one tick per 11.6 days up to a million a
#: second. Outside, durations and window conversions stop being meaningful numbers.
SAMPLE_HZ_RANGE = (1e-6, 1e6)
#: The longest segment window or stride (and budget span), in steps (2**31 - 1: 24 days at
#: 1 kHz). Past it a window is a typo, and numpy's int64 window arithmetic would overflow.
MAX_WINDOW_STEPS = 2**31 - 1
#: The most dimensions and values one row of a field, media column or modality may hold: a
#: declaration past these is a typo, and would fail later, inside numpy, far from the file.
MAX_NDIM = 32
MAX_ROW_ELEMENTS = 2**31 - 1


@dataclass(frozen=True)
class FieldSpec:
    """One numeric column: its dtype and per-row shape (``()`` for a scalar)."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Schema:
    sample_hz: float
    time: str
    time_unit: str = "ticks"
    entity: str | None = None
    fields: Mapping[str, FieldSpec] = field(default_factory=dict)
    globals: Mapping[str, FieldSpec] = field(default_factory=dict)
    media: Mapping[str, MediaSpec] = field(default_factory=dict)
    tags: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        """Validate and build. Raises :class:`SchemaError` naming the offending key."""
        if not isinstance(data, Mapping):
            raise SchemaError(f"schema: expected a mapping, got {type(data).__name__}")
        check_keys(data, _SCHEMA_KEYS, where="schema", error=SchemaError)
        hz = data.get("sample_hz")
        rate = finite_float(hz)
        if rate is None or rate <= 0:
            raise SchemaError(f"schema.sample_hz: must be a positive number (ticks per second), got {shown(hz)}")
        if not SAMPLE_HZ_RANGE[0] <= rate <= SAMPLE_HZ_RANGE[1]:
            raise SchemaError(f"schema.sample_hz: {rate:g} Hz is outside the supported range {SAMPLE_HZ_RANGE[0]:g} to "
                              f"{SAMPLE_HZ_RANGE[1]:g} Hz; check the unit (ticks per second)")
        time = _name(data.get("time"), "schema.time", "the time column")
        unit = data.get("time_unit", "ticks")
        if unit not in TIME_UNITS:
            raise SchemaError(f"schema.time_unit: must be one of {list(TIME_UNITS)}, got {shown(unit)}")
        entity = data.get("entity")
        if entity is not None:
            entity = _name(entity, "schema.entity", "the entity column")
        fields = _specs(data.get("fields"), "fields", required=True)
        globals_ = _specs(data.get("globals"), "globals", required=False)
        media = _media(data.get("media"))
        tags = data.get("tags")
        if tags is not None:
            tags = _name(tags, "schema.tags", "the tag column")
        schema = cls(rate, time, unit, entity, fields, globals_, media, tags)
        declared: dict[str, list[str]] = {}
        for key, name in (
            [("schema.time", time)] + ([("schema.entity", entity)] if entity else [])
            + [(f"schema.fields.{n}", n) for n in fields] + [(f"schema.globals.{n}", n) for n in globals_]
            + [(f"schema.media.{n}", n) for n in media] + ([("schema.tags", tags)] if tags else [])
        ):
            declared.setdefault(name, []).append(key)
        dupes = {name: keys for name, keys in declared.items() if len(keys) > 1}
        if dupes:
            where = "; ".join(f"{name!r} at {' and '.join(keys)}" for name, keys in sorted(dupes.items()))
            raise SchemaError(
                f"schema: column name declared more than once: {where} "
                "(time, entity, fields, globals, media and tags share one namespace; rename one)"
            )
        return schema

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_hz": self.sample_hz, "time": self.time, "time_unit": self.time_unit, "entity": self.entity,
            "fields": {k: v.to_dict() for k, v in self.fields.items()},
            "globals": {k: v.to_dict() for k, v in self.globals.items()},
            "media": {k: v.to_dict() for k, v in self.media.items()},
            "tags": self.tags,
        }

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON form: part of every cache key built on this schema."""
        return canonical_digest(self.to_dict())

    def all_fields(self) -> dict[str, FieldSpec]:
        """Per-entity fields and tick globals: what a track record holds."""
        return {**self.fields, **self.globals}


def _name(value: Any, key: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SchemaError(f"{key}: must name {what} (a non-empty string), got {shown(value)}")
    return value


def _shape(value: Any, key: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                                       for d in value):
        raise SchemaError(f"{key}: must be a list of positive ints ([] for a scalar), got {shown(value)}")
    problem = shape_limit_problem(value)
    if problem:
        raise SchemaError(f"{key}: {problem}")
    return tuple(value)


def shape_limit_problem(dims: list[int] | tuple[int, ...]) -> str | None:
    """Why a shape of positive ints is too large to declare (:data:`MAX_NDIM`,
    :data:`MAX_ROW_ELEMENTS`), or None."""
    if len(dims) > MAX_NDIM:
        return f"{len(dims)} dimensions; at most {MAX_NDIM} are allowed"
    if math.prod(dims) > MAX_ROW_ELEMENTS:
        return (f"{shown(list(dims))} holds more than {MAX_ROW_ELEMENTS} values per row, the most allowed (check the "
                "shape for a typo)")
    return None


def _dtype(value: Any, key: str) -> str:
    if not isinstance(value, str) or value not in NUMERIC_DTYPES:  # (a list would not even hash)
        raise SchemaError(f"{key}: must be one of {sorted(NUMERIC_DTYPES)}, got {shown(value)}")
    return value


def _specs(raw: Any, section: str, *, required: bool) -> dict[str, FieldSpec]:
    if raw is None:
        if required:
            raise SchemaError(f"schema.{section}: at least one field is required, e.g. {{'speed': {{'dtype': "
                              "'float32'}}")
        return {}
    if not isinstance(raw, Mapping) or (required and not raw):
        raise SchemaError(f"schema.{section}: must be a non-empty mapping of name -> {{dtype, shape}}, got "
                          f"{shown(raw)}")
    out = {}
    for name, spec in raw.items():
        _name(name, f"schema.{section}: key {shown(name)}", "a column")
        key = f"schema.{section}.{name}"
        if not isinstance(spec, Mapping):
            raise SchemaError(f"{key}: must be a mapping with 'dtype' and optional 'shape', got {shown(spec)}")
        check_keys(spec, ("dtype", "shape"), where=key, error=SchemaError)
        out[name] = FieldSpec(name, _dtype(spec.get("dtype"), f"{key}.dtype"),
                              _shape(spec.get("shape"), f"{key}.shape"))
    return out


def _media(raw: Any) -> dict[str, MediaSpec]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SchemaError(f"schema.media: must be a mapping of name -> {{dtype, shape, provider}}, got {shown(raw)}")
    out = {}
    for name, spec in raw.items():
        _name(name, f"schema.media: key {shown(name)}", "a column")
        key = f"schema.media.{name}"
        if not isinstance(spec, Mapping):
            raise SchemaError(f"{key}: must be a mapping with 'dtype', 'shape' and 'provider', got {shown(spec)}")
        check_keys(spec, ("dtype", "shape", "provider"), where=key, error=SchemaError)
        provider = _name(spec.get("provider"), f"{key}.provider", "a registered media provider")
        if provider not in media_provider_names():
            raise SchemaError(
                f"{key}.provider: no media provider named {provider!r}; registered: {media_provider_names()}. Register "
                "it with kuration.sources.media.register_media_provider(name, factory) before declaring the schema"
            )
        shape = _shape(spec.get("shape"), f"{key}.shape")
        if not shape:
            raise SchemaError(f"{key}.shape: media must have a shape, e.g. [64, 64, 3]")
        out[name] = MediaSpec(name, _dtype(spec.get("dtype"), f"{key}.dtype"), shape, provider)
    return out
