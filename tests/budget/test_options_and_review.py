"""Budget options (preflight), the stored plan, the validator on tampered plans, and the review."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.budget import (
    BudgetError, BudgetOptions, ShardChunking, hours_selection_review, plan_budget, validate_budget_plan,
)
from kuration.budget.plan_store import (
    load_scored_pool, read_admitted, read_budget_plan, write_budget_plan,
)
from kuration.scoring.segment_store import RUN_KEY, SKIPPED_KEY, write_source_segments
from tests.budget.segment_tables import assignments, segments_table, strategy

H = 1 / 3600


@pytest.mark.parametrize("kwargs, message", [
    ({}, "nothing requested"),
    ({"train_hours": 1, "test_count": 3}, "request hours or a count of segments, not both"),
    ({"train_hours": -1}, "train_hours: must be a finite number of hours >= 0"),
    ({"train_hours": math.inf}, "train_hours: must be a finite number"),
    ({"train_count": 2.5}, "train_count: counts whole segments"),
    ({"train_hours": True}, "train_hours: must be"),
    # not OverflowError
    ({"train_hours": 10**400}, "train_hours: must be a finite number of hours >= 0 or unset, got 1000"),
    ({"val_count": 10**5000}, r"val_count: must be a whole number >= 0 or unset, got <int too large to show>"),
    ({"train_hours": 1, "span_steps": 2**31},
     "span_steps: must be a positive whole number of steps, at most 2147483647"),
    ({"train_hours": 1, "span_seconds": 10**400}, "span_seconds: must be a positive finite number"),
    ({"train_hours": 1, "span_steps": 10, "span_seconds": 1.0}, "set one, not both"),
    ({"train_hours": 1, "span_steps": 0}, "span_steps: must be a positive whole number"),
    ({"train_hours": 1, "span_seconds": -2}, "span_seconds: must be a positive finite number"),
    ({"train_count": 1, "span_steps": 10}, "a count selects segments"),
    ({"train_hours": 1, "clip_aggregate": "median"}, "clip_aggregate: must be one of"),
    ({"train_hours": 1, "seed": "x"}, "seed: must be an integer"),
])
def test_invalid_requests_fail_before_any_work_naming_the_key(kwargs, message):
    with pytest.raises(BudgetError, match=message):
        BudgetOptions(**kwargs)


def test_preflight_rejects_spans_shorter_than_a_dropped_shard():
    with pytest.raises(BudgetError, match="span_steps=32 < shard_length=64 with short_policy 'drop'"):
        BudgetOptions(train_hours=1, span_steps=32, chunking=ShardChunking(64, "drop"))
    BudgetOptions(train_hours=1, span_steps=32, chunking=ShardChunking(64, "keep"))  # keep and pad are fine
    seconds = BudgetOptions(train_hours=1, span_seconds=3.0, chunking=ShardChunking(64, "drop"))
    with pytest.raises(BudgetError, match="span_seconds=3 is 30 steps at 10 Hz, fewer than shard_length=64"):
        plan_budget(segments_table([("s", "e", 0, 100, 100, 1.0, [])]), seconds, strategy=strategy())


@pytest.mark.parametrize("bad, message", [((0, "keep"), "shard_length: must be a positive"),
                                          ((64, "trim"), "short_policy: must be one of")])
def test_shard_chunking_validates(bad, message):
    with pytest.raises(BudgetError, match=message):
        ShardChunking(*bad)


def test_options_round_trip_and_refuse_unknown_keys():
    options = BudgetOptions(train_hours=2, test_hours=0.5, span_seconds=30.0, chunking=ShardChunking(64, "pad"), seed=4)
    assert BudgetOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options
    with pytest.raises(BudgetError,
                       match=r"^budget options: unknown key\(s\) \['train_hour'\]; valid keys: \['train_hours', "):
        BudgetOptions.from_dict({"train_hour": 1})
    with pytest.raises(BudgetError, match=r"^budget options\.chunking: unknown key\(s\) \['shard_len'\]; valid keys: "
                                          r"\['shard_length', 'short_policy'\]$"):
        BudgetOptions.from_dict({"chunking": {"shard_len": 64}})


ROWS = [(f"s{i}", "e", 0, 100, 100, float(i), ["rare"] if i == 1 else []) for i in range(1, 7)]
SPLITS = assignments({"s1": "train", "s2": "train", "s3": "train", "s4": "train", "s5": "test", "s6": "test"})


@pytest.fixture
def plan():
    return plan_budget(segments_table(ROWS), BudgetOptions(train_hours=20 * H, test_hours=10 * H),
                       strategy=strategy(tags=("rare",), tag_coverage=True, min_tag_frac=0.5),
                       split_assignments=SPLITS)


def test_a_fresh_plan_validates(plan):
    result = validate_budget_plan(plan.items, plan.accounting)
    assert result.ok and not result.warnings and result.figures["train_admitted_hours"] == 20.0 / 3600


def _tampered(plan, source, **changes):
    items = plan.items
    rows = np.array(items.column("source_id").to_pylist()) == source
    for column, value in changes.items():
        values = items.column(column).to_pylist()
        values = [value if hit else v for v, hit in zip(values, rows, strict=True)]
        items = items.set_column(items.column_names.index(column), column, pa.array(values, items.column(column).type
                                                                                   if column != "reason"
                                                                                    else pa.string()))
    return items


def test_the_validator_catches_an_over_budget_split(plan):
    items = _tampered(plan, "s2", admitted=True, fill_rank=99)  # s2 was budget_full
    errors = validate_budget_plan(items, plan.accounting).errors
    assert any("more than one item over budget" in e for e in errors)
    assert any("the items sum to 30" in e for e in errors)


def test_the_validator_catches_a_minus_inf_admission_and_a_cross_split_source(plan):
    items = _tampered(plan, "s4", priority=-math.inf, status="filtered")
    assert any("without a finite priority" in e for e in validate_budget_plan(items, plan.accounting).errors)
    items = _tampered(plan, "s6", group="s4")  # s6 is admitted to test; s4, its new group, to train
    errors = validate_budget_plan(items, plan.accounting).errors
    assert any("group 's4' is in splits ['test', 'train']" in e for e in errors)


def test_the_validator_catches_a_broken_group_cap(plan):
    accounting = json.loads(json.dumps(plan.accounting))
    accounting["splits"]["train"]["group_cap"] = 5.0
    assert any("over its cap of 5" in e for e in validate_budget_plan(plan.items, accounting).errors)


def test_underfill_past_the_threshold_is_a_warning_not_an_error():
    # Train's pool holds 40 s, enough for the request, but two of its four spans cannot be ranked.
    rows = [(s, e, a, b, n, math.nan if s in ("s1", "s2") else p, t) for s, e, a, b, n, p, t in ROWS]
    plan = plan_budget(segments_table(rows), BudgetOptions(train_hours=40 * H), strategy=strategy(),
                       split_assignments=SPLITS)
    result = validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=0.4)
    assert result.ok and result.warnings == (
        "train: underfilled by 20 of 40 seconds (50%); the pool's candidates hold 20. Excluded items: non_finite 2",)
    assert not validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=0.6).warnings


def test_a_budget_larger_than_the_pool_warns_whatever_the_threshold_with_both_figures():
    # Was: under a 0.7 threshold this 60% underfill passed silently. The request (100 s) is
    # larger than train's whole pool (40 s), which no threshold should hide.
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_hours=100 * H), strategy=strategy(),
                       split_assignments=SPLITS)
    for threshold in (0.5, 0.7, 1.0):
        result = validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=threshold)
        assert result.ok and result.warnings == (
            "train: underfilled by 60 of 100 seconds (60%): the budget is larger than the split's whole scored pool "
            "(0.0278 h requested, 0.0111 h in the pool). Lower the train budget, or add recordings to train",)
        assert result.figures["train_pool_hours"] == pytest.approx(40 * H)
        assert result.figures["scored_pool_hours"] == pytest.approx(60 * H)
        assert result.figures["requested_hours"] == pytest.approx(100 * H)


def test_a_stored_plan_reads_back_and_refuses_tampering(plan, tmp_path):
    urls = write_budget_plan(plan, tmp_path, inputs={"note": "x"})
    back = read_budget_plan(tmp_path)
    columns = ["source_id", "reason", "admitted"]
    assert back.items.select(columns).equals(plan.items.select(columns))
    assert back.accounting == json.loads(json.dumps(plan.accounting)) and back.options == plan.options
    admitted = read_admitted(tmp_path)
    assert admitted.column("source_id").to_pylist() == ["s1", "s4", "s6"]
    table = pq.read_table(urls["admitted"])
    pq.write_table(table.slice(0, 1), urls["admitted"])
    with pytest.raises(BudgetError, match="does not match the SHA-256"):
        read_admitted(tmp_path)


def test_reading_a_missing_plan_says_what_to_materialize(tmp_path):
    with pytest.raises(BudgetError, match="materialize budget_plan"):
        read_budget_plan(tmp_path)
    (tmp_path / "budget").mkdir()
    (tmp_path / "budget" / "budget.json").write_text("{")
    with pytest.raises(BudgetError, match="not valid JSON"):
        read_budget_plan(tmp_path)


def _store(root, source, rows, run="run-a", skipped=None):
    table = segments_table(rows)
    meta = {RUN_KEY: run.encode()}
    if skipped:
        meta[SKIPPED_KEY] = skipped.encode()
    write_source_segments(root, source, table.replace_schema_metadata(meta))


def test_the_scored_pool_refuses_a_mix_of_scoring_runs(tmp_path):
    _store(tmp_path, "s1", ROWS[:1])
    _store(tmp_path, "s2", ROWS[1:2], run="run-b")
    with pytest.raises(BudgetError, match="scored by different scoring runs"):
        load_scored_pool(tmp_path, ["s1", "s2"])
    with pytest.raises(BudgetError, match="the current settings give run-c"):
        load_scored_pool(tmp_path, ["s1"], expected_run="run-c")
    with pytest.raises(BudgetError, match="no scored segments for source 's9'"):
        load_scored_pool(tmp_path, ["s1", "s9"])


def test_the_scored_pool_reports_skipped_sources(tmp_path):
    _store(tmp_path, "s1", ROWS[:1])
    write_source_segments(tmp_path, "s2", segments_table(ROWS[:1]).slice(0, 0).replace_schema_metadata(
        {RUN_KEY: b"run-a", SKIPPED_KEY: b"bad file"}))
    pool = load_scored_pool(tmp_path, ["s1", "s2"], expected_run="run-a")
    assert pool.segments.num_rows == 1 and pool.skipped == {"s2": "bad file"} and pool.run_fingerprint == "run-a"


def test_the_review_explains_each_decision(plan, tmp_path):
    review = hours_selection_review(plan, max_examples=2)
    data = review.to_dict()
    train = data["splits"]["train"]
    assert train["priority"] == {"admitted_max": 4.0, "admitted_min": 1.0, "best_left_out": 3.0}
    assert train["reasons"]["budget_full"]["items"] == 2 and train["reasons"]["admitted"]["items"] == 2
    assert [e["source_id"] for e in train["examples"]["reserved"]] == ["s1"]
    assert [e["source_id"] for e in train["examples"]["first_left_out"]] == ["s3", "s2"]
    assert "admitted first as the best 'rare' item" in review.explain("s1", "e", 0)
    assert "the train budget was reached before its turn" in review.explain("s3", "e", 0)
    with pytest.raises(KeyError, match="no item 'nope'"):
        review.explain("nope", "e", 0)
    text = review.render()
    assert "train: requested 20 s, admitted 20 s (100.0%)" in text and "[first_left_out] s3 / e" in text
    write_budget_plan(plan, tmp_path)
    from_root = hours_selection_review(str(tmp_path)).to_dict()
    assert from_root == hours_selection_review(read_budget_plan(tmp_path)).to_dict()


def test_the_review_accepts_a_result_carrying_a_plan_and_refuses_anything_else(plan):
    class WriteResult:
        budget_plan = plan
    assert hours_selection_review(WriteResult()).plan is plan
    with pytest.raises(BudgetError, match="needs a BudgetPlan"):
        hours_selection_review(42)
    with pytest.raises(BudgetError, match="max_examples"):
        hours_selection_review(plan, max_examples=0)


def test_the_review_is_bounded_however_large_the_plan():
    rows = [(f"s{i}", "e", 0, 10, 10, float(i), []) for i in range(200)]
    plan = plan_budget(segments_table(rows), BudgetOptions(train_hours=50 * H), strategy=strategy(),
                       split_assignments=assignments({f"s{i}": "train" for i in range(200)}))
    review = hours_selection_review(plan, max_examples=3)
    examples = review.to_dict()["splits"]["train"]["examples"]
    assert all(len(v) <= 3 for v in examples.values()) and len(review.render().splitlines()) < 40
