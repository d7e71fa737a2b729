"""``kuration run`` (kuration_cli.graph_run): the whole graph through the instance,
its summary, and its exit status: 0 done, 1 a blocking check or a step failed (named), 2 the
graph could not start."""

from __future__ import annotations

import json
import os
from argparse import Namespace
from pathlib import Path

import pytest

from kuration.demo.corpus import write_demo_landing_zone
from kuration_cli.graph_run import CODE_LOCATION_NAME, JOB_ORDER, run_main, shown_value
from tests.dagster.small_landing import small_settings, write_small_landing_zone
from tests.dagster.ui_runs import WORKSPACE, executor_name, reexecute_all, run_and_step_processes, ui_workspace

@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return write_small_landing_zone(tmp_path / "landing")


def _run(landing: Path, storage: Path, config: Path | None = None) -> tuple[int, str]:
    lines: list[str] = []
    code = run_main(Namespace(landing=str(landing), storage=str(storage), config=None if config is None else
                              str(config)), out=lines.append)
    return code, "\n".join(lines)


@pytest.mark.slow
def test_the_whole_graph_runs_on_the_instance_beside_the_storage_root(landing, tmp_path, monkeypatch):
    """``kuration run`` twice on a fresh instance, every job each time: 5 s to 30 s."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("KURATION_LANDING_ZONE", "/somewhere/else")
    code, out = _run(landing, tmp_path / "storage")
    assert code == 0, out
    for job in JOB_ORDER:
        assert f"\n{job}: run " in out and f"{job}: run" in out
    assert out.count("SUCCESS") == len(JOB_ORDER) and "FAILED" not in out
    assert f"settings: {landing / 'curation.json'}" in out
    assert "asset scored_segments: 6 partitions" in out
    assert "kuration run: 5 runs succeeded" in out
    # figures print in the one number format: hours with their unit, no float noise
    admitted = [line.split() for line in out.splitlines() if line.strip().startswith("train_admitted_hours")]
    assert admitted and all(words[-1] == "h" for words in admitted), admitted
    home = tmp_path / "storage" / "dagster_home"
    assert (home / "dagster.yaml").exists() and f"DAGSTER_HOME={home}" in out
    # the caller's environment is its own again
    assert os.environ["KURATION_LANDING_ZONE"] == "/somewhere/else" and "DAGSTER_HOME" not in os.environ
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:  # the runs belong to that instance
        jobs = {run.job_name for run in instance.get_runs()}
    assert jobs == set(JOB_ORDER)
    # run again: nothing new, the scoring comes from the cache and the split is kept; an
    # environment override turns the rollout store off for this deployment
    monkeypatch.setenv("KURATION_ROLLOUTS_ENABLED", "false")
    code, again = _run(landing, tmp_path / "storage")
    assert code == 0 and "(6 from cache)" in again and "resolution_mode      extended" in again
    assert "build_rollouts: not run: rollouts are disabled" in again and "kuration run: 4 runs succeeded" in again


def test_own_modality_names_without_rollouts_skip_the_store_as_not_configured(landing, tmp_path, monkeypatch):
    """The first run of a team's own data must not fail on a stage it never asked for: an output
    spec with its own modality names (no pos) and no curation.json rollouts."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    spec = json.loads((landing / "output_spec.json").read_text())
    renamed = {"pos": "xyz", "vel": "velocity", "battery": "charge"}
    spec["modalities"] = {renamed.get(k, k): v for k, v in spec["modalities"].items() if k != "frame"}
    (landing / "output_spec.json").write_text(json.dumps(spec))
    code, out = _run(landing, tmp_path / "storage")
    assert code == 0, out
    assert ("build_rollouts: not run: rollout store not configured: "
            f"{landing / 'curation.json'} has no 'rollouts', and {landing / 'output_spec.json'} lacks the default "
            "rollout recipe's modalities ['pos', 'battery', 'vel']") in out
    assert "kuration run: 4 runs succeeded" in out and "FAILURE" not in out
    assert not (tmp_path / "storage" / "rollouts").exists()


def test_an_edit_of_the_settings_during_kuration_run_stops_the_next_run(landing, tmp_path, monkeypatch):
    from kuration_cli.graph_run import run_graph

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()

    def edit() -> None:  # after the budget plan, before the dataset: one kuration run, two versions
        (landing / "curation.json").write_text(json.dumps({**small_settings(), "write_workers": 2}))

    lines: list[str] = []
    outcome = run_graph(str(landing), str(tmp_path / "storage"), out=lines.append, after_budget=edit)
    out = "\n".join(lines)
    assert not outcome.ok and list(outcome.runs) == ["curate_splits", "score_recordings", "fill_budget",
                                                     "build_dataset"]
    assert "kuration run: build_dataset failed: step shards_and_manifest: " in out
    assert "changed while run " in out and "Launch a new run" in out
    assert not (tmp_path / "storage" / "dataset").exists()


def test_the_runs_name_the_code_location_of_workspace_yaml():
    from dagster._core.workspace.load import location_origins_from_yaml_paths

    (location,) = location_origins_from_yaml_paths([str(WORKSPACE)])
    assert location.location_name == CODE_LOCATION_NAME


def test_every_job_and_the_asset_job_of_the_ui_and_sensor_run_their_steps_in_process(tmp_path, monkeypatch):
    from kuration_definitions import build_definitions

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(tmp_path))
    repository = build_definitions().get_repository_def()
    jobs = repository.get_all_jobs()
    assert set(JOB_ORDER) | {"__ASSET_JOB"} <= {job.name for job in jobs}
    assert {job.name: job.executor_def.name for job in jobs} == {job.name: "in_process" for job in jobs}


@pytest.mark.slow
def test_each_run_is_listed_under_its_job_and_re_executes_from_the_ui(landing, tmp_path, monkeypatch):
    """The whole graph once, then a re-execution through a code server and a run worker
    process, as the UI launches it: 10 s to 60 s, most of it the two processes starting."""
    from dagster import AssetKey, DagsterInstance, RunsFilter
    from dagster._core.storage.tags import REPOSITORY_LABEL_TAG

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    storage = tmp_path / "storage"
    code, out = _run(landing, storage)
    assert code == 0, out
    with DagsterInstance.get() as instance:
        for job in JOB_ORDER:
            # the job's Runs tab and the overview timeline ask for its runs by job name and
            # code location; a run without an origin has no location and is in neither
            (run,) = instance.get_runs(RunsFilter(job_name=job, tags={
                REPOSITORY_LABEL_TAG: f"__repository__@{CODE_LOCATION_NAME}"}))
            assert run.remote_job_origin.location_name == CODE_LOCATION_NAME and run.job_code_origin is not None
            assert run.remote_job_origin.job_name == job and f"{job}: run {run.run_id} SUCCESS" in out
            # executed here, every step in this process
            assert executor_name(instance, run) == "in_process"
            assert run_and_step_processes(instance, run.run_id) == (os.getpid(), {os.getpid()})
        (scoring,) = instance.get_runs(RunsFilter(job_name="score_recordings"))
        assert scoring.tags["dagster/asset_partition_range_start"] < scoring.tags["dagster/asset_partition_range_end"]

        # "Re-execute all" on the budget plan's run, through the UI's code server and run
        # worker processes, which read the landing zone and storage root from the environment
        monkeypatch.setenv("KURATION_LANDING_ZONE", str(landing))
        monkeypatch.setenv("KURATION_STORAGE_ROOT", str(storage))
        (parent,) = instance.get_runs(RunsFilter(job_name="fill_budget"))
        with ui_workspace(instance) as workspace:
            child = reexecute_all(workspace, parent.run_id)
        assert child.status.value == "SUCCESS", [e.message for e in instance.all_logs(child.run_id)][-5:]
        assert child.parent_run_id == parent.run_id and child.root_run_id == parent.run_id
        assert child.job_name == "fill_budget" and child.remote_job_origin.location_name == CODE_LOCATION_NAME
        assert {r.run_id for r in instance.get_runs(RunsFilter(job_name="fill_budget"))} == {parent.run_id,
                                                                                          child.run_id}
        # the run worker ran the budget plan and its check itself: no process per step
        run_process, step_processes = run_and_step_processes(instance, child.run_id)
        assert run_process != os.getpid() and step_processes == {run_process}
        assert executor_name(instance, child) == "in_process"
        assert instance.get_latest_materialization_event(AssetKey("budget_plan")).run_id == child.run_id


def _mismatch_universe_ids(landing: Path) -> None:
    csv = landing / "universe.csv"
    rows = csv.read_text().splitlines()
    # ids written relative to the landing zone instead of recordings/
    csv.write_text("\n".join([rows[0], *(f"recordings/{row}" for row in rows[1:])]) + "\n")


def test_mismatched_universe_ids_stop_the_graph_naming_the_check(landing, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    _mismatch_universe_ids(landing)
    code, out = _run(landing, tmp_path / "storage")
    assert code == 1
    assert "kuration run: curate_splits failed: blocking check universe:universe_sources failed" in out
    assert "later jobs were not run" in out and "score_recordings: run" not in out
    assert not (tmp_path / "storage" / "splits" / "splits.json").exists()


def test_a_second_call_in_the_same_process_runs_on_its_own_landing_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    outputs = []
    for name in ("first", "second"):
        zone = write_demo_landing_zone(tmp_path / name, seed=5, recordings_per_site=1, sites=2, minutes=(1, 1))
        _mismatch_universe_ids(Path(zone.root))  # each call stops after curate_splits, the same job
        code, out = _run(Path(zone.root), tmp_path / f"{name}_storage")
        assert code == 1
        outputs.append(out)
    second = outputs[1]
    assert f"{tmp_path / 'second_storage' / 'universe' / 'universe.parquet'}" in second
    assert f"under {tmp_path / 'second' / 'recordings'}" in second and str(tmp_path / "first") not in second


def test_settings_that_cannot_be_read_exit_2_before_anything_runs(landing, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (landing / "curation.json").write_text(json.dumps({"budget": {"train_hour": 1}}))
    code, out = _run(landing, tmp_path / "storage")
    assert code == 2 and out == ""
    assert "budget: unknown key(s) ['train_hour']" in capsys.readouterr().err
    # --config names another file, which wins over the landing zone's
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"plugins": ["no_such_kuration_plugin_module"]}))
    code, _ = _run(landing, tmp_path / "storage", config=good)
    assert code == 2 and "no_such_kuration_plugin_module" in capsys.readouterr().err
    code, _ = _run(tmp_path / "missing", tmp_path / "storage")
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "storage" / "universe").exists()


def test_a_remote_storage_root_needs_dagster_home(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    code = run_main(Namespace(landing=str(tmp_path), storage="s3://bucket/kuration", config=None), out=print)
    assert code == 2 and "set DAGSTER_HOME" in capsys.readouterr().err


def test_two_recordings_of_one_name_stop_the_scoring_naming_both(landing, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    settings = {**small_settings(), "source_pattern": "flight_*"}
    (landing / "curation.json").write_text(json.dumps(settings))
    (landing / "recordings" / "airfield_north" / "flight_001.npz").write_bytes(b"")
    code, out = _run(landing, tmp_path / "storage")
    assert code == 1, out
    assert ("score_recordings: not run: recordings whose names collide: 'airfield_north/flight_001.npz' and "
            "'airfield_north/flight_001.parquet' are both 'airfield_north/flight_001'") in out
    assert "rename or move one of each pair" in out and "score_recordings: run" not in out


@pytest.mark.slow
def test_partitions_keyed_by_path_give_way_to_recording_names(landing, tmp_path, monkeypatch):
    from dagster import DagsterInstance

    from kuration.landing.recordings import list_recordings, recording_name

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sources = sorted(list_recordings(landing / "recordings"))
    with DagsterInstance.get() as instance:  # an instance an earlier release registered
        instance.add_dynamic_partitions("sources", sources)
    code, out = _run(landing, tmp_path / "storage")
    assert code == 0, out
    assert f"score_recordings: {len(sources)} partition(s) keyed by path renamed to their recording names" in out
    assert f"asset scored_segments: {len(sources)} partitions" in out
    with DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("sources") == [recording_name(s) for s in sources]
    assert sorted(p.relative_to(tmp_path / "storage" / "scored_segments").as_posix()
                  for p in (tmp_path / "storage" / "scored_segments").rglob("*.parquet")) == [
        f"{recording_name(s)}.parquet" for s in sources]


@pytest.mark.parametrize("key, value, text", [
    ("train_admitted_hours", 0.51234567, "0.512 h"), ("train_emitted_hours", 1234.5, "1,234 h"),
    ("written_shards", 3322, "3,322"), ("samples", 12.0, "12"), ("leakage", 0, "0"),
    ("commit_state", "committed", "committed"), ("status", True, "True"),
])
def test_the_summary_prints_figures_in_the_one_number_format(key, value, text):
    assert shown_value(key, value) == text
