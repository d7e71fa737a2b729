"""One resource opens the landing zone once per run: ``curation.json`` is read once however
many assets and checks the run holds, every step uses that one version (an edit mid-run is not
seen), and the run records the fingerprint in its tags, so a step that opens another version
(in another process, or a run pinned by ``kuration run``) fails instead of mixing the two."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from dagster import execute_job, materialize, reconstructable

from kuration.landing import open_landing_zone
from kuration.read import load_committed
from kuration_assets import budget, budget_assets, budget_plan
from kuration_resources import LANDING_FINGERPRINT_TAG
from rollout_assets import rollout_lineage, rollout_store
from splits_assets import universe
from tests.dagster.multiprocess_job import edited_mid_run
from tests.dagster.runs import H, dataset_assets_and_checks, failure_text
from tests.landing.reads import counted_reads


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return counted_reads(monkeypatch)


def test_one_run_reads_curation_json_once_and_an_edit_mid_run_is_not_mixed_in(scored, instance, scored_landing,
                                                                               reads, monkeypatch):
    (scored_landing / "curation.json").write_text(json.dumps({"budget": {"span_seconds": 10}}))
    before = open_landing_zone(scored_landing)
    reads.clear()
    planned = budget_assets.plan_stored_budget

    def plan_then_edit(*args, **kwargs):
        # the budget plan was priced with 64-step shards; now the files say 32 and two writers
        stored = planned(*args, **kwargs)
        spec = json.loads((scored_landing / "output_spec.json").read_text())
        (scored_landing / "output_spec.json").write_text(json.dumps({**spec, "shard_length": 32}))
        (scored_landing / "curation.json").write_text(json.dumps({"write_workers": 2}))
        return stored

    monkeypatch.setattr(budget_assets, "plan_stored_budget", plan_then_edit)
    # the whole chain, the dataset published (the store reads the published version)
    result = materialize(
        [budget_plan, budget, *dataset_assets_and_checks(), rollout_store, rollout_lineage],
        resources=scored, instance=instance, raise_on_error=False,
        run_config={"ops": {"budget_plan": {"config": {"train": 60 * H, "val": 30 * H, "test": 30 * H}}}})
    assert result.success, failure_text(result)
    assert reads["curation.json"] == 1 and reads["output_spec.json"] == 1 and reads["schema.json"] == 1
    # every step wrote with the version the run opened, the one the run's tag names
    assert instance.get_run_by_id(result.run_id).tags[LANDING_FINGERPRINT_TAG] == before.fingerprint
    assert load_committed(Path(scored["storage_root"].url) / "dataset").spec.shard_length == 64
    after = open_landing_zone(scored_landing)
    assert after.spec.shard_length == 32 and after.fingerprint != before.fingerprint


def test_a_run_pinned_to_another_version_fails_at_its_first_step(resources, instance):
    result = materialize([universe], resources=resources, instance=instance, raise_on_error=False,
                         tags={LANDING_FINGERPRINT_TAG: "0" * 64})
    assert not result.success
    text = failure_text(result)
    assert (f"changed while run {result.run_id} was using it: it was opened with settings fingerprint "
            "000000000000") in text
    assert "Launch a new run" in text
    assert not (Path(resources["storage_root"].url) / "universe").exists()


@pytest.mark.slow
def test_a_step_in_another_process_that_finds_the_settings_edited_fails(small_landing, tmp_path, monkeypatch):
    """About 40 s: Dagster starts a Python process, and imports the code location, per step
    (three here); that is the case under test."""
    from dagster import instance_for_test

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(small_landing))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(tmp_path / "storage"))
    zone = open_landing_zone(small_landing)
    with instance_for_test() as instance:
        with execute_job(reconstructable(edited_mid_run), instance=instance) as done:
            assert not done.success
            run_id = done.run_id
            failures = [e for e in done.all_events if e.is_step_failure]
        # the first step's process recorded the version it opened; the step that opened after the
        # edit, in a process of its own, found another one and stopped
        assert instance.get_run_by_id(run_id).tags[LANDING_FINGERPRINT_TAG] == zone.fingerprint
        assert [e.step_key for e in failures] == ["reads_settings"]
        error = failures[0].step_failure_data.error
        while error.cause is not None:
            error = error.cause
        assert error.cls_name == "LandingZoneChangedError"
        assert f"changed while run {run_id} was using it: it was opened with settings fingerprint " \
               f"{zone.fingerprint[:12]}" in error.message
        assert instance.get_latest_materialization_event(universe.key).run_id == run_id
