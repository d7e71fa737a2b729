"""``scored_segments``: one dynamic partition per source; and ``segment_pool``, the check over
the whole pool, a step of its own after the scoring step (or alone)."""

import warnings
from collections import Counter
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetExecutionContext,
    BackfillPolicy,
    DagsterEventType,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
    asset_check,
)

from kuration.landing.recordings import recording_name, source_ids_for_names
from kuration.numbers import rounded
from kuration.scoring import SourceOutcome
from kuration.scoring.segment_store import SegmentPoolCheck, check_segment_pool, score_and_store
from kuration_dagster_checks import asset_check_result, markdown_table
from kuration_dagster_checks.provenance import provenance_entry
from kuration_resources import ASSET_GROUP, LandingZoneResource, StorageRootResource
from splits_assets import universe

SOURCE_PARTITIONS = "sources"
#: Keyed by recording name (``wind_farm/flight_005``: ``kuration.landing.recordings.recording_name``),
#: mapped back to source ids through the recordings listing.
source_partitions = DynamicPartitionsDefinition(name=SOURCE_PARTITIONS)
#: The provenance key of a partition materialization's recording change token, as listed before
#: it was scored: ``new_recordings_sensor`` without a cursor skips a recording whose listing still says it.
RECORDING_TOKEN = "recording_token"

#: Rows of the pool check's tables; the core result keeps them all.
TABLE_ROWS = 30


# Dagster labels the backfill_policy parameter beta at decoration time; we rely on it on
# purpose (single-run backfills), so the notice is silenced here and only here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Parameter `backfill_policy`")

    @asset(
        partitions_def=source_partitions,
        # One run scores a whole backfill range with the resource's workers; a strategy
        # change is a backfill over every partition (it reuses the cached features: docs/dagster.md).
        backfill_policy=BackfillPolicy.single_run(),
        deps=[universe],
        group_name=ASSET_GROUP,
        kinds={"parquet"},
    )
    def scored_segments(
        context: AssetExecutionContext,
        storage_root: StorageRootResource,
        landing_zone: LandingZoneResource,
    ) -> MaterializeResult:
        """Each source's segments with the strategy's features, tags and priorities, as
        scored_segments/{recording name}.parquet. Unchanged sources come from the scoring cache;
        after a strategy change, so do their features (reused_features), and only the priorities are computed."""
        zone = landing_zone.open()
        # listed before scoring: a rewrite during the run leaves an older token, so the sensor scores again
        listed = zone.list_recordings()
        stored = score_and_store(
            zone.adapter, segmenter=zone.segmenter, strategy=zone.strategy,
            sources=source_ids_for_names(context.partition_keys, listed, where=zone.recordings_url),
            root=storage_root.url, workers=zone.config.workers,
            progress=lambda outcome, done,
            total: context.log.info(f"{done}/{total} {outcome.source_id}: {outcome.status}"),
        )
        # One output for the run's partition range (so the segment_pool step follows it);
        # Dagster puts each partition's metadata on that partition's materialization.
        for outcome, url, summary in stored:
            context.add_asset_metadata(_partition_metadata(outcome, url, summary, listed[outcome.source_id]),
                                       partition_key=recording_name(outcome.source_id))
        return MaterializeResult()


@asset_check(
    asset=scored_segments, blocking=True,
    description="The pool over every scored source is not empty; non-finite priorities of windows the entity was "
                "present in warn. Its tables break the pool down by the source ids' first folder and list the "
                "skipped sources. Reads only: it runs after the scoring step, or alone over the stored pool.",
)
def segment_pool(context: AssetCheckExecutionContext, storage_root: StorageRootResource) -> AssetCheckResult:
    pool = check_segment_pool(storage_root.url)
    plotted = ("sources", "skipped_sources", "segments", "track_hours", "non_finite_segments")
    return _with_pool_tables(asset_check_result(pool, plotted=plotted), pool, _statuses_in_run(context))


def _with_pool_tables(check: AssetCheckResult, pool: SegmentPoolCheck, statuses: Counter[str]) -> AssetCheckResult:
    """The check's metadata plus the pool's per-folder table, the skipped sources and, when this
    run scored partitions, how many were scored, cached or skipped."""
    metadata = dict(check.metadata)
    metadata["by_folder"] = markdown_table(pool.folders[:TABLE_ROWS], more=max(len(pool.folders) - TABLE_ROWS, 0))
    if pool.skipped:
        metadata["skipped"] = markdown_table(({"source": s, "skipped_error": e} for s, e in pool.skipped[:TABLE_ROWS]),
                                             columns=["source", "skipped_error"],
                                             more=max(len(pool.skipped) - TABLE_ROWS, 0))
    if statuses:
        counts = ", ".join(f"{n:,} {status}" for status, n in sorted(statuses.items()))
        metadata["this_run"] = MetadataValue.text(counts)
    return check._replace(metadata=metadata)


def _statuses_in_run(context: AssetCheckExecutionContext) -> Counter[str]:
    """The ``status`` (scored, cached, skipped) of each scored_segments partition this run
    materialized; empty when the check runs alone."""
    records = context.instance.get_records_for_run(context.run.run_id,
                                                   of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    statuses: Counter[str] = Counter()
    for record in records:
        materialization = record.asset_materialization
        if materialization is not None and materialization.asset_key == scored_segments.key:
            status = materialization.metadata.get("status")
            statuses[str(status.value if status is not None else "unknown")] += 1
    return statuses


def _partition_metadata(outcome: SourceOutcome, url: str, summary: dict[str, Any],
                        recording_token: str) -> dict[str, Any]:
    metadata = {
        "path": MetadataValue.path(url), "status": outcome.status, "segments": summary["segments"],
        "hours": rounded(summary["hours"]), "absent": summary["absent"], "non_finite": summary["non_finite"],
        "filtered_out": summary["filtered_out"],
        **{name: rounded(summary[name]) for name in ("priority_min", "priority_median", "priority_max")},
    }
    if outcome.reused_features:  # the strategy changed: these came from the cache, the rest were computed
        metadata["reused_features"] = MetadataValue.text(", ".join(outcome.reused_features))
    if outcome.error:
        metadata["skipped_error"] = MetadataValue.text(outcome.error)
    # cache keys last, in one entry a person can leave closed
    metadata.update(provenance_entry({
        RECORDING_TOKEN: recording_token,
        "identity": outcome.identity.token() if outcome.identity else "",
        "identity_strong": bool(outcome.identity and outcome.identity.strong),
    }))
    return metadata
