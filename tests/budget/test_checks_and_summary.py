"""The budget check's verdict (``validate_budget_plan``, ``check_budget_plan``) and the plan
summary (``summarize_plan``) the ``budget_plan`` asset reports."""

import json

import numpy as np
import pyarrow as pa
import pytest

from kuration.budget import BudgetOptions, BudgetValidation, plan_budget, validate_budget_plan
from kuration.budget.plan_store import check_budget_plan, stored_split_identity, write_budget_plan
from kuration.errors import BudgetError
from kuration.budget.summary import summarize_plan
from kuration.checks import CheckResult
from tests.budget.segment_tables import assignments, segments_table, strategy

HOUR = 36_000  # steps at 10 Hz
#: Four one-hour tracks in train (priorities 1..4), two in test.
ROWS = [(f"s{i}", "e", 0, HOUR, HOUR, float(i), []) for i in range(1, 7)]
SPLITS = assignments({"s1": "train", "s2": "train", "s3": "train", "s4": "train", "s5": "test", "s6": "test"})


def _plan(**hours):
    return plan_budget(segments_table(ROWS), BudgetOptions(**hours), strategy=strategy(), split_assignments=SPLITS)


def test_a_sound_plan_reads_admitted_against_requested_per_split():
    plan = _plan(train_hours=2.5, test_hours=1.0)
    result = validate_budget_plan(plan.items, plan.accounting)
    assert isinstance(result, BudgetValidation) and isinstance(result, CheckResult) and result.passed
    assert result.verdict == ("train 3 h of 2.5 h requested (+20.0%, within one 3600 s span); "
                              "test 1 h of 1 h requested (exact)")
    assert result.figures["train_requested_hours"] == 2.5 and result.figures["train_admitted_hours"] == 3.0
    assert result.figures["train_last_admitted_seconds"] == 3600.0


def test_an_underfilled_split_warns_in_the_verdict():
    plan = _plan(train_hours=10.0)
    result = validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=0.5)
    assert result.severity == "warn" and result.ok
    assert result.verdict.startswith("train 4 h of 10 h requested (-60.0%); 1 warning; first: train: underfilled by "
                                     "21600 of 36000 seconds (60%)")


def test_a_count_budget_counts_segments():
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_count=2, test_count=1), strategy=strategy(),
                       split_assignments=SPLITS)
    result = validate_budget_plan(plan.items, plan.accounting)
    assert result.passed and result.verdict == ("train 2 of 2 segments requested (exact); "
                                                "test 1 of 1 segments requested (exact)")
    assert result.figures["train_admitted_segments"] == 2


def test_a_broken_plan_fails_naming_the_first_violation():
    plan = _plan(train_hours=2.5, test_hours=1.0)
    admitted = np.array(plan.items.column("admitted").to_pylist()) | (
        np.array(plan.items.column("split").to_pylist()) == "train")
    items = plan.items.set_column(plan.items.column_names.index("admitted"), "admitted", pa.array(admitted))
    result = validate_budget_plan(items, plan.accounting)
    assert result.severity == "error"
    assert result.verdict == f"{len(result.errors)} contract violations; first: {result.errors[0]}"
    assert result.errors[0].startswith("train: admitted 14400 seconds against 9000 requested")


def test_the_stored_check_uses_the_recorded_threshold_and_fails_instead_of_raising(tmp_path):
    assert check_budget_plan(tmp_path).verdict.startswith("cannot check the budget plan: no budget plan at ")
    # Train's pool (s1-s4) holds 4 h; s1 and s2 cannot be ranked, so 2 of the 4 h requested are admitted.
    rows = [(*row[:5], np.nan if row[0] in ("s1", "s2") else row[5], row[6]) for row in ROWS]
    plan = plan_budget(segments_table(rows), BudgetOptions(train_hours=4.0), strategy=strategy(),
                       split_assignments=SPLITS)
    write_budget_plan(plan, tmp_path, inputs={"check": {"underfill_warn_fraction": 0.7}})
    assert check_budget_plan(tmp_path).passed  # 50% underfill, under the recorded 70%
    assert check_budget_plan(tmp_path, underfill_warn_fraction=0.4).severity == "warn"
    (tmp_path / "budget" / "budget.json").write_text("[1]")
    broken = check_budget_plan(tmp_path)
    assert broken.severity == "error" and "must be a JSON object" in broken.verdict


@pytest.mark.parametrize("digest", [7, "abc", "f" * 63, None])
def test_the_stored_split_identity_is_the_baked_splits_digest_or_refused(tmp_path, digest):
    plan = _plan(train_hours=10.0)
    write_budget_plan(plan, tmp_path, inputs={"splits_sha256": "ab" * 32})
    assert stored_split_identity(tmp_path) == {"origin": "splits_json", "sha256": "ab" * 32}
    write_budget_plan(plan, tmp_path, inputs={} if digest is None else {"splits_sha256": digest})
    if digest is None:  # a plan stored before plans recorded their split
        assert stored_split_identity(tmp_path) is None
    else:
        with pytest.raises(BudgetError, match="inputs.splits_sha256 must be a SHA-256 hex string"):
            stored_split_identity(tmp_path)


def test_the_summary_converts_seconds_to_hours_and_sums_the_exclusions():
    plan = _plan(train_hours=2.5, test_hours=1.0)
    summary = summarize_plan(plan.accounting)
    assert summary.unit == "hours"
    train = summary.splits["train"]
    assert (train.requested, train.admitted, train.candidate) == (2.5, 3.0, 4.0)
    assert train.utilization == pytest.approx(1.2)
    per_split = [block["excluded"]["budget_full"]["items"] for block in plan.accounting["splits"].values()]
    assert summary.excluded["budget_full"] == sum(per_split) == 2 and summary.excluded["not_in_split"] == 0
    (row,) = [r for r in summary.rows() if r["split"] == "train"]
    assert row["requested (h)"] == 2.5 and row["utilization"] == "120.0%"
    assert summary.line().startswith("train: 3/2.5 h, ")
    assert json.dumps(summary.tag_coverage)  # plain data, as the asset's metadata needs


def test_a_count_summary_stays_in_segments():
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_count=2), strategy=strategy(),
                       split_assignments=SPLITS)
    summary = summarize_plan(plan.accounting)
    assert summary.unit == "segments" and summary.splits["train"].admitted == 2.0
    assert "admitted (segments)" in summary.rows()[0]
