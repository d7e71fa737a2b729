"""One shard's arrays from one track: every modality routed from its source, zero-filled
where the entity is absent, padded when the spec pads, and never silently zero where the
entity is present.

Routing (:class:`kuration.output.spec.Modality`):

- ``field:<name>``: the track's values of that schema field or global, cast to the
  declared dtype (same kind only; the spec was validated against the schema);
- ``segment:<feature>``: ``track.meta[feature]``, the span's aggregated value, repeated on
  every present row (absent from ``track.meta`` is an error). Into a float dtype it is cast
  as fields are; into an integer or bool dtype it is cast when it is whole, finite and in
  the dtype's range (bool: 0 or 1), as tags and counts are, which the segment table stores
  as float64 (:func:`cast_whole`). A float is written as a canonical float
  (:mod:`kuration.canonical.floats`: ``0.0`` for either zero, one NaN): it was computed by a
  reduction whose zero sign and NaN payload depend on the CPU. Field and media values are
  not touched: they are the recording's own bits, copied, never computed;
- ``media:<column>``: the track's references, decoded by the adapter in one bounded batch
  per shard; a present row without a reference is an error, and so is any failure to
  decode (a :class:`kuration.sources.media.MediaError` naming source, entity and row);
- ``encoder:<hook>``: the encoder's value for every present row (see :mod:`.encoders`).

This module builds arrays in memory; it does not choose file names or write anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kuration.sources.entities import entity_key
from kuration.errors import OutputError
from kuration.canonical.floats import canonical_floats
from kuration.sources.media import MediaError
from kuration.output.containers.protocol import ShardArrays
from kuration.output.encoders import OutputEncoder, encode_rows
from kuration.output.spec import Modality, OutputSpec
from kuration.sources.schema import Schema

if TYPE_CHECKING:  # annotations only: a Track's module imports pyarrow, which a reader never needs
    from kuration.sources.tracks import Track


class MissingValueError(OutputError, ValueError):
    """A present entity has no value for a declared modality (writing zero would lie)."""


class MediaDecoder(Protocol):
    def decode_media(self, column: str, refs: list[Any], *, source_id: str) -> np.ndarray: ...


def _where(track: Track, row: int) -> str:
    return f"source {track.source_id!r}, entity {entity_key(track.entity_id)}, row {row} (tick {int(track.ticks[row])})"


def _shaped(values: Any, modality: Modality, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.shape[1:] != modality.shape:
        raise MissingValueError(
            f"modality {modality.name!r} ({modality.source}): {what} has shape {list(array.shape[1:])} per row, "
            f"the spec declares {list(modality.shape)}"
        )
    return array


def _cast(values: Any, modality: Modality, what: str) -> np.ndarray:
    """``values`` as ``modality``'s dtype when the cast keeps their kind (float to float, int
    to int or float, ...). ``field:``, ``media:`` and ``encoder:`` values take this rule, not
    :func:`cast_whole`'s: a field's and a media column's kind is declared in the schema and
    checked against the spec before anything is read, so any value of another kind is a
    spec error; an encoder's values are known only for the record preflight encodes, and a
    rule that depends on values (whole floats into ints) would pass there and fail on a
    later record, after publication began. The kind is the same for every record."""
    array = _shaped(values, modality, what)
    if not np.can_cast(array.dtype, modality.numpy_dtype, casting="same_kind") and array.size:
        raise MissingValueError(
            f"modality {modality.name!r} ({modality.source}): {what} is {array.dtype}, which {modality.dtype} cannot "
            "hold without changing kind"
        )
    return array.astype(modality.numpy_dtype, copy=False)


def _whole_range(dtype: np.dtype) -> tuple[int, int]:
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _first_unfit(array: np.ndarray, dtype: np.dtype) -> bool | int | float | None:
    """The first value of ``array`` (bools, ints or floats) that integer or bool ``dtype``
    cannot hold exactly, None when every value fits. Compared as Python numbers: exact for
    every int64 and uint64, where a float64 bound would round."""
    low, high = _whole_range(dtype)
    for value in array.ravel().tolist():
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            return value
        if not low <= int(value) <= high:
            return value
    return None


def cast_whole(values: Any, modality: Modality, what: str, *, where: str) -> np.ndarray:
    """``values`` as ``modality``'s dtype. Into an integer or bool dtype, numbers of any kind
    are cast when every value is whole, finite and in the dtype's range (bool: 0 or 1): a
    tag or count aggregated as float64 is an int64 label. Anything else takes :func:`_cast`'s
    rule. A value that does not fit is a :class:`MissingValueError` naming the modality,
    ``what``, ``where`` it was found and the value."""
    array = _shaped(values, modality, what)
    target = modality.numpy_dtype
    if target.kind not in "iub" or array.dtype.kind not in "biuf":
        return _cast(array, modality, what)
    unfit = _first_unfit(array, target)
    if unfit is not None:
        low, high = _whole_range(target)
        raise MissingValueError(
            f"modality {modality.name!r} ({modality.source}): {what} is {unfit!r} at {where}, which {modality.dtype} "
            f"cannot hold: it takes whole values from {low} to {high}. Declare a float dtype, or aggregate the "
            "feature so every span's value is whole (a tag or count with clip_aggregate 'max' or 'min', not 'mean')"
        )
    return array.astype(target)


def assemble_shard(
    track: Track,
    start: int,
    stop: int,
    spec: OutputSpec,
    *,
    schema: Schema,
    encoder: OutputEncoder | None = None,
    media: MediaDecoder | None = None,
) -> ShardArrays:
    """The arrays of the shard covering rows ``[start, stop)`` of ``track``."""
    n = stop - start
    rows = spec.shard_rows(n)
    present = np.zeros(rows, bool)
    present[:n] = track.present[start:stop]
    arrays: dict[str, np.ndarray] = {}
    present_rows = np.flatnonzero(present)
    for name, m in spec.modalities.items():
        if m.kind == "media":
            arrays[name] = _media(track, _Rows(start, stop, rows, present_rows), name, m, media, schema)
            continue
        out = np.zeros((rows, *m.shape), m.numpy_dtype)
        if m.kind == "field":
            if m.key not in track.values:
                raise MissingValueError(f"modality {name!r}: track of source {track.source_id!r} has no field "
                                        f"{m.key!r}")
            out[:n] = _cast(track.values[m.key][start:stop], m, f"field {m.key!r}")
            out[:n][~present[:n]] = 0  # tracks zero-fill absent rows already; a shard must not depend on it
        elif m.kind == "segment":
            out[present_rows] = segment_value(track.meta, name, m, source_id=str(track.source_id),
                                              entity=entity_key(track.entity_id))[0]
        arrays[name] = out
    hooks = spec.of_kind("encoder")
    if hooks and len(present_rows):  # with no present row the zero-filled arrays are already right
        for name, values in encoded_rows(track, start + present_rows, hooks, encoder, schema).items():
            arrays[name][present_rows] = values
    return ShardArrays(arrays, present if spec.presence_mask else None, n)


def encoded_rows(track: Track, rows: np.ndarray, hooks: Mapping[str, Modality], encoder: OutputEncoder | None,
                 schema: Schema) -> dict[str, np.ndarray]:
    """The ``encoder:`` modalities ``hooks`` (name -> modality) at track ``rows`` (present
    rows), as the encoder returns them for those records, cast to each modality."""
    if encoder is None:
        raise MissingValueError(f"modalities {sorted(hooks)} come from an encoder; pass encoder=")
    ctx = {"schema": schema, "track": {**track.meta, "source_id": track.source_id, "entity_id": track.entity_id}}
    values = encode_rows(encoder, list(_records(track, rows)), ctx, sorted({m.key for m in hooks.values()}),
                         where=lambda i: _where(track, int(rows[i])))
    return {name: _cast(np.asarray(values[m.key]), m, f"encoder hook {m.key!r}") for name, m in hooks.items()}


@dataclass(frozen=True)
class _Rows:
    """A shard's rows of its track: ``[start, stop)``, in ``count`` rows (padded when the
    spec pads); ``present`` are the indices, in the shard, of the rows where the entity is."""

    start: int
    stop: int
    count: int
    present: np.ndarray


def _media(track: Track, rows: _Rows, name: str, m: Modality, media: MediaDecoder | None,
           schema: Schema) -> np.ndarray:
    if media is None:
        raise MissingValueError(f"modality {name!r} ({m.source}): pass adapter= (something with decode_media) to "
                                "decode it")
    refs = track.media[m.key][rows.start:rows.stop]
    missing = [i for i in rows.present if refs[i] is None]
    if missing:
        raise MissingValueError(
            f"modality {name!r}: no {m.key!r} reference at {_where(track, rows.start + missing[0])} although the "
            "entity is present"
        )
    if not len(rows.present):
        return np.zeros((rows.count, *m.shape), m.numpy_dtype)
    decoded = decode_media_rows(track, rows.start + rows.present, name, m, media, schema)
    if len(rows.present) == rows.count and decoded.flags.c_contiguous:
        return decoded  # every row present, no padding: the decoded batch is the array, no zeroed one made first
    out = np.zeros((rows.count, *m.shape), m.numpy_dtype)
    out[rows.present] = decoded
    return out


def segment_value(meta: Mapping[str, Any], name: str, m: Modality, *, source_id: str, entity: str) -> np.ndarray:
    """The value of ``segment:`` modality ``name`` (``m``) for a span whose track meta is
    ``meta``: ``meta[m.key]`` as one row of the modality's dtype and shape, a canonical
    float (see the module docstring), cast by :func:`cast_whole`. A span without the
    feature, or a value the modality cannot hold, is a :class:`MissingValueError` naming
    the span. The dataset writer checks every span with it while planning, so a shard
    never fails here after publication began."""
    if m.key not in meta:
        raise MissingValueError(
            f"modality {name!r}: no segment feature {m.key!r} in the span's meta for source {source_id!r}, entity "
            f"{entity}; it has {sorted(meta)}. Add the feature to the strategy (segment: modalities read the "
            "span-aggregated features)"
        )
    span = meta.get("span_index")
    where = f"source {source_id!r}, entity {entity}" + ("" if span is None else f", span {span}")
    return canonical_floats(cast_whole(np.asarray(meta[m.key])[None, ...], m, f"segment feature {m.key!r}",
                                       where=where))


def decode_media_rows(track: Track, rows: np.ndarray, name: str, m: Modality, media: MediaDecoder,
                      schema: Schema) -> np.ndarray:
    """The references at track ``rows`` (present rows that have one) decoded by ``media``
    and cast to modality ``m``. Any failure, the provider's own or an unexpected exception
    from it, is a :class:`MediaError` naming the source, entity and row (the row of the
    reference at fault when the provider says which, else the batch's rows). ``OSError``
    and ``MemoryError`` pass through as they are: they are about the machine, not the
    references, and a caller may retry them (``resume=True``)."""
    refs = [track.media[m.key][int(r)] for r in rows]
    provider = schema.media[m.key].provider  # the spec was validated against the schema
    try:
        decoded = media.decode_media(m.key, refs, source_id=track.source_id)
    except MediaError as exc:
        at = exc.reference
        where = _where(track, int(rows[at])) if at is not None and 0 <= at < len(rows) else _rows_where(track, rows)
        raise MediaError(f"modality {name!r}, {where}: {exc}", reference=at) from exc
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        raise MediaError(
            f"modality {name!r}, {_rows_where(track, rows)}: the {provider!r} media provider failed with "
            f"{type(exc).__name__}: {exc}. A provider must return ({len(refs)}, *{list(m.shape)}) values or raise "
            "MediaError naming the reference; fix the provider or the references (first "
            f"{refs[0]!r})"
        ) from exc
    decoded = _cast(decoded, m, f"decoded media {m.key!r}")
    if len(decoded) != len(rows):
        raise MissingValueError(
            f"modality {name!r}: the {m.key!r} decoder returned {len(decoded)} rows for {len(rows)} "
            f"references (source {track.source_id!r})")
    return decoded


def _rows_where(track: Track, rows: np.ndarray) -> str:
    first, last = int(rows[0]), int(rows[-1])
    return (f"source {track.source_id!r}, entity {entity_key(track.entity_id)}, rows {first}-{last} (ticks "
            f"{int(track.ticks[first])}-{int(track.ticks[last])})")


def _records(track: Track, rows: np.ndarray):
    for i in rows:
        row = int(i)
        record: dict[str, Any] = {name: arr[row] for name, arr in track.values.items()}
        record.update({name: refs[row] for name, refs in track.media.items()})
        record["_tags"] = track.tags[row]
        record["_tick"] = int(track.ticks[row])
        record["_present"] = True
        yield record


__all__ = ["MediaDecoder", "MissingValueError", "assemble_shard", "cast_whole", "decode_media_rows", "encoded_rows",
           "segment_value"]
