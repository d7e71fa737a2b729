"""A source's scored table in parts: its segment rows and each feature's values, cached under
namespaces that outlive a strategy change (:func:`~kuration.scoring.fingerprints.feature_fingerprints`).

After a strategy change, a source whose segment rows and every feature are cached is not
read again: its table is assembled here from the parts, the priorities and predicate
verdicts computed as :func:`~kuration.scoring.track.score_track` computes them. A source
with only some features cached is read, and only the missing ones are computed
(:func:`computing_only`). This module reads and writes cache entries; it does not decide
which sources to score (:mod:`.scoring_plan` does) or run anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kuration.scoring.cache import ScoreCache
from kuration.scoring.fingerprints import FeatureFingerprints
from kuration.scoring.strategy import Strategy
from kuration.sources.protocol import SourceIdentity

#: The segment rows' own columns, cached under :attr:`FeatureFingerprints.segments`: every
#: column of a scored table but the features, ``priority`` and ``passed``.
_SEGMENT_COLUMNS_EXCLUDED = ("priority", "passed")


def segment_columns(schema: pa.Schema, features: Iterable[str]) -> list[str]:
    """The columns of a scored table of ``schema`` that are the segment rows' own (not ``features``)."""
    excluded = {*features, *_SEGMENT_COLUMNS_EXCLUDED}
    return [name for name in schema.names if name not in excluded]


@dataclass(frozen=True, eq=False)  # holds Arrow tables: compared by identity
class CachedParts:
    """A source's cached segment rows and the features cached for them (each of their length)."""

    segments: pa.Table
    features: dict[str, pa.ChunkedArray]


def cached_parts(cache: ScoreCache, parts: FeatureFingerprints, strategy: Strategy, schema: pa.Schema,
                 source_id: str, identity: SourceIdentity) -> CachedParts | None:
    """What the cache holds of ``source_id`` under ``strategy``'s feature definitions; None
    without its segment rows (then nothing of it can be reused)."""
    segments = cache.get(parts.segments, source_id, identity)
    if segments is None or segments.schema.names != segment_columns(schema, strategy.feature_keys()):
        return None
    features: dict[str, pa.ChunkedArray] = {}
    for key, fingerprint in parts.features.items():
        entry = cache.get(fingerprint, source_id, identity)
        if entry is not None and entry.schema.names == [key] and entry.num_rows == segments.num_rows:
            features[key] = entry.column(key)
    return CachedParts(segments, features)


def put_feature_entries(cache: ScoreCache, parts: FeatureFingerprints, source_id: str, identity: SourceIdentity,
                        table: pa.Table, keys: Sequence[str], *, segments: bool) -> None:
    """A scored source's segment rows (``segments``) and the columns of ``keys``, in the
    table's (canonical) order."""
    if segments:
        cache.put(parts.segments, source_id, identity, table.select(segment_columns(table.schema, keys)))
    for key in keys:
        cache.put(parts.features[key], source_id, identity, table.select([key]))


def assembled(schema: pa.Schema, strategy: Strategy, segments: pa.Table,
              features: dict[str, pa.ChunkedArray]) -> pa.Table:
    """A source's scored table under ``strategy`` from its segment rows and every feature's
    values: the priorities and predicate verdicts computed here, as :func:`score_track` does."""
    scored = strategy.score({key: column.to_numpy(zero_copy_only=False) for key, column in features.items()})
    columns: dict[str, Any] = {name: segments.column(name) for name in segments.schema.names}
    columns.update(features)
    columns["priority"] = pa.chunked_array([pa.array(scored.priority, pa.float64())])
    columns["passed"] = pa.chunked_array([pa.array(scored.passed, pa.bool_())])
    return pa.Table.from_arrays([columns[field.name].cast(field.type) for field in schema], schema=schema)


def computing_only(keys: Sequence[str]) -> Strategy:
    """A strategy whose scored table holds exactly ``keys`` (its priority is thrown away):
    what a worker computes for a source whose other features are cached."""
    return Strategy("inclusion", {key: 1.0 for key in keys})


__all__ = ["CachedParts", "assembled", "cached_parts", "computing_only", "put_feature_entries", "segment_columns"]
