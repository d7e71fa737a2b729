"""Dagster assets for seed 000: ``scored_segments`` (one partition per source), its pool
check, and the sensor that turns new recordings into scoring runs. The budget plan,
shards and dataset manifest follow in their own issues."""

from dagster import Definitions

from kuration_assets.scoring_assets import scored_segments, segment_pool, source_partitions
from kuration_assets.sensors import new_recordings_sensor

defs = Definitions(assets=[scored_segments], sensors=[new_recordings_sensor])

__all__ = ["defs", "new_recordings_sensor", "scored_segments", "segment_pool", "source_partitions"]
