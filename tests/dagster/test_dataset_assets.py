"""``shards`` + ``dataset_manifest`` (one step) and the blocking ``dataset_integrity`` check."""

import json
from pathlib import Path

import pyarrow as pa

from dagster import materialize

from kuration.budget import plan_budget
from kuration.budget.plan_store import load_scored_pool, read_budget_plan, read_budget_record, write_budget_plan
from kuration.read import load_committed, verify_dataset
from kuration.scoring import Strategy
from kuration_assets import training_dataset
from tests.dagster.runs import H, failure_text
from tests.dagster.runs import materialization_metadata
from tests.dagster.runs import plan_budget_for_tests


def _dataset(resources, instance, **config):
    return materialize([training_dataset], resources=resources, instance=instance, raise_on_error=False,
                       run_config={"ops": {"training_dataset": {"config": config}}} if config else None)


def test_the_dataset_is_written_committed_and_verified(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    result = _dataset(scored, instance)
    assert result.success
    meta = materialization_metadata(result)
    assert set(meta) == {"shards", "dataset_manifest"}
    assert meta["shards"]["train_shards"] > 0 and meta["shards"]["container"] == "npz"
    assert list(meta["shards"])[0] == "splits"
    assert meta["shards"]["splits"].startswith("| split | shards | steps | size |")
    assert meta["shards"]["train_size"].endswith(" KiB")  # a size people read, not a byte count
    assert meta["shards"]["written_shards"] == meta["dataset_manifest"]["shards"]
    manifest = meta["dataset_manifest"]
    assert manifest["commit_state"] == "committed" and "| path | split |" in manifest["preview"]
    assert manifest["train_requested_hours"] == 0.0167  # 60 s, in hours to three significant digits
    assert 0 < manifest["train_emitted_hours"] < manifest["train_requested_hours"] + 10 * H
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "dataset_integrity" and check.passed
    assert check.description.startswith(f"{manifest['shards']} shards, ") and "commit chain intact" in check.description
    assert verify_dataset(tmp_path / "storage" / "dataset").ok


def test_rematerializing_the_same_plan_reuses_every_verified_shard(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    first = materialization_metadata(_dataset(scored, instance))["shards"]
    dataset = load_committed(tmp_path / "storage" / "dataset")
    victim = Path(dataset.shard_path(dataset.entries[0]))
    victim.write_bytes(victim.read_bytes()[:-1])  # bit rot on one shard
    again = materialization_metadata(_dataset(scored, instance))["shards"]
    assert (again["written_shards"], again["reused_shards"]) == (1, first["written_shards"] - 1)


def test_a_new_plan_replaces_the_dataset_unless_told_to_keep_it(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    before = (tmp_path / "storage" / "dataset" / "dataset_manifest.json").read_bytes()
    plan_budget_for_tests(scored, instance, train=30 * H)
    kept = _dataset(scored, instance, replace_other_runs=False)
    assert not kept.success and "holds a committed dataset of another run" in failure_text(kept)
    assert (tmp_path / "storage" / "dataset" / "dataset_manifest.json").read_bytes() == before
    replaced = _dataset(scored, instance)
    assert replaced.success
    after = (tmp_path / "storage" / "dataset" / "dataset_manifest.json").read_bytes()
    assert after != before
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


def test_without_a_budget_plan_the_dataset_step_fails_with_the_fix(scored, instance):
    result = _dataset(scored, instance)
    assert not result.success and "materialize budget_plan" in failure_text(result)


def test_a_torn_commit_record_is_replaced_not_resumed(scored, instance, tmp_path):
    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    commit = tmp_path / "storage" / "dataset" / "dataset.commit.json"
    commit.write_bytes(commit.read_bytes()[:40])
    kept = _dataset(scored, instance, replace_other_runs=False)
    assert not kept.success and "Re-run the write with force=True" in failure_text(kept)
    replaced = _dataset(scored, instance)
    assert replaced.success and materialization_metadata(replaced)["shards"]["reused_shards"] == 0
    assert verify_dataset(tmp_path / "storage" / "dataset").ok


def test_the_dataset_records_which_baked_split_its_plan_was_made_over(scored, instance, tmp_path):
    # a rollout store proves its split lineage through this: config.json -> splits.json digest
    from kuration.splits.artifacts import read_split_assignments

    plan_budget_for_tests(scored, instance)
    assert _dataset(scored, instance).success
    config = load_committed(tmp_path / "storage" / "dataset").config
    _, splits_digest = read_split_assignments(tmp_path / "storage")
    assert config["provenance"]["split"] == {"origin": "splits_json", "sha256": splits_digest}
