"""Segment features: named numbers computed per segment, the inputs of a strategy's priority.

A feature is addressed by a string key:

``<field>.<reducer>``
    a built-in reducer over a schema field or global: ``mean``, ``min``, ``max``, ``std``
    (population, ddof 0), ``delta`` (last present value minus first present value) or
    ``frac`` (share of present timesteps where the value is true; for numeric fields:
    nonzero). For a vector field the reducer applies to the per-timestep L2 norm (over all
    components, whatever the shape); ``<field>[i].<reducer>`` addresses component ``i`` of
    the flattened (C-order) row instead.
``tag.<name>``
    the number of present timesteps carrying event tag ``name``.
``fn.<name>``
    a user function registered with :func:`register_feature`, ``fn(track, segment) -> float``.

Every reducer runs over the segment's **present** timesteps only: absent rows are zero-filled
in a track and must never count (this holds for globals too, so a feature always describes
the entity while it was there). A segment with no present timestep gives NaN for every
reducer. A NaN or infinite value at a present timestep propagates into the reducers that
read it (``frac`` counts NaN as nonzero); it is reported downstream as non-finite, never
replaced by 0. Every value comes out canonical (:func:`kuration.canonical.floats.canonical_floats`:
``0.0``, never ``-0.0``, and one NaN): ``max`` over ``0.0`` and ``-0.0`` returns either zero
depending on the CPU's SIMD kernel, and a feature is hashed and written downstream.

Registration is process-global. A worker process rebuilds user features by importing the
module that registered them, so register in an importable module (``my_project.features``)
and import that module wherever a strategy using ``fn.<name>`` is scored; a function
registered in a notebook's ``__main__`` is invisible to spawned workers.
:func:`registered_features` reports each name's ``module:qualname`` for that purpose.

This module computes numbers; it does not weigh them (that is :mod:`kuration.scoring.strategy`).
"""

from __future__ import annotations

import numbers
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.errors import ScoringError, shown
from kuration.canonical.floats import canonical_floats
from kuration.scoring.segments import Segment
from kuration.sources.schema import Schema
from kuration.sources.tracks import Track

REDUCERS = ("mean", "min", "max", "std", "delta", "frac")
KINDS = ("field", "tag", "fn")
_COMPONENT = re.compile(r"(?P<name>.+)\[(?P<index>0|[1-9][0-9]*)\]")
#: Elements gathered at once by the per-segment std pass (bounds memory for overlapping windows).
_GATHER_CHUNK = 1 << 22

FeatureFn = Callable[[Track, Segment], float]


class FeatureError(ScoringError, ValueError):
    """A feature key is malformed or does not resolve, or a feature cannot be computed."""


@dataclass(frozen=True)
class FeatureKey:
    """A parsed feature key. ``kind`` is "field", "tag" or "fn"; ``name`` the field, tag or
    function name; ``reducer`` and ``component`` only for field features."""

    key: str
    kind: str
    name: str
    reducer: str | None = None
    component: int | None = None


class _KeyProblem(Exception):
    """Internal: why a key is invalid, without the 'feature key ...' prefix."""


_GRAMMAR = "expected '<field>.<reducer>', '<field>[i].<reducer>', 'tag.<name>' or 'fn.<name>'"


def _parse(key: Any) -> FeatureKey:
    if not isinstance(key, str) or not key.strip():
        raise _KeyProblem(f"must be a non-empty string ({_GRAMMAR}), got {key!r}")
    for prefix in ("tag", "fn"):
        if key.startswith(prefix + "."):
            name = key[len(prefix) + 1:]
            if not name:
                raise _KeyProblem(f"'{prefix}.' needs a name after the dot, e.g. '{prefix}.lane_change'")
            return FeatureKey(key, prefix, name)
    target, dot, reducer = key.rpartition(".")
    if not dot or not target:
        raise _KeyProblem(f"{_GRAMMAR}; reducers: {list(REDUCERS)}")
    if reducer not in REDUCERS:
        raise _KeyProblem(f"unknown reducer {reducer!r}; valid reducers: {list(REDUCERS)}")
    component = None
    match = _COMPONENT.fullmatch(target)
    if match:
        if len(match["index"]) > 9:  # no field has a billion components; int() of 4300+ digits would raise
            raise _KeyProblem(f"component index in {target[:40]!r}... is too large (at most 9 digits)")
        target, component = match["name"], int(match["index"])
    elif "[" in target or "]" in target:
        raise _KeyProblem(f"malformed component index in {target!r}; write '<field>[i]' with a non-negative integer i")
    return FeatureKey(key, "field", target, reducer, component)


def _resolve(fk: FeatureKey, schema: Schema) -> None:
    fields = schema.all_fields()
    if fk.kind in ("tag", "fn") and fk.kind in fields and fk.name in REDUCERS:
        raise _KeyProblem(
            f"ambiguous: {fk.kind!r} is both a schema field and the reserved '{fk.kind}.' prefix; rename the field"
        )
    if fk.kind == "tag":
        if schema.tags is None:
            raise _KeyProblem("the schema declares no tag column; set schema 'tags' to count event tags")
        return
    if fk.kind == "fn":
        if fk.name not in _REGISTRY:
            raise _KeyProblem(_unregistered(fk.name))
        return
    spec = fields.get(fk.name)
    if spec is None:
        if fk.name in schema.media:
            raise _KeyProblem(f"{fk.name!r} is a media column; features read numeric fields and globals")
        special = {schema.time: "time", schema.entity: "entity", schema.tags: "tag"}
        if fk.name in special:
            raise _KeyProblem(f"{fk.name!r} is the schema's {special[fk.name]} column, not a field")
        raise _KeyProblem(f"unknown field {fk.name!r}; schema fields and globals: {sorted(fields)}")
    if fk.component is not None:
        if not spec.shape:
            raise _KeyProblem(f"field {fk.name!r} is a scalar; drop the [{fk.component}]")
        if fk.component >= spec.size:
            raise _KeyProblem(
                f"component {fk.component} out of range for field {fk.name!r} with shape {list(spec.shape)} "
                f"(valid 0..{spec.size - 1})"
            )


def parse_feature_key(key: str, schema: Schema | None = None) -> FeatureKey:
    """Parse ``key``; with ``schema``, also check that it resolves (the field exists, the
    component is in range, the schema has a tag column, the function is registered).
    Raises :class:`FeatureError` naming the key."""
    try:
        fk = _parse(key)
        if schema is not None:
            _resolve(fk, schema)
    except _KeyProblem as exc:
        raise FeatureError(f"feature key {shown(key)}: {exc}") from None
    return fk


# -- registry ---------------------------------------------------------------------------------

_REGISTRY: dict[str, FeatureFn] = {}
_LOCK = threading.Lock()


def _origin(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def register_feature(name: str, fn: FeatureFn | None = None, *, replace: bool = False) -> Any:
    """Register ``fn(track, segment) -> float`` as feature ``fn.<name>``. Usable as a
    decorator: ``@register_feature("curvature")``.

    Registering the same function again (same object, or same ``module:qualname``, as when
    a module is re-imported) is a no-op; a different function under a taken name raises
    unless ``replace=True``."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise FeatureError("register_feature: name must be a non-empty string without surrounding spaces, got "
                           f"{name!r}")
    if fn is None:
        def decorator(f: FeatureFn) -> FeatureFn:
            register_feature(name, f, replace=replace)
            return f
        return decorator
    if not callable(fn):
        raise FeatureError(f"register_feature({name!r}): fn must be callable as fn(track, segment) -> float, got "
                           f"{fn!r}")
    with _LOCK:
        old = _REGISTRY.get(name)
        if old is not None and old is not fn and _origin(old) != _origin(fn) and not replace:
            raise FeatureError(
                f"register_feature({name!r}): already registered to {_origin(old)}; "
                f"pass replace=True to register {_origin(fn)} instead"
            )
        _REGISTRY[name] = fn
    return fn


def unregister_feature(name: str) -> None:
    """Remove ``name`` (no error when absent). Mostly for tests."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def _unregistered(name: str) -> str:
    return (
        f"no feature function {name!r} is registered; registered: {sorted(_REGISTRY)}. "
        "Call register_feature in an importable module and import it before scoring (workers re-import it)"
    )


def get_feature(name: str) -> FeatureFn:
    """The function registered as ``name``; raises :class:`FeatureError` listing the
    registered names when there is none."""
    fn = _REGISTRY.get(name)
    if fn is None:
        raise FeatureError(f"feature fn.{name}: {_unregistered(name)}")
    return fn


def registered_features() -> dict[str, str]:
    """Registered names -> ``module:qualname`` of their function (what a worker must import)."""
    return {name: _origin(fn) for name, fn in sorted(_REGISTRY.items())}


# -- computation ------------------------------------------------------------------------------

def _segment_sum(values: np.ndarray, starts: np.ndarray, stops: np.ndarray, ufunc: np.ufunc = np.add,
                 pad: float = 0.0) -> np.ndarray:
    """``ufunc.reduce(values[start:stop])`` per segment, exact (no cumulative-sum
    cancellation, a NaN stays in its own segments), windows may overlap. Segments are
    non-empty."""
    if not len(starts):
        return np.zeros(0, dtype=values.dtype)
    padded = np.append(values, np.asarray(pad, dtype=values.dtype))  # stop may equal len(values)
    idx = np.empty(2 * len(starts), dtype=np.intp)
    idx[0::2] = starts
    idx[1::2] = stops
    return ufunc.reduceat(padded, idx)[0::2]


def _gathered(starts: np.ndarray, stops: np.ndarray) -> Iterable[tuple[slice, np.ndarray, np.ndarray]]:
    """Chunks of segments with their concatenated row indices and per-segment offsets."""
    lengths = stops - starts
    i, n = 0, len(starts)
    while i < n:
        j, total = i, 0
        while j < n and (j == i or total + lengths[j] <= _GATHER_CHUNK):
            total += int(lengths[j])
            j += 1
        lens = lengths[i:j]
        offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.intp)
        rows = np.arange(total, dtype=np.intp) - np.repeat(offsets - starts[i:j], lens)
        yield slice(i, j), rows, offsets
        i = j


def _series(track: Track, fk: FeatureKey, n_rows: int) -> np.ndarray:
    values = track.values.get(fk.name)
    if values is None:
        raise FeatureError(
            f"feature key {fk.key!r}: track {track.source_id!r}/{track.entity_id!r} has no field {fk.name!r}; "
            f"it has {sorted(track.values)}"
        )
    arr = np.asarray(values)
    if arr.shape[:1] != (n_rows,):
        raise FeatureError(f"feature key {fk.key!r}: field {fk.name!r} has {arr.shape[:1]} rows, the track has "
                           f"{n_rows}")
    if arr.dtype.kind not in "biuf":
        raise FeatureError(f"feature key {fk.key!r}: field {fk.name!r} has non-numeric dtype {arr.dtype}")
    if arr.ndim == 1:
        if fk.component is not None:
            raise FeatureError(f"feature key {fk.key!r}: field {fk.name!r} is a scalar; drop the [{fk.component}]")
        return arr.astype(np.float64)
    flat = arr.reshape(n_rows, int(np.prod(arr.shape[1:]))).astype(np.float64)
    if fk.component is not None:
        if fk.component >= flat.shape[1]:
            raise FeatureError(
                f"feature key {fk.key!r}: component {fk.component} out of range for field {fk.name!r} "
                f"with shape {list(arr.shape[1:])} (valid 0..{flat.shape[1] - 1})"
            )
        return flat[:, fk.component]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sqrt(np.einsum("ij,ij->i", flat, flat))


def _reduce(reducer: str, x: np.ndarray, present: np.ndarray, starts: np.ndarray, stops: np.ndarray,
            count: np.ndarray) -> np.ndarray:
    empty = count == 0
    safe = np.where(empty, 1, count)
    with np.errstate(invalid="ignore", over="ignore"):
        if reducer == "mean":
            out = _segment_sum(np.where(present, x, 0.0), starts, stops) / safe
        elif reducer == "frac":
            out = _segment_sum((present & (x != 0)).astype(np.float64), starts, stops) / safe
        elif reducer == "min":
            out = _segment_sum(np.where(present, x, np.inf), starts, stops, np.minimum, np.inf)
        elif reducer == "max":
            out = _segment_sum(np.where(present, x, -np.inf), starts, stops, np.maximum, -np.inf)
        elif reducer == "delta":
            n = len(x)
            rows = np.arange(n)
            first_at = np.minimum.accumulate(np.where(present, rows, n)[::-1])[::-1]
            last_at = np.maximum.accumulate(np.where(present, rows, -1))
            first = first_at[starts]
            last = last_at[stops - 1]
            ok = first < stops
            out = np.full(len(starts), np.nan)
            out[ok] = x[last[ok]] - x[first[ok]]
        elif reducer == "std":
            mean = _segment_sum(np.where(present, x, 0.0), starts, stops) / safe
            out = np.empty(len(starts))
            for chunk, rows, offsets in _gathered(starts, stops):
                seg = np.repeat(np.arange(chunk.stop - chunk.start), stops[chunk] - starts[chunk])
                dev = np.where(present[rows], x[rows] - mean[chunk][seg], 0.0)
                out[chunk] = np.add.reduceat(dev * dev, offsets) / safe[chunk]
            out = np.sqrt(out)
        else:  # pragma: no cover - _parse admits only REDUCERS
            raise FeatureError(f"unknown reducer {reducer!r}")
    out = out.astype(np.float64, copy=False)
    out[empty] = np.nan
    return out


def _tag_positions(track: Track, present: np.ndarray, wanted: set[str] | None) -> dict[str, np.ndarray]:
    """Tag -> sorted rows (present timesteps only) carrying it; each row at most once."""
    rows: dict[str, list[int]] = {}
    for i, tags in enumerate(track.tags):
        if tags and present[i]:
            for tag in set(tags):
                if wanted is None or tag in wanted:
                    rows.setdefault(tag, []).append(i)
    return {tag: np.asarray(r, dtype=np.int64) for tag, r in rows.items()}


def _tag_counts(positions: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    return (np.searchsorted(positions, stops) - np.searchsorted(positions, starts)).astype(np.float64)


def _bounds(track: Track, segments: Sequence[Segment]) -> tuple[np.ndarray, np.ndarray]:
    n = len(segments)
    starts = np.fromiter((s.start for s in segments), dtype=np.intp, count=n)
    stops = np.fromiter((s.stop for s in segments), dtype=np.intp, count=n)
    bad = np.flatnonzero((starts < 0) | (stops <= starts) | (stops > len(track)))
    if len(bad):
        s = segments[int(bad[0])]
        raise FeatureError(
            f"segment {s.index} [{s.start}, {s.stop}) does not fit track {track.source_id!r}/{track.entity_id!r} "
            f"of {len(track)} steps; segment the same track you compute features on"
        )
    return starts, stops


def segment_tags(track: Track, segments: Sequence[Segment]) -> list[list[str]]:
    """Per segment: the sorted distinct event tags on its present timesteps."""
    starts, stops = _bounds(track, segments)
    present = np.asarray(track.present, dtype=bool)
    out: list[list[str]] = [[] for _ in segments]
    for tag, positions in sorted(_tag_positions(track, present, None).items()):
        for i in np.flatnonzero(_tag_counts(positions, starts, stops)).tolist():
            out[i].append(tag)
    return out


def _user_feature(track: Track, segments: Sequence[Segment], fk: FeatureKey) -> np.ndarray:
    fn = get_feature(fk.name)
    out = np.empty(len(segments), dtype=np.float64)
    for i, seg in enumerate(segments):
        try:
            value: object = fn(track, seg)  # user code: checked below, whatever it declares
        except Exception as exc:
            raise FeatureError(
                f"feature {fk.key!r} ({_origin(fn)}) failed on track {track.source_id!r}/{track.entity_id!r} "
                f"segment {seg.index} [{seg.start}, {seg.stop}): {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(value, np.ndarray) and value.shape == ():
            value = value.item()
        if not isinstance(value, numbers.Real):
            raise FeatureError(
                f"feature {fk.key!r} ({_origin(fn)}) returned {value!r} ({type(value).__name__}) for track "
                f"{track.source_id!r}/{track.entity_id!r} segment {seg.index}; a feature function must return a float"
            )
        out[i] = float(value)
    return out


def compute_features(track: Track, segments: Sequence[Segment], keys: Iterable[str]) -> dict[str, np.ndarray]:
    """One float64 array of ``len(segments)`` values per key (in the order given; a
    repeated key is computed once), canonical (see the module docstring). ``segments``
    must come from ``track``."""
    parsed = [parse_feature_key(k) for k in dict.fromkeys(keys)]
    starts, stops = _bounds(track, segments)
    n_rows = len(track)
    present = np.asarray(track.present, dtype=bool)
    if present.shape != (n_rows,):
        raise FeatureError(f"track {track.source_id!r}/{track.entity_id!r}: present has shape {present.shape}, "
                           f"expected ({n_rows},)")
    count = _segment_sum(present.astype(np.int64), starts, stops)
    wanted_tags = {fk.name for fk in parsed if fk.kind == "tag"}
    tag_rows = _tag_positions(track, present, wanted_tags) if wanted_tags else {}
    series: dict[tuple[str, int | None], np.ndarray] = {}
    out: dict[str, np.ndarray] = {}
    for fk in parsed:
        if fk.kind == "tag":
            positions = tag_rows.get(fk.name)
            out[fk.key] = np.zeros(len(segments)) if positions is None else _tag_counts(positions, starts, stops)
        elif fk.kind == "fn":
            out[fk.key] = _user_feature(track, segments, fk)
        else:
            sid = (fk.name, fk.component)
            if sid not in series:
                series[sid] = _series(track, fk, n_rows)
            out[fk.key] = _reduce(fk.reducer, series[sid], present, starts, stops, count)  # type: ignore[arg-type]
    return {key: canonical_floats(values) for key, values in out.items()}


__all__ = [
    "REDUCERS",
    "FeatureError",
    "FeatureKey",
    "compute_features",
    "get_feature",
    "parse_feature_key",
    "register_feature",
    "registered_features",
    "segment_tags",
    "unregister_feature",
]

