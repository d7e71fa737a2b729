"""``shards`` + ``dataset_manifest`` (one step, ``shards_and_manifest``) and the blocking
``shards_present`` and ``dataset_integrity`` checks: steps of their own, runnable alone on the
committed dataset.

The step commits a new version of ``dataset/`` and leaves it staged (docs/versions.md):
``published_dataset``, which these runs leave out, would make it current. So the tests read
the staged version by name (:func:`tests.dagster.runs.staged_dataset`), the one the checks
audit, and a committed version is never changed: a rewrite is a new version beside it."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from dagster import AssetKey, AssetSelection, materialize

from kuration.budget import plan_budget
from kuration.budget.plan_store import load_scored_pool, read_budget_plan, read_budget_record, write_budget_plan
from kuration.output.versions import DatasetRoot
from kuration.read import iter_shards, load_committed, verify_dataset
from kuration.scoring import Strategy
from kuration_assets import dataset_assets, dataset_integrity, published_dataset, shards_and_manifest, shards_present
from rollout_assets import rollout_store
from tests.dagster.runs import H, failure_text
from tests.dagster.runs import markdown_rows, materialization_metadata
from tests.dagster.runs import plan_budget_for_tests, staged_dataset, staged_dir


def _dataset(resources, instance, **config):
    return materialize([shards_and_manifest, dataset_integrity], resources=resources, instance=instance,
                       raise_on_error=False,
                       run_config={"ops": {"shards_and_manifest": {"config": config}}} if config else None)


def test_the_dataset_is_written_committed_and_verified(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    result = _dataset(scored, instance)
    assert result.success
    meta = materialization_metadata(result)
    assert set(meta) == {"shards", "dataset_manifest"}
    assert meta["shards"]["train_shards"] > 0 and meta["shards"]["container"] == "npz"
    assert list(meta["shards"])[0] == "splits"
    assert meta["shards"]["splits"].startswith("| split | shards | steps | size |")
    shards_table = {row["split"]: row for row in markdown_rows(meta["shards"]["splits"])}
    assert shards_table["train"]["size"].endswith(" KiB")  # a size people read, not a byte count
    assert int(shards_table["train"]["shards"]) == meta["shards"]["train_shards"]  # and a number the UI plots
    assert not [key for key in meta["shards"] if key.endswith("_size")]  # read in the table, not again in a row
    assert meta["shards"]["written_shards"] == meta["dataset_manifest"]["shards"]
    manifest = meta["dataset_manifest"]
    assert manifest["commit_state"] == "committed" and "| path | split |" in manifest["preview"]
    assert list(manifest)[:2] == ["inspect_report", "splits"]  # the report, then the per-split table
    manifest_table = {row["split"]: row for row in markdown_rows(manifest["splits"])}
    requested = float(manifest_table["train"]["requested (h)"])
    assert requested == 0.0167  # 60 s, in hours to three significant digits
    assert 0 < manifest["train_emitted_hours"] < requested + 10 * H
    assert float(manifest_table["train"]["emitted (h)"]) == manifest["train_emitted_hours"]
    assert not [key for key in manifest if key.endswith("_requested_hours")]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "dataset_integrity" and check.passed
    assert check.description.startswith(f"{manifest['shards']} shards, ") and "commit chain intact" in check.description
    assert meta["shards"]["version"] == meta["dataset_manifest"]["version"] == "v1"
    assert verify_dataset(staged_dataset(tmp_path / "storage")).ok


def test_rematerializing_the_same_plan_reuses_every_verified_shard(scored, instance, tmp_path):
    """The rewrite of the rotten shard goes into a new version (v1 is committed, so never
    changed), which keeps every shard of v1 that still verifies."""
    plan_budget_for_tests(scored, instance)
    first = materialization_metadata(_dataset(scored, instance))["shards"]
    dataset = load_committed(staged_dataset(tmp_path / "storage"))
    victim = Path(dataset.shard_path(dataset.entries[0]))
    victim.write_bytes(victim.read_bytes()[:-1])  # bit rot on one shard
    rotten = victim.read_bytes()
    again = materialization_metadata(_dataset(scored, instance))["shards"]
    assert (again["written_shards"], again["reused_shards"]) == (1, first["written_shards"] - 1)
    assert (first["version"], again["version"]) == ("v1", "v2") and victim.read_bytes() == rotten
    assert verify_dataset(staged_dataset(tmp_path / "storage")).ok


def test_a_new_plan_replaces_the_dataset_unless_told_to_keep_it(scored, instance, tmp_path):
    """Replacing writes a new version (v2) beside the other run's (v1), which stays as it was,
    readable by name; refused, nothing new is written at all."""
    storage = tmp_path / "storage"
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    v1 = storage / "dataset" / "versions" / "v1"
    assert staged_dir(storage) == v1
    before = (v1 / "dataset_manifest.json").read_bytes()
    plan_budget_for_tests(scored, instance, train=30 * H)
    kept = _dataset(scored, instance, replace_other_runs=False)
    assert not kept.success and "holds a committed dataset of another run" in failure_text(kept)
    assert staged_dir(storage) == v1 and not (storage / "dataset" / "versions" / "v2").exists()
    assert (v1 / "dataset_manifest.json").read_bytes() == before
    replaced = _dataset(scored, instance)
    assert replaced.success
    assert staged_dir(storage) == storage / "dataset" / "versions" / "v2"
    after = (staged_dir(storage) / "dataset_manifest.json").read_bytes()
    assert after != before and (v1 / "dataset_manifest.json").read_bytes() == before
    assert verify_dataset(storage / "dataset", version="v1").ok
    # the new plan's shards whose content the old dataset already held are kept, not rewritten
    old_keys = {e["content_key"] for e in json.loads(before)["entries"]}
    new_entries = json.loads(after)["entries"]
    kept = sum(e["content_key"] in old_keys for e in new_entries)
    shards = materialization_metadata(replaced)["shards"]
    assert (shards["written_shards"], shards["reused_shards"]) == (len(new_entries) - kept, kept) and kept > 0


def _store_an_empty_plan(root: Path) -> None:
    """Replace the stored plan by one over the same pool whose split names no recording
    (ids written relative to the landing zone): every source not_in_split, nothing admitted."""
    stored = read_budget_plan(root)
    sources = sorted(set(stored.items.column("source_id").to_pylist()))
    elsewhere = pa.table({"stage": ["train"], "source": ["recordings/x.parquet"], "group": ["x"]})
    empty = plan_budget(load_scored_pool(root, sources).segments, stored.options,
                        strategy=Strategy.from_dict(stored.strategy), split_assignments=elsewhere)
    write_budget_plan(empty, root, inputs=read_budget_record(root)["inputs"])


def test_an_empty_plan_fails_the_dataset_step_unless_allowed(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    _store_an_empty_plan(tmp_path / "storage")
    refused = _dataset(scored, instance)
    assert not refused.success and "the budget plan admits nothing" in failure_text(refused)
    assert "allow_empty=True" in failure_text(refused) and not (tmp_path / "storage" / "dataset").exists()
    allowed = _dataset(scored, instance, allow_empty=True)
    assert allowed.success and materialization_metadata(allowed)["dataset_manifest"]["shards"] == 0


def test_the_seeds_int64_label_from_a_segment_feature_is_written_and_read_back(scored, instance, tmp_path):
    """Seed 000's ``label`` example, from the float64 tag the segment table stores."""
    spec_file = tmp_path / "landing" / "output_spec.json"
    spec = json.loads(spec_file.read_text())
    spec["modalities"]["label"] = {"dtype": "int64", "shape": [], "source": "segment:tag.near_miss"}
    spec_file.write_text(json.dumps(spec))
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    labels = [arrays["label"] for arrays in iter_shards(staged_dataset(tmp_path / "storage"))]
    assert labels and {a.dtype for a in labels} == {np.dtype(np.int64)}
    assert set(np.concatenate(labels).tolist()) == {0, 1}


def test_without_a_budget_plan_the_dataset_step_fails_with_the_fix(scored, instance):
    result = _dataset(scored, instance)
    assert not result.success and "materialize budget_plan" in failure_text(result)


def test_a_torn_commit_record_is_replaced_not_resumed(scored, instance, tmp_path):
    """The torn version (v1) is set aside, not resumed or repaired: the replacement is a new
    version (v2) that trusts none of v1's shards."""
    storage = tmp_path / "storage"
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    commit = staged_dir(storage) / "dataset.commit.json"
    commit.write_bytes(commit.read_bytes()[:40])
    torn = commit.read_bytes()
    kept = _dataset(scored, instance, replace_other_runs=False)
    assert not kept.success and "Re-run the write with force=True" in failure_text(kept)
    replaced = _dataset(scored, instance)
    assert replaced.success and materialization_metadata(replaced)["shards"]["reused_shards"] == 0
    assert staged_dataset(storage).endswith("@v2") and verify_dataset(staged_dataset(storage)).ok
    assert commit.read_bytes() == torn


def test_the_dataset_records_which_baked_split_its_plan_was_made_over(scored, instance, tmp_path):
    # a rollout store proves its split lineage through this: config.json -> splits.json digest
    from kuration.splits.artifacts import read_split_assignments

    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    config = load_committed(staged_dataset(tmp_path / "storage")).config
    _, splits_digest = read_split_assignments(tmp_path / "storage")
    assert config["provenance"]["split"] == {"origin": "splits_json", "sha256": splits_digest}


def _integrity_alone(resources, instance):
    return materialize([shards_and_manifest, dataset_integrity], resources=resources, instance=instance,
                       raise_on_error=False, selection=AssetSelection.checks(dataset_integrity))


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: its mtime (ns) and SHA-256, to prove a check rewrote nothing."""
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _latest_materializations(instance) -> dict[str, tuple[str, float]]:
    """Each dataset asset's latest materialization: the run that made it, and when."""
    out = {}
    for key in ("shards", "dataset_manifest"):
        event = instance.get_latest_materialization_event(AssetKey(key))
        out[key] = (event.run_id, event.timestamp)
    return out


def _step_keys(result) -> set[str]:
    return {event.step_key for event in result.all_events if event.step_key}


def test_the_integrity_check_is_a_step_of_its_own_after_the_write(scored, instance):
    plan_budget_for_tests(scored, instance)
    result = _dataset(scored, instance)
    assert result.success and _step_keys(result) == {"shards_and_manifest", "dataset_manifest_dataset_integrity"}
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "dataset_integrity" and check.passed


def test_the_integrity_check_alone_reverifies_the_committed_dataset_and_rewrites_nothing(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    dataset = staged_dir(tmp_path / "storage")  # the version the check audits
    before, materialized = _files(dataset), _latest_materializations(instance)

    sound = _integrity_alone(scored, instance)
    assert sound.success and _step_keys(sound) == {"dataset_manifest_dataset_integrity"}
    assert sound.get_asset_materialization_events() == []
    (check,) = sound.get_asset_check_evaluations()
    assert check.passed and "commit chain intact" in check.description

    entries = load_committed(dataset).entries
    victim = entries[-1]["path"]
    shard = dataset / victim
    shard.write_bytes(bytes(b ^ 0xFF for b in shard.read_bytes()))  # same size, other bytes
    tampered_files = _files(dataset)
    tampered = _integrity_alone(scored, instance)
    assert not tampered.success and _step_keys(tampered) == {"dataset_manifest_dataset_integrity"}
    (check,) = tampered.get_asset_check_evaluations()
    assert not check.passed and check.severity.value == "ERROR"
    assert check.description.startswith(f"1 of {len(entries):,} shards bad; first: {victim}: ")
    # the check only read: the files are as the tamper left them, the rest as committed
    assert _files(dataset) == tampered_files
    assert {k: v for k, v in tampered_files.items() if k != victim} == {k: v for k, v in before.items() if k != victim}
    assert _latest_materializations(instance) == materialized and tampered.get_asset_materialization_events() == []


def test_the_integrity_check_alone_without_a_dataset_says_how_to_commit_one(scored, instance, tmp_path):
    result = _integrity_alone(scored, instance)
    assert not result.success and result.get_asset_materialization_events() == []
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed and check.description == (
        f"no dataset is committed at {tmp_path / 'storage' / 'dataset'} (no dataset.commit.json or "
        "dataset_manifest.json: nothing was written there, or a writer stopped before its first commit); "
        "materialize shards and dataset_manifest (the build_dataset job), then run the check again")
    assert not (tmp_path / "storage" / "dataset").exists()


def test_the_shards_check_finds_every_listed_shard_at_its_size_after_the_write_and_alone(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    written = materialize([shards_and_manifest, shards_present], resources=scored, instance=instance,
                          raise_on_error=False)
    assert written.success and _step_keys(written) == {"shards_and_manifest", "shards_shards_present"}
    (check,) = written.get_asset_check_evaluations()
    dataset = staged_dir(tmp_path / "storage")
    entries = load_committed(dataset).entries
    assert check.check_name == "shards_present" and check.asset_key == AssetKey("shards") and check.passed
    assert check.description.startswith(f"all {len(entries):,} shards the manifest lists are present")
    assert check.metadata["shards"].value == len(entries) and check.metadata["missing_shards"].value == 0  # plotted
    (dataset / entries[0]["path"]).unlink()
    alone = materialize([shards_and_manifest, shards_present], resources=scored, instance=instance,
                        raise_on_error=False, selection=AssetSelection.checks(shards_present))
    assert not alone.success and alone.get_asset_materialization_events() == []
    (check,) = alone.get_asset_check_evaluations()
    assert not check.passed and check.severity.value == "ERROR" and check.metadata["missing_shards"].value == 1
    assert check.description.startswith(f"1 of {len(entries):,} shards absent or of another size; first: ")
    assert entries[0]["path"] in check.description


def test_a_failed_integrity_check_keeps_the_rollout_store_from_running_in_the_same_run(scored, instance, tmp_path,
                                                                                      monkeypatch):
    """The damaged version is never published either: ``published_dataset``, between the
    check and the store, is held back too, so readers of ``dataset/`` still see no version."""
    plan_budget_for_tests(scored, instance)
    write = dataset_assets.write_planned_dataset

    def write_then_rot_a_shard(out, *args, **kwargs):
        result = write(out, *args, **kwargs)
        staged = load_committed(result.version_url)
        shard = Path(staged.shard_path(staged.entries[0]))
        shard.write_bytes(shard.read_bytes()[:-1])  # damaged after the commit, before the check reads it
        return result

    monkeypatch.setattr(dataset_assets, "write_planned_dataset", write_then_rot_a_shard)
    result = materialize([shards_and_manifest, dataset_integrity, published_dataset, rollout_store], resources=scored,
                         instance=instance, raise_on_error=False)
    assert not result.success
    (check,) = result.get_asset_check_evaluations()
    first = load_committed(staged_dataset(tmp_path / "storage")).entries[0]["path"]
    assert not check.passed and f"first: {first}: missing, or its size or SHA-256 differs" in check.description
    assert set(materialization_metadata(result)) == {"shards", "dataset_manifest"}  # no publication, no rollout_store
    # never started (rather than failing on the damaged shard itself): the blocking check held them back
    assert [e for e in result.all_events if e.step_key in ("published_dataset", "rollout_store")] == []
    assert instance.get_latest_materialization_event(AssetKey("rollout_store")) is None
    assert DatasetRoot(tmp_path / "storage" / "dataset").current() is None
    assert not (tmp_path / "storage" / "rollouts").exists()


def test_write_workers_come_from_run_config_else_the_curation_settings(scored, instance, tmp_path, monkeypatch):
    # The count reaches the writer: a bad one fails the step naming it, from either place.
    plan_budget_for_tests(scored, instance)
    from_run = _dataset(scored, instance, write_workers=0)
    assert not from_run.success and "write_workers must be between 1" in failure_text(from_run)
    monkeypatch.setenv("KURATION_WRITE_WORKERS", "0")
    from_env = _dataset(scored, instance)
    assert not from_env.success and "KURATION_WRITE_WORKERS: write_workers must be between 1" in failure_text(from_env)
    monkeypatch.setenv("KURATION_WRITE_WORKERS", "2")
    assert _dataset(scored, instance).success
    in_workers = (staged_dir(tmp_path / "storage") / "dataset_manifest.json").read_bytes()
    monkeypatch.delenv("KURATION_WRITE_WORKERS")
    one = _dataset(scored, instance, write_workers=1, reuse_shards=False)
    assert one.success and materialization_metadata(one)["shards"]["reused_shards"] == 0
    assert (staged_dir(tmp_path / "storage") / "dataset_manifest.json").read_bytes() == in_workers
