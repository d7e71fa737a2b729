"""Write, audit, publish: ``shards_and_manifest`` commits a new dataset version and leaves it
staged, the blocking checks audit that version (each records it), and ``published_dataset``
makes it current only when every blocking check passed on it. A failing check never
publishes, in the run or later; readers keep the version that was current."""

import json
from pathlib import Path

import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from kuration.demo.corpus import write_demo_landing_zone
from kuration.errors import CommitError
from kuration.output.versions import DatasetRoot
from kuration.read import load_committed
from kuration_assets import (
    dataset_integrity, dataset_quality, published_dataset, shards_and_manifest, shards_present,
)
from kuration_cli.graph_run import run_graph
from tests.dagster.runs import failure_text, plan_budget_for_tests

GRAPH = [shards_and_manifest, shards_present, dataset_integrity, dataset_quality, published_dataset]
#: The write alone, without the checks Dagster runs with an asset by default.
WRITE_ONLY = AssetSelection.assets(shards_and_manifest).without_checks()


def _build(resources, instance: DagsterInstance, *, policy=None, selection=None, budget=None):
    if budget is not None:
        plan_budget_for_tests(resources, instance, **budget)
    run_config = None
    if policy is not None:
        run_config = {"ops": {"dataset_manifest_dataset_quality": {"config": {"policy_json": json.dumps(policy)}}}}
    return materialize(GRAPH, resources=resources, instance=instance, run_config=run_config, raise_on_error=False,
                       selection=selection)


def _root(resources) -> DatasetRoot:
    return DatasetRoot(resources["storage_root"].path("dataset"))


def _published(result) -> list:
    return [e for e in result.get_asset_materialization_events() if e.asset_key.path == ["published_dataset"]]


def test_a_build_that_passes_its_audit_is_published(scored, instance):
    result = _build(scored, instance, budget={})
    assert result.success
    (event,) = _published(result)
    assert event.materialization.metadata["version"].value == "v1"
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {name: e.metadata["version"].value for name, e in checks.items()} == {
        "shards_present": "v1", "dataset_integrity": "v1", "dataset_quality": "v1"}
    root = _root(scored)
    assert root.current().version == "v1" and load_committed(root.url).root == root.version_url("v1")


def test_a_blocking_quality_failure_stages_the_version_and_never_publishes_it(scored, instance):
    assert _build(scored, instance, budget={}).success
    current = load_committed(_root(scored).url).manifest
    failing = _build(scored, instance, budget={"train": 40 / 3600}, policy={"min_shards": 10**6, "blocking": True})
    assert not _published(failing)
    quality = {e.check_name: e for e in failing.get_asset_check_evaluations()}["dataset_quality"]
    assert not quality.passed and quality.metadata["version"].value == "v2" and "min_shards" in quality.description
    root = _root(scored)
    assert root.versions() == ["v1", "v2"] and root.current().version == "v1"
    assert load_committed(root.url).manifest == current  # readers never saw v2
    # published_dataset materialized alone, later, still refuses: its audit failed on v2
    alone = materialize(GRAPH, resources=scored, instance=instance, raise_on_error=False,
                        selection=AssetSelection.assets(published_dataset))
    assert not alone.success
    assert "v2 not published (readers keep the current version): dataset_manifest:dataset_quality: failed on v2" in (
        failure_text(alone))
    assert root.current().version == "v1"


def test_an_advisory_quality_failure_warns_and_the_version_is_published(scored, instance):
    result = _build(scored, instance, budget={}, policy={"min_shards": 10**6})
    assert result.success and _published(result)
    quality = {e.check_name: e for e in result.get_asset_check_evaluations()}["dataset_quality"]
    assert not quality.passed and quality.severity.value == "WARN"
    assert _root(scored).current().version == "v1"


def test_a_staged_version_that_fails_integrity_is_not_published(scored, instance):
    assert _build(scored, instance, budget={}).success
    plan_budget_for_tests(scored, instance, train=40 / 3600)
    staged = materialize(GRAPH, resources=scored, instance=instance, selection=WRITE_ONLY)  # v2 staged
    assert staged.success
    root = _root(scored)
    v2 = load_committed(root.url, version="v2")
    shard = root.destination.where(f"versions/v2/{v2.entries[0]['path']}")
    with open(shard, "r+b") as handle:  # corrupted between the write and its audit
        handle.seek(10)
        handle.write(b"\xff\xfe")
    audit = _build(scored, instance, selection=AssetSelection.checks(shards_present, dataset_integrity,
                                                                        dataset_quality) | AssetSelection.assets(
                                                                            published_dataset))
    assert not _published(audit)
    integrity = {e.check_name: e for e in audit.get_asset_check_evaluations()}["dataset_integrity"]
    assert not integrity.passed and integrity.metadata["version"].value == "v2"
    assert root.current().version == "v1"


def test_a_check_that_has_not_evaluated_the_staged_version_blocks_its_publication(scored, instance):
    assert _build(scored, instance, budget={}).success
    plan_budget_for_tests(scored, instance, train=40 / 3600)
    assert materialize(GRAPH, resources=scored, instance=instance, selection=WRITE_ONLY).success
    alone = materialize(GRAPH, resources=scored, instance=instance, raise_on_error=False,
                        selection=AssetSelection.assets(published_dataset))
    assert not alone.success
    text = failure_text(alone)
    assert "v2 not published" in text and "its latest evaluation is of v1, not v2" in text
    assert _root(scored).current().version == "v1"


def test_kuration_run_never_publishes_a_version_that_fails_a_blocking_check(tmp_path):
    """``kuration run`` on a landing zone whose quality policy is blocking and unmet: the
    build fails naming the check, the version stays staged, and readers find nothing published."""
    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=1, sites=3, minutes=(1, 2))
    landing = Path(zone.root)
    (landing / "quality.json").write_text(json.dumps({"min_shards": 10**6, "blocking": True}))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(tmp_path / "home"))
        outcome = run_graph(str(landing), str(tmp_path / "storage"), out=lambda line: None)
    assert not outcome.ok and outcome.failure.startswith("build_dataset failed: blocking check")
    assert any("dataset_quality" in name for name in outcome.failed_checks)
    root = DatasetRoot(tmp_path / "storage" / "dataset")
    assert root.versions() == ["v1"] and root.current() is None
    with pytest.raises(CommitError, match="no version is published yet"):
        load_committed(root.url)


def test_a_build_waiting_in_the_run_queue_does_not_hide_the_audit_of_the_version_before_it(scored, instance):
    """A run plans its checks when it is created, so a build queued behind this one (the
    deployment's run queue lets one build go at a time, tests/deploy/test_run_queue.py) holds
    the newest, not yet evaluated, execution of each check. The publish step judges the
    latest execution that is not still waiting or running: the audit of the staged version."""
    from dagster import DagsterRunStatus, Definitions, define_asset_job

    plan_budget_for_tests(scored, instance)
    audited = _build(scored, instance, selection=AssetSelection.assets(shards_and_manifest).without_checks()
                     | AssetSelection.checks(shards_present, dataset_integrity, dataset_quality))
    assert audited.success and not _published(audited) and _root(scored).current() is None
    build = define_asset_job("build_dataset", selection=AssetSelection.assets(shards_and_manifest, published_dataset))
    # created, not started yet (as a queued run waits), and its checks planned
    queued = instance.create_run_for_job(Definitions(assets=GRAPH, jobs=[build], resources=scored).resolve_job_def(
        "build_dataset"), status=DagsterRunStatus.NOT_STARTED)
    alone = materialize(GRAPH, resources=scored, instance=instance, raise_on_error=False,
                        selection=AssetSelection.assets(published_dataset))
    assert alone.success, failure_text(alone)
    assert _root(scored).current().version == "v1"
    assert instance.get_run_by_id(queued.run_id).status == DagsterRunStatus.NOT_STARTED


def test_publishing_keeps_keep_versions_versions_and_says_which_it_removed(scored, instance):
    landing = Path(scored["landing_zone"].url)
    (landing / "curation.json").write_text(json.dumps({"keep_versions": 1}))
    first = _build(scored, instance, budget={})
    assert first.success and _published(first)[0].materialization.metadata["versions_removed"].value == "none"
    second = _build(scored, instance, budget={"train": 40 / 3600})
    assert second.success
    metadata = _published(second)[0].materialization.metadata
    assert (metadata["version"].value, metadata["versions_removed"].value, metadata["keep_versions"].value) == (
        "v2", "v1", 1)
    root = _root(scored)
    assert root.versions() == ["v2"] and root.current().version == "v2"
