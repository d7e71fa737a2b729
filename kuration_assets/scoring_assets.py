"""``scored_segments``: one dynamic partition per source; and the check over the pool."""

import warnings
from typing import Any

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetMaterialization,
    BackfillPolicy,
    DynamicPartitionsDefinition,
    MetadataValue,
    asset,
)

from kuration.landing import recording_name, source_ids_for_names
from kuration.numbers import rounded
from kuration.scoring import SourceOutcome
from kuration.scoring.segment_store import check_segment_pool, score_and_store
from kuration_dagster_checks import asset_check_result
from kuration_resources import CurationResource, LandingZoneResource, StorageRootResource
from splits_assets import universe

SOURCE_PARTITIONS = "sources"
#: Keyed by recording name (``wind_farm/flight_005``: ``kuration.landing.recording_name``),
#: mapped back to source ids through the recordings listing.
source_partitions = DynamicPartitionsDefinition(name=SOURCE_PARTITIONS)
#: A partition materialization's recording change token, as listed before it was scored:
#: ``new_recordings_sensor`` without a cursor skips a recording whose listing still says it.
RECORDING_TOKEN_METADATA = "recording_token"

# Computed in the asset's own step: the asset yields one materialization per partition and
# no output, so a separate check step (which waits on the output) would never run.
segment_pool = AssetCheckSpec(
    "segment_pool", asset="scored_segments", blocking=True,
    description="the segment pool is not empty; non-finite priorities are counted",
)


# Dagster labels the backfill_policy parameter beta at decoration time; we rely on it on
# purpose (single-run backfills), so the notice is silenced here and only here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Parameter `backfill_policy`")

    @asset(
        partitions_def=source_partitions,
        # One run scores a whole backfill range with the resource's workers; a strategy
        # change is a backfill over every partition (the cache misses on the new fingerprint).
        backfill_policy=BackfillPolicy.single_run(),
        output_required=False,
        deps=[universe],
        group_name="scoring",
        kinds={"parquet"},
        check_specs=[segment_pool],
    )
    def scored_segments(
        context: AssetExecutionContext,
        storage_root: StorageRootResource,
        landing_zone: LandingZoneResource,
        curation: CurationResource,
    ):
        """Each source's segments with the strategy's features, tags and priorities, as
        `scored_segments/{recording name}.parquet`. Unchanged sources come from the scoring cache."""
        settings = curation.settings(landing_zone)
        config = curation.config(landing_zone)
        # listed before scoring: a rewrite during the run leaves an older token, so the sensor scores again
        listed = curation.list_recordings(landing_zone)
        sources = source_ids_for_names(context.partition_keys, listed, where=config.recordings_url(landing_zone.url))
        stored = score_and_store(
            curation.adapter(landing_zone, settings), segmenter=settings.segmenter, strategy=settings.strategy,
            sources=sources, root=storage_root.url, workers=config.workers,
            progress=lambda outcome, done,
            total: context.log.info(f"{done}/{total} {outcome.source_id}: {outcome.status}"),
        )
        for outcome, url, summary in stored:
            yield AssetMaterialization(
                asset_key=context.asset_key, partition=recording_name(outcome.source_id),
                metadata={**_partition_metadata(outcome, url, summary),
                          RECORDING_TOKEN_METADATA: listed[outcome.source_id]})
        yield asset_check_result(check_segment_pool(storage_root.url), check_name=segment_pool.name)


def _partition_metadata(outcome: SourceOutcome, url: str, summary: dict[str, Any]) -> dict[str, Any]:
    metadata = {
        "path": MetadataValue.path(url), "status": outcome.status, "segments": summary["segments"],
        "hours": rounded(summary["hours"]), "absent": summary["absent"], "non_finite": summary["non_finite"],
        "filtered_out": summary["filtered_out"],
        **{name: rounded(summary[name]) for name in ("priority_min", "priority_median", "priority_max")},
        "identity": outcome.identity.token() if outcome.identity else "",
        "identity_strong": bool(outcome.identity and outcome.identity.strong),
    }
    if outcome.error:
        metadata["skipped_error"] = MetadataValue.text(outcome.error)
    return metadata
