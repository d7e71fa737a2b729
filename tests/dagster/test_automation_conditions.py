"""The automation conditions of the code location, evaluated without a daemon
(``evaluate_automation_conditions``) on an instance ``kuration run`` filled, after in-process
runs that stand for what the sensor, a manual run or the nightly schedule would launch."""

import json
from pathlib import Path

import pytest
from dagster import AssetKey, AssetSelection, DagsterInstance, evaluate_automation_conditions, materialize

from kuration import storage
from kuration.demo.corpus import write_demo_landing_zone
from kuration.errors import InputError
from kuration_assets import (
    budget, budget_plan, dataset_integrity, dataset_quality, published_dataset, scored_segments, segment_pool,
    shards_and_manifest, shards_present,
)
from kuration_assets.automation import DEFAULT_SENSOR_INTERVAL_SECONDS, SENSOR_INTERVAL_ENV, sensor_interval_seconds
from kuration_cli.graph_run import run_graph
from kuration_definitions import DATASET_LEASE_TAG, defs
from rollout_assets import rollout_lineage, rollout_store
from splits_assets import resolved_splits, split_leakage, universe, universe_drift
from tests.built_once import BuiltOnce, build_once
from tests.dagster.runs import landing_resources

DOWNSTREAM = ("budget_plan", "shards", "dataset_manifest", "published_dataset", "rollout_store")


class Curated:
    """An instance and storage root ``kuration run`` filled, and the conditions' cursor so far."""

    def __init__(self, instance: DagsterInstance, landing: Path, storage: Path):
        self.instance = instance
        self.landing = landing
        self.storage = storage
        self.resources = landing_resources(landing, storage)
        self.cursor = None

    def tick(self) -> set[str]:
        """One evaluation of every condition, as one daemon tick: the assets it requests."""
        result = evaluate_automation_conditions(defs=defs, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        return {key for key in DOWNSTREAM + ("universe", "resolved_splits", "scored_segments")
                if result.get_num_requested(AssetKey(key))}

    def run(self, assets, **kwargs):
        return materialize(assets, resources=self.resources, instance=self.instance, raise_on_error=False, **kwargs)

    def partitions(self) -> list[str]:
        return self.instance.get_dynamic_partitions("sources")

    def rescore(self, names: list[str], *, with_check: bool):
        """A scoring run over ``names`` (adjacent partitions), with or without its segment_pool step."""
        tags = {"dagster/asset_partition_range_start": names[0], "dagster/asset_partition_range_end": names[-1]}
        return self.run([scored_segments, segment_pool] if with_check else [scored_segments], tags=tags)


def _curate(root: Path) -> None:
    """``kuration run`` on the small demo zone, on a private instance, all under ``root``."""
    zone = write_demo_landing_zone(root / "landing", seed=5, recordings_per_site=2, sites=3, minutes=(1, 2))
    landing = Path(zone.root)
    storage.write_bytes_atomic(str(landing / "curation.json"), json.dumps({
        "recordings": "recordings", "segment_window": 10, "segment_stride": 5,
        "budget": {"train_hours": 0.02, "val_hours": 0.01, "test_hours": 0.01, "span_seconds": 20},
        "split": {"strategy": "random", "seed": 2, "val_ratio": 0.34, "test_ratio": 0.34},
    }).encode())
    home = root / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(home))
        outcome = run_graph(str(landing), str(root / "storage"), out=lambda line: None)
    assert outcome.ok, outcome


@pytest.fixture(scope="module")
def curated_once(tmp_path_factory) -> BuiltOnce[None]:
    """The whole graph run once for the module (a few seconds); each test gets a fresh copy."""
    return build_once(tmp_path_factory.mktemp("curated"), _curate)


@pytest.fixture
def curated(curated_once: BuiltOnce[None], monkeypatch):
    root = curated_once.fresh()  # as kuration run left it, at the paths it recorded
    monkeypatch.setenv("DAGSTER_HOME", str(root / "home"))
    with DagsterInstance.get() as instance:
        state = Curated(instance, root / "landing", root / "storage")
        # the first tick of a daemon started on a curated instance: nothing is stale, nothing runs
        assert state.tick() == set()
        yield state


def test_nothing_is_requested_while_everything_is_up_to_date(curated):
    assert curated.tick() == set()
    assert curated.tick() == set()


def test_a_rescored_pool_plans_the_whole_chain_once_its_pool_check_passed(curated):
    first = curated.partitions()[:2]
    assert curated.rescore(first, with_check=False).success
    # scored, but segment_pool (its own step) has not passed on it yet
    assert curated.tick() == set()
    assert curated.run([scored_segments, segment_pool], selection=AssetSelection.checks(segment_pool)).success
    # one run: the budget check, then the dataset and its audit, its publication, then the store
    assert curated.tick() == set(DOWNSTREAM)
    assert curated.tick() == set(), "asked twice for one update"
    assert curated.run([budget_plan, budget, shards_and_manifest, shards_present, dataset_integrity, dataset_quality,
                        published_dataset, rollout_store, rollout_lineage]).success
    assert curated.tick() == set()


def test_the_publication_and_the_store_wait_for_every_audit_check_of_a_dataset_built_by_hand(curated):
    """A version written by hand without its checks is staged: ``published_dataset`` (and the
    store after it) is asked for only once each of its audit's blocking checks passed on it,
    run one by one here, in steps of their own. Requested earlier, the publication would fail
    its audit (a check that has not evaluated the version) and the chain would stop there."""
    checks = [shards_and_manifest, shards_present, dataset_integrity, dataset_quality]
    assert curated.run([shards_and_manifest], selection=AssetSelection.assets(shards_and_manifest)).success
    assert curated.tick() == set()
    for check in (dataset_integrity, dataset_quality):
        assert curated.run(checks, selection=AssetSelection.checks(check)).success
        assert curated.tick() == set(), check.check_key
    assert curated.run(checks, selection=AssetSelection.checks(shards_present)).success
    assert curated.tick() == {"published_dataset", "rollout_store"}
    assert curated.tick() == set()


def test_a_failed_pool_check_stops_the_budget_plan(curated):
    # a delivery of unreadable recordings: every source is skipped, the pool is empty
    names = curated.partitions()
    for path in (curated.landing / "recordings").rglob("*.parquet"):
        path.write_bytes(b"not a parquet file")
    result = curated.rescore(names, with_check=True)
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == segment_pool.check_key.name and not evaluation.passed
    assert curated.tick() == set()
    assert curated.tick() == set()


def _rebudget(curated, **budget) -> None:
    settings = json.loads((curated.landing / "curation.json").read_text())
    settings["budget"].update(budget)
    (curated.landing / "curation.json").write_text(json.dumps(settings))


def test_a_budget_check_that_only_warns_lets_the_automation_go_on(curated):
    # a budget larger than each split's pool: the budget check warns, a run continues past it
    # (blocking stops only at ERROR), and so does the automation (Dagster's own check_passed
    # would count the warning as failed and stop the chain here for good)
    _rebudget(curated, train_hours=1, val_hours=1, test_hours=1)
    result = curated.run([budget_plan, budget])
    (evaluation,) = result.get_asset_check_evaluations()
    assert result.success and not evaluation.passed and evaluation.severity.value == "WARN"
    assert "larger than the split's whole scored pool" in str(evaluation.description)
    assert curated.tick() == {"shards", "dataset_manifest", "published_dataset", "rollout_store"}
    assert curated.tick() == set(), "asked twice for one update"


def test_a_budget_check_that_fails_as_an_error_stops_the_automation(curated):
    # spans longer than any recording: every split's request admits nothing, an ERROR
    _rebudget(curated, span_seconds=3600)
    result = curated.run([budget_plan, budget])
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity.value == "ERROR", evaluation.description
    assert curated.tick() == set()
    assert curated.tick() == set()
    # put right, the plan's next materialization and its passing check release the chain
    _rebudget(curated, span_seconds=20)
    assert curated.run([budget_plan, budget]).success
    assert curated.tick() == {"shards", "dataset_manifest", "published_dataset", "rollout_store"}


def _resplit(curated) -> None:
    assert curated.run([universe, resolved_splits, split_leakage, universe_drift],
                       selection=AssetSelection.assets(universe, resolved_splits) | AssetSelection.checks(
                           split_leakage, universe_drift)).success


def test_a_new_split_plans_the_chain_from_the_budget_plan(curated):
    _resplit(curated)
    assert curated.tick() == set(DOWNSTREAM)


def test_a_new_split_waits_for_the_new_recordings_to_be_scored(curated):
    # the sensor's tick: a new partition, the split run first and the scoring run after it
    curated.instance.add_dynamic_partitions("sources", ["zz_site/flight_001"])
    _resplit(curated)
    # budget_plan waits for the unscored partition; the rollout store, which reads the split
    # too, must not be rebuilt from the old dataset meanwhile (and again after the new one)
    assert curated.tick() == set()


def test_the_nightly_recuration_run_leaves_nothing_for_the_automation(curated, monkeypatch):
    from kuration_definitions import build_definitions

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(curated.landing))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(curated.storage))
    job = build_definitions().resolve_job_def("recurate")
    result = job.execute_in_process(instance=curated.instance, raise_on_error=False)
    assert result.success
    materialized = {event.asset_key.to_user_string() for event in result.get_asset_materialization_events()}
    assert materialized == {"universe", "resolved_splits", *DOWNSTREAM}
    assert result.dagster_run.tags.get(DATASET_LEASE_TAG[0]) == DATASET_LEASE_TAG[1]
    # it planned every downstream asset itself: none of them is asked for again
    assert curated.tick() == set()


def test_which_sensor_runs_which_asset_and_what_is_on_by_default():
    from dagster import DefaultScheduleStatus, DefaultSensorStatus

    repo = defs.get_repository_def()
    graph = defs.resolve_asset_graph()
    conditioned = {key.to_user_string() for key in graph.get_all_asset_keys()
                   if graph.get(key).automation_condition is not None}
    assert conditioned == set(DOWNSTREAM)
    sensors = {s.name: s for s in repo.sensor_defs}
    assert set(sensors) == {"new_recordings_sensor", "default_automation_condition_sensor"}
    automation = sensors["default_automation_condition_sensor"]
    assert {k.to_user_string() for k in automation.asset_selection.resolve(graph)} >= conditioned
    assert automation.run_tags == dict([DATASET_LEASE_TAG])
    assert automation.default_status == DefaultSensorStatus.RUNNING
    assert sensors["new_recordings_sensor"].default_status == DefaultSensorStatus.STOPPED
    (schedule,) = repo.schedule_defs
    assert (schedule.name, schedule.job_name, schedule.default_status) == (
        "nightly_recuration", "recurate", DefaultScheduleStatus.STOPPED)


@pytest.mark.parametrize(("value", "seconds"), [(None, DEFAULT_SENSOR_INTERVAL_SECONDS), ("5", 5), (" 2 ", 2)])
def test_the_sensor_interval_comes_from_the_environment(value, seconds):
    environ = {} if value is None else {SENSOR_INTERVAL_ENV: value}
    assert sensor_interval_seconds(environ) == seconds


@pytest.mark.parametrize("value", ["0", "-3", "fast", "1.5"])
def test_a_bad_sensor_interval_is_refused_naming_the_variable(value):
    with pytest.raises(InputError, match=rf"{SENSOR_INTERVAL_ENV}: expected a whole number of seconds of at least 1, "
                                         rf"got '{value}'"):
        sensor_interval_seconds({SENSOR_INTERVAL_ENV: value})


def test_the_interval_reaches_every_sensor(monkeypatch, tmp_path):
    import subprocess
    import sys

    code = ("from kuration_definitions import defs; "
            "print(sorted({s.minimum_interval_seconds for s in defs.get_repository_def().sensor_defs}))")
    env = {"PATH": "", SENSOR_INTERVAL_ENV: "7", "KURATION_LANDING_ZONE": str(tmp_path),
           "KURATION_STORAGE_ROOT": str(tmp_path / "s"), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[7]"

