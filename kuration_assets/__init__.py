"""Dagster assets for seed 000: ``scored_segments`` (one partition per source), its pool
check, the sensor that turns new recordings into scoring runs, and ``budget_plan`` with its
blocking ``budget`` check, and the committed training dataset (``shards`` and
``dataset_manifest``, one step: ``shards_and_manifest``, a new version left staged) with its
audit, the blocking ``shards_present``, ``dataset_integrity`` and ``dataset_quality`` checks
(the last fails only under a blocking policy, else warns), and ``published_dataset``, which
makes the audited version current."""

from dagster import Definitions

from kuration_assets.budget_assets import BudgetPlanConfig, budget, budget_plan
from kuration_assets.dataset_assets import (
    DatasetConfig, QualityCheckConfig, dataset_integrity, dataset_quality, published_dataset, shards_and_manifest,
    shards_present,
)
from kuration_assets.scoring_assets import scored_segments, segment_pool, source_partitions
from kuration_assets.sensors import new_recordings_sensor

defs = Definitions(assets=[scored_segments, budget_plan, shards_and_manifest, published_dataset],
                   asset_checks=[segment_pool, budget, shards_present, dataset_integrity, dataset_quality],
                   sensors=[new_recordings_sensor])

__all__ = ["BudgetPlanConfig", "DatasetConfig", "QualityCheckConfig", "budget", "budget_plan", "dataset_integrity",
           "dataset_quality", "defs",
           "new_recordings_sensor", "published_dataset", "shards_and_manifest", "shards_present", "scored_segments",
           "segment_pool",
           "source_partitions"]
