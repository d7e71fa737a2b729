"""Dagster assets for seed 004: ``rollout_store``, the Zarr rollout replay store built from
the committed dataset's train split, with its blocking ``rollout_validation`` and
``rollout_lineage`` checks."""

from dagster import Definitions

from rollout_assets.assets import RolloutStoreConfig, rollout_lineage, rollout_store, rollout_validation

defs = Definitions(assets=[rollout_store], asset_checks=[rollout_validation, rollout_lineage])

__all__ = ["RolloutStoreConfig", "defs", "rollout_lineage", "rollout_store", "rollout_validation"]
