"""Planning a feature pass: which sources the score cache answers whole, which in part, and
which must be scored.

:func:`plan_scoring` asks each source for its identity (only with a cache: without one every
source is scored, so no identity is needed and none is hashed) and looks the source up:

- *cached*: this strategy's scored table is in the cache (:attr:`ScoringPlan.cached`), or
  the segment rows and every feature are, each under its own definition
  (:attr:`ScoringPlan.features_cached`): the run assembles the table without reading the
  source;
- *partly cached*: the segment rows and some features are cached
  (:attr:`ScoringPlan.partly_cached`): the run reads the source and computes only the
  missing features, one pass per set of missing features (:meth:`ScoringPlan.partial_passes`);
- *to compute*: every other source, scored whole.

A source whose identity cannot be established is recorded with its error
(:attr:`ScoringPlan.unidentified`); the run skips it or raises, as ``on_error`` says.

The plan reads the sources' identities and the cache, nothing else: it writes no cache
entry, reads no recording and scores nothing (:func:`kuration.scoring.score_sources` does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from kuration.scoring.cache import ScoreCache
from kuration.scoring.feature_cache import CachedParts, cached_parts
from kuration.scoring.fingerprints import FeatureFingerprints, feature_fingerprints, run_fingerprint
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.scoring.track import segment_table_schema
from kuration.sources.protocol import SourceAdapter, SourceIdentity


@dataclass(frozen=True, eq=False)  # holds Arrow tables: compared by identity
class ScoringPlan:
    """What a feature pass over ``source_ids`` will do (see the module docstring). Every
    source is in exactly one of ``unidentified``, ``cached``, ``features_cached``,
    ``partly_cached`` and ``to_compute``; ``identities`` holds every identity established."""

    source_ids: tuple[str, ...]
    run_fingerprint: str
    parts: FeatureFingerprints
    identities: Mapping[str, SourceIdentity]
    unidentified: Mapping[str, Exception]
    #: This strategy's scored tables, as cached.
    cached: Mapping[str, pa.Table]
    #: Segment rows and every feature cached: the table is assembled from them.
    features_cached: Mapping[str, CachedParts]
    #: Segment rows and some features cached: the source is read for the others.
    partly_cached: Mapping[str, CachedParts]
    to_compute: tuple[str, ...]

    def partial_passes(self) -> dict[tuple[str, ...], list[str]]:
        """The partly cached sources by the feature keys they miss (one pass each), in
        source order, the passes in the order their first source comes."""
        passes: dict[tuple[str, ...], list[str]] = {}
        for source_id, found in self.partly_cached.items():
            missing = tuple(key for key in self.parts.features if key not in found.features)
            passes.setdefault(missing, []).append(source_id)
        return passes

    @property
    def cache_fingerprints(self) -> tuple[str, ...]:
        """Every cache namespace the run reads and writes: what a cache prune keeps."""
        return (self.run_fingerprint, self.parts.segments, *self.parts.features.values())


def plan_scoring(adapter: SourceAdapter, *, segmenter: Segmenter, strategy: Strategy,
                 sources: Sequence[str] | None = None, cache: ScoreCache | None = None) -> ScoringPlan:
    """The plan of scoring ``sources`` (default: all the adapter lists) with ``cache`` (see
    the module docstring). It raises only what the adapter's ``list_sources`` raises: a
    failed identity is recorded, not raised."""
    source_ids = tuple(sorted(set(adapter.list_sources() if sources is None else sources)))
    fingerprint = run_fingerprint(adapter, segmenter, strategy)
    parts = feature_fingerprints(adapter, segmenter, strategy)
    if cache is None:  # without a cache, skip the hash: an identity only decides whether cached work is reused
        return ScoringPlan(source_ids, fingerprint, parts, {}, {}, {}, {}, {}, source_ids)
    schema = segment_table_schema(strategy)
    identities: dict[str, SourceIdentity] = {}
    unidentified: dict[str, Exception] = {}
    cached: dict[str, pa.Table] = {}
    features_cached: dict[str, CachedParts] = {}
    partly_cached: dict[str, CachedParts] = {}
    to_compute: list[str] = []
    for source_id in source_ids:
        try:
            identity = adapter.identity(source_id)
        except Exception as exc:  # the run skips the source or raises, as on_error says
            unidentified[source_id] = exc
            continue
        identities[source_id] = identity
        table = cache.get(fingerprint, source_id, identity)
        found = cached_parts(cache, parts, strategy, schema, source_id, identity) \
            if table is None and identity.strong else None
        if table is not None:
            cached[source_id] = table
        elif found is not None and len(found.features) == len(parts.features):
            features_cached[source_id] = found
        elif found is not None and found.features:
            partly_cached[source_id] = found
        else:
            to_compute.append(source_id)
    return ScoringPlan(source_ids, fingerprint, parts, identities, unidentified, cached, features_cached,
                       partly_cached, tuple(to_compute))


__all__ = ["ScoringPlan", "plan_scoring"]
