"""Kuration core library: plain Python over numpy / pyarrow / fsspec. Never imports dagster.

Subpackages: :mod:`kuration.splits` (universe, selectors, leakage, drift, baking).
Every error it raises is a :class:`KurationError`; :mod:`kuration.errors` draws the tree.
"""

from kuration._version import __version__
from kuration.errors import (
    BudgetError,
    CommitError,
    InputError,
    KurationError,
    LeaseError,
    OutputError,
    RecordingError,
    ScoringError,
    SelectorError,
    SplitConfigError,
    SplitConstraintError,
    SplitError,
    SplitGenerationError,
    SplitLeakageError,
    UniverseDriftError,
    UniverseError,
)
from kuration.scoring.features import (
    FeatureError,
    FeatureKey,
    compute_features,
    get_feature,
    parse_feature_key,
    register_feature,
    registered_features,
    segment_tags,
    unregister_feature,
)
from kuration.sources.entities import EntityIdError, entity_key, parse_entity_key
from kuration.lazy_exports import lazy_getattr
from kuration.scoring.track import score_track, segment_table_schema
from kuration.scoring.segments import Segment, Segmenter, SegmenterError
from kuration.scoring.strategy import Predicate, ScoreResult, Selection, Strategy, StrategyError

#: The write side, as the seed's examples import them (``from kuration import
#: write_dataset``). Loaded on first use: most processes that import kuration (scoring
#: workers, the Dagster code server) never write a dataset.
_LAZY = {
    "OutputSpec": "kuration.output.spec",
    "write_track": "kuration.output.write_track",
    "write_dataset": "kuration.output.write_dataset",
    "inspect_dataset": "kuration.inspect.report",
    "compare_datasets": "kuration.inspect.compare",
    "check_quality": "kuration.inspect.quality",
    "Pipeline": "kuration.pipeline",
    # the read side (numpy only): ``from kuration import iter_shards``
    "iter_shards": "kuration.read.loaders",
    "shard_entries": "kuration.read.loaders",
    "read_shard_arrays": "kuration.read.loaders",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "BudgetError",
    "CommitError",
    "InputError",
    "KurationError",
    "LeaseError",
    "OutputError",
    "RecordingError",
    "ScoringError",
    "SelectorError",
    "SplitConfigError",
    "SplitConstraintError",
    "SplitError",
    "SplitGenerationError",
    "SplitLeakageError",
    "UniverseDriftError",
    "UniverseError",
    "__version__",
    "Segment",
    "Segmenter",
    "SegmenterError",
    "FeatureError",
    "FeatureKey",
    "compute_features",
    "get_feature",
    "parse_feature_key",
    "register_feature",
    "registered_features",
    "segment_tags",
    "unregister_feature",
    "Predicate",
    "ScoreResult",
    "Selection",
    "Strategy",
    "StrategyError",
    "EntityIdError",
    "entity_key",
    "parse_entity_key",
    "score_track",
    "segment_table_schema",
    *_LAZY,
]
