"""``new_recordings_sensor``: new or rewritten recordings in the landing zone become
scoring runs; a changed universe (a changed ``universe.csv``, or, without one, a recording
added or removed) re-materializes the universe and the resolved split. The split extends
itself (``kuration.splits.extend``): new sources are placed by the seeded rule and no
existing source moves, so the next budget plan sees every new recording in a split.

Without a cursor (its first tick, or after a reset) the sensor starts from what the instance
already holds: each ``scored_segments`` partition's latest materialization records the
recording's change token, and the universe's its universe token, so an instance a
``kuration run`` filled asks for nothing until a recording or the universe changes."""

import json
from collections.abc import Mapping, Sequence
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

from kuration.canonical.hashing import canonical_digest
from kuration.landing.recordings import (
    contiguous_blocks, diff_recordings, partition_update, recording_names, universe_token,
)
from kuration_assets.automation import sensor_interval_seconds
from kuration_assets.scoring_assets import RECORDING_TOKEN, SOURCE_PARTITIONS, scored_segments, source_partitions
from kuration_dagster_checks.provenance import recorded_provenance
from kuration_resources import CurationResource, LandingZoneResource
from splits_assets import resolved_splits, universe
from splits_assets.metadata import UNIVERSE_TOKEN


#: Run tags a sensor-launched run carries: which recording it scores (new or rewritten), or
#: which recordings when it scores several, and why it runs. The UI's run list shows them;
#: filter on them with `kuration/...`.
RECORDING_TAG = "kuration/recording"
RECORDINGS_TAG = "kuration/recordings"
CHANGE_TAG = "kuration/change"
#: How many names a multi-recording run's tag lists before "and N more", and its longest value.
_TAGGED_NAMES = 5
_TAG_CHARS = 200
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
def new_recordings_sensor(context: SensorEvaluationContext, landing_zone: LandingZoneResource,
                          curation: CurationResource):
    current = curation.list_recordings(landing_zone)
    names = {source_id: name for name, source_id in recording_names(current).items()}
    existing = context.instance.get_dynamic_partitions(SOURCE_PARTITIONS)
    update = partition_update(existing, current)
    token = universe_token(landing_zone.universe_csv_url(), current)
    previous = json.loads(context.cursor) if context.cursor else _seeded_cursor(context.instance, names)
    diff = diff_recordings(previous.get("recordings", {}), current)

    requests = []
    if token and token != previous.get("universe"):
        if landing_zone.universe_csv_url() is not None:
            why = "universe.csv changed"
        elif context.cursor:
            why = f"{len(diff.new)} recording(s) added, {len(diff.removed)} removed"
        else:
            why = "the recordings differ from the last universe materialization's"
        requests.append(RunRequest(run_key=f"universe:{token}",
                                   asset_selection=[universe.key, resolved_splits.key], tags={CHANGE_TAG: why}))
    # the partitions as they will be once this tick's requests apply: deletions leave gaps,
    # additions are appended in order, so a tick's new recordings are one contiguous range
    ordered = [k for k in existing if k not in update.replace] + list(update.add)
    for change, source_ids in (("new recording", diff.new), ("rewritten", diff.changed)):
        for block in contiguous_blocks(ordered, [names[s] for s in source_ids]):
            requests.append(_scoring_request(block, change, {names[s]: (s, current[s]) for s in source_ids}))

    cursor = json.dumps({"recordings": current, "universe": token}, sort_keys=True)
    partition_requests: list[Any] = []
    if update.replace:
        partition_requests.append(source_partitions.build_delete_request(list(update.replace)))
    if update.add:
        partition_requests.append(source_partitions.build_add_request(list(update.add)))
    if not requests:
        since = "since the last tick" if context.cursor else "since their latest materializations"
        return SensorResult(
            skip_reason=SkipReason(f"all {len(current)} recording(s) and the universe unchanged {since}"),
            dynamic_partitions_requests=partition_requests, cursor=cursor)
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=cursor)


def _scoring_request(block: Sequence[str], change: str, listed: Mapping[str, tuple[str, str]]) -> RunRequest:
    """One scored_segments run over ``block`` (partition keys adjacent in the partitions' order):
    a single partition, or a range that ``BackfillPolicy.single_run`` scores in one run. The
    run key names each recording's token, so a re-evaluation does not ask again."""
    if len(block) == 1:
        (name,) = block
        source_id, token = listed[name]
        return RunRequest(run_key=f"{source_id}:{token}", partition_key=name, asset_selection=[scored_segments.key],
                          tags={RECORDING_TAG: name, CHANGE_TAG: change})
    shown = ", ".join(block[:_TAGGED_NAMES]) + (f" and {len(block) - _TAGGED_NAMES} more"
                                                if len(block) > _TAGGED_NAMES else "")
    tag = f"{len(block)}: {shown}"
    if len(tag) > _TAG_CHARS:
        tag = tag[: _TAG_CHARS - 3] + "..."
    return RunRequest(
        run_key=f"{scored_segments.key.to_user_string()}:{canonical_digest([listed[n] for n in block])}",
        asset_selection=[scored_segments.key],
        tags={RECORDINGS_TAG: tag, CHANGE_TAG: change,
              "dagster/asset_partition_range_start": block[0], "dagster/asset_partition_range_end": block[-1]},
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
