"""Dagster assets for seed 003: ``universe`` and ``resolved_splits``, with their checks."""

from dagster import Definitions

from splits_assets.assets import SplitDefinition, SplitStrategy, resolved_splits, universe
from splits_assets.checks import split_leakage, universe_drift, universe_schema, universe_sources

defs = Definitions(
    assets=[universe, resolved_splits],
    asset_checks=[universe_schema, universe_sources, split_leakage, universe_drift],
)

__all__ = ["SplitDefinition", "SplitStrategy", "defs", "resolved_splits", "split_leakage", "universe", "universe_drift",
           "universe_schema", "universe_sources"]
