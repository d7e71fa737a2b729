"""The universe / resolved_splits assets and their blocking checks, materialized in process."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, AssetSelection, materialize

from kuration.splits import load_splits
from kuration.splits.artifacts import load_universe
from kuration.splits.extend import hashed_stage
from splits_assets import resolved_splits, split_leakage, universe, universe_drift, universe_schema, universe_sources
from tests.dagster.downstream import training_view
from tests.dagster.runs import failure_text, markdown_items, materialization_metadata, write_rule
from tests.dagster.small_landing import write_settings_files
from tests.splits.mismatched_ids import prefix_universe_sources

ALL = [universe, resolved_splits, universe_schema, universe_sources, split_leakage, universe_drift]


def _run(assets, resources, instance, split_config=None):
    run_config = {"ops": {"resolved_splits": {"config": split_config or {"strategy": "random", "seed": 1}}}}
    return materialize(assets, resources=resources, instance=instance, run_config=run_config, raise_on_error=False)


def _checks(result) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def _materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def test_universe_asset_writes_parquet_and_metadata(resources, instance, tmp_path):
    result = materialize([universe, universe_schema], resources=resources, instance=instance)
    assert result.success
    (mat,) = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert meta["samples"] == 24 and meta["sources"] == 6 and meta["groups"] == 3
    stored = load_universe(resources["storage_root"].url)
    assert meta["universe_hash"] == stored.hash
    assert "site_a/rec_1.parquet#0" in meta["preview"]
    assert _checks(result) == {"universe_schema": True}
    # the data version tracks the universe content
    record = instance.get_latest_materialization_event(AssetKey("universe"))
    assert record is not None


def test_whole_graph_resolves_a_leak_free_split(resources, instance):
    result = _run(ALL, resources, instance)
    assert result.success
    assert _checks(result) == {"universe_schema": True, "universe_sources": True, "split_leakage": True,
                               "universe_drift": True}
    verdicts = {e.check_name: e.description for e in result.get_asset_check_evaluations()}
    assert verdicts["universe_schema"].startswith("24 samples from 6 sources in 3 groups: ")
    assert verdicts["universe_sources"].startswith("6 universe sources, each names a recording under ")
    assert verdicts["split_leakage"].startswith("no sample or group in two stages (train ")
    assert verdicts["universe_drift"].startswith("split is baked against the current universe ")
    storage = Path(resources["storage_root"].url)
    cfg = load_splits(storage / "splits" / "splits.json")
    assert cfg.is_baked
    table = pq.read_table(storage / "splits" / "split_assignments.parquet").to_pandas()
    exclusive = table[table.stage != "predict"]
    assert exclusive.groupby("group").stage.nunique().max() == 1  # groups kept whole
    assert set(exclusive.stage) == {"train", "val", "test"}
    assert (table.stage == "predict").sum() == 24  # empty predict = whole universe
    report = json.loads((storage / "splits" / "split_report.json").read_text())
    assert report["status"] == "resolved" and report["leakage"]["ok"] is True


def test_leaking_split_blocks_downstream_in_the_same_run(resources, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {
        "train": [{"kind": "glob", "pattern": "site_a/*"}, {"kind": "files", "paths": ["site_b/rec_1.parquet"]}],
        "val": [{"kind": "files", "paths": ["site_b/rec_2.parquet"]}],  # site_b in train and val
        "test": [{"kind": "glob", "pattern": "site_c/*"}],
    })
    result = _run([*ALL, training_view], resources, instance, {"splits_json": rule})
    assert not result.success
    assert _checks(result)["split_leakage"] is False
    assert "resolved_splits" in _materialized(result)
    assert "training_view" not in _materialized(result)
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "split_leakage"]
    meta = {k: v.value for k, v in evaluation.metadata.items()}
    assert "| no_split_overlap.shared_groups | site_b |" in meta["figures"]
    assert evaluation.description.startswith("no_split_overlap violated:") and "'site_b'" in evaluation.description
    assert "(first: site_b/rec_1.parquet#0, " in evaluation.description  # the first leaking samples are named
    assert markdown_items(meta["errors"])[0].startswith("no_split_overlap violated:") and "warnings" not in meta


def test_warn_policy_reports_but_does_not_block(resources, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {
        "leakage_check": "warn",
        "train": [{"kind": "files", "paths": ["site_a/rec_1.parquet"]}],
        "val": [{"kind": "files", "paths": ["site_a/rec_2.parquet"]}],
    })
    result = _run([*ALL, training_view], resources, instance, {"splits_json": rule})
    assert result.success
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "split_leakage"]
    assert evaluation.passed is False and evaluation.severity.value == "WARN"
    assert "training_view" in _materialized(result)


def test_drifted_positional_rule_is_refused_and_blocks_downstream(resources, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {
        "universe_hash": "0" * 64,  # pinned to some other universe
        "train": [{"kind": "dir_indices", "ids": ["0-7"]}],
        "test": [{"kind": "dir_indices", "ids": ["16-23"]}],
    })
    result = _run([*ALL, training_view], resources, instance, {"splits_json": rule})
    assert not result.success
    checks = _checks(result)
    assert checks["universe_drift"] is False and checks["split_leakage"] is False
    assert "training_view" not in _materialized(result)
    storage = Path(resources["storage_root"].url)
    assert not (storage / "splits" / "splits.json").exists()  # nothing wrong was written
    report = json.loads((storage / "splits" / "split_report.json").read_text())
    assert report["status"] == "refused_drift"
    assert "Re-run resolve-splits" in report["input_drift"]["message"]


def test_position_independent_rule_with_stale_pin_still_resolves(resources, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {
        "universe_hash": "0" * 64,
        "train": [{"kind": "file_indices", "source": "site_a/rec_1.parquet", "ids": ["0-3"]}],
        "val": [{"kind": "file_indices", "source": "site_b/rec_1.parquet", "ids": [0, 1]}],
        # a stale baked file must decide about every sample; these it keeps out of train / val / test
        "predict": [{"kind": "file_indices", "source": "site_b/rec_1.parquet", "ids": [2, 3]},
                    {"kind": "files", "paths": ["site_a/rec_2.parquet", "site_b/rec_2.parquet", "site_c/rec_1.parquet",
                                                "site_c/rec_2.parquet"]}],
    })
    result = _run(ALL, resources, instance, {"splits_json": rule})
    assert result.success
    assert _checks(result)["universe_drift"] is True


def test_universe_changed_after_baking_fails_drift_check(resources, instance, small_landing):
    assert _run(ALL, resources, instance).success
    with (small_landing / "universe.csv").open("a") as handle:
        handle.write("site_d/rec_1.parquet,0-3,site_d\n")
    assert materialize([universe], resources=resources, instance=instance).success
    # evaluate the split's checks alone against the changed universe
    result = materialize(
        ALL, resources=resources, instance=instance, raise_on_error=False,
        selection=AssetSelection.checks(universe_drift, split_leakage),
    )
    checks = _checks(result)
    assert checks == {"universe_drift": False, "split_leakage": False}


def test_bad_universe_csv_fails_the_universe_asset_with_the_line(resources, instance, small_landing):
    (small_landing / "universe.csv").write_text("source,index\nrec.parquet,0\nrec.parquet,x\n")
    result = materialize([universe], resources=resources, instance=instance, raise_on_error=False)
    assert not result.success
    failure = failure_text(result)
    assert "universe.csv: 1 invalid cell(s)" in failure
    assert "line 3, column 'index': value 'x'" in failure


def test_universe_schema_check_catches_a_tampered_parquet(resources, instance):
    assert materialize([universe], resources=resources, instance=instance).success
    path = Path(resources["storage_root"].url) / "universe" / "universe.parquet"
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # drop a row, keep the pinned hash
    result = materialize(
        [universe, universe_schema], resources=resources, instance=instance, raise_on_error=False,
        selection=AssetSelection.checks(universe_schema),
    )
    assert _checks(result) == {"universe_schema": False}


def test_landing_zone_on_an_fsspec_url(tmp_path, instance):
    import fsspec

    from kuration.demo.corpus import DEMO_OUTPUT_SPEC, DEMO_SCHEMA, DEMO_STRATEGY
    from kuration_resources import LandingZoneResource, StorageRootResource

    fs = fsspec.filesystem("memory")
    fs.pipe("/lz-test/universe.csv", b"source,index,group\nr1.parquet,0-2,g1\nr2.parquet,0-2,g2\n")
    for name, doc in (("schema", DEMO_SCHEMA), ("strategy", DEMO_STRATEGY), ("output_spec", DEMO_OUTPUT_SPEC)):
        fs.pipe(f"/lz-test/{name}.json", json.dumps(doc).encode())
    resources = {
        "storage_root": StorageRootResource(url="memory://lz-test-storage"),
        "landing_zone": LandingZoneResource(url="memory://lz-test"),
    }
    result = materialize([universe, universe_schema], resources=resources, instance=instance)
    assert result.success
    assert fs.exists("/lz-test-storage/universe/universe.parquet")
    assert len(load_universe("memory://lz-test-storage")) == 6


def test_split_definition_config_rejects_two_sources(resources, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {"train": [{"kind": "all"}]})
    result = _run(ALL, resources, instance, {"splits_json": rule, "strategy": "random"})
    assert not result.success
    assert "needs exactly one of splits_json, strategy, from_split_column" in failure_text(result)


@pytest.mark.parametrize("strategy", ["random", "stratified"])
def test_demo_corpus_through_the_graph(tmp_path, instance, demo_landing, strategy):
    from kuration_resources import LandingZoneResource, StorageRootResource

    resources = {
        "storage_root": StorageRootResource(url=str(tmp_path / "s")),
        "landing_zone": LandingZoneResource(url=str(demo_landing)),
    }
    result = _run(ALL, resources, instance, {"strategy": strategy, "seed": 4})
    assert result.success
    assert all(_checks(result).values()) and "universe_sources" in _checks(result)


def _curate_splits(monkeypatch, tmp_path, instance, landing):
    """The code location's own ``curate_splits`` job, on ``landing``."""
    from kuration_definitions import build_definitions

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(landing))
    monkeypatch.setenv("KURATION_STORAGE_ROOT", str(tmp_path / "job_storage"))
    return build_definitions().resolve_job_def("curate_splits").execute_in_process(
        instance=instance, raise_on_error=False,
        run_config={"ops": {"resolved_splits": {"config": {"strategy": "stratified", "seed": 0}}}})


def test_curate_splits_checks_that_the_demo_universe_names_its_recordings(monkeypatch, tmp_path, instance,
                                                                         demo_landing):
    result = _curate_splits(monkeypatch, tmp_path, instance, demo_landing)
    assert result.success and _checks(result)["universe_sources"] is True
    assert _materialized(result) == {"universe", "resolved_splits"}


def test_universe_ids_relative_to_the_landing_zone_block_resolved_splits(monkeypatch, tmp_path, instance,
                                                                        demo_landing):
    ids = sorted(prefix_universe_sources(demo_landing))  # recordings/<site>/flight_NNN.parquet
    result = _curate_splits(monkeypatch, tmp_path, instance, demo_landing)
    assert not result.success
    assert _checks(result) == {"universe_schema": True, "universe_sources": False}
    assert _materialized(result) == {"universe"}  # the blocking check stopped resolved_splits
    assert not (tmp_path / "job_storage" / "splits").exists()
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "universe_sources"]
    assert evaluation.severity.value == "ERROR"
    recordings = f"{demo_landing}/recordings"
    assert evaluation.description.startswith(
        f"{len(ids)} of {len(ids)} universe sources name no recording under {recordings} matching '*.parquet': "
        f"{ids[0]!r}, {ids[1]!r}, {ids[2]!r} and {len(ids) - 3} more")
    (error,) = markdown_items(evaluation.metadata["errors"])
    assert f"Universe source ids are paths relative to the recordings root {recordings} " in error
    assert "match a recording once the prefix 'recordings/' is removed" in error
    figures = evaluation.metadata["figures"].value
    assert f"| unmatched_sources | {len(ids)} |" in figures and f"| recordings | {len(ids)} |" in figures


def test_without_a_universe_csv_the_recordings_root_is_enumerated(tmp_path, instance):
    # curation.json's "recordings": "." makes the landing zone itself the recordings root
    from kuration_resources import LandingZoneResource, StorageRootResource

    landing = tmp_path / "folder_landing"
    (landing / "site_a").mkdir(parents=True)
    write_settings_files(landing)
    for name in ("site_a/r1.parquet", "site_a/r2.parquet", "r0.parquet", "notes.txt", ".hidden.parquet"):
        (landing / name).write_bytes(b"x")
    resources = {
        "storage_root": StorageRootResource(url=str(tmp_path / "s")),
        "landing_zone": LandingZoneResource(url=str(landing), universe_csv=None, source_pattern="*.parquet",
                                            recordings="."),
    }
    assert materialize([universe, universe_schema], resources=resources, instance=instance).success
    stored = load_universe(str(tmp_path / "s"))
    assert stored.uids() == ["r0.parquet#0", "site_a/r1.parquet#0", "site_a/r2.parquet#0"]
    assert stored[0].materialized_path == str(landing / "r0.parquet")


def test_a_bad_config_value_is_refused_before_the_run(resources, instance):
    from dagster import DagsterInvalidConfigError

    with pytest.raises(DagsterInvalidConfigError, match="strategy"):
        _run(ALL, resources, instance, {"strategy": "alphabetical"})


def test_the_split_data_version_is_the_baked_files_digest(resources, instance):
    import hashlib

    assert _run(ALL, resources, instance).success
    record = instance.get_latest_materialization_event(AssetKey("resolved_splits"))
    version = record.asset_materialization.tags["dagster/data_version"]
    text = (Path(resources["storage_root"].url) / "splits" / "splits.json").read_bytes()
    assert version == hashlib.sha256(text).hexdigest()


def _stored_stages(resources) -> dict[str, str]:
    table = pq.read_table(Path(resources["storage_root"].url) / "splits" / "split_assignments.parquet").to_pandas()
    exclusive = table[table.stage != "predict"]
    return dict(zip(exclusive.uid, exclusive.stage, strict=True))


def _grow(landing: Path) -> None:
    """A new recording of an existing site, and a new site (placeholder files, as in ``small_landing``)."""
    for name in ("site_a/rec_3.parquet", "site_d/rec_1.parquet"):
        (landing / "recordings" / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / "recordings" / name).write_bytes(b"")
    with (landing / "universe.csv").open("a") as handle:
        handle.write("site_a/rec_3.parquet,0-1,site_a\nsite_d/rec_1.parquet,0-3,site_d\n")


def test_a_grown_universe_extends_the_computed_split_without_moving_a_source(resources, instance, small_landing):
    assert _run(ALL, resources, instance).success
    before = _stored_stages(resources)
    _grow(small_landing)
    result = _run([*ALL, training_view], resources, instance)
    assert result.success and all(_checks(result).values())
    after = _stored_stages(resources)
    assert {uid: after[uid] for uid in before} == before
    assert after["site_a/rec_3.parquet#0"] == after["site_a/rec_3.parquet#1"] == before["site_a/rec_1.parquet#0"]
    assert after["site_d/rec_1.parquet#0"] == hashed_stage(1, "site_d", val_ratio=0.2, test_ratio=0.2)
    meta = materialization_metadata(result)["resolved_splits"]
    assert meta["resolution_mode"] == "extended"
    assert (meta["kept_samples"], meta["newly_assigned_samples"], meta["removed_samples"]) == (24, 6, 0)
    assert meta["extension_rule"].startswith("kuration.split-extension.v1: ")
    # a changed seed resolves afresh
    fresh = _run(ALL, resources, instance, {"strategy": "random", "seed": 2})
    assert fresh.success and materialization_metadata(fresh)["resolved_splits"]["resolution_mode"] == "fresh"
    assert "kept_samples" not in materialization_metadata(fresh)["resolved_splits"]


def test_a_baked_file_on_a_grown_universe_blocks_until_extended(resources, instance, small_landing, tmp_path):
    from kuration_cli import main

    baked = tmp_path / "baked.json"
    assert main(["resolve-splits", "--universe-csv", str(small_landing / "universe.csv"), "--strategy", "random",
                 "--seed", "5", "--out", str(baked), "-q"]) == 0
    assert _run(ALL, resources, instance, {"splits_json": str(baked)}).success
    before = _stored_stages(resources)
    _grow(small_landing)
    blocked = _run([*ALL, training_view], resources, instance, {"splits_json": str(baked)})
    assert not blocked.success
    assert _checks(blocked) == {"universe_schema": True, "universe_sources": True, "universe_drift": False,
                                "split_leakage": False}
    assert "training_view" not in _materialized(blocked)
    (drift,) = [e for e in blocked.get_asset_check_evaluations() if e.check_name == "universe_drift"]
    assert drift.description.startswith(f"split refused: {baked} was baked against universe ")
    assert "6 samples from 2 sources are in none of its stages (first: site_a/rec_3.parquet, " \
           "site_d/rec_1.parquet)" in drift.description
    assert "extend_baked: true" in drift.description
    extended = _run([*ALL, training_view], resources, instance,
                    {"splits_json": str(baked), "extend_baked": True, "seed": 5})
    assert extended.success and all(_checks(extended).values())
    assert "training_view" in _materialized(extended)
    after = _stored_stages(resources)
    assert {uid: after[uid] for uid in before} == before and len(after) == 30
    meta = materialization_metadata(extended)["resolved_splits"]
    assert meta["resolution_mode"] == "extended_baked"
    assert (meta["kept_samples"], meta["newly_assigned_samples"]) == (24, 6) and "removed_samples" not in meta
