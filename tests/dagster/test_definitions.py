"""The one code location loads, holds every package's definitions, and the demo job runs."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey

from kuration_definitions import build_definitions, defs
from tests.ui.dagster_dev import DemoFolders

REPO = Path(__file__).resolve().parents[2]


def test_code_location_loads_and_merges_every_package():
    from dagster import Definitions

    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"universe", "resolved_splits", "scored_segments", "budget_plan", "shards", "dataset_manifest",
                    "published_dataset", "rollout_store"}
    checks = {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys}
    assert checks == {("universe", "universe_schema"), ("universe", "universe_sources"),
                      ("resolved_splits", "split_leakage"),
                      ("resolved_splits", "universe_drift"), ("scored_segments", "segment_pool"),
                      ("budget_plan", "budget"), ("shards", "shards_present"),
                      ("dataset_manifest", "dataset_integrity"),
                      ("dataset_manifest", "dataset_quality"), ("rollout_store", "rollout_validation"),
                      ("rollout_store", "rollout_lineage")}
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"curate_splits", "score_recordings", "fill_budget",
                                                             "build_dataset", "build_rollouts", "recurate"}
    assert defs.resolve_sensor_def("new_recordings_sensor") is not None
    assert defs.resolve_sensor_def("default_automation_condition_sensor") is not None
    assert defs.resolve_schedule_def("nightly_recuration").job_name == "recurate"
    job = defs.resolve_implicit_global_asset_job_def()
    assert job is not None
    curate = defs.resolve_job_def("curate_splits").asset_layer.asset_graph.asset_check_keys
    assert {(c.asset_key.to_user_string(), c.name) for c in curate} == {
        ("universe", "universe_schema"), ("universe", "universe_sources"), ("resolved_splits", "split_leakage"),
        ("resolved_splits", "universe_drift")}
    assert graph.get(AssetKey("resolved_splits")).parent_keys == {AssetKey("universe")}
    assert graph.get(AssetKey("budget_plan")).parent_keys == {AssetKey("scored_segments"), AssetKey("resolved_splits")}
    assert graph.get(AssetKey("shards")).parent_keys == {AssetKey("budget_plan")}
    assert graph.get(AssetKey("dataset_manifest")).parent_keys == {AssetKey("shards")}
    # the publication waits for the audit's checks on both assets; the store reads the published version
    assert graph.get(AssetKey("published_dataset")).parent_keys == {AssetKey("shards"), AssetKey("dataset_manifest")}
    assert graph.get(AssetKey("rollout_store")).parent_keys == {AssetKey("published_dataset"),
                                                                 AssetKey("resolved_splits")}


def test_one_asset_group_so_the_lineage_graph_opens_on_the_assets():
    # the UI collapses a graph of several groups into group boxes; the stages are the jobs
    graph = defs.resolve_asset_graph()
    assert {graph.get(key).group_name for key in graph.get_all_asset_keys()} == {"curation"}
    jobs = {name: {k.to_user_string() for k in defs.resolve_job_def(name).asset_layer.executable_asset_keys}
            for name in ("curate_splits", "score_recordings", "fill_budget", "build_dataset", "build_rollouts",
                         "recurate")}
    assert jobs == {"curate_splits": {"universe", "resolved_splits"}, "score_recordings": {"scored_segments"},
                    "fill_budget": {"budget_plan"},
                    "build_dataset": {"shards", "dataset_manifest", "published_dataset"},
                    "build_rollouts": {"rollout_store"},
                    # re-curation: everything but the scoring, which the sensor and backfills own
                    "recurate": {"universe", "resolved_splits", "budget_plan", "shards", "dataset_manifest",
                                 "published_dataset", "rollout_store"}}
    checks = {c.name for c in defs.resolve_job_def("build_dataset").asset_layer.asset_graph.asset_check_keys}
    assert checks == {"shards_present", "dataset_integrity", "dataset_quality"}
    rollouts = defs.resolve_job_def("build_rollouts").asset_layer.asset_graph.asset_check_keys
    assert {c.name for c in rollouts} == {"rollout_validation", "rollout_lineage"}
    pool = defs.resolve_job_def("score_recordings").asset_layer.asset_graph.asset_check_keys
    assert {c.name for c in pool} == {"segment_pool"}


def test_blocking_checks_are_declared_blocking():
    from kuration_assets import budget, dataset_integrity, dataset_quality, segment_pool, shards_present
    from rollout_assets import rollout_lineage, rollout_validation
    from splits_assets import split_leakage, universe_drift, universe_schema, universe_sources

    for check in (split_leakage, universe_drift, universe_schema, universe_sources, segment_pool, budget,
                  shards_present, dataset_integrity, dataset_quality, rollout_validation, rollout_lineage):
        (spec,) = check.check_specs
        assert spec.blocking, spec.name


def test_the_quality_check_is_part_of_the_audit_and_runs_in_build_dataset():
    """Once advisory (not blocking), the quality check is now blocking and one of the checks a
    version must pass before ``published_dataset`` publishes it; a failed gate still only warns
    (which neither a blocking check nor the audit stops at) unless the policy says
    ``"blocking": true`` (tests/dagster/test_write_audit_publish.py runs both). The audit is
    every blocking check of the dataset's two assets, and build_dataset runs them all."""
    from kuration_assets import dataset_quality
    from kuration_assets.dataset_assets import AUDIT_CHECKS

    (spec,) = dataset_quality.check_specs
    assert spec.blocking and dataset_quality.check_key in AUDIT_CHECKS
    graph = defs.resolve_asset_graph()
    dataset_checks = graph.get_check_keys_for_assets({AssetKey("shards"), AssetKey("dataset_manifest")})
    assert set(AUDIT_CHECKS) == {key for key in dataset_checks if graph.get_check_spec(key).blocking}
    job = defs.resolve_job_def("build_dataset")
    assert set(AUDIT_CHECKS) <= job.asset_layer.asset_graph.asset_check_keys


def test_resources_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(tmp_path / "s"))
    monkeypatch.setenv("KURATION_LANDING_ZONE", "s3://bucket/landing")
    resources = build_definitions().resources
    assert resources["storage_root"].url == str(tmp_path / "s")
    assert resources["landing_zone"].universe_csv_url() == "s3://bucket/landing/universe.csv"


def test_workspace_and_instance_yaml_point_at_the_code_location():
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == "kuration_definitions"
    instance_cfg = yaml.safe_load((REPO / "dagster.yaml").read_text())
    assert instance_cfg["telemetry"]["enabled"] is False
    assert instance_cfg["concurrency"]["runs"]["max_concurrent_runs"] >= 1
    assert "sqlite" in instance_cfg["storage"]


def test_instance_yaml_loads_as_a_dagster_instance(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    code = "from dagster import DagsterInstance; i = DagsterInstance.get(); print(type(i._run_storage).__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"DAGSTER_HOME": str(home), "PATH": ""},
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Sqlite" in out.stdout
    assert (tmp_path / "instance").is_dir()  # storage went where dagster.yaml says


def test_demo_job_materializes_everything_and_reports(demo):
    """kuration-demo (kuration_definitions.demo_job.main) on a private instance: the session's
    ``demo`` fixture runs it once, and this test reads what it printed and left. The first test
    to ask for it pays for the run, the whole graph on the demo corpus (about 30 s here)."""
    folders = DemoFolders.under(demo.fresh())
    assert demo.built.code == 0
    out = demo.built.out
    assert "SUCCESS" in out
    for needle in ("asset universe", "asset resolved_splits", "train_samples", "split_leakage", "universe_drift",
                   "universe:universe_sources", "each names a recording under",
                   "asset scored_segments: ", "segment_pool", "asset budget_plan", "train_admitted",
                   "budget_plan:budget", "budget review", "asset dataset_manifest", "commit_state",
                   "dataset_manifest:dataset_integrity",
                   # each check's verdict, under its line
                   "no sample or group in two stages (train ", "h of 4 h requested (+",
                   "verified: every size and SHA-256 matches, commit chain intact",
                   # the demo's quality.json, judged by the quality check of the audit, and the HTML report
                   "dataset_manifest:dataset_quality   PASSED", "all 6 gates passed", "html_report",
                   # and it ends with a validated rollout store
                   "build_rollouts: run", "asset rollout_store", f"{'rollout_store:rollout_validation':<34} PASSED",
                   f"{'rollout_store:rollout_lineage':<34} PASSED",
                   "candidate actions; every array, link, mask, label and source hash checks out"):
        assert needle in out
    assert "FAILED" not in out
    assert (folders.storage / "splits" / "splits.json").exists()
    assert (folders.storage / "budget" / "admitted.parquet").exists()
    from kuration.read import verify_dataset
    assert verify_dataset(folders.storage / "dataset").ok
    from kuration.rollouts import validate_rollout_zarr_store
    assert validate_rollout_zarr_store(folders.storage / "rollouts" / "rollouts.zarr").ok


def test_an_unreachable_landing_zone_warns_at_load_and_defers_its_plugins(monkeypatch, tmp_path):
    # no S3 credentials in this process: the code location still loads, and says why it could not read curation.json
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(tmp_path / "s"))
    monkeypatch.setenv("KURATION_LANDING_ZONE", "s3://bucket/landing")
    with pytest.warns(UserWarning, match="could not read the curation settings of s3://bucket/landing"):
        build_definitions()


def test_an_invalid_curation_json_fails_the_load_naming_the_key(monkeypatch, tmp_path):
    from kuration.landing.curation_config import CurationConfigError

    (tmp_path / "curation.json").write_text('{"workers": 2, "segment_windw": 3}')
    monkeypatch.setenv("KURATION_LANDING_ZONE", str(tmp_path))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(tmp_path / "s"))
    with pytest.raises(CurationConfigError, match=r"curation.json: unknown key\(s\) \['segment_windw'\]"):
        build_definitions()
