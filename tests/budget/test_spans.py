"""Spans: what a span covers, how it aggregates its segments, and which spans the fill may consider."""

import math

import numpy as np
import pyarrow as pa
import pytest

from kuration.budget import BudgetError, BudgetOptions
from kuration.budget.spans import segment_items, span_items
from tests.budget.segment_tables import FEATURE, segments_table

H = 1 / 3600  # one second, in hours

# One 25-step track: segments [0,10) p=1, [5,15) p=3, [10,20) p=2; no segment reaches the tail [20,25).
TRACK = [
    ("s", "e", 0, 10, 25, 1.0, ["a"]),
    ("s", "e", 5, 15, 25, 3.0, ["b"]),
    ("s", "e", 10, 20, 25, 2.0, []),
]


def _spans(rows, how="max", **options):
    return span_items(segments_table(rows), BudgetOptions(train_hours=1, **options), clip_aggregate=how).to_pylist()


@pytest.mark.parametrize("how, expected", [("max", [3.0, 3.0]), ("mean", [2.0, 2.5]), ("min", [1.0, 2.0])])
def test_a_span_aggregates_only_the_segments_overlapping_it(how, expected):
    spans = _spans(TRACK, how, span_steps=10)
    assert [(s["start"], s["stop"], s["steps"]) for s in spans] == [(0, 10, 10), (10, 20, 10), (20, 25, 5)]
    assert [s["priority"] for s in spans[:2]] == expected
    assert [s[FEATURE] for s in spans[:2]] == expected  # every feature aggregates the same way
    assert [s["segments"] for s in spans] == [2, 2, 0]
    assert [s["tags"] for s in spans] == [["a", "b"], ["b"], []]
    assert [s["seconds"] for s in spans] == [1.0, 1.0, 0.5]


def test_a_tail_no_segment_reaches_is_unscored_not_dropped():
    tail = _spans(TRACK, span_steps=10)[2]
    assert tail["status"] == "unscored" and math.isnan(tail["priority"])


def test_unset_spans_mean_one_whole_track_span():
    (span,) = _spans(TRACK)
    assert (span["span_index"], span["start"], span["stop"], span["priority"]) == (0, 0, 25, 3.0)
    assert span["tags"] == ["a", "b"] and span["seconds"] == 2.5


def test_span_seconds_convert_with_the_tracks_rate():
    spans = _spans(TRACK, span_seconds=1.0)  # 10 steps at 10 Hz
    assert [(s["start"], s["stop"]) for s in spans] == [(0, 10), (10, 20), (20, 25)]


def test_a_segment_on_a_span_boundary_overlaps_only_the_spans_it_covers():
    rows = [("s", "e", 0, 10, 30, 5.0, []), ("s", "e", 10, 20, 30, 1.0, []), ("s", "e", 20, 30, 30, 2.0, [])]
    assert [s["priority"] for s in _spans(rows, span_steps=10)] == [5.0, 1.0, 2.0]


def test_spans_all_failing_the_filter_are_minus_inf_and_partly_failing_ones_aggregate_the_passing():
    rows = [
        ("s", "e", 0, 10, 20, -math.inf, []), ("s", "e", 5, 15, 20, 4.0, []), ("s", "e", 10, 20, 20, -math.inf, []),
        ("t", "e", 0, 10, 10, -math.inf, ["rare"]),
    ]
    spans = _spans(rows, "mean", span_steps=10)
    # Span [0,10) of s: one failing and one passing segment -> the passing one's priority.
    assert [(s["source_id"], s["status"], s["priority"]) for s in spans] == [
        ("s", "ok", 4.0), ("s", "ok", 4.0), ("t", "filtered", -math.inf)]


def test_a_nan_or_plus_inf_priority_excludes_the_span_it_touches():
    rows = [("s", "e", 0, 10, 20, math.nan, []), ("s", "e", 10, 20, 20, 1.0, []),
            ("u", "e", 0, 10, 10, math.inf, [])]
    spans = _spans(rows, span_steps=10)
    assert [s["status"] for s in spans] == ["non_finite", "ok", "non_finite"]
    assert math.isnan(spans[0]["priority"]) and math.isnan(spans[2]["priority"])


def test_a_nan_feature_stays_nan_in_the_span():
    rows = [("s", "e", 0, 10, 10, 1.0, [], math.nan), ("s", "e", 0, 10, 10, 2.0, [], 3.0)]
    (span,) = _spans(rows, "max")
    assert span["priority"] == 2.0 and math.isnan(span[FEATURE])


def test_span_items_do_not_depend_on_row_order():
    table = segments_table(TRACK + [("a", "x", 0, 5, 5, 9.0, ["b"])])
    options = BudgetOptions(train_hours=1, span_steps=10)
    shuffled = table.take(pa.array(np.random.default_rng(1).permutation(table.num_rows)))
    a, b = span_items(table, options, clip_aggregate="mean"), span_items(shuffled, options, clip_aggregate="mean")
    assert a.to_pylist().__repr__() == b.to_pylist().__repr__()  # NaN-safe equality
    assert a.column("source_id").to_pylist()[0] == "a"  # canonical order


def test_segment_items_are_the_segments_with_their_status():
    rows = TRACK + [("t", "e", 0, 10, 10, -math.inf, []), ("t", "e", 10, 20, 20, math.nan, [])]
    items = segment_items(segments_table(rows)).to_pylist()
    assert [(i["source_id"], i["segment_index"], i["status"]) for i in items] == [
        ("s", 0, "ok"), ("s", 1, "ok"), ("s", 2, "ok"), ("t", 0, "filtered"), ("t", 1, "non_finite")]


def test_a_table_scored_before_track_steps_existed_is_refused_with_the_fix():
    table = segments_table(TRACK).drop_columns(["track_steps"])
    with pytest.raises(BudgetError, match="re-materialize scored_segments"):
        span_items(table, BudgetOptions(train_hours=1), clip_aggregate="max")


def test_a_segment_outside_its_track_is_refused():
    with pytest.raises(BudgetError, match=r"segment 0 of 's' / 'e' spans \[0, 30\) outside its track of 25 steps"):
        span_items(segments_table([("s", "e", 0, 30, 25, 1.0, [])]), BudgetOptions(train_hours=1), clip_aggregate="max")


def test_track_steps_must_agree_within_a_track():
    rows = [("s", "e", 0, 10, 25, 1.0, []), ("s", "e", 10, 20, 30, 1.0, [])]
    with pytest.raises(BudgetError, match="track_steps differs within the track 's' / 'e'"):
        span_items(segments_table(rows), BudgetOptions(train_hours=1), clip_aggregate="max")


def test_an_empty_segment_table_gives_no_spans():
    empty = segments_table([]).slice(0, 0)
    assert span_items(empty, BudgetOptions(train_hours=1, span_steps=4), clip_aggregate="max").num_rows == 0


def test_canonical_order_holds_when_offsets_are_too_large_to_pack():
    big = 2**61
    rows = [(s, "e", start, start + 10, big + 10, p, []) for s, start, p in
            [("c", big, 1.0), ("a", 0, 2.0), ("b", big, 3.0), ("a", big, 4.0), ("c", 0, 5.0)]]
    table = segments_table(rows)
    spans = span_items(table, BudgetOptions(train_hours=1), clip_aggregate="max").to_pylist()
    assert [(s["source_id"], s["priority"]) for s in spans] == [("a", 4.0), ("b", 3.0), ("c", 5.0)]
    items = segment_items(table).to_pylist()
    assert [(i["source_id"], i["start"]) for i in items] == [("a", 0), ("a", big), ("b", big), ("c", 0), ("c", big)]


def test_blocks_of_whole_tracks_give_the_same_spans(monkeypatch):
    import kuration.budget.spans as spans_module
    rows = TRACK + [(f"x{i}", "e", s, s + 10, 40, float(i + s), ["a"] if s == 10 else []) for i in range(4)
                    for s in (0, 5, 10, 20, 30)] + [("t", "e", 0, 10, 10, math.nan, [])]
    options = BudgetOptions(train_hours=1, span_steps=10)
    whole = span_items(segments_table(rows), options, clip_aggregate="mean")
    monkeypatch.setattr(spans_module, "BLOCK_ROWS", 4)  # smaller than a track: cuts fall on track starts
    blocked = span_items(segments_table(rows), options, clip_aggregate="mean")
    assert blocked.num_rows == whole.num_rows == 3 + 4 * 4 + 1
    assert repr(blocked.to_pylist()) == repr(whole.to_pylist())
