"""The inspect report on the ``dataset_manifest`` materialization, and the ``dataset_quality``
check: a kur-check policy from the landing zone or from run config, runnable on its own
against the staged version. A failed gate warns (the run goes on, the version is still
published) unless the policy says ``"blocking": true`` (tests/dagster/test_write_audit_publish.py);
a policy that cannot be read fails the check at ERROR, and since the check is blocking, its
step and the run fail, so that version is not published."""

import json

from dagster import AssetCheckSeverity, AssetSelection, materialize

from kuration_assets import dataset_integrity, dataset_quality, shards_and_manifest
from tests.dagster.runs import markdown_rows, materialization_metadata
from tests.dagster.runs import plan_budget_for_tests


def _quality(resources, instance, *, alone=False, **config):
    # the check's op is named after its asset and itself
    run_config = {"ops": {"dataset_manifest_dataset_quality": {"config": config}}} if config else None
    result = materialize([shards_and_manifest, dataset_integrity, dataset_quality], resources=resources,
                         instance=instance,
                         run_config=run_config, raise_on_error=False,
                         selection=AssetSelection.checks(dataset_quality) if alone else None)
    return result, {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_the_manifest_carries_the_report_and_its_html_and_the_check_says_there_is_no_policy(scored, instance,
                                                                                             tmp_path):
    plan_budget_for_tests(scored, instance)
    result, checks = _quality(scored, instance)
    assert result.success
    manifest = materialization_metadata(result)["dataset_manifest"]
    assert next(iter(manifest)) == "inspect_report"  # the summary comes first in the UI
    report = manifest["inspect_report"]
    assert report.startswith(f"**{manifest['shards']:,} shards from ")  # and how many of the scored sources
    assert "| split | shards | steps | hours | requested |" in report and "**Modalities**" in report
    assert "**Budget** (hours)" in report and "4.0119444444444445" not in report
    html = tmp_path / "storage" / "reports" / "dataset_report.html"
    assert manifest["html_report"] == str(html)
    text = html.read_text()
    assert all(f'data-chart="{name}"' in text for name in ("hours_per_split", "shard_lengths", "priorities"))
    assert set(checks) == {"dataset_integrity", "dataset_quality"} and checks["dataset_integrity"].passed
    quality = checks["dataset_quality"]
    assert quality.passed and quality.description.startswith("no quality policy: add ")
    assert str(tmp_path / "landing" / "quality.json") in quality.description


def test_the_check_runs_alone_with_the_landing_zone_policy_or_run_config(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    assert _quality(scored, instance)[0].success
    (tmp_path / "landing" / "quality.json").write_text(json.dumps({"min_shards": 10**9, "max_skipped_sources": 0}))
    result, checks = _quality(scored, instance, alone=True)
    assert result.success  # a warning does not fail the step
    assert result.get_asset_materialization_events() == []  # the dataset is checked, not rebuilt
    failed = checks["dataset_quality"]
    assert not failed.passed and failed.severity == AssetCheckSeverity.WARN
    assert failed.description.startswith("1 of 2 gates failed; first: min_shards: ")
    # each gate with what it measured against its threshold, in one table; no bare True / False figures
    gates = {row["gate"]: row for row in markdown_rows(failed.metadata["gates"])}
    shards = failed.metadata["shards"].value  # what was measured is a number too, which the check's page plots
    assert gates["min_shards"]["result"] == "FAILED" and gates["min_shards"]["threshold"] == "1,000,000,000"
    assert gates["min_shards"]["measured"] == f"{shards:,}" and shards > 0
    assert (gates["max_skipped_sources"]["result"], gates["max_skipped_sources"]["measured"]) == ("passed", "0")
    assert "figures" not in failed.metadata and failed.metadata["skipped_sources"].value == 0
    # run config wins over the landing zone's file
    result, checks = _quality(scored, instance, alone=True,
                              policy_json=json.dumps({"min_shards": 1, "verify": True}))
    assert result.success and checks["dataset_quality"].passed
    assert checks["dataset_quality"].description == "all 2 gates passed"
    result, checks = _quality(scored, instance, alone=True, policy_json='{"min_shard": 1}')
    bad = checks["dataset_quality"]
    assert not result.success  # a blocking check at ERROR fails its step: nothing is published after it
    assert not bad.passed and bad.severity == AssetCheckSeverity.ERROR
    assert bad.description.startswith("cannot check the quality policy: run config policy_json") and "min_shard" in \
        bad.description
