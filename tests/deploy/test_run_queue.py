"""deploy/dagster.yaml's run queue, as it is, on the real PostgreSQL: runs launched from the UI
wait in the queue, and the daemon's queue pass lets one dataset build (tag
kuration/lease=dataset) go at a time while the other runs go beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.dagster.small_landing import write_small_landing_zone
from tests.dagster.ui_runs import (finished_run, launch_job, run_and_step_processes, ui_workspace,
                                  wait_for_run_worker_exit, work_queue)


@pytest.mark.slow
def test_the_queue_lets_one_dataset_build_go_at_a_time_and_the_other_runs_beside_it(deployment, tmp_path: Path,
                                                                                    monkeypatch):
    """The whole graph once on PostgreSQL, then three runs, each in a run worker process the
    queue launches, two of them one after the other: 20 s to 80 s."""
    from dagster import DagsterInstance, DagsterRunStatus

    from kuration.read import load_committed, verify_dataset
    from kuration_cli.graph_run import run_graph
    from kuration_definitions import DATASET_LEASE_TAG

    landing = write_small_landing_zone(tmp_path / "landing")
    storage = tmp_path / "storage"
    # the graph once, so a dataset build has its budget plan to build from
    lines: list[str] = []
    assert run_graph(str(landing), str(storage), out=lines.append).ok, "\n".join(lines)
    first_manifest = load_committed(str(storage / "dataset")).record.manifest_sha256

    # the code server the UI starts, and the run workers the queue launches, read these
    monkeypatch.setenv("KURATION_LANDING_ZONE", str(landing))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(storage))
    with DagsterInstance.get() as instance, ui_workspace(instance) as workspace:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        first, second = launch_job(workspace, "build_dataset"), launch_job(workspace, "build_dataset")
        other = launch_job(workspace, "curate_splits")
        lease_key, lease_value = DATASET_LEASE_TAG
        for run_id in (first, second, other):
            run = instance.get_run_by_id(run_id)
            assert run.status == DagsterRunStatus.QUEUED  # nothing runs until the daemon lets it
            assert (run.tags.get(lease_key) == lease_value) == (run_id != other)

        work_queue(workspace)
        # the first build and the other run went; the second build waits for the first
        assert instance.get_run_by_id(second).status == DagsterRunStatus.QUEUED
        assert instance.get_run_by_id(first).status != DagsterRunStatus.QUEUED
        assert instance.get_run_by_id(other).status != DagsterRunStatus.QUEUED
        assert finished_run(instance, other).status == DagsterRunStatus.SUCCESS
        assert finished_run(instance, first).status == DagsterRunStatus.SUCCESS
        assert instance.get_run_by_id(second).status == DagsterRunStatus.QUEUED

        work_queue(workspace)  # the first build is done: the second goes
        assert finished_run(instance, second).status == DagsterRunStatus.SUCCESS
        # each build ran in a run worker of its own, one after the other, never side by side
        workers = {run_id: run_and_step_processes(instance, run_id)[0] for run_id in (first, second, other)}
        assert len(set(workers.values()) | {os.getpid()}) == 4
        starts = {run_id: instance.get_run_record_by_id(run_id).start_time for run_id in (first, second)}
        ends = {run_id: instance.get_run_record_by_id(run_id).end_time for run_id in (first, second)}
        assert ends[first] <= starts[second]
        for run_id in workers:
            wait_for_run_worker_exit(instance, run_id)
    # the second build found the first's commit and kept it: same inputs, same manifest
    dataset = str(storage / "dataset")
    assert verify_dataset(dataset).ok and load_committed(dataset).record.manifest_sha256 == first_manifest
