"""``scored_segments`` (dynamic partitions, single-run backfills), its pool check, and
``new_recordings_sensor``, on an instance for tests."""

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, AssetSelection, DagsterInstance, Definitions, materialize

from kuration.demo.corpus import write_demo_landing_zone
from kuration.landing.recordings import list_recordings, recording_name
from kuration.scoring.segment_store import read_source_segments
from kuration_assets import new_recordings_sensor, scored_segments, segment_pool, source_partitions
from kuration_dagster_checks.provenance import PROVENANCE, recorded_provenance
from tests.dagster.runs import failure_text, landing_resources
from tests.dagster.sensors import run_sensor, scoring_requests


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=1, sites=3, minutes=(1, 2))
    return Path(zone.root)


@pytest.fixture
def resources(tmp_path: Path, landing: Path) -> dict:
    return landing_resources(landing, tmp_path / "storage")


def _sources(landing: Path) -> list[str]:
    root = landing / "recordings"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet"))


def _names(landing: Path) -> list[str]:
    """The scoring partition keys: each source id without its extension."""
    return [recording_name(s) for s in _sources(landing)]


def _partition_meta(result) -> dict[str, dict]:
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        out[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _check(result) -> tuple[bool, str]:
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation.passed, evaluation.severity.value


def _materialize(resources, instance, partition_key):
    return materialize([scored_segments, segment_pool], resources=resources, instance=instance,
                       partition_key=partition_key, raise_on_error=False)


def test_one_partition_scores_one_source_and_reports_it(resources, instance, landing, tmp_path):
    sources, names = _sources(landing), _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    result = _materialize(resources, instance, names[0])
    assert result.success
    (meta,) = _partition_meta(result).values()
    assert meta["status"] == "scored" and meta["segments"] > 0 and 0 < meta["hours"]
    assert meta["non_finite"] == 0 and meta["priority_min"] <= meta["priority_median"] <= meta["priority_max"]
    # cache keys only in the provenance entry, last: not figures a person reads
    assert list(meta)[-1] == PROVENANCE and not {"identity", "identity_strong", "recording_token"} & set(meta)
    provenance = recorded_provenance(meta)
    # the recording's own bytes and its frame file's, folded into one strong fingerprint
    assert provenance["identity_strong"] is True and provenance["identity"].startswith("fingerprint:")
    # the listing's change token, which the sensor compares on a tick without a cursor
    assert provenance["recording_token"] == list_recordings(landing / "recordings")[sources[0]]
    # stored under the recording's name, once suffixed
    assert meta["path"] == str(tmp_path / "storage" / "scored_segments" / f"{names[0]}.parquet")
    table = read_source_segments(tmp_path / "storage", sources[0])
    assert table.num_rows == meta["segments"] and set(table.column("source_id").to_pylist()) == {sources[0]}
    assert _check(result) == (True, "ERROR")
    assert instance.get_materialized_partitions(AssetKey("scored_segments")) == {names[0]}


def test_a_rerun_reuses_the_cache(resources, instance, landing):
    names = _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    assert _partition_meta(_materialize(resources, instance, names[1]))[names[1]]["status"] == "scored"
    again = _partition_meta(_materialize(resources, instance, names[1]))[names[1]]
    assert again["status"] == "cached"


def test_a_range_runs_once_and_records_every_partition(resources, instance, landing):
    names = _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    job = Definitions(assets=[scored_segments], asset_checks=[segment_pool],
                      resources=resources).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, tags={
        "dagster/asset_partition_range_start": names[0], "dagster/asset_partition_range_end": names[-1]})
    assert result.success
    meta = _partition_meta(result)
    assert sorted(meta) == names  # one materialization per partition, one run
    # each partition carries its own recording's figures, not the last one's
    for name in names:
        assert meta[name]["path"].endswith(f"/scored_segments/{name}.parquet") and meta[name]["status"] == "scored"
    assert len({recorded_provenance(meta[n])["identity"] for n in names}) == len(names)
    # the pool check is a step of its own, after the one scoring step
    assert {e.step_key for e in result.all_events if e.step_key} == {"scored_segments", "scored_segments_segment_pool"}
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.metadata["this_run"].value == f"{len(names)} scored"
    assert instance.get_materialized_partitions(AssetKey("scored_segments")) == set(names)
    assert scored_segments.backfill_policy.max_partitions_per_run is None  # single run


def test_a_partition_naming_no_recording_fails_the_run_naming_it(resources, instance, landing):
    instance.add_dynamic_partitions(source_partitions.name, ["gone/flight_001"])
    result = _materialize(resources, instance, "gone/flight_001")
    assert not result.success
    assert "1 scoring partition(s) name no recording under" in failure_text(result)
    assert "'gone/flight_001'. Restore the recording, or delete the partition" in failure_text(result)


def _pool_alone(resources, instance):
    return materialize([scored_segments, segment_pool], resources=resources, instance=instance, raise_on_error=False,
                       selection=AssetSelection.checks(segment_pool))


def test_the_pool_check_alone_summarizes_every_partition_scored_so_far(resources, instance, landing, tmp_path):
    sources, names = _sources(landing), _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    meta = {}
    for name in names:  # one sensor-style run per partition
        meta.update(_partition_meta(_materialize(resources, instance, name)))
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "storage").rglob("*") if p.is_file()}
    result = _pool_alone(resources, instance)
    assert result.success and result.get_asset_materialization_events() == []
    assert {e.step_key for e in result.all_events if e.step_key} == {"scored_segments_segment_pool"}
    (evaluation,) = result.get_asset_check_evaluations()
    segments, hours = sum(m["segments"] for m in meta.values()), sum(m["hours"] for m in meta.values())
    assert evaluation.passed and evaluation.description.startswith(f"{segments:,} segments (") and (
        f"from {len(sources)} sources; " in evaluation.description)
    figures = evaluation.metadata["figures"].value
    assert f"| sources | {len(sources)} |" in figures and f"| segments | {segments:,} |" in figures
    table = evaluation.metadata["by_folder"].value.splitlines()
    assert table[0] == "| folder | sources | skipped | segments | hours | non_finite | filtered_out | absent |"
    folders = sorted({s.split("/")[0] for s in sources})
    assert [row.split(" | ")[0].lstrip("| ") for row in table[2:]] == folders  # one row per site
    assert sum(int(row.split(" | ")[3].replace(",", "")) for row in table[2:]) == segments
    assert hours > 0 and "this_run" not in evaluation.metadata and "skipped" not in evaluation.metadata
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "storage").rglob("*") if p.is_file()} == files


def test_the_pool_check_alone_with_nothing_scored_fails_saying_so(resources, instance):
    result = _pool_alone(resources, instance)
    assert not result.success and result.get_asset_materialization_events() == []
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.description.startswith("no segments in any of 0 scored sources. ")


def test_a_skipped_source_beside_scored_ones_is_listed_by_the_pool_check(resources, instance, landing):
    sources, names = _sources(landing), _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    pq.write_table(pa.table({"tick": [0, 1]}), landing / "recordings" / sources[0])  # broken before scoring
    result = materialize([scored_segments, segment_pool], resources=resources, instance=instance, tags={
        "dagster/asset_partition_range_start": names[0], "dagster/asset_partition_range_end": names[-1]})
    assert result.success  # the pool is not empty: the skipped source is named, not fatal
    meta = _partition_meta(result)
    assert meta[names[0]]["status"] == "skipped" and "missing column" in meta[names[0]]["skipped_error"]
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and f"; 1 source skipped: {names[0]} (" in evaluation.description
    assert evaluation.metadata["this_run"].value == f"{len(names) - 1} scored, 1 skipped"
    skipped = evaluation.metadata["skipped"].value.splitlines()
    assert skipped[0] == "| source | skipped_error |" and skipped[2].startswith(f"| {names[0]} | ")
    assert "missing column" in skipped[2] and len(skipped) == 3


def test_a_broken_source_is_recorded_and_its_stale_segments_replaced(resources, instance, landing, tmp_path):
    sources, names = _sources(landing), _names(landing)
    instance.add_dynamic_partitions(source_partitions.name, names)
    assert _materialize(resources, instance, names[0]).success
    pq.write_table(pa.table({"tick": [0, 1]}), landing / "recordings" / sources[0])  # rewritten, now broken
    result = _materialize(resources, instance, names[0])
    assert not result.success  # the blocking pool check fails its step: nothing downstream runs
    meta = _partition_meta(result)[names[0]]
    assert meta["status"] == "skipped" and "missing column" in meta["skipped_error"] and meta["segments"] == 0
    assert read_source_segments(tmp_path / "storage", sources[0]).num_rows == 0
    assert _check(result) == (False, "ERROR")  # the only stored source is now empty: empty pool
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.description.startswith(f"no segments in any of 1 scored source; skipped: {names[0]} (")


def test_the_sensor_says_what_it_does():
    description = new_recordings_sensor.description
    assert "new recordings become one scored_segments run over their partitions (keyed by recording name)" in (
        description)
    assert "first tick skips every recording and universe whose latest materialization recorded the token" in (
        description)


def test_sensor_adds_partitions_requests_runs_and_keeps_a_cursor(resources, landing):
    instance = DagsterInstance.ephemeral()
    sources, names = _sources(landing), _names(landing)
    first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
    # an empty instance: every recording is new, one run over their partitions, added in order
    assert scoring_requests(first) == [([names[0], names[-1]], "new recording")]
    (add,) = first.dynamic_partitions_requests
    assert list(add.partition_keys) == names
    # a new universe re-resolves the split too (which extends itself: no source moves)
    assert [r.asset_selection for r in first.run_requests if not r.tags.get("kuration/recordings")] == [
        [AssetKey("universe"), AssetKey("resolved_splits")]]
    assert [r.tags["kuration/change"] for r in first.run_requests if not r.tags.get("kuration/recordings")] == [
        "universe.csv changed"]
    instance.add_dynamic_partitions(source_partitions.name, names)

    unchanged = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert unchanged.run_requests == []
    assert unchanged.skip_reason.skip_message == "all 3 recording(s) and the universe unchanged since the last tick"

    changed = landing / "recordings" / sources[1]
    changed.write_bytes(changed.read_bytes() + b"")  # same bytes...
    stat = changed.stat()
    os.utime(changed, (stat.st_atime + 30, stat.st_mtime + 30))  # ...but rewritten later
    new = landing / "recordings" / "new_site" / "flight_999.parquet"
    new.parent.mkdir()
    new.write_bytes((landing / "recordings" / sources[0]).read_bytes())
    third = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=unchanged.cursor)
    # each run names its recording and why it runs, for the UI's run list
    assert {r.partition_key: (r.tags["kuration/recording"], r.tags["kuration/change"]) for r in third.run_requests} == {
        names[1]: (names[1], "rewritten"), "new_site/flight_999": ("new_site/flight_999", "new recording")}
    (add,) = third.dynamic_partitions_requests
    assert list(add.partition_keys) == ["new_site/flight_999"]  # the changed one already exists
    assert json.loads(third.cursor)["recordings"]["new_site/flight_999.parquet"]


def test_rewritten_recordings_apart_are_a_run_each_and_adjacent_ones_one_run(resources, landing):
    instance = DagsterInstance.ephemeral()
    sources, names = _sources(landing), _names(landing)
    first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
    instance.add_dynamic_partitions(source_partitions.name, names)
    for source in (sources[0], sources[2]):
        path = landing / "recordings" / source
        os.utime(path, (path.stat().st_atime + 30, path.stat().st_mtime + 30))
    # a range over both would cover the unchanged partition between them
    apart = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert scoring_requests(apart) == [(names[0], "rewritten"), (names[2], "rewritten")]
    path = landing / "recordings" / sources[1]
    os.utime(path, (path.stat().st_atime + 30, path.stat().st_mtime + 30))
    adjacent = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert scoring_requests(adjacent) == [([names[0], names[2]], "rewritten")]
    assert adjacent.run_requests[0].tags["kuration/recordings"] == f"3: {', '.join(names)}"


def test_without_a_universe_csv_a_new_or_removed_recording_re_resolves_the_universe(tmp_path, landing):
    instance = DagsterInstance.ephemeral()
    resources = landing_resources(landing, tmp_path / "storage", universe_csv=None)
    sources, names = _sources(landing), _names(landing)
    first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
    universe_runs = [r for r in first.run_requests if r.asset_selection != [AssetKey("scored_segments")]]
    assert [r.asset_selection for r in universe_runs] == [[AssetKey("universe"), AssetKey("resolved_splits")]]
    instance.add_dynamic_partitions(source_partitions.name, names)

    # a rewrite changes a recording, not the universe: only its partition is scored again
    changed = landing / "recordings" / sources[0]
    os.utime(changed, (changed.stat().st_atime + 30, changed.stat().st_mtime + 30))
    rewrite = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert [r.partition_key for r in rewrite.run_requests] == [names[0]]

    (landing / "recordings" / sources[1]).unlink()
    removed = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=rewrite.cursor)
    (run,) = removed.run_requests
    assert run.asset_selection == [AssetKey("universe"), AssetKey("resolved_splits")]
    assert run.tags["kuration/change"] == "0 recording(s) added, 1 removed"
    assert run.run_key != universe_runs[0].run_key  # another universe, another run
