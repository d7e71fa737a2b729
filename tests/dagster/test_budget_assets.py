"""``budget_plan`` over every scored partition and the resolved split, and its blocking ``budget`` check."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import materialize

from kuration.budget.plan_store import read_budget_plan, read_budget_record, write_budget_plan
from kuration_assets import budget, budget_plan
from kuration_resources import StorageRootResource
from splits_assets import resolved_splits, universe
from tests.dagster.runs import H, failure_text, markdown_items, markdown_rows, write_rule
from tests.splits.mismatched_ids import prefix_universe_sources


def _budget(resources, instance, **config):
    config = {"train": 60 * H, "val": 30 * H, "test": 30 * H, "span_seconds": 10.0, **config}
    return materialize([budget_plan, budget], resources=resources, instance=instance, raise_on_error=False,
                       run_config={"ops": {"budget_plan": {"config": config}}})


def _evaluation(result):
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_the_plan_fills_each_split_and_its_check_passes(scored, instance, tmp_path):
    result = _budget(scored, instance)
    assert result.success
    (mat,) = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    meta = {k: v.value for k, v in mat.metadata.items()}
    # the figures are read in the one table; hours to three significant digits (60 s is 0.0167 h),
    # the unit in the column's name
    table = {row["split"]: row for row in markdown_rows(meta["budget"])}
    assert [table[split]["requested (h)"] for split in ("train", "val", "test")] == ["0.0167", "0.00833", "0.00833"]
    for split in ("train", "val", "test"):
        requested = float(table[split]["requested (h)"])
        # what each split admitted is a number too, which the UI plots; the table shows the same
        assert requested <= meta[f"{split}_admitted_hours"] < requested + 10 * H
        assert float(table[split]["admitted (h)"]) == meta[f"{split}_admitted_hours"]
        assert float(table[split]["emitted (h)"]) <= meta[f"{split}_admitted_hours"]
        assert float(table[split]["utilization"].rstrip("%")) >= 100.0
    # no figure of the table repeated as a row of its own
    assert not [key for key in meta if key.endswith(("_requested_hours", "_emitted_hours", "_utilization_percent"))]
    assert meta["unit"] == "hours" and meta["sources"] == 6 and "| train |" in meta["budget"]
    assert list(meta)[0] == "budget"  # the summary table first
    excluded = meta["excluded"].splitlines()
    assert excluded[0] == "| reason left out | items |"
    assert {line.split(" | ")[0].strip("| ") for line in excluded[2:]} >= {
        "budget_full", "filtered", "non_finite", "group_cap", "not_in_split"}
    coverage = meta["tag_coverage"].splitlines()
    assert coverage[0] == "| split | tag | admitted items | reserve |"
    assert {line.split(" | ")[1] for line in coverage[2:] if line.startswith("| train |")} == {
        "near_miss", "landing", "low_battery"}
    assert _evaluation(result).passed and _evaluation(result).description.startswith("train 0.0167 h of 0.0167 h ")
    assert "| train_requested_hours | 0.0167 h |" in _evaluation(result).metadata["figures"].value  # hours, said so
    plan = read_budget_plan(tmp_path / "storage")
    assert plan.options.span_seconds == 10.0 and plan.options.chunking.shard_length == 64  # from output_spec.json
    assert plan.options.chunking.short_policy == "pad"
    admitted = pq.read_table(tmp_path / "storage" / "budget" / "admitted.parquet")
    assert admitted.num_rows == plan.admitted().num_rows > 0
    record = read_budget_record(tmp_path / "storage")
    assert record["inputs"]["sources"] == 6 and len(record["inputs"]["splits_sha256"]) == 64


def test_a_count_budget_admits_segments(scored, instance, tmp_path):
    result = _budget(scored, instance, budget_unit="segments", train=5, val=2, test=2, span_seconds=None)
    assert result.success and _evaluation(result).passed
    acc = read_budget_plan(tmp_path / "storage").accounting
    assert acc["unit"] == "segments" and [acc["splits"][s]["admitted"] for s in ("train", "val", "test")] == [5, 2, 2]


def test_underfill_past_the_threshold_warns_without_blocking(scored, instance):
    result = _budget(scored, instance, train=100.0)
    assert result.success
    evaluation = _evaluation(result)
    assert not evaluation.passed and evaluation.severity.value == "WARN"
    warnings = markdown_items(evaluation.metadata["warnings"])
    (train,) = [w for w in warnings if w.startswith("train: underfilled")]
    # 100 h is more than train's whole pool: the warning gives both figures, the check's figures too.
    assert ": the budget is larger than the split's whole scored pool (100 h requested, " in train
    assert train.endswith(" in the pool). Lower the train budget, or add recordings to train")
    assert "; 1 warning; first: train: underfilled" in evaluation.description
    figures = evaluation.metadata["figures"].value
    assert "| train_requested_hours | 100 h |" in figures and "| train_pool_hours | " in figures
    assert "| requested_hours | 100 h |" in figures and "| scored_pool_hours | " in figures


def test_scored_sources_in_no_split_fail_the_check(scored, instance, scored_landing):
    # The universe rewritten with ids relative to the landing zone, as a user did: the split
    # resolves over ids no recording was scored as, so every scored source is in no split.
    prefix_universe_sources(scored_landing)
    split = {"ops": {"resolved_splits": {"config": {"strategy": "random", "seed": 2}}}}
    assert materialize([universe, resolved_splits], resources=scored, instance=instance, run_config=split).success
    result = _budget(scored, instance)
    assert not result.success  # blocking: nothing downstream of budget_plan may run on this plan
    evaluation = _evaluation(result)
    assert not evaluation.passed and evaluation.severity.value == "ERROR"
    errors = markdown_items(evaluation.metadata["errors"])
    assert errors[0].startswith("not_in_split: none of the 6 scored sources is in the resolved split ('airfield_")
    assert "Universe source ids are paths relative to the recordings root" in errors[0]
    assert [e.split(":")[0] for e in errors[1:]] == ["train", "val", "test"]
    assert all(" requested, nothing admitted: no scored item is in the " in e for e in errors[1:])
    assert evaluation.description.startswith("4 contract violations; first: not_in_split: none of the 6 scored ")


def test_a_requested_split_that_admits_nothing_fails_and_a_zero_request_passes(scored, instance, tmp_path):
    rule = write_rule(tmp_path / "rule.json", {"train": [{"kind": "glob", "pattern": "airfield_*/*"}],
                                               "test": [{"kind": "glob", "pattern": "[!a]*/*"}]})
    split = {"ops": {"resolved_splits": {"config": {"splits_json": rule}}}}
    assert materialize([resolved_splits], resources=scored, instance=instance, run_config=split).success
    result = _budget(scored, instance)  # val asks for 30 s, but the split gives val no source
    assert not result.success
    (error,) = markdown_items(_evaluation(result).metadata["errors"])
    assert error == ("val: 0.00833 h requested, nothing admitted: no scored item is in the val split (its pool is "
                     "empty). Re-materialize resolved_splits so val holds sources, add recordings to val, or request "
                     "0 for val if it is meant to be empty")
    empty_on_purpose = _budget(scored, instance, val=0.0)
    assert empty_on_purpose.success and _evaluation(empty_on_purpose).passed


def test_a_plan_that_breaks_the_contract_fails_the_check(scored, instance, tmp_path):
    assert _budget(scored, instance).success
    root = tmp_path / "storage"
    plan = read_budget_plan(root)
    # Admit everything in train, rewrite the plan consistently (hashes match): only the contract is broken.
    items = plan.items
    in_train = [s == "train" and st == "ok" for s, st in zip(items.column("split").to_pylist(),
                                                           items.column("status").cast("string").to_pylist(),
                                                             strict=True)]
    admitted = [a or t for a, t in zip(items.column("admitted").to_pylist(), in_train, strict=True)]
    items = items.set_column(items.column_names.index("admitted"), "admitted", pa.array(admitted))
    write_budget_plan(type(plan)(items, plan.accounting, plan.options, plan.strategy), root,
                      inputs=read_budget_record(root)["inputs"])
    evaluation = budget(storage_root=StorageRootResource(url=str(root)))
    assert not evaluation.passed and evaluation.severity.value == "ERROR"
    assert any("more than one item over budget" in e for e in markdown_items(evaluation.metadata["errors"]))


def test_a_tampered_plan_file_fails_the_check(scored, instance, tmp_path):
    assert _budget(scored, instance).success
    items = tmp_path / "storage" / "budget" / "plan_items.parquet"
    pq.write_table(pq.read_table(items).slice(0, 3), items)
    evaluation = budget(storage_root=StorageRootResource(url=str(tmp_path / "storage")))
    assert not evaluation.passed and evaluation.severity.value == "ERROR"
    assert "does not match the SHA-256" in markdown_items(evaluation.metadata["errors"])[0]
    assert evaluation.description.startswith("cannot check the budget "
                                             "plan: ") and "does not match" in evaluation.description


def test_an_invalid_request_fails_before_anything_is_written(scored, instance, tmp_path, scored_landing):
    spec = json.loads((scored_landing / "output_spec.json").read_text())
    (scored_landing / "output_spec.json").write_text(json.dumps({**spec, "short_policy": "drop"}))
    result = _budget(scored, instance, span_seconds=None, span_steps=32)
    assert not result.success
    assert "span_steps=32 < shard_length=64 with short_policy 'drop'" in failure_text(result)
    assert not (tmp_path / "storage" / "budget").exists()


def test_a_strategy_changed_after_scoring_is_refused_until_rescored(scored, instance, scored_landing):
    strategy = json.loads((scored_landing / "strategy.json").read_text())
    strategy["priority"]["wind.max"] = 0.5
    (scored_landing / "strategy.json").write_text(json.dumps(strategy))
    result = _budget(scored, instance)
    assert not result.success and "Backfill every scored_segments partition" in failure_text(result)


def test_a_refused_split_is_not_used(scored, instance, tmp_path):
    report = tmp_path / "storage" / "splits" / "split_report.json"
    data = json.loads(report.read_text())
    report.write_text(json.dumps({**data, "status": "refused_drift", "input_drift": {"message": "rule drifted"}}))
    result = _budget(scored, instance)
    assert not result.success and "the last split run was 'refused_drift'" in failure_text(result)


def test_a_memory_budget_plans_from_mapped_checkpoints_with_the_same_result(scored, instance, tmp_path):
    assert _budget(scored, instance).success
    plain = read_budget_plan(tmp_path / "storage").admitted()
    result = _budget(scored, instance, memory_budget="1KiB")
    assert result.success and _evaluation(result).passed
    (mat,) = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    memory = mat.metadata["pool_memory"].value.splitlines()
    assert {"| mapped_sources | 6 |", "| resident_bytes | 0 B |", "| budget_bytes | 1.0 KiB |"} <= set(memory)
    assert read_budget_plan(tmp_path / "storage").admitted().equals(plain)
    bad = _budget(scored, instance, memory_budget="lots")
    assert not bad.success and "memory_budget='lots'" in failure_text(bad)


def test_unset_amounts_come_from_the_curation_settings_and_set_ones_win():
    from dataclasses import asdict

    from kuration.budget import ShardChunking
    from kuration.landing.curation_config import BudgetSettings, resolve_curation_config
    from kuration.errors import BudgetError
    from kuration_assets import BudgetPlanConfig

    settings = BudgetSettings(train_hours=2.0, val_hours=0.5, test_hours=0.0, span_seconds=30.0)
    chunking = ShardChunking(8)

    def options(config: BudgetPlanConfig):
        # the asset's path: curation.json's budget, the config's set fields over it by the one precedence rule
        budget = resolve_curation_config(overrides=[("curation.json", {"budget": asdict(settings)}),
                                                    ("run config", config.curation_overrides())]).budget
        return config.options(chunking, budget)

    options_ = options(BudgetPlanConfig())
    assert (options_.train_hours, options_.val_hours, options_.test_hours, options_.span_seconds) == (
        2.0, 0.5, 0.0, 30.0)
    options_ = options(BudgetPlanConfig(train=1.0, span_steps=40))
    assert (options_.train_hours, options_.val_hours, options_.span_seconds, options_.span_steps) == (
        1.0, 0.5, None, 40)
    # counts are not in curation.json: a segments budget must say how many
    with pytest.raises(BudgetError, match="budget_unit segments: set train"):
        options(BudgetPlanConfig(budget_unit="segments"))
    counted = options(BudgetPlanConfig(budget_unit="segments", train=12))
    assert (counted.train_count, counted.val_count, counted.test_count) == (12, 0, 0)
