"""A failing blocking check stops everything downstream, and says why: a hand-baked
``splits.json`` that puts one scenario in train and in val (``bake_leaking_split``).

Once through ``kuration run`` (exit 1, naming the check and the leaking group), then as a
user retries it from the UI: "Materialize all" over the whole graph as one backfill, on the
same instance. ``split_leakage`` fails in both; budget_plan, shards, dataset_manifest and
rollout_store (everything that reads the split) never materialize and nothing is written
under the storage root for them; the run's failure, the check's evaluation and what the UI's
GraphQL returns name the check, the group and its samples."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.dagster.ui_runs import asset_check_and_materializations, launch_backfill, run_backfill, ui_workspace
from tests.own_data.landing_factory import LeakingSplit, bake_leaking_split, fleet_on_an_instance

#: Everything that reads the resolved split.
DOWNSTREAM = ["budget_plan", "shards", "dataset_manifest", "rollout_store"]
#: What those assets would write under the storage root.
DOWNSTREAM_FILES = ["budget", "dataset", "rollouts"]
EVERY_ASSET = ["universe", "resolved_splits", "scored_segments", *DOWNSTREAM]


#: one shared fixture on an instance (kuration run, then a whole-graph backfill): about 20 to 30 s
pytestmark = pytest.mark.slow

@dataclass
class Leaked:
    leak: LeakingSplit
    storage: Path
    code: int
    out: str
    backfill: Any
    ui: dict


@pytest.fixture(scope="module")
def leaked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Leaked]:
    from dagster import DagsterInstance

    with fleet_on_an_instance(tmp_path_factory.mktemp("leak"), prefix=f"leak_{uuid.uuid4().hex[:8]}") as fleet:
        leak = bake_leaking_split(fleet.zone)
        code, out = fleet.run()
        fleet.serve()
        with DagsterInstance.get() as instance, ui_workspace(instance) as workspace:
            backfill = run_backfill(workspace, launch_backfill(workspace, EVERY_ASSET))
            ui = asset_check_and_materializations(workspace, "resolved_splits", "split_leakage", DOWNSTREAM)
        yield Leaked(leak, fleet.storage, code, out, backfill, ui)


def _offender_named(text: str, leak: LeakingSplit) -> None:
    assert "no_split_overlap violated" in text and f"'{leak.group}'" in text and "in both train and val" in text, text
    assert f"{leak.in_train}#0" in text, text  # the first leaking sample by uid


def test_kuration_run_exits_1_naming_the_check_the_group_and_its_samples(leaked):
    """The first test of the module pays for ``leaked``: ``kuration run`` on the fleet and a
    whole-graph backfill through the UI's code server and run workers (10 s to 45 s)."""
    assert leaked.code == 1
    assert ("kuration run: curate_splits failed: blocking check resolved_splits:split_leakage failed; later jobs "
            "were not run") in leaked.out
    (verdict,) = [line for line in leaked.out.splitlines() if "no_split_overlap violated" in line and "#0" in line]
    _offender_named(verdict, leaked.leak)
    for job in ("score_recordings", "fill_budget", "build_dataset", "build_rollouts"):
        assert f"{job}: run" not in leaked.out


def test_the_runs_fail_on_the_check_and_say_which(leaked):
    from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

    with DagsterInstance.from_config(os.fspath(leaked.storage.parent / "home")) as instance:
        (cli_run,) = instance.get_runs(RunsFilter(job_name="curate_splits"))
        backfill_runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": leaked.backfill.backfill_id}))
        splits_runs = [run for run in backfill_runs if "resolved_splits" in str(run.asset_selection)]
        assert splits_runs, [run.asset_selection for run in backfill_runs]
        for run in [cli_run, *splits_runs]:
            assert run.status == DagsterRunStatus.FAILURE
            (failure,) = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)
            assert "Steps failed: ['resolved_splits_split_leakage']" in failure.message
            step_failure = instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_FAILURE)
            error = step_failure[0].dagster_event.step_failure_data.error
            assert "blocking asset check failed" in error.message and "resolved_splits: split_leakage" in error.message
            evaluations = {entry.dagster_event.event_specific_data.check_name: entry.dagster_event.event_specific_data
                           for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)}
            assert not evaluations["split_leakage"].passed and evaluations["universe_drift"].passed
            _offender_named(evaluations["split_leakage"].description, leaked.leak)


def test_nothing_that_reads_the_split_is_materialized_or_written(leaked):
    from dagster import AssetKey, DagsterInstance
    from dagster._core.execution.backfill import BulkActionStatus

    assert leaked.backfill.status in (BulkActionStatus.COMPLETED_FAILED, BulkActionStatus.FAILED)
    with DagsterInstance.from_config(os.fspath(leaked.storage.parent / "home")) as instance:
        assert instance.get_latest_materialization_event(AssetKey("resolved_splits")) is not None
        for name in DOWNSTREAM:
            assert instance.get_latest_materialization_event(AssetKey(name)) is None, name
    written = {path.name for path in leaked.storage.iterdir()}
    assert "splits" in written and not written & set(DOWNSTREAM_FILES), written
    assert not list(leaked.storage.rglob("dataset.commit.json"))


def test_the_ui_shows_the_check_failed_naming_the_offender_and_nothing_downstream(leaked):
    check = leaked.ui["check"]
    assert check["blocking"] is True
    execution = check["executionForLatestMaterialization"]
    assert execution["status"] == "FAILED"
    assert execution["evaluation"]["success"] is False and execution["evaluation"]["severity"] == "ERROR"
    _offender_named(execution["evaluation"]["description"], leaked.leak)
    for name in DOWNSTREAM:
        shown = leaked.ui[name]
        assert shown["__typename"] == "AssetNotFoundError" or shown["assetMaterializations"] == [], (name, shown)
