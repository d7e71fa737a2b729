"""``new_recordings_sensor``: new or rewritten recordings in the landing zone become
scoring runs; a changed ``universe.csv`` re-materializes the universe."""

import json

from dagster import RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from kuration.landing import diff_recordings, file_token, list_recordings
from kuration_assets.scoring_assets import SOURCE_PARTITIONS, scored_segments, source_partitions
from kuration_resources import CurationResource, LandingZoneResource
from splits_assets import universe


@sensor(asset_selection=[universe, scored_segments], minimum_interval_seconds=30)
def new_recordings_sensor(context: SensorEvaluationContext, landing_zone: LandingZoneResource,
                          curation: CurationResource):
    previous = json.loads(context.cursor) if context.cursor else {}
    config = curation.config(landing_zone)
    current = list_recordings(config.recordings_url(landing_zone.url), pattern=config.source_pattern)
    diff = diff_recordings(previous.get("recordings", {}), current)
    csv_url = landing_zone.universe_csv_url()
    csv_token = file_token(csv_url) if csv_url else None
    requests = []
    if csv_token and csv_token != previous.get("universe_csv"):
        requests.append(RunRequest(run_key=f"universe:{csv_token}", asset_selection=[universe.key]))
    known = set(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS))
    to_add = [s for s in diff.to_score if s not in known]
    for source_id in diff.to_score:
        requests.append(RunRequest(
            run_key=f"{source_id}:{current[source_id]}", partition_key=source_id, asset_selection=[scored_segments.key],
        ))
    cursor = json.dumps({"recordings": current, "universe_csv": csv_token}, sort_keys=True)
    if not requests:
        return SensorResult(skip_reason=SkipReason(f"no new or changed recordings among {len(current)}"), cursor=cursor)
    return SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[source_partitions.build_add_request(to_add)] if to_add else [],
        cursor=cursor,
    )
