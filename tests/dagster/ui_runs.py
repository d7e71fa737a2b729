"""Acting as ``dagster dev`` on an instance: the repository's ``workspace.yaml`` loaded as the
webserver loads it (a code server process per location), the UI's own GraphQL mutations sent
to it, and the daemon's run queue and backfills worked, so a launched run starts in a run
worker process. Queries answer what the UI renders (a check's latest evaluation, an asset's
materializations)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The workspace ``dagster dev`` and ``scripts/ui.sh`` load.
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"


@contextmanager
def ui_workspace(instance: Any) -> Iterator[Any]:
    """The webserver's workspace on ``workspace.yaml``: each code location served by its own
    code server process, which reads the ``KURATION_*`` environment of this process."""
    from dagster_graphql.test.utils import define_out_of_process_workspace

    earlier = _code_servers()
    with define_out_of_process_workspace(str(WORKSPACE), None, instance) as workspace:
        try:
            yield workspace
        finally:
            started = _code_servers() - earlier
    # Leaving the workspace asks its code servers to shut down, and returns: one still
    # finishing its runs' work must not find the instance's database dropped under it.
    deadline = time.monotonic() + 60
    while running := [pid for pid in started if _running(pid)]:
        assert time.monotonic() < deadline, f"code server process(es) {running} still run 60 s after the shutdown"
        time.sleep(0.2)


def _code_servers() -> set[int]:
    """The code server processes (``dagster api grpc``) this process started and that still run."""
    import os

    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(") ", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"api" in command and b"grpc" in command and _running(int(entry.name)):
            found.add(int(entry.name))
    return found


def reexecute_all(workspace: Any, parent_run_id: str, timeout: float = 240) -> Any:
    """The run page's "Re-execute all" on ``parent_run_id``: the UI's mutation, the queued run
    launched as the daemon launches it, then the run once it finished (a ``DagsterRun``)."""
    from dagster_graphql.client.query import LAUNCH_PIPELINE_REEXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_PIPELINE_REEXECUTION_MUTATION, {
        "reexecutionParams": {"parentRunId": parent_run_id, "strategy": "ALL_STEPS"}})
    launched = result.data["launchPipelineReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    work_queue(workspace)
    return finished_run(workspace.instance, launched["run"]["runId"], timeout)


def launch_job(workspace: Any, job: str) -> str:
    """The Launchpad's "Launch run" of ``job`` (no run config): the UI's mutation, which puts
    the run in the instance's run queue; its run id."""
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    from kuration_cli.graph_run import CODE_LOCATION_NAME

    result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_PIPELINE_EXECUTION_MUTATION, {
        "executionParams": {"selector": {"repositoryLocationName": CODE_LOCATION_NAME,
                                         "repositoryName": "__repository__", "jobName": job},
                            "runConfigData": {}, "mode": "default"}})
    launched = result.data["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def work_queue(workspace: Any) -> None:
    """One pass of the daemon's run queue (``dagster-daemon run``'s QueuedRunCoordinatorDaemon):
    the queued runs its limits let go are launched, each in a run worker process."""
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
        list(daemon.run_iteration(workspace))


def finished_run(instance: Any, run_id: str, timeout: float = 240) -> Any:
    """The run once it finished (a ``DagsterRun``), waited for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (run := instance.get_run_by_id(run_id)).is_finished:
        assert time.monotonic() < deadline, f"run {run_id} still {run.status.value} after {timeout} s"
        time.sleep(0.5)
    return run


def run_and_step_processes(instance: Any, run_id: str) -> tuple[int, set[int]]:
    """The process id the run started in (its RUN_START event) and those its steps' events came
    from (of the events that record one: a planned materialization does not)."""
    from dagster import DagsterEventType

    events = [entry.dagster_event for entry in instance.all_logs(run_id) if entry.dagster_event is not None]
    (run_process,) = {event.pid for event in events if event.event_type == DagsterEventType.RUN_START}
    return run_process, {event.pid for event in events if event.step_key is not None and event.pid is not None}


def wait_for_run_worker_exit(instance: Any, run_id: str, timeout: float = 60) -> None:
    """Until the process the run started in has exited: a run worker goes on for a moment after
    its run finished (its last events, its compute logs), and a test must not drop the
    instance's database under it."""
    pid, _ = run_and_step_processes(instance, run_id)
    deadline = time.monotonic() + timeout
    while _running(pid):
        assert time.monotonic() < deadline, f"the run worker of {run_id} (pid {pid}) still runs after {timeout} s"
        time.sleep(0.2)


def _running(pid: int) -> bool:
    """The process exists and has not exited (an exited child nobody reaped yet is a zombie)."""
    try:
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def executor_name(instance: Any, run: Any) -> str:
    """The executor the run's execution plan was made for (``in_process``, ``multiprocess``)."""
    return instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id).executor_name


def launch_backfill(workspace: Any, assets: list[str]) -> str:
    """The UI's "Materialize all partitions" on ``assets`` (and "as one backfill" of what is
    downstream of them when they are listed too): the launchPartitionBackfill mutation over
    every partition; returns the backfill's id."""
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_PARTITION_BACKFILL_MUTATION, {
        "backfillParams": {"assetSelection": [{"path": [name]} for name in assets], "allPartitions": True}})
    launched = result.data["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def run_backfill(workspace: Any, backfill_id: str, timeout: float = 240) -> Any:
    """Work the backfill as the daemon does: its iterations request the runs, the run queue
    launches them in run worker processes, until the backfill is no longer in progress;
    returns it (a ``PartitionBackfill``)."""
    import logging

    from dagster._core.execution.backfill import BulkActionStatus
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    instance = workspace.instance
    logger = logging.getLogger("tests.backfill")
    deadline = time.monotonic() + timeout
    with QueuedRunCoordinatorDaemon(interval_seconds=1) as queue:
        while True:
            list(execute_backfill_iteration(workspace, logger))
            list(queue.run_iteration(workspace))
            backfill = instance.get_backfill(backfill_id)
            if backfill.status not in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING,
                                       BulkActionStatus.FAILING):
                return backfill
            assert time.monotonic() < deadline, f"backfill {backfill_id}: {backfill.status.value} after {timeout} s"
            time.sleep(0.5)


def asset_check_and_materializations(workspace: Any, check_of: str, check: str, assets: list[str]) -> dict:
    """What the UI shows: ``check``'s latest execution on asset ``check_of`` (its status and
    evaluation, as the asset's Checks tab renders them) and each of ``assets``' latest
    materialization (its Events tab), through the webserver's GraphQL."""
    from dagster_graphql.test.utils import execute_dagster_graphql

    fields = " ".join(
        f'{name}: assetOrError(assetKey: {{path: ["{name}"]}}) {{ __typename ... on Asset {{ '
        f'assetMaterializations(limit: 1) {{ runId }} }} }}' for name in assets)
    query = f'''{{
      checked: assetNodeOrError(assetKey: {{path: ["{check_of}"]}}) {{
        ... on AssetNode {{ assetChecksOrError {{ ... on AssetChecks {{ checks {{
          name blocking
          executionForLatestMaterialization {{ runId status evaluation {{ success severity description }} }}
        }} }} }} }}
      }}
      {fields}
    }}'''
    result = execute_dagster_graphql(workspace.create_request_context(), query)
    assert not result.errors, result.errors
    checks = {c["name"]: c for c in result.data["checked"]["assetChecksOrError"]["checks"]}
    return {"check": checks[check], **{name: result.data[name] for name in assets}}
