"""Dagster assets for seed 000: ``scored_segments`` (one partition per source), its pool
check, the sensor that turns new recordings into scoring runs, and ``budget_plan`` with its
blocking ``budget`` check. Shards and the dataset manifest follow in their own issue."""

from dagster import Definitions

from kuration_assets.budget_assets import BudgetPlanConfig, budget, budget_plan
from kuration_assets.scoring_assets import scored_segments, segment_pool, source_partitions
from kuration_assets.sensors import new_recordings_sensor

defs = Definitions(assets=[scored_segments, budget_plan], asset_checks=[budget], sensors=[new_recordings_sensor])

__all__ = ["BudgetPlanConfig", "budget", "budget_plan", "defs", "new_recordings_sensor", "scored_segments", "segment_pool", "source_partitions"]
