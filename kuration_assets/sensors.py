"""``new_recordings_sensor``: new or rewritten recordings in the landing zone become
scoring runs; a changed universe (a changed ``universe.csv``, or, without one, a recording
added or removed) re-materializes the universe and the resolved split. The split extends
itself (``kuration.splits.extend``): new sources are placed by the seeded rule and no
existing source moves, so the next budget plan sees every new recording in a split."""

import json

from dagster import RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from kuration.hashing import canonical_digest
from kuration.landing import diff_recordings, file_token, list_recordings
from kuration_assets.scoring_assets import SOURCE_PARTITIONS, scored_segments, source_partitions
from kuration_resources import CurationResource, LandingZoneResource
from splits_assets import resolved_splits, universe


#: Run tags a sensor-launched run carries: which recording it scores (new or rewritten), or why
#: the universe is re-read. The UI's run list shows them; filter on them with `kuration/...`.
RECORDING_TAG = "kuration/recording"
CHANGE_TAG = "kuration/change"


@sensor(
    asset_selection=[universe, resolved_splits, scored_segments], minimum_interval_seconds=30,
    description="Every 30 s, lists the recordings root (curation.json `recordings`): a new or rewritten recording "
                "becomes a scored_segments partition run tagged with its name, and a changed universe (universe.csv, "
                "or the recordings themselves without one) re-materializes universe and resolved_splits, which "
                "extends the split without moving a source.",
)
def new_recordings_sensor(context: SensorEvaluationContext, landing_zone: LandingZoneResource,
                          curation: CurationResource):
    previous = json.loads(context.cursor) if context.cursor else {}
    config = curation.config(landing_zone)
    current = list_recordings(config.recordings_url(landing_zone.url), pattern=config.source_pattern)
    diff = diff_recordings(previous.get("recordings", {}), current)
    csv_url = landing_zone.universe_csv_url()
    csv_token = file_token(csv_url) if csv_url else None
    requests = []
    if csv_url is not None:
        universe_changed = bool(csv_token) and csv_token != previous.get("universe_csv")
        universe_token = csv_token
    else:  # the universe is the recordings themselves
        universe_changed = bool(diff.new or diff.removed)
        universe_token = canonical_digest(sorted(current))
    if universe_changed:
        why = ("universe.csv changed" if csv_url is not None
               else f"{len(diff.new)} recording(s) added, {len(diff.removed)} removed")
        requests.append(RunRequest(run_key=f"universe:{universe_token}",
                                   asset_selection=[universe.key, resolved_splits.key], tags={CHANGE_TAG: why}))
    known = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS))
    to_add = [s for s in diff.to_score if s not in known]
    for source_id in diff.to_score:
        requests.append(RunRequest(
            run_key=f"{source_id}:{current[source_id]}", partition_key=source_id, asset_selection=[scored_segments.key],
            tags={RECORDING_TAG: source_id, CHANGE_TAG: "new recording" if source_id in diff.new else "rewritten"},
        ))
    cursor = json.dumps({"recordings": current, "universe_csv": csv_token}, sort_keys=True)
    if not requests:
        return SensorResult(skip_reason=SkipReason(f"no new or changed recordings among {len(current)}"), cursor=cursor)
    return SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[source_partitions.build_add_request(to_add)] if to_add else [],
        cursor=cursor,
    )
