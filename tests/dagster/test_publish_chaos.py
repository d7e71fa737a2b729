"""Chaos under declarative automation: many automated builds of the dataset, a chosen fraction
of which fail their audit (the quality gates under a blocking policy, or integrity: a shard
corrupted on disk after the commit). The automation conditions decide what runs, as the
daemon's ticks would (``evaluate_automation_conditions``), and across every build:

- no version whose blocking check failed is ever published;
- every version whose checks passed is published, on the tick after its audit;
- the current version always names one whose checks passed.

Each build is a new budget plan (two plans alternate, so every build is a new run and a new
version), the dataset step the conditions request, its checks, and the publish step they
request, or not. The default run makes 50 builds (about a minute on an in-memory instance:
three in-process runs and two evaluations of every condition per build); ``pytest -m soak``
makes 200.
"""

import json
import random

import pytest
from dagster import AssetKey, AssetSelection, evaluate_automation_conditions, materialize

import kuration_assets.dataset_assets as dataset_assets
from kuration.output.versions import DatasetRoot
from kuration.read import load_committed
from kuration_assets import budget, budget_plan, published_dataset, shards_and_manifest
from kuration_definitions import defs
from tests.dagster.runs import H, dataset_assets_and_checks

FAULTS = ("none", "quality", "integrity")
WATCHED = ("shards", "dataset_manifest", "published_dataset")
ASSETS = dataset_assets_and_checks()
#: A policy no dataset of this corpus meets, marked blocking: the quality check fails at ERROR.
UNMET = json.dumps({"min_shards": 10**6, "blocking": True})


class Automation:
    """The conditions' cursor, and one tick: which watched assets the conditions request."""

    def __init__(self, instance):
        self.instance, self.cursor = instance, None

    def tick(self) -> set[str]:
        result = evaluate_automation_conditions(defs=defs, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        return {key for key in WATCHED if result.get_num_requested(AssetKey(key))}


def _corrupting_writes(monkeypatch) -> None:
    """From now on the dataset step's write corrupts one shard of the version it committed
    (bit rot after the commit): dataset_integrity must catch it."""
    real = dataset_assets.write_planned_dataset

    def write(*args, **kwargs):
        result = real(*args, **kwargs)
        path = f"{result.version_url}/{result.manifest['entries'][0]['path']}"
        with open(path, "r+b") as handle:
            handle.seek(40)
            byte = handle.read(1)
            handle.seek(40)
            handle.write(bytes([byte[0] ^ 0xFF]))
        return result

    monkeypatch.setattr(dataset_assets, "write_planned_dataset", write)


def _build(scored, instance, automation, fault, build, monkeypatch) -> tuple[str, bool, bool]:
    """One automated build: (its version, whether its audit passed, whether it was published)."""
    train = (40 + 10 * (build % 2)) * H
    plan = {"budget_plan": {"config": {"train": train, "val": 30 * H, "test": 30 * H, "span_seconds": 10.0}}}
    assert materialize([budget_plan, budget], resources=scored, instance=instance, run_config={"ops": plan}).success
    requested = automation.tick()
    assert {"shards", "dataset_manifest"} <= requested, f"build {build}: a new plan, yet the dataset is not requested"
    config = {"ops": {"dataset_manifest_dataset_quality": {"config": {"policy_json": UNMET}}}} if (
        fault == "quality") else None
    with monkeypatch.context() as patch:
        if fault == "integrity":
            _corrupting_writes(patch)
        written = materialize(ASSETS, resources=scored, instance=instance, run_config=config, raise_on_error=False,
                              selection=AssetSelection.assets(shards_and_manifest))
    checks = written.get_asset_check_evaluations()
    version = DatasetRoot(scored["storage_root"].path("dataset")).newest_committed()
    passed = all(c.passed or c.severity.value == "WARN" for c in checks) and len(checks) == 3
    publish = "published_dataset" in automation.tick()
    if publish:
        assert materialize(ASSETS, resources=scored, instance=instance,
                           selection=AssetSelection.assets(published_dataset)).success, f"build {build}"
    return version, passed, publish


def _chaos(scored, instance, monkeypatch, builds: int, seed: int) -> None:
    rng = random.Random(seed)
    automation = Automation(instance)
    automation.tick()  # the cursor starts after the fixture's runs
    root = DatasetRoot(scored["storage_root"].path("dataset"))
    passed_versions, failed_versions = set(), set()
    for build in range(builds):
        fault = rng.choices(FAULTS, weights=(2, 1, 1))[0]
        version, passed, published = _build(scored, instance, automation, fault, build, monkeypatch)
        assert passed == (fault == "none"), f"build {build} ({fault}): the audit said passed={passed}"
        assert published == passed, f"build {build} ({fault}): published={published}, audit passed={passed}"
        (passed_versions if passed else failed_versions).add(version)
        current = root.current()
        assert current is None or current.version in passed_versions, f"build {build}: {current} is current"
        if current is not None:
            assert load_committed(root.url).root == root.version_url(current.version)
    log = {record.version for record in root.publish_log()}
    assert log == passed_versions and not log & failed_versions
    assert passed_versions and failed_versions and len(passed_versions | failed_versions) == builds


def test_no_automated_build_publishes_over_a_failing_check(scored, instance, monkeypatch):
    """Slow (about a minute): the issue asks for at least 50 automated builds, each three
    in-process runs and two evaluations of every automation condition."""
    _chaos(scored, instance, monkeypatch, builds=50, seed=11)


@pytest.mark.soak
def test_no_automated_build_publishes_over_a_failing_check_soak(scored, instance, monkeypatch):
    """The same with 200 builds (about four minutes), under the soak marker only."""
    _chaos(scored, instance, monkeypatch, builds=200, seed=12)
