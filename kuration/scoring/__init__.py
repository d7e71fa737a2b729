"""Scoring: recordings cut into segments, each described by features and ranked by a strategy.

One module per step:

* :mod:`~kuration.scoring.segments` — the :class:`Segmenter` (windows over a track);
* :mod:`~kuration.scoring.features` — feature keys (``speed.max``, ``tag.near_miss``,
  ``fn.<registered>``) and their vectorised computation;
* :mod:`~kuration.scoring.strategy` — the :class:`Strategy` (``strategy.json``): priority,
  predicates, tags;
* :mod:`~kuration.scoring.track` — :func:`score_track`, one track's segment table;
* :mod:`~kuration.scoring.scoring_plan` — :func:`plan_scoring`, which sources the cache
  answers whole, in part, or not at all (:class:`ScoringPlan`);
* :mod:`~kuration.scoring.score_sources` — :func:`score_sources`, many sources with workers
  (:mod:`~kuration.scoring.executors`), a cache (:mod:`~kuration.scoring.feature_cache`) and
  a memory budget (the :class:`Pool` of :mod:`~kuration.scoring.pools`);
* :mod:`~kuration.scoring.fingerprints` — the fingerprints that key the cache;
* :mod:`~kuration.scoring.cache` — the score cache (in memory, or any fsspec folder);
* :mod:`~kuration.scoring.segment_store` — the per-source segment files under a storage root.
"""

from kuration.scoring.cache import FsspecScoreCache, MemoryScoreCache, ScoreCache
from kuration.scoring.features import (
    REDUCERS, FeatureError, FeatureKey, compute_features, get_feature, parse_feature_key, register_feature,
    registered_features, segment_tags, unregister_feature,
)
from kuration.scoring.pools import Pool
from kuration.scoring.score_sources import (
    SCORING_CODE_VERSION, EmptySegmentPoolError, FeatureFingerprints, MemoryBudgetError, ScoringResult,
    SourceOutcome, SourceScoringError, feature_fingerprints, provide_fingerprint, run_fingerprint,
    score_one_source, score_sources,
)
from kuration.scoring.scoring_plan import ScoringPlan, plan_scoring
from kuration.scoring.segments import Segment, Segmenter, SegmenterError
from kuration.scoring.strategy import (
    CLIP_AGGREGATE, METHODS, OPS, Predicate, ScoreResult, Selection, Strategy, StrategyError,
)
from kuration.scoring.track import score_track, segment_table_schema

__all__ = [
    "CLIP_AGGREGATE", "METHODS", "OPS", "REDUCERS", "SCORING_CODE_VERSION", "EmptySegmentPoolError", "FeatureError",
    "FeatureFingerprints", "FeatureKey", "FsspecScoreCache", "MemoryBudgetError", "MemoryScoreCache", "Pool",
    "Predicate", "ScoreCache", "ScoreResult", "ScoringPlan", "ScoringResult", "Segment",
    "Segmenter", "SegmenterError", "Selection", "SourceOutcome", "SourceScoringError", "Strategy", "StrategyError",
    "compute_features", "feature_fingerprints", "get_feature", "parse_feature_key", "plan_scoring",
    "provide_fingerprint", "register_feature", "registered_features", "run_fingerprint", "score_one_source",
    "score_sources", "score_track", "segment_tags", "segment_table_schema", "unregister_feature",
]
