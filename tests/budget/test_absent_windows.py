"""Absent windows: a window the entity is absent from throughout is left out of its spans'
aggregates, a span with no present window is ``absent``, and the budget block accounts for
the present data that items which could not be ranked took with them."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kuration.budget import BudgetOptions, plan_budget, validate_budget_plan
from kuration.budget.spans import segment_items, span_items
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.scoring.track import score_track
from tests.budget.segment_tables import FEATURE, segments_table, strategy
from tests.scoring._tracks import make_track


def _with_presence(rows, fractions) -> pa.Table:
    table = segments_table(rows)
    return table.set_column(table.column_names.index("present_fraction"), "present_fraction",
                            pa.array(fractions, pa.float64()))


# One 40-step track, windows of 10 every 10; the entity is absent from [10, 20) throughout
# (NaN priority and feature, as the feature pass gives), and NaN data at a present row in [30, 40).
ROWS = [
    ("s", "e", 0, 10, 40, 2.0, ["a"]),
    ("s", "e", 10, 20, 40, math.nan, []),
    ("s", "e", 20, 30, 40, 1.0, []),
    ("s", "e", 30, 40, 40, math.nan, []),
]
FRACTIONS = [0.5, 0.0, 1.0, 0.8]


@pytest.mark.parametrize("how", ["max", "mean", "min"])
def test_a_span_aggregates_its_present_windows_only(how):
    spans = span_items(_with_presence(ROWS, FRACTIONS), BudgetOptions(train_hours=1, span_steps=20),
                       clip_aggregate=how).to_pylist()
    # [0, 20): window 0 present, window 1 absent -> ranked on window 0 alone (was non_finite).
    # [20, 40): window 3 is present with a NaN: it cannot be ranked, absent or not.
    assert [(s["status"], s["priority"], s[FEATURE]) for s in spans[:1]] == [("ok", 2.0, 2.0)]
    assert spans[1]["status"] == "non_finite" and math.isnan(spans[1]["priority"])
    assert [s["segments"] for s in spans] == [2, 2]  # still counted as overlapping
    # Present seconds (10 Hz): [0, 20) is 5 + 0 steps, [20, 40) is 10 + 8 steps.
    assert [s["present_seconds"] for s in spans] == [0.5, 1.8]
    assert [s["seconds"] for s in spans] == [2.0, 2.0]


def test_a_span_with_no_present_window_is_absent_and_never_admitted():
    rows = [("s", "e", 0, 10, 30, 1.0, []), ("s", "e", 10, 20, 30, 0.0, []), ("s", "e", 20, 30, 30, 3.0, [])]
    table = _with_presence(rows, [1.0, 0.0, 1.0])
    spans = span_items(table, BudgetOptions(train_hours=1, span_steps=10), clip_aggregate="max").to_pylist()
    assert [s["status"] for s in spans] == ["ok", "absent", "ok"]
    assert math.isnan(spans[1]["priority"]) and math.isnan(spans[1][FEATURE]) and spans[1]["present_seconds"] == 0.0
    # A count: the absent segment itself is absent, though a tag-only priority would be finite.
    items = segment_items(table).to_pylist()
    assert [i["status"] for i in items] == ["ok", "absent", "ok"] and math.isnan(items[1]["priority"])
    assert [i["present_seconds"] for i in items] == [1.0, 0.0, 1.0]
    plan = plan_budget(table, BudgetOptions(train_hours=1, span_steps=10), strategy=strategy(), group_of={"s": "g"})
    assert plan.items.column("reason").to_pylist() == ["admitted", "absent", "admitted"]
    train = plan.accounting["splits"]["train"]
    assert train["excluded"]["absent"] == {"items": 1, "seconds": 1.0, "present_seconds": 0.0}
    assert plan.accounting["totals"]["absent_items"] == 1


def test_the_budget_block_reports_the_present_seconds_lost_and_validation_checks_them():
    table = _with_presence(ROWS + [("t", "e", 0, 10, 10, 4.0, [])], FRACTIONS + [0.3])
    plan = plan_budget(table, BudgetOptions(train_hours=1, span_steps=20), strategy=strategy(),
                       group_of={"s": "g", "t": "g"})
    train = plan.accounting["splits"]["train"]
    assert train["admitted_present_seconds"] == pytest.approx(0.5 + 0.3)
    assert train["lost_present_seconds"] == pytest.approx(1.8)  # the non_finite span's present data
    assert train["excluded"]["non_finite"]["present_seconds"] == pytest.approx(1.8)
    assert train["pool_present_seconds"] == pytest.approx(0.5 + 1.8 + 0.3)
    assert plan.accounting["totals"]["lost_present_seconds"] == pytest.approx(1.8)
    assert validate_budget_plan(plan.items, plan.accounting).ok

    tampered = {**plan.accounting,
                "splits": {**plan.accounting["splits"], "train": {**train, "lost_present_seconds": 0.0}}}
    result = validate_budget_plan(plan.items, tampered)
    assert not result.ok and any("lost_present_seconds 0.0, the items sum to 1.8" in e for e in result.errors)
    absent_admitted = plan.items.set_column(
        plan.items.column_names.index("status"), "status",
        pc.if_else(pc.equal(plan.items.column("source_id"), "t"), "absent",
                   plan.items.column("status").cast(pa.string())))
    assert any("1 admitted item(s) without a finite priority, e.g. t/e#0 (status absent" in e
               for e in validate_budget_plan(absent_admitted, plan.accounting).errors)


def test_a_presence_gap_as_long_as_a_window_no_longer_sinks_its_span():
    """End to end through the feature pass: the drone's radio drops for 12 steps in the middle
    of a 60-step span; the windows inside the gap have NaN features, the span is still ranked
    on the windows around the gap, and its present data is admitted."""
    present = np.ones(120, bool)
    present[24:36] = False
    speed = np.linspace(1.0, 2.0, 120)
    track = make_track(present, values={"speed": speed})
    scored = score_track(track, segmenter=Segmenter(6, 6, unit="steps"),
                         strategy=Strategy.from_dict({"method": "inclusion", "priority": {"speed.max": 1.0}}))
    assert scored.column("present_fraction").to_pylist()[4:6] == [0.0, 0.0]
    assert all(math.isnan(p) for p in scored.column("priority").to_pylist()[4:6])
    plan = plan_budget(scored, BudgetOptions(train_hours=1, span_steps=60),
                       strategy=Strategy.from_dict({"method": "inclusion", "priority": {"speed.max": 1.0}}),
                       group_of={"src": "g"})
    assert plan.items.column("status").cast(pa.string()).to_pylist() == ["ok", "ok"]
    assert plan.items.column("reason").to_pylist() == ["admitted", "admitted"]
    first = plan.items.to_pylist()[0]
    assert first["speed.max"] == pytest.approx(speed[59]) and first["present_seconds"] == pytest.approx(4.8)
    assert plan.accounting["splits"]["train"]["lost_present_seconds"] == 0.0


def test_a_present_fraction_outside_zero_to_one_is_refused():
    from kuration.budget import BudgetError

    with pytest.raises(BudgetError, match=r"present_fraction of segment 1 is nan; it must be a share"):
        span_items(_with_presence(ROWS, [1.0, math.nan, 1.0, 1.0]), BudgetOptions(train_hours=1), clip_aggregate="max")


def test_the_review_names_the_present_data_lost_and_explains_an_absent_span():
    from kuration.budget import hours_selection_review

    table = _with_presence(ROWS, [1.0, 0.0, 0.0, 0.0])
    plan = plan_budget(table, BudgetOptions(train_hours=1, span_steps=10), strategy=strategy(), group_of={"s": "g"})
    assert plan.items.column("reason").to_pylist() == ["admitted", "absent", "absent", "absent"]
    review = hours_selection_review(plan)
    assert "absent 3" in review.render()
    assert review.explain("s", "e", 1) == ("s / e / span_index 1 (train): never admissible: its entity is absent from "
                                           "every window overlapping it, so there is nothing to rank")
    lossy = plan_budget(_with_presence(ROWS, FRACTIONS), BudgetOptions(train_hours=1, span_steps=20),
                        strategy=strategy(),
                        group_of={"s": "g"})
    assert "present data lost in items that could not be ranked (non_finite, unscored, absent): 1.8 s" in \
        hours_selection_review(lossy).render()


def test_the_segment_summary_counts_absent_windows_apart_from_non_finite_ones():
    from kuration.scoring.segment_store import segment_summary

    summary = segment_summary(_with_presence(ROWS, FRACTIONS))
    assert (summary["segments"], summary["absent"], summary["non_finite"]) == (4, 1, 1)
