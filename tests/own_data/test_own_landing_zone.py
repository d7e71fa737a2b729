"""End to end on a landing zone unlike the demo (``tests/own_data/landing_factory.py``): the
sessions/ layout, frames beside it in .npz archives, entities that leave the view and come
back, a plugin feature and a plugin media provider, settings in curation.json.

Through the commands a new user runs: ``kuration check-landing`` and ``kuration run``, then
the new-recordings sensor as the daemon would run it when a session arrives. Mismatched ids
fail loudly at each point they can slip through: the universe ids (``universe_sources``),
scored sources the split does not know (the ``budget`` check)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from kuration.landing.recordings import recording_name
from kuration.landing.plugins import PLUGINS_ENV, forget_loaded_plugins
from kuration.output.versions import DatasetRoot
from kuration.read import load_committed, read_shard, verify_dataset
from kuration_cli import main
from tests.dagster.sensors import execute_requests, run_sensor, scoring_requests
from tests.output.corpus import version_dir
from tests.own_data.landing_factory import (
    FRAMES,
    RECORDINGS,
    SAMPLE_HZ,
    SESSIONS,
    FleetLandingZone,
    add_session,
    forget_fleet_plugin,
    write_fleet_landing_zone,
)

SPLITS = ("train", "val", "test")


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FleetLandingZone]:
    """The generated landing zone, its plugin folder on ``sys.path`` and ``PYTHONPATH`` (the
    scoring workers import the plugin too), no instance or plugins from the environment;
    afterwards the plugin's module and registrations are gone again."""
    zone = write_fleet_landing_zone(tmp_path / "landing", plugins=tmp_path / "plugins",
                                    prefix=f"fleet_{uuid.uuid4().hex[:8]}")
    monkeypatch.syspath_prepend(str(zone.plugin_folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(zone.plugin_folder),
                                                                   os.environ.get("PYTHONPATH")])))
    for name in (PLUGINS_ENV, "DAGSTER_HOME", "KURATION_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    forget_loaded_plugins()
    yield zone
    forget_fleet_plugin(zone)


REPO = Path(__file__).resolve().parents[2]


def kuration(*argv: str, fresh_process: bool = False) -> tuple[int, str]:
    """``kuration <argv>``: its exit status and what it printed (stdout, then stderr, where
    Dagster's own log of a failing step goes); in this process, or with ``fresh_process`` in
    a new interpreter that finds the plugin through ``PYTHONPATH`` alone, as a user's shell
    would run it."""
    if fresh_process:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KURATION_") and k != "DAGSTER_HOME"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        done = subprocess.run([sys.executable, "-m", "kuration_cli", *argv], capture_output=True, text=True, env=env,
                              timeout=300)
        return done.returncode, f"{done.stdout}\n--- stderr ---\n{done.stderr}"
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, f"{out.getvalue()}\n--- stderr ---\n{err.getvalue()}"


def stdout_lines(out: str) -> list[str]:
    """The lines a command printed to stdout (what :func:`kuration` returned before stderr)."""
    return out.partition("\n--- stderr ---\n")[0].splitlines()


def run(zone: FleetLandingZone, storage: Path, *, fresh_process: bool = False) -> tuple[int, str]:
    return kuration("run", "--landing", str(zone.root), "--storage", str(storage), fresh_process=fresh_process)


def manifest(storage: Path) -> dict:
    """The manifest of the dataset's current version."""
    return json.loads((version_dir(storage / "dataset") / "dataset_manifest.json").read_text())


def assignments(storage: Path) -> dict[str, str]:
    """Sample uid -> its train / val / test stage, from the resolved split (``predict`` is
    not exclusive: every sample may be in it too)."""
    table = pq.read_table(storage / "splits" / "split_assignments.parquet", columns=["uid", "stage"]).to_pylist()
    return {row["uid"]: row["stage"] for row in table if row["stage"] in SPLITS}


def shard_key(entry: dict) -> tuple:
    """What a shard holds, whatever its file is called: split, source, entity, span and rows."""
    return (entry["split"], entry["source_id"], entry["entity_id"], entry["span_index"], entry["shard_index"],
            entry["start"], entry["stop"])


# -- the happy path ---------------------------------------------------------------------------

def test_check_landing_finds_nothing_wrong_with_the_fleet(fleet):
    code, out = kuration("check-landing", str(fleet.root))
    lines = stdout_lines(out)
    assert code == 0, out
    assert [line for line in lines if not line.startswith("INFO ")][-1:] == lines[-1:]  # no error, no warning
    assert lines[-1].startswith(f"landing zone {fleet.root}: 0 errors, 0 warnings") and "ready to run" in lines[-1]
    assert any(line.startswith(f"INFO    plugins.loaded: plugin {fleet.plugin_module} imported") for line in lines)
    decoded = [line for line in lines if line.startswith("INFO    media.decoded: ")]
    # frames beside sessions/ resolve under media_root "."; the plugin provider gives metres as float32
    assert decoded and all(line.endswith(("'camera': 4 references decode as uint8[6, 8, 3]",
                                          "'depth': 4 references decode as float32[4, 5]")) for line in decoded)
    assert {line.split("'")[3] for line in decoded} == {"camera", "depth"}


def test_check_landing_says_to_set_media_root_when_frames_sit_beside_the_sessions(fleet):
    settings = json.loads((fleet.root / "curation.json").read_text())
    del settings["media_root"]  # references then resolve against sessions/, where no frames are
    (fleet.root / "curation.json").write_text(json.dumps(settings))
    code, out = kuration("check-landing", str(fleet.root))
    errors = [line for line in stdout_lines(out) if line.startswith("ERROR")]
    assert code == 2 and errors, out
    assert all(line.startswith("ERROR   media.unresolved: ") for line in errors)
    assert all(line.endswith(f"Hint: the references resolve against {fleet.root}: set \"media_root\": '.' in "
                             "curation.json") for line in errors)



@pytest.mark.slow
def test_run_curates_the_fleet_into_a_committed_dataset_with_the_plugins(fleet, tmp_path):
    storage = tmp_path / "storage"
    code, out = run(fleet, storage, fresh_process=True)  # the plugin found through PYTHONPATH alone
    assert code == 0, out
    assert "kuration run: 5 runs succeeded" in out and "FAILED" not in out
    assert f"settings: {fleet.root / 'curation.json'}" in out
    assert f"each names a recording under {fleet.root / RECORDINGS}" in out
    assert f"asset scored_segments: {len(SESSIONS)} partitions (0 from cache)" in out

    verification = verify_dataset(storage / "dataset")
    assert verification.ok, verification.errors
    entries = manifest(storage)["entries"]
    stage = assignments(storage)
    sources_by_split = {split: {e["source_id"] for e in entries if e["split"] == split} for split in SPLITS}
    assert all(sources_by_split.values()), sources_by_split  # every split reached the dataset
    for split, sources in sources_by_split.items():  # ... from sources the split holds
        assert {stage[f"{source}#0"] for source in sources} == {split}
    assert set().union(*sources_by_split.values()) <= set(fleet.source_ids())

    # the plugin feature was computed for every segment and counts the re-entries of track 2
    segments = pq.read_table(storage / "scored_segments" / f"{SESSIONS[0][0]}" / f"{SESSIONS[0][1]}.parquet")
    per_entity: dict[str, float] = {}
    for entity, value in zip(segments.column("entity_id").to_pylist(), segments.column(fleet.feature_key).to_pylist(),
                             strict=True):
        per_entity[entity] = per_entity.get(entity, 0.0) + value
    assert per_entity["int:1"] == 0.0 and per_entity["int:2"] > 0 and per_entity["int:3"] > 0
    absent = [f for f, e in zip(segments.column("present_fraction").to_pylist(),
                                segments.column("entity_id").to_pylist(), strict=True) if e == "int:3" and f == 0.0]
    assert absent, "track 3 is out of view for a whole window"

    # the plugin provider decoded the depth patches (millimetres -> metres), media from frames/ beside sessions/
    _assert_media_decoded(fleet, storage, entries)


def _assert_media_decoded(zone: FleetLandingZone, storage: Path, entries: list[dict]) -> None:
    dataset = load_committed(storage / "dataset")
    entry = next(e for e in entries if e["entity_id"] == "int:1")
    arrays = read_shard(dataset, entry)
    day, vehicle = entry["source_id"].removesuffix(".parquet").split("/")
    table = pq.read_table(zone.root / RECORDINGS / day / f"{vehicle}.parquet").to_pylist()
    rows = {round(r["t"] * SAMPLE_HZ): i for i, r in enumerate(table) if r["track_id"] == 1}
    depth = np.load(zone.root / FRAMES / day / f"{vehicle}_depth.npz")["arr_0"]
    camera = np.load(zone.root / FRAMES / day / f"{vehicle}.npz")["trk_1"]
    ticks = range(entry["start"], entry["stop"])  # track 1 is in view from tick 0 on, so rows are ticks
    assert arrays.present.all()
    np.testing.assert_array_equal(arrays.arrays["depth"],
                                  np.stack([depth[rows[t]] for t in ticks]).astype(np.float32) / np.float32(1000))
    np.testing.assert_array_equal(arrays.arrays["camera"], camera[list(ticks)])


# -- mismatched ids fail loudly ---------------------------------------------------------------

def universe_relative_to_the_landing_zone(zone: FleetLandingZone) -> None:
    """The mistake the issue reports: universe ids written against the landing zone, not sessions/."""
    header, *rows = zone.universe_csv.read_text().splitlines()
    zone.universe_csv.write_text("\n".join([header, *(f"{RECORDINGS}/{row}" for row in rows)]) + "\n")


def test_check_landing_names_universe_ids_relative_to_the_landing_zone(fleet):
    universe_relative_to_the_landing_zone(fleet)
    code, out = kuration("check-landing", str(fleet.root))
    assert code == 2, out
    [error] = [line for line in stdout_lines(out) if line.startswith("ERROR")]
    assert error.startswith(f"ERROR   universe.unmatched_sources: {len(SESSIONS)} of the {len(SESSIONS)} universe")
    assert sorted(fleet.source_ids())[0] in error and str(fleet.root / RECORDINGS) in error
    assert "fix the errors above before running" in stdout_lines(out)[-1]



def test_universe_ids_relative_to_the_landing_zone_stop_the_run_at_universe_sources(fleet, tmp_path):
    universe_relative_to_the_landing_zone(fleet)
    storage = tmp_path / "storage"
    code, out = run(fleet, storage)
    assert code == 1, out
    assert "kuration run: curate_splits failed: blocking check universe:universe_sources failed" in out
    assert re.search(r"check universe:universe_sources +FAILED \(ERROR\)", out)
    first = sorted(fleet.source_ids())[0]
    assert first.startswith(f"{RECORDINGS}/") and first in out  # names the ids ...
    assert str(fleet.root / RECORDINGS) in out  # ... and where they resolve from
    assert "score_recordings: run" not in out and not (storage / "scored_segments").exists()
    assert not (storage / "dataset").exists()


def test_scored_sessions_the_universe_leaves_out_fail_the_budget_check(fleet, tmp_path):
    stray = add_session(fleet, "2024-03-09", "van_21", "unknown", seed=77, in_universe=False)
    storage = tmp_path / "storage"
    code, out = run(fleet, storage)
    assert code == 1, out
    # the universe check only warns: the session is scored, and belongs to no split
    assert re.search(r"check universe:universe_sources +FAILED \(WARN\)\n.*1 recording in no universe row "
                     rf"\('{re.escape(stray)}'\)", out)
    assert f"asset scored_segments: {len(SESSIONS) + 1} partitions" in out
    assert "kuration run: fill_budget failed: blocking check budget_plan:budget failed" in out
    assert re.search(r"check budget_plan:budget +FAILED \(ERROR\)", out)
    assert f"not_in_split: 1 of the 8 scored sources is in no split ('{stray}')" in out
    assert "build_dataset: run" not in out and not (storage / "dataset").exists()


# -- new data through the sensor --------------------------------------------------------------

def materialized(results, asset: str) -> list[dict]:
    """The metadata of every materialization of ``asset`` among ``results``."""
    found = []
    for result in results:
        for event in result.get_asset_materialization_events():
            mat = event.step_materialization_data.materialization
            if mat.asset_key.to_user_string() == asset:
                found.append({k: v.value for k, v in mat.metadata.items()})
    return found


@pytest.mark.slow
def test_new_sessions_reach_a_split_and_the_next_dataset_through_the_sensor(fleet, tmp_path, monkeypatch):
    from dagster import AssetKey, DagsterInstance

    from kuration_definitions import build_definitions

    storage = tmp_path / "storage"
    code, out = run(fleet, storage)
    assert code == 0, out
    stage_before = assignments(storage)
    shards_before = {shard_key(e): e for e in manifest(storage)["entries"]}

    # the code location, as the daemon loads it for this landing zone and storage root
    monkeypatch.setenv("KURATION_LANDING_ZONE", str(fleet.root))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(storage))
    defs = build_definitions()
    sensor = defs.resolve_sensor_def("new_recordings_sensor")
    splits_assets = {AssetKey("universe"), AssetKey("resolved_splits")}
    with DagsterInstance.from_config(str(storage / "dagster_home")) as instance:
        # First tick after `run`: the sensor has no cursor, and starts from the instance. Every
        # partition's latest materialization recorded the token the listing gives now, the
        # universe's its csv token: nothing to ask for, and no partition to add.
        first = run_sensor(sensor, instance=instance, resources=defs.resources)
        assert first.run_requests == [] and first.dynamic_partitions_requests == []
        assert first.skip_reason.skip_message == (f"all {len(SESSIONS)} recording(s) and the universe unchanged "
                                                  "since their latest materializations")

        # Two sessions arrive: a busy one in a scenario the split knows, one in a new scenario.
        known_group = SESSIONS[0][2]
        joining = add_session(fleet, "2024-03-08", "van_11", known_group, seconds=64, seed=202, interactions=4)
        novel = add_session(fleet, "2024-03-08", "truck_30", "school_zone", seconds=56, seed=303, interactions=4)
        second = run_sensor(sensor, instance=instance, resources=defs.resources, cursor=first.cursor)
        universe_run, scoring_run = second.run_requests
        assert set(universe_run.asset_selection) == splits_assets
        # both sessions in one run: their partitions are appended together, one range covers them
        names = sorted(recording_name(s) for s in (joining, novel))
        assert scoring_requests(second) == [(names, "new recording")]
        assert scoring_run.tags["kuration/recordings"] == f"2: {names[0]}, {names[1]}"
        assert [list(r.partition_keys) for r in second.dynamic_partitions_requests] == [names]
        results = execute_requests(defs, instance, second)
        assert all(r.success for r in results)
        [split_run] = materialized(results, "resolved_splits")
        assert split_run["resolution_mode"] == "extended"
        new_samples = 64 // 8 + 56 // 8
        assert split_run["newly_assigned_samples"] == new_samples
        # nothing new since: the next tick skips
        assert run_sensor(sensor, instance=instance, resources=defs.resources, cursor=second.cursor).run_requests == []

        budget = defs.resolve_job_def("fill_budget").execute_in_process(instance=instance, raise_on_error=False)
        assert budget.success and all(e.passed for e in budget.get_asset_check_evaluations())
        build = defs.resolve_job_def("build_dataset").execute_in_process(instance=instance, raise_on_error=False)
        assert build.success

    # no existing sample moved stage; the new ones are placed, the joining session with its scenario
    stage_after = assignments(storage)
    assert {uid: stage_after[uid] for uid in stage_before} == stage_before
    added = {uid: stage for uid, stage in stage_after.items() if uid not in stage_before}
    assert len(added) == new_samples and {uid.split("#")[0] for uid in added} == {joining, novel}
    groups = fleet.groups()
    scenario_stage = {stage_before[f"{s}#0"] for s, g in groups.items() if g == known_group and s != joining}
    assert {stage_after[f"{joining}#0"]} == scenario_stage

    # the next dataset holds the new sessions; every shard that holds what it held before is byte-identical
    verification = verify_dataset(storage / "dataset")
    assert verification.ok, verification.errors
    shards_after = {shard_key(e): e for e in manifest(storage)["entries"]}
    assert {joining, novel} <= {key[1] for key in shards_after}
    unchanged = shards_before.keys() & shards_after.keys()
    assert unchanged
    for key in unchanged:
        assert shards_after[key]["sha256"] == shards_before[key]["sha256"], key
    # ... because the rebuild kept them (verified, not rewritten) and wrote only the rest
    [shards] = materialized([build], "shards")
    assert (shards["reused_shards"], shards["written_shards"]) == (len(unchanged), len(shards_after) - len(unchanged))


def test_a_plan_that_admits_nothing_is_refused_by_the_writer_unless_allowed(fleet, tmp_path, monkeypatch):
    settings = json.loads((fleet.root / "curation.json").read_text())
    settings["budget"].update(train_hours=0, val_hours=0, test_hours=0)
    (fleet.root / "curation.json").write_text(json.dumps(settings))
    storage = tmp_path / "storage"
    code, out = run(fleet, storage)
    assert code == 1, out
    assert re.search(r"check budget_plan:budget +PASSED\n +nothing requested, nothing admitted", out)
    assert "kuration run: build_dataset failed" in out and "the dataset would be empty" in out
    assert "build_rollouts: run" not in out and DatasetRoot(storage / "dataset").versions() == []  # none started

    # an empty dataset on purpose: the build's allow_empty
    from dagster import DagsterInstance

    from kuration_definitions import build_definitions

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(fleet.root))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(storage))
    with DagsterInstance.from_config(str(storage / "dagster_home")) as instance:
        build = build_definitions().resolve_job_def("build_dataset").execute_in_process(
            instance=instance, raise_on_error=False,
            run_config={"ops": {"shards_and_manifest": {"config": {"allow_empty": True}}}})
    assert build.success
    verification = verify_dataset(storage / "dataset")
    assert verification.ok and verification.shards == 0 and manifest(storage)["entries"] == []
