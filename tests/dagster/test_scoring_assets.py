"""``scored_segments`` (dynamic partitions, single-run backfills), its pool check, and
``new_recordings_sensor``, on an instance for tests."""

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, AssetSelection, DagsterInstance, Definitions, materialize

from kuration.demo_corpus import write_demo_landing_zone
from kuration.scoring.segment_store import read_source_segments
from kuration_assets import new_recordings_sensor, scored_segments, segment_pool, source_partitions
from kuration_resources import CurationResource, LandingZoneResource, StorageRootResource
from tests.dagster.sensors import run_sensor


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=1, sites=3, minutes=(1, 2))
    return Path(zone.root)


@pytest.fixture
def resources(tmp_path: Path, landing: Path) -> dict:
    return {
        "storage_root": StorageRootResource(url=str(tmp_path / "storage")),
        "landing_zone": LandingZoneResource(url=str(landing)),
        "curation": CurationResource(),
    }


def _sources(landing: Path) -> list[str]:
    root = landing / "recordings"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet"))


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
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    result = _materialize(resources, instance, sources[0])
    assert result.success
    (meta,) = _partition_meta(result).values()
    assert meta["status"] == "scored" and meta["segments"] > 0 and 0 < meta["hours"]
    assert meta["non_finite"] == 0 and meta["priority_min"] <= meta["priority_median"] <= meta["priority_max"]
    # the recording's own bytes and its frame file's, folded into one strong fingerprint
    assert meta["identity_strong"] is True and meta["identity"].startswith("fingerprint:")
    table = read_source_segments(tmp_path / "storage", sources[0])
    assert table.num_rows == meta["segments"] and set(table.column("source_id").to_pylist()) == {sources[0]}
    assert _check(result) == (True, "ERROR")
    assert instance.get_materialized_partitions(AssetKey("scored_segments")) == {sources[0]}


def test_a_rerun_reuses_the_cache(resources, instance, landing):
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    assert _partition_meta(_materialize(resources, instance, sources[1]))[sources[1]]["status"] == "scored"
    again = _partition_meta(_materialize(resources, instance, sources[1]))[sources[1]]
    assert again["status"] == "cached"


def test_a_range_runs_once_and_records_every_partition(resources, instance, landing):
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    job = Definitions(assets=[scored_segments], asset_checks=[segment_pool],
                      resources=resources).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, tags={
        "dagster/asset_partition_range_start": sources[0], "dagster/asset_partition_range_end": sources[-1]})
    assert result.success
    meta = _partition_meta(result)
    assert sorted(meta) == sources  # one materialization per partition, one run
    # each partition carries its own source's figures, not the last one's
    for source in sources:
        assert f"/scored_segments/{source}" in meta[source]["path"] and meta[source]["status"] == "scored"
    assert len({meta[s]["identity"] for s in sources}) == len(sources)
    # the pool check is a step of its own, after the one scoring step
    assert {e.step_key for e in result.all_events if e.step_key} == {"scored_segments", "scored_segments_segment_pool"}
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.metadata["this_run"].value == f"{len(sources)} scored"
    assert instance.get_materialized_partitions(AssetKey("scored_segments")) == set(sources)
    assert scored_segments.backfill_policy.max_partitions_per_run is None  # single run


def _pool_alone(resources, instance):
    return materialize([scored_segments, segment_pool], resources=resources, instance=instance, raise_on_error=False,
                       selection=AssetSelection.checks(segment_pool))


def test_the_pool_check_alone_summarizes_every_partition_scored_so_far(resources, instance, landing, tmp_path):
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    meta = {}
    for source in sources:  # one sensor-style run per partition
        meta.update(_partition_meta(_materialize(resources, instance, source)))
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
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    pq.write_table(pa.table({"tick": [0, 1]}), landing / "recordings" / sources[0])  # broken before scoring
    result = materialize([scored_segments, segment_pool], resources=resources, instance=instance, tags={
        "dagster/asset_partition_range_start": sources[0], "dagster/asset_partition_range_end": sources[-1]})
    assert result.success  # the pool is not empty: the skipped source is named, not fatal
    meta = _partition_meta(result)
    assert meta[sources[0]]["status"] == "skipped" and "missing column" in meta[sources[0]]["skipped_error"]
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and f"; 1 source skipped: {sources[0]} (" in evaluation.description
    assert evaluation.metadata["this_run"].value == f"{len(sources) - 1} scored, 1 skipped"
    skipped = evaluation.metadata["skipped"].value.splitlines()
    assert skipped[0] == "| source | skipped_error |" and skipped[2].startswith(f"| {sources[0]} | ")
    assert "missing column" in skipped[2] and len(skipped) == 3


def test_a_broken_source_is_recorded_and_its_stale_segments_replaced(resources, instance, landing, tmp_path):
    sources = _sources(landing)
    instance.add_dynamic_partitions(source_partitions.name, sources)
    assert _materialize(resources, instance, sources[0]).success
    pq.write_table(pa.table({"tick": [0, 1]}), landing / "recordings" / sources[0])  # rewritten, now broken
    result = _materialize(resources, instance, sources[0])
    assert not result.success  # the blocking pool check fails its step: nothing downstream runs
    meta = _partition_meta(result)[sources[0]]
    assert meta["status"] == "skipped" and "missing column" in meta["skipped_error"] and meta["segments"] == 0
    assert read_source_segments(tmp_path / "storage", sources[0]).num_rows == 0
    assert _check(result) == (False, "ERROR")  # the only stored source is now empty: empty pool
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.description.startswith(f"no segments in any of 1 scored source; skipped: {sources[0]} (")


def test_the_sensor_says_what_it_does():
    assert "a new or rewritten recording becomes a scored_segments partition run" in new_recordings_sensor.description


def test_sensor_adds_partitions_requests_runs_and_keeps_a_cursor(resources, landing):
    instance = DagsterInstance.ephemeral()
    sources = _sources(landing)
    first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
    requested = sorted(r.partition_key for r in first.run_requests if r.partition_key)
    assert requested == sources
    (add,) = first.dynamic_partitions_requests
    assert sorted(add.partition_keys) == sources
    # a new universe re-resolves the split too (which extends itself: no source moves)
    assert [r.asset_selection for r in first.run_requests if not r.partition_key] == [
        [AssetKey("universe"), AssetKey("resolved_splits")]]
    assert [r.tags["kuration/change"] for r in first.run_requests if not r.partition_key] == ["universe.csv changed"]
    instance.add_dynamic_partitions(source_partitions.name, sources)

    unchanged = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert unchanged.run_requests == [] and unchanged.skip_reason is not None

    changed = landing / "recordings" / sources[1]
    changed.write_bytes(changed.read_bytes() + b"")  # same bytes...
    stat = changed.stat()
    os.utime(changed, (stat.st_atime + 30, stat.st_mtime + 30))  # ...but rewritten later
    new = landing / "recordings" / "new_site" / "flight_999.parquet"
    new.parent.mkdir()
    new.write_bytes((landing / "recordings" / sources[0]).read_bytes())
    third = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=unchanged.cursor)
    assert sorted(r.partition_key for r in third.run_requests) == sorted([sources[1], "new_site/flight_999.parquet"])
    # each run names its recording and why it runs, for the UI's run list
    assert {r.partition_key: (r.tags["kuration/recording"], r.tags["kuration/change"]) for r in third.run_requests} == {
        sources[1]: (sources[1], "rewritten"), "new_site/flight_999.parquet": ("new_site/flight_999.parquet",
                                                                             "new recording")}
    (add,) = third.dynamic_partitions_requests
    assert list(add.partition_keys) == ["new_site/flight_999.parquet"]  # the changed one already exists
    assert json.loads(third.cursor)["recordings"]["new_site/flight_999.parquet"]


def test_without_a_universe_csv_a_new_or_removed_recording_re_resolves_the_universe(tmp_path, landing):
    instance = DagsterInstance.ephemeral()
    resources = {
        "storage_root": StorageRootResource(url=str(tmp_path / "storage")),
        "landing_zone": LandingZoneResource(url=str(landing), universe_csv=None),
        "curation": CurationResource(),
    }
    sources = _sources(landing)
    first = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
    universe_runs = [r for r in first.run_requests if not r.partition_key]
    assert [r.asset_selection for r in universe_runs] == [[AssetKey("universe"), AssetKey("resolved_splits")]]
    instance.add_dynamic_partitions(source_partitions.name, sources)

    # a rewrite changes a recording, not the universe: only its partition is scored again
    changed = landing / "recordings" / sources[0]
    os.utime(changed, (changed.stat().st_atime + 30, changed.stat().st_mtime + 30))
    rewrite = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=first.cursor)
    assert [r.partition_key for r in rewrite.run_requests] == [sources[0]]

    (landing / "recordings" / sources[1]).unlink()
    removed = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=rewrite.cursor)
    (run,) = removed.run_requests
    assert run.asset_selection == [AssetKey("universe"), AssetKey("resolved_splits")]
    assert run.tags["kuration/change"] == "0 recording(s) added, 1 removed"
    assert run.run_key != universe_runs[0].run_key  # another universe, another run
