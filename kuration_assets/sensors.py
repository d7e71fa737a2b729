"""``new_recordings_sensor``: new or rewritten recordings in the landing zone become
scoring runs; a changed universe (a changed ``universe.csv``, or, without one, a recording
added or removed) re-materializes the universe and the resolved split. The split extends
itself (``kuration.splits.extend``): new sources are placed by the seeded rule and no
existing source moves, so the next budget plan sees every new recording in a split.

Without a cursor (its first tick, or after a reset) the sensor starts from what the instance
already holds: each ``scored_segments`` partition's latest materialization records the
recording's change token, and the universe's its universe token, so an instance a
``kuration run`` filled asks for nothing until a recording or the universe changes."""

from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from kuration.landing.recordings import PartitionUpdate, ScoringRun, plan_tick
from kuration_assets.automation import sensor_interval_seconds
from kuration_assets.scoring_assets import RECORDING_TOKEN, SOURCE_PARTITIONS, scored_segments, source_partitions
from kuration_dagster_checks.provenance import recorded_provenance
from kuration_resources import LandingZoneResource
from splits_assets import resolved_splits, universe
from splits_assets.metadata import UNIVERSE_TOKEN


#: Run tags a sensor-launched run carries: which recording it scores (new or rewritten), or
#: which recordings when it scores several, and why it runs. The UI's run list shows them;
#: filter on them with `kuration/...`.
RECORDING_TAG = "kuration/recording"
RECORDINGS_TAG = "kuration/recordings"
CHANGE_TAG = "kuration/change"
#: KURATION_SENSOR_INTERVAL_SECONDS when the code location loaded (30 s by default).
_INTERVAL_SECONDS = sensor_interval_seconds()


@sensor(
    asset_selection=[universe, resolved_splits, scored_segments], minimum_interval_seconds=_INTERVAL_SECONDS,
    description=f"Every {_INTERVAL_SECONDS} s (KURATION_SENSOR_INTERVAL_SECONDS), lists the recordings root "
                "(recordings in curation.json): new recordings become one scored_segments run over their partitions "
                "(keyed by recording name), a rewritten one a run of its own, each tagged with its recordings; a "
                "changed universe (universe.csv, or the recordings themselves without one) re-materializes universe "
                "and resolved_splits, which extends the split without moving a source. Its first tick skips every "
                "recording and universe whose latest materialization recorded the token it lists now. Off until "
                "switched on (Automation in the UI, or: dagster sensor start new_recordings_sensor); budget_plan and "
                "what follows run by their automation condition.",
)
def new_recordings_sensor(context: SensorEvaluationContext, landing_zone: LandingZoneResource):
    zone = landing_zone.open()
    listing = zone.list_recordings()
    tick = plan_tick(listing, context.instance.get_dynamic_partitions(SOURCE_PARTITIONS),
                     universe_token=zone.universe_token(listing), universe_csv=zone.universe_csv_url is not None,
                     cursor=context.cursor, recorded=lambda names: _seeded_cursor(context.instance, names),
                     scoring_asset=scored_segments.key.to_user_string())
    requests = [_scoring_request(run) for run in tick.scoring]
    if tick.universe_change is not None:
        requests.insert(0, RunRequest(run_key=tick.universe_run_key, tags={CHANGE_TAG: tick.universe_change},
                                      asset_selection=[universe.key, resolved_splits.key]))
    partitions = _partition_requests(tick.partitions)
    if not requests:
        return SensorResult(skip_reason=SkipReason(tick.skip_reason), dynamic_partitions_requests=partitions,
                            cursor=tick.cursor)
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partitions, cursor=tick.cursor)


def _partition_requests(update: PartitionUpdate) -> list[Any]:
    """Delete the partitions keyed by an earlier release's path, then add the new names."""
    requests: list[Any] = []
    if update.replace:
        requests.append(source_partitions.build_delete_request(list(update.replace)))
    if update.add:
        requests.append(source_partitions.build_add_request(list(update.add)))
    return requests


def _scoring_request(run: ScoringRun) -> RunRequest:
    """One scored_segments run over ``run.partitions``: a single partition, or a range that
    ``BackfillPolicy.single_run`` scores in one run."""
    if len(run.partitions) == 1:
        return RunRequest(run_key=run.run_key, partition_key=run.partitions[0], asset_selection=[scored_segments.key],
                          tags={RECORDING_TAG: run.label, CHANGE_TAG: run.change})
    return RunRequest(
        run_key=run.run_key, asset_selection=[scored_segments.key],
        tags={RECORDINGS_TAG: run.label, CHANGE_TAG: run.change,
              "dagster/asset_partition_range_start": run.partitions[0],
              "dagster/asset_partition_range_end": run.partitions[-1]},
    )


def _seeded_cursor(instance: DagsterInstance, names: Mapping[str, str]) -> dict[str, Any]:
    """The cursor a tick without one starts from: each listed recording's token as its
    partition's latest materialization recorded it (two queries for all partitions), and the
    universe's token as its latest materialization recorded it. A recording without a
    recorded token (never materialized, or by an earlier release) is new."""
    latest = instance.get_latest_storage_id_by_partition(
        scored_segments.key, DagsterEventType.ASSET_MATERIALIZATION, partitions=set(names.values()))
    stored_tokens: dict[str, str] = {}
    if latest:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=scored_segments.key, storage_ids=list(latest.values())),
            limit=len(latest)).records
        for record in records:
            materialization = record.asset_materialization
            if materialization is not None and materialization.partition is not None:
                recorded = recorded_provenance(materialization.metadata).get(RECORDING_TOKEN)
                if recorded is not None:
                    stored_tokens[materialization.partition] = str(recorded)
    recordings = {source_id: stored_tokens[name] for source_id, name in names.items() if name in stored_tokens}
    event = instance.get_latest_materialization_event(universe.key)
    universe_materialization = event.asset_materialization if event is not None else None
    recorded_universe = (recorded_provenance(universe_materialization.metadata).get(UNIVERSE_TOKEN)
                         if universe_materialization is not None else None)
    return {"recordings": recordings, "universe": str(recorded_universe) if recorded_universe is not None else None}
