"""Kuration core library: plain Python over numpy / pyarrow / fsspec. Never imports dagster.

Subpackages: :mod:`kuration.splits` (universe, selectors, leakage, drift, baking).
Every error it raises is a :class:`KurationError`; :mod:`kuration.errors` draws the tree.
"""

from typing import TYPE_CHECKING

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
from kuration.lazy_exports import type_checking_exports

# Everything below is imported on first use (``kuration.write_dataset``, ``from kuration
# import Strategy``): importing ``kuration`` must stay as light as numpy, because a training
# node that only reads shards (``kuration.core.loaders``) imports this package first, and
# most processes that do import it (scoring workers, the Dagster code server) never write.
if TYPE_CHECKING:
    from kuration.inspect.compare import compare_datasets
    from kuration.inspect.quality import check_quality
    from kuration.inspect.report import inspect_dataset
    from kuration.output.spec import OutputSpec
    from kuration.output.write_dataset import write_dataset
    from kuration.output.write_track import write_track
    from kuration.pipeline import Pipeline
    from kuration.read.loaders import iter_shards, read_shard_arrays, shard_entries
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
    from kuration.scoring.segments import Segment, Segmenter, SegmenterError
    from kuration.scoring.strategy import Predicate, ScoreResult, Selection, Strategy, StrategyError
    from kuration.scoring.track import score_track, segment_table_schema
    from kuration.sources.entities import EntityIdError, entity_key, parse_entity_key

__getattr__ = type_checking_exports(__name__, __file__)

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
    "OutputSpec",
    "write_track",
    "write_dataset",
    "inspect_dataset",
    "compare_datasets",
    "check_quality",
    "Pipeline",
    "iter_shards",
    "shard_entries",
    "read_shard_arrays",
]
