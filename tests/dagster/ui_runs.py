"""Acting as ``dagster dev`` on an instance: the repository's ``workspace.yaml`` loaded as the
webserver loads it (a code server process per location), the UI's own GraphQL mutations sent
to it, and the daemon's run queue worked, so a launched run starts in a run worker process."""

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

    with define_out_of_process_workspace(str(WORKSPACE), None, instance) as workspace:
        yield workspace


def reexecute_all(workspace: Any, parent_run_id: str, timeout: float = 240) -> Any:
    """The run page's "Re-execute all" on ``parent_run_id``: the UI's mutation, the queued run
    launched as the daemon launches it, then the run once it finished (a ``DagsterRun``)."""
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
    from dagster_graphql.client.query import LAUNCH_PIPELINE_REEXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_PIPELINE_REEXECUTION_MUTATION, {
        "reexecutionParams": {"parentRunId": parent_run_id, "strategy": "ALL_STEPS"}})
    launched = result.data["launchPipelineReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
        list(daemon.run_iteration(workspace))
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + timeout
    while not (run := workspace.instance.get_run_by_id(run_id)).is_finished:
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


def executor_name(instance: Any, run: Any) -> str:
    """The executor the run's execution plan was made for (``in_process``, ``multiprocess``)."""
    return instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id).executor_name
