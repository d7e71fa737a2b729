"""``OutputSpec``: what each timestep of a shard holds, declared once and validated.

::

    OutputSpec.from_dict({
        "shard_length": 64,              # timesteps per shard
        "short_policy": "keep",          # keep | pad | drop: the tail shorter than a shard
        "container": "npz",              # npz | json | hdf5 | parquet
        "presence_mask": True,           # emit _present: bool[L] (default)
        "modalities": {
            "pos":   {"dtype": "float32", "shape": [3], "source": "field:pos"},
            "frame": {"dtype": "uint8", "shape": [150, 280, 3], "source": "media:frame"},
            "label": {"dtype": "int64", "shape": [], "source": "segment:label"},
        },
    })

A modality's ``source`` is ``field:<schema field or global>``, ``segment:<feature>`` (the
span's aggregated feature, read from ``track.meta``), ``media:<schema media column>``
(decoded by its provider) or ``encoder:<hook>`` (an :class:`OutputEncoder` returns it).
Every validation error names the key path (``output.modalities.pos.dtype``) and lists the
valid values. This module does not read tracks or write files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.budget.options import SHORT_POLICIES, ShardChunking
from kuration.canonical.hashing import canonical_digest
from kuration.errors import InputError, check_keys, shown
from kuration.numbers import whole_number
from kuration.sources.schema import Schema, shape_limit_problem

CONTAINERS = ("npz", "json", "hdf5", "parquet")
SOURCE_KINDS = ("field", "segment", "media", "encoder")
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")
#: Arrays every shard carries besides the modalities; modality names may not start with "_".
PRESENT, N_STEPS = "_present", "_n_steps"
_SPEC_KEYS = ("shard_length", "short_policy", "container", "presence_mask", "modalities")
_MODALITY_KEYS = ("dtype", "shape", "source")
#: Modality names: portable as npz members, HDF5 datasets and Parquet columns ("/" would
#: make HDF5 groups); names starting with "_" are the shard's own arrays.
MODALITY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: The most timesteps a shard may declare. A shard is one training item (the seed's example
#: is 64 steps); a length past this is a typo that would only fail inside the writer's
#: allocation.
MAX_SHARD_LENGTH = 1 << 24


class OutputSpecError(InputError):
    """An output spec is invalid, or does not fit the schema it is used with."""


@dataclass(frozen=True)
class Modality:
    """One declared array per timestep: ``(L, *shape)`` of ``dtype`` in every shard."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    kind: str
    key: str

    @property
    def source(self) -> str:
        return f"{self.kind}:{self.key}"

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "source": self.source}


def _modality(name: Any, raw: Any) -> Modality:
    if not isinstance(name, str) or not MODALITY_NAME.match(name):
        raise OutputSpecError(
            f"output.modalities: name {shown(name)} must start with a letter and hold only letters, digits and _ "
            f"(names starting with _ are reserved for {PRESENT} and {N_STEPS})"
        )
    where = f"output.modalities.{name}"
    if not isinstance(raw, Mapping):
        raise OutputSpecError(f"{where}: must be a mapping with keys {list(_MODALITY_KEYS)}, got {shown(raw)}")
    check_keys(raw, _MODALITY_KEYS, where=where, error=OutputSpecError)
    for key in _MODALITY_KEYS:
        if key not in raw:
            raise OutputSpecError(f"{where}.{key}: required")
    dtype = raw["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:  # np.dtype("f4") == "float32": a name, not a dtype object
        raise OutputSpecError(f"{where}.dtype: must be one of {list(DTYPES)}, got {shown(dtype)}")
    shape = raw["shape"]
    if not isinstance(shape, (list, tuple)) or any(
        isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape
    ):
        raise OutputSpecError(f"{where}.shape: must be a list of positive integers ([] for a scalar), got "
                              f"{shown(shape)}")
    problem = shape_limit_problem(shape)
    if problem:
        raise OutputSpecError(f"{where}.shape: {problem}")
    source = raw["source"]
    if not isinstance(source, str) or ":" not in source:
        raise OutputSpecError(f"{where}.source: must be '<kind>:<name>' with kind one of {list(SOURCE_KINDS)}, got "
                              f"{shown(source)}")
    kind, key = source.split(":", 1)
    if kind not in SOURCE_KINDS:
        raise OutputSpecError(f"{where}.source: kind {shown(kind)} is not one of {list(SOURCE_KINDS)}")
    if not key:
        raise OutputSpecError(f"{where}.source: {shown(source)} names nothing after '{kind}:'")
    return Modality(name, dtype, tuple(int(d) for d in shape), kind, key)


@dataclass(frozen=True)
class OutputSpec:
    """A validated output spec; build it with :meth:`from_dict`."""

    shard_length: int
    short_policy: str
    container: str
    presence_mask: bool
    modalities: Mapping[str, Modality]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutputSpec:
        if not isinstance(data, Mapping):
            raise OutputSpecError(f"output: must be a mapping with keys {list(_SPEC_KEYS)}, got {type(data).__name__}")
        check_keys(data, _SPEC_KEYS, where="output", error=OutputSpecError)
        length = whole_number(data.get("shard_length"))
        if length is None or length < 1:
            raise OutputSpecError(
                "output.shard_length: required, a positive whole number of timesteps, got "
                f"{shown(data.get('shard_length'))}")
        if length > MAX_SHARD_LENGTH:
            raise OutputSpecError(f"output.shard_length: {shown(length)} timesteps; a shard holds at most "
                                  f"{MAX_SHARD_LENGTH}")
        policy = data.get("short_policy", "keep")
        if not isinstance(policy, str) or policy not in SHORT_POLICIES:
            raise OutputSpecError(f"output.short_policy: must be one of {list(SHORT_POLICIES)}, got {shown(policy)}")
        container = data.get("container", "npz")
        if not isinstance(container, str) or container not in CONTAINERS:
            raise OutputSpecError(f"output.container: must be one of {list(CONTAINERS)}, got {shown(container)}")
        presence = data.get("presence_mask", True)
        if not isinstance(presence, bool):
            raise OutputSpecError(f"output.presence_mask: must be true or false, got {shown(presence)}")
        raw = data.get("modalities")
        if not isinstance(raw, Mapping) or not raw:
            raise OutputSpecError("output.modalities: required, a non-empty mapping of name -> {dtype, shape, source}")
        modalities = {name: _modality(name, spec) for name, spec in raw.items()}
        return cls(length, policy, container, presence, dict(sorted(modalities.items())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard_length": self.shard_length, "short_policy": self.short_policy, "container": self.container,
            "presence_mask": self.presence_mask,
            "modalities": {name: m.to_dict() for name, m in self.modalities.items()},
        }

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON form: what resume pins."""
        return canonical_digest(self.to_dict())

    @property
    def chunking(self) -> ShardChunking:
        """How the budget plan prices the dropped tail for this spec."""
        return ShardChunking(self.shard_length, self.short_policy)

    def of_kind(self, kind: str) -> dict[str, Modality]:
        return {name: m for name, m in self.modalities.items() if m.kind == kind}

    def validate_against(self, schema: Schema) -> OutputSpec:
        """Every ``field:`` and ``media:`` source exists in ``schema`` with this shape, and
        its dtype converts without changing kind (float to float, int to int or float, ...).
        Raises :class:`OutputSpecError` with the first of :meth:`problems_against`."""
        problems = self.problems_against(schema)
        if problems:
            raise OutputSpecError(problems[0])
        return self

    def problems_against(self, schema: Schema) -> list[str]:
        """Every way this spec does not fit ``schema`` (see :meth:`validate_against`), one
        message per modality, in modality order; empty when it fits."""
        fields = schema.all_fields()
        problems = []
        for name, m in self.modalities.items():
            where = f"output.modalities.{name}.source"
            if m.kind == "field":
                if m.key not in fields:
                    problems.append(f"{where}: schema has no field or global {m.key!r}; it has {sorted(fields)}")
                    continue
                field_spec = fields[m.key]
                got_dtype, got_shape = field_spec.numpy_dtype, field_spec.shape
            elif m.kind == "media":
                if m.key not in schema.media:
                    problems.append(f"{where}: schema has no media column {m.key!r}; it has {sorted(schema.media)}")
                    continue
                media_spec = schema.media[m.key]
                got_dtype, got_shape = np.dtype(media_spec.dtype), media_spec.shape
            else:
                continue
            if tuple(got_shape) != m.shape:
                problems.append(f"output.modalities.{name}.shape: {list(m.shape)}, but {m.source} is "
                                f"{list(got_shape)} in the schema")
            elif not np.can_cast(got_dtype, m.numpy_dtype, casting="same_kind"):
                problems.append(f"output.modalities.{name}.dtype: {m.dtype} cannot hold {m.source} ({got_dtype}) "
                                "without changing its kind; declare a dtype of the same kind")
        return problems

    def shards_for(self, steps: int) -> list[tuple[int, int]]:
        """The ``[start, stop)`` row ranges (relative to a span) of each shard of a span of
        ``steps`` rows, after the short policy: ``keep`` and ``pad`` keep the short tail
        (``pad`` pads it when writing), ``drop`` discards it."""
        full, tail = divmod(steps, self.shard_length)
        out = [(k * self.shard_length, (k + 1) * self.shard_length) for k in range(full)]
        if tail and self.short_policy != "drop":
            out.append((full * self.shard_length, steps))
        return out

    def shard_rows(self, n_steps: int) -> int:
        """Rows the arrays of a shard with ``n_steps`` real steps hold: ``shard_length``
        when padding, else the real steps."""
        return self.shard_length if self.short_policy == "pad" else n_steps


__all__ = ["CONTAINERS", "DTYPES", "MAX_SHARD_LENGTH", "MODALITY_NAME", "Modality", "N_STEPS", "OutputSpec",
           "OutputSpecError",
           "PRESENT", "SOURCE_KINDS"]
