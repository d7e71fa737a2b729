"""``new_recordings_sensor`` on an instance that already holds the graph: a tick without a
cursor starts from the latest materializations (the recording token each partition recorded,
the universe's token), so it asks for nothing until something changes; new recordings
become one run over their partitions, tagged with their names."""

import json
import os
import time
from pathlib import Path

import pytest
from dagster import AssetKey, AssetMaterialization, Definitions, instance_for_test

from kuration.demo.corpus import write_demo_landing_zone
from kuration.landing.recordings import RecordingNameError, list_recordings, recording_name
from kuration_assets import new_recordings_sensor, scored_segments, source_partitions
from kuration_assets.scoring_assets import RECORDING_TOKEN
from kuration_dagster_checks.provenance import provenance_entry
from kuration_resources import LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits, universe
from splits_assets.metadata import UNIVERSE_TOKEN
from tests.dagster.runs import landing_resources
from tests.dagster.sensors import execute_requests, run_sensor, scoring_requests

SPLIT = {"split": {"strategy": "random", "seed": 2, "val_ratio": 0.34, "test_ratio": 0.34}}
SKIPPED = "all {n} recording(s) and the universe unchanged since their latest materializations"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=1, sites=3, minutes=(1, 2))
    (Path(zone.root) / "curation.json").write_text(json.dumps(SPLIT))
    return Path(zone.root)


@pytest.fixture
def resources(tmp_path: Path, landing: Path) -> dict:
    return landing_resources(landing, tmp_path / "storage")


@pytest.fixture
def materialized(resources):
    """An instance holding the universe, the split and every recording scored, by running
    what a first tick on an empty instance asks for (one run over every partition)."""
    defs = Definitions(assets=[universe, resolved_splits, scored_segments], resources=resources)
    with instance_for_test() as instance:
        first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
        names = sorted(recording_name(s) for s in list_recordings(Path(resources["landing_zone"].url) / "recordings"))
        assert scoring_requests(first) == [([names[0], names[-1]], "new recording")]
        assert all(result.success for result in execute_requests(defs, instance, first))
        yield defs, instance


def _copy_recording(landing: Path, source_id: str, to: str) -> str:
    recordings = landing / "recordings"
    (recordings / to).parent.mkdir(parents=True, exist_ok=True)
    (recordings / to).write_bytes((recordings / source_id).read_bytes())
    frames = recordings / source_id.replace(".parquet", ".frames.npy")
    (recordings / to.replace(".parquet", ".frames.npy")).write_bytes(frames.read_bytes())
    return to


def _tick(instance, resources, cursor=None):
    return run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=cursor)


def test_after_the_graph_ran_a_tick_without_a_cursor_asks_for_nothing(materialized, resources, landing):
    _, instance = materialized
    first = _tick(instance, resources)
    assert first.run_requests == [] and first.dynamic_partitions_requests == []
    assert first.skip_reason.skip_message == SKIPPED.format(n=3)
    # and the cursor it leaves is the listing's: the next tick agrees
    assert json.loads(first.cursor)["recordings"] == list_recordings(landing / "recordings")
    assert _tick(instance, resources, first.cursor).run_requests == []


def test_one_new_recording_is_one_request_naming_it(materialized, resources, landing):
    defs, instance = materialized
    sources = sorted(list_recordings(landing / "recordings"))
    before = _tick(instance, resources).cursor
    new = _copy_recording(landing, sources[0], "new_site/flight_009.parquet")
    for cursor in (None, before):  # from the instance, or from the last tick's cursor
        tick = _tick(instance, resources, cursor)
        (request,) = tick.run_requests  # universe.csv did not change: no universe run
        assert request.partition_key == "new_site/flight_009" == recording_name(new)
        assert request.tags["kuration/recording"] == "new_site/flight_009"
        assert request.tags["kuration/change"] == "new recording"
        assert [list(r.partition_keys) for r in tick.dynamic_partitions_requests] == [["new_site/flight_009"]]
    (result,) = execute_requests(defs, instance, tick)
    assert result.success
    assert _tick(instance, resources).run_requests == []

    # a universe.csv row for it changes the universe: it is read again, and the split extended
    csv = landing / "universe.csv"
    csv.write_text(csv.read_text() + f"{new},0-1,new_site\n")
    (request,) = _tick(instance, resources).run_requests
    assert request.asset_selection == [AssetKey("universe"), AssetKey("resolved_splits")]
    assert request.tags["kuration/change"] == "universe.csv changed"


def test_two_new_recordings_are_one_run_over_both(materialized, resources, landing):
    defs, instance = materialized
    sources = sorted(list_recordings(landing / "recordings"))
    _copy_recording(landing, sources[0], "new_site/flight_008.parquet")
    _copy_recording(landing, sources[1], "new_site/flight_009.parquet")
    tick = _tick(instance, resources)
    (request,) = tick.run_requests
    assert scoring_requests(tick) == [(["new_site/flight_008", "new_site/flight_009"], "new recording")]
    assert request.tags["kuration/recordings"] == "2: new_site/flight_008, new_site/flight_009"
    assert request.partition_key is None and request.asset_selection == [AssetKey("scored_segments")]
    # evaluated again before the run lands, the same run key: Dagster launches it once
    assert [r.run_key for r in _tick(instance, resources).run_requests] == [request.run_key]
    (result,) = execute_requests(defs, instance, tick)
    assert result.success  # one run, both partitions
    assert {m.partition for m in (e.step_materialization_data.materialization
                                  for e in result.get_asset_materialization_events())} == {
        "new_site/flight_008", "new_site/flight_009"}
    assert _tick(instance, resources).skip_reason.skip_message == SKIPPED.format(n=5)


def test_a_rewritten_recording_is_one_request(materialized, resources, landing):
    _, instance = materialized
    sources = sorted(list_recordings(landing / "recordings"))
    path = landing / "recordings" / sources[1]
    os.utime(path, (time.time() + 60, time.time() + 60))
    tick = _tick(instance, resources)
    (request,) = tick.run_requests
    assert (request.partition_key, request.tags["kuration/change"]) == (recording_name(sources[1]), "rewritten")
    assert tick.dynamic_partitions_requests == []
    # with the cursor of a tick before the rewrite, the same request and run key
    assert [r.run_key for r in _tick(instance, resources, json.dumps(
        {"recordings": {**list_recordings(landing / "recordings"), sources[1]: "old"},
         "universe": json.loads(tick.cursor)["universe"]})).run_requests] == [request.run_key]


def test_two_recordings_of_one_name_fail_the_tick_naming_both(materialized, tmp_path, landing):
    _, instance = materialized
    resources = {"storage_root": StorageRootResource(url=str(tmp_path / "storage")),
                 "landing_zone": LandingZoneResource(url=str(landing), source_pattern="flight_*")}
    source = sorted(list_recordings(landing / "recordings"))[0]
    (landing / "recordings" / source.replace(".parquet", ".npz")).write_bytes(b"")
    with pytest.raises(RecordingNameError, match=(
            f"'{source.replace('.parquet', '.npz')}' and '{source}' are both '{recording_name(source)}'")):
        _tick(instance, resources)


def test_partitions_keyed_by_path_are_renamed_and_scored_once(resources, landing):
    """An instance of an earlier release: partitions keyed ``site/flight.parquet``, their
    materializations without a recording token. The first tick replaces the keys with the
    recording names and scores them in one run; the next asks for nothing."""
    defs = Definitions(assets=[universe, resolved_splits, scored_segments], resources=resources)
    sources = sorted(list_recordings(landing / "recordings"))
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(source_partitions.name, sources)
        for source in sources:
            instance.report_runless_asset_event(AssetMaterialization("scored_segments", partition=source))
        tick = _tick(instance, resources)
        names = [recording_name(s) for s in sources]
        assert [(type(r).__name__, list(r.partition_keys)) for r in tick.dynamic_partitions_requests] == [
            ("DeleteDynamicPartitionsRequest", sources), ("AddDynamicPartitionsRequest", names)]
        assert scoring_requests(tick) == [([names[0], names[-1]], "new recording")]
        assert all(r.success for r in execute_requests(defs, instance, tick))
        assert instance.get_dynamic_partitions(source_partitions.name) == names
        assert _tick(instance, resources).run_requests == []


def test_forty_materialized_partitions_are_read_in_a_few_queries(resources, landing):
    """The seeding reads every partition's latest materialization at once (the latest storage
    id per partition, then those records), not one query per partition."""
    recordings = landing / "recordings"
    source = sorted(list_recordings(recordings))[0]
    for i in range(37):
        _copy_recording(landing, source, f"bulk/flight_{i:03d}.parquet")
    listed = list_recordings(recordings)
    assert len(listed) == 40
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(source_partitions.name, [recording_name(s) for s in listed])
        for source_id, token in listed.items():
            instance.report_runless_asset_event(AssetMaterialization(
                "scored_segments", partition=recording_name(source_id),
                metadata=provenance_entry({RECORDING_TOKEN: token})))
        instance.report_runless_asset_event(AssetMaterialization("universe", metadata=provenance_entry({
            UNIVERSE_TOKEN: resources["landing_zone"].open().universe_token()})))
        calls: dict[str, int] = {}
        for name in ("get_latest_storage_id_by_partition", "fetch_materializations",
                     "get_latest_materialization_event", "get_latest_materialization_events"):
            original = getattr(instance, name)

            def counted(*args, _name=name, _original=original, **kwargs):
                calls[_name] = calls.get(_name, 0) + 1
                return _original(*args, **kwargs)
            setattr(instance, name, counted)
        tick = _tick(instance, resources)
    assert tick.run_requests == [] and tick.skip_reason.skip_message == SKIPPED.format(n=40)
    assert calls == {"get_latest_storage_id_by_partition": 1, "fetch_materializations": 1,
                     "get_latest_materialization_event": 1}

