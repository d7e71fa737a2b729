"""The graph curating new recordings by itself, under the real daemon: ``kuration run`` fills a
private instance on a small landing zone, ``dagster dev`` (its webserver, daemon and code
server in their own process group) serves it, new recordings land, ``new_recordings_sensor``
is switched on, and its runs and the automation sensor's run must commit, audit and publish a
new dataset version and build a rollout store that hold the new recordings; then everything
is stopped by its PID.

The sensors tick every ``KURATION_SENSOR_INTERVAL_SECONDS`` (1 s here; the daemon looks about
every 5 s), so the wait is a few runs long, not minutes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import zarr

from kuration import storage
from kuration.demo.corpus import write_demo_landing_zone
from kuration.read import load_committed, verify_dataset
from kuration_assets.automation import SENSOR_INTERVAL_ENV
from kuration_cli.graph_run import run_graph
from tests.ui.dagster_dev import (
    LOCATION,
    log_tail,
    start_dagster_dev,
    stop_dagster_dev,
    wait_until_loaded,
    write_private_home,
)

pytestmark = pytest.mark.slow

#: Longest wait for the sensor's runs and the automation run after them; they take well under
#: a minute on two busy cores.
CURATION_TIMEOUT_S = 240
CORPUS = {"seed": 5, "sites": 3, "minutes": (1, 1)}
NEW_RECORDING = "flight_002"
DOWNSTREAM = ("budget_plan", "shards", "dataset_manifest", "published_dataset", "rollout_store")

#: The run queue of deploy/dagster.yaml (one run at a time holds the dataset lease), looking at
#: the queue every second instead of every 5 s.
RUN_QUEUE_YAML = """run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
    tag_concurrency_limits:
      - key: kuration/lease
        value: dataset
        limit: 1
"""

_SENSOR_STATE = """{ sensorOrError(sensorSelector: {repositoryLocationName: "%s", repositoryName: "__repository__",
  sensorName: "%s"}) { __typename ... on Sensor { sensorState { status } } ... on PythonError { message } } }"""
_START_SENSOR = """mutation { startSensor(sensorSelector: {repositoryLocationName: "%s",
  repositoryName: "__repository__", sensorName: "%s"}) { __typename ... on Sensor { sensorState { status } }
  ... on PythonError { message } } }"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _write_landing(root: Path, recordings_per_site: int, *, budget_seconds: tuple[int, int, int]) -> Path:
    zone = write_demo_landing_zone(root, recordings_per_site=recordings_per_site, **CORPUS)
    train, val, test = (seconds / 3600 for seconds in budget_seconds)
    storage.write_bytes_atomic(str(root / "curation.json"), json.dumps({
        "recordings": "recordings", "segment_window": 10, "segment_stride": 5,
        "budget": {"train_hours": train, "val_hours": val, "test_hours": test, "span_seconds": 20},
        "split": {"strategy": "random", "seed": 2, "val_ratio": 0.34, "test_ratio": 0.34},
    }).encode())
    return Path(zone.root)


def _deliver(staged: Path, landing: Path) -> list[str]:
    """Copy the staged corpus's new recordings into the landing zone, media and annotations
    first, each file by an atomic rename, then its curation.json (a budget that admits every
    span) and last the universe that names them; their source ids."""
    new = sorted(p.relative_to(staged) for p in staged.rglob(f"{NEW_RECORDING}*"))
    for relative in sorted(new, key=lambda p: p.suffix == ".parquet"):  # the recording itself after its media
        target = landing / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staged / relative, target.with_name(target.name + ".part"))
        os.replace(target.with_name(target.name + ".part"), target)
    for name in ("curation.json", "universe.csv"):
        shutil.copyfile(staged / name, landing / f"{name}.part")
        os.replace(landing / f"{name}.part", landing / name)
    recordings = landing / "recordings"
    return sorted(p.relative_to(recordings).as_posix() for p in recordings.rglob(f"{NEW_RECORDING}.parquet"))


def _graphql(server, query: str) -> dict[str, Any]:
    answer = server.graphql(query)
    assert "errors" not in answer, answer
    return answer["data"]


def _sensor_status(server, name: str) -> str:
    data = _graphql(server, _SENSOR_STATE % (LOCATION, name))["sensorOrError"]
    assert data["__typename"] == "Sensor", data
    return data["sensorState"]["status"]


def _runs_since(instance, before: set[str]) -> list:
    return [run for run in instance.get_runs() if run.run_id not in before]


def _run_errors(instance, runs) -> str:
    """Each failed run's step and run failure messages, for a failing test's report."""
    from dagster import DagsterEventType, DagsterRunStatus

    lines = []
    for run in runs:
        if run.status != DagsterRunStatus.FAILURE:
            continue
        for record in instance.all_logs(run.run_id, of_type={DagsterEventType.STEP_FAILURE,
                                                             DagsterEventType.RUN_FAILURE}):
            event = record.dagster_event
            error = getattr(event.event_specific_data, "error", None) if event else None
            lines.append(f"run {run.run_id} ({run.job_name}) {event.event_type_value if event else ''} "
                         f"{event.step_key if event else ''}: {error.message if error else record.message}")
    return "\n".join(lines) or "(no failed run)"


def _diagnosis(server, instance, runs) -> str:
    def line(run) -> str:
        assets = sorted(k.to_user_string() for k in run.asset_selection or ())
        tags = {k: v for k, v in run.tags.items() if k.startswith(("kuration/", "dagster/from"))}
        return f"  {run.run_id} {run.status.value} {assets} tags={tags}"

    summary = "\n".join(line(run) for run in runs)
    return (f"runs since the delivery:\n{summary or '  (none)'}\nfailed runs:\n{_run_errors(instance, runs)}\n"
            f"the end of {server.log}:\n{log_tail(server.log, 60)}")


def _wait_for_curation(server, instance, before: set[str], timeout: float) -> list:
    """Runs since the delivery, once the rollout store was rebuilt and no run is queued or running."""
    from dagster import AssetKey, DagsterRunStatus

    finished = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
    started = time.monotonic()
    runs: list = []
    while time.monotonic() - started < timeout:
        assert server.process.poll() is None, f"dagster dev exited\n{_diagnosis(server, instance, runs)}"
        runs = _runs_since(instance, before)
        if any(run.status == DagsterRunStatus.FAILURE for run in runs):
            pytest.fail(f"a run failed\n{_diagnosis(server, instance, runs)}")
        latest = instance.get_latest_materialization_event(AssetKey("rollout_store"))
        if latest is not None and latest.run_id not in before and all(run.status in finished for run in runs):
            return runs
        time.sleep(1)
    pytest.fail(f"no new rollout store within {timeout:.0f} s\n{_diagnosis(server, instance, runs)}")


def test_new_recordings_become_a_new_dataset_and_rollout_store_under_the_daemon(tmp_path, monkeypatch):
    """Slow by nature (30 s to 2 min): ``kuration run`` fills the instance, ``dagster dev``
    starts with its daemon, and the sensor's two runs and the automation's run each start a
    run worker process and wait for a daemon tick (about every 5 s)."""
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus

    # A budget each split's pool fills, so the budget check passes on the first run. The
    # delivery raises it so every new span is admitted: that check then warns (larger than the
    # pool), which neither the automation run nor the automation stops at.
    landing = _write_landing(tmp_path / "landing", recordings_per_site=1, budget_seconds=(60, 40, 40))
    # the same corpus with one more recording per site
    staged = _write_landing(tmp_path / "staged", recordings_per_site=2, budget_seconds=(3600, 3600, 3600))
    store_root = tmp_path / "storage"
    home = write_private_home(tmp_path / "home")
    with (home / "dagster.yaml").open("a") as instance_yaml:
        instance_yaml.write(RUN_QUEUE_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert run_graph(str(landing), str(store_root), out=lambda line: None).ok
    before_dataset = load_committed(store_root / "dataset").record

    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "1")
    server = start_dagster_dev(home, landing, store_root, _free_port(), tmp_path / "dagster_dev.log")
    try:
        wait_until_loaded(server)
        # on from the start, without anyone switching it on
        assert _sensor_status(server, "default_automation_condition_sensor") == "RUNNING"
        assert _sensor_status(server, "new_recordings_sensor") == "STOPPED"
        with DagsterInstance.from_config(str(home)) as instance:
            before = {run.run_id for run in instance.get_runs()}
            new_sources = _deliver(staged, landing)
            started = _graphql(server, _START_SENSOR % (LOCATION, "new_recordings_sensor"))["startSensor"]
            assert started["__typename"] == "Sensor" and started["sensorState"]["status"] == "RUNNING", started
            runs = _wait_for_curation(server, instance, before, CURATION_TIMEOUT_S)
            diagnosis = _diagnosis(server, instance, runs)
            assert all(run.status == DagsterRunStatus.SUCCESS for run in runs), diagnosis
            selections = sorted(sorted(k.to_user_string() for k in run.asset_selection or ()) for run in runs)
            # the sensor's split run and scoring run, and one automation run for the whole chain after them
            assert selections == sorted([["resolved_splits", "universe"], ["scored_segments"], sorted(DOWNSTREAM)]), (
                diagnosis)
            (chain,) = [run for run in runs if run.asset_selection and AssetKey("budget_plan") in run.asset_selection]
            assert chain.tags.get("kuration/lease") == "dataset", chain.tags
            for key in DOWNSTREAM:  # once each, not once per upstream update
                records = instance.fetch_materializations(AssetKey(key), limit=100).records
                assert len([r for r in records if r.run_id not in before]) == 1, (key, diagnosis)
    finally:
        stopped = stop_dagster_dev(server)
    assert stopped.left == [], f"processes of dagster dev still alive: {stopped.left}\n{log_tail(server.log)}"

    assert verify_dataset(store_root / "dataset").ok
    dataset = load_committed(store_root / "dataset")
    assert dataset.record != before_dataset
    in_dataset = {entry["source_id"] for entry in dataset.entries}
    assert set(new_sources) <= in_dataset, f"new recordings not in the dataset: {set(new_sources) - in_dataset}"
    store = zarr.open_group(str(store_root / "rollouts" / "rollouts.zarr"), mode="r")
    in_store = {entry["source_id"] for entry in dataset.entries if entry["path"] in set(store["sources"].attrs[
        "shard_paths"])}
    new_in_train = {entry["source_id"] for entry in dataset.entries
                    if entry["split"] == "train" and entry["source_id"] in new_sources}
    assert new_in_train, "the split put no new recording in train: the rollout store could not show one"
    assert new_in_train <= in_store, f"new train recordings not in the rollout store: {new_in_train - in_store}"
