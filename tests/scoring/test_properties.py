"""Hypothesis: the vectorized reducers equal a naive loop over present rows on random tracks."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.scoring.features import REDUCERS, compute_features, segment_tags
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from tests.scoring._tracks import make_track

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAGS = ["a", "b", "c"]
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def tracks(draw):
    n = draw(st.integers(0, 40))
    present = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    speed = draw(st.lists(st.one_of(finite, st.just(0.0)), min_size=n, max_size=n))
    pos = draw(st.lists(st.lists(st.one_of(finite, st.just(0.0)), min_size=3, max_size=3), min_size=n, max_size=n))
    flag = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    count = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    tags = draw(st.lists(st.lists(st.sampled_from(TAGS), max_size=3), min_size=n, max_size=n))
    values = {
        "speed": np.asarray(speed, dtype=np.float64),
        "pos": np.asarray(pos, dtype=np.float64).reshape(n, 3),
        "flag": np.asarray(flag, dtype=bool),
        "count": np.asarray(count, dtype=np.int32),
    }
    return make_track(present, values=values, tags=tags)


segmenters = st.builds(lambda w, s: Segmenter(w, s, unit="steps"), st.integers(1, 12), st.integers(1, 12))


def naive(values: np.ndarray, reducer: str) -> float:
    if not len(values):
        return float("nan")
    return {
        "mean": np.mean, "min": np.min, "max": np.max, "std": np.std,
        "delta": lambda v: v[-1] - v[0], "frac": lambda v: np.mean(v != 0),
    }[reducer](values)


def series(track, field: str, component: int | None) -> np.ndarray:
    arr = np.asarray(track.values[field], dtype=np.float64)
    if arr.ndim == 1:
        return arr
    return arr[:, component] if component is not None else np.sqrt((arr**2).sum(axis=1))


@SETTINGS
@given(tracks(), segmenters)
def test_reducers_equal_a_naive_computation_over_present_rows(track, segmenter):
    segs = segmenter.segments(track)
    targets = [("speed", None), ("pos", None), ("pos", 1), ("flag", None), ("count", None)]
    keys = [f"{f}{'' if c is None else f'[{c}]'}.{r}" for f, c in targets for r in REDUCERS]
    got = compute_features(track, segs, keys)
    for field, comp in targets:
        x = series(track, field, comp)
        for r in REDUCERS:
            key = f"{field}{'' if comp is None else f'[{comp}]'}.{r}"
            want = [naive(x[s.start:s.stop][track.present[s.start:s.stop]], r) for s in segs]
            np.testing.assert_allclose(got[key], want, rtol=1e-9, atol=1e-6, err_msg=key)


@SETTINGS
@given(tracks(), segmenters)
def test_tag_counts_and_segment_tags_equal_a_naive_count(track, segmenter):
    segs = segmenter.segments(track)
    got = compute_features(track, segs, [f"tag.{t}" for t in TAGS])
    listed = segment_tags(track, segs)
    for i, s in enumerate(segs):
        rows = [j for j in range(s.start, s.stop) if track.present[j]]
        for t in TAGS:
            assert got[f"tag.{t}"][i] == sum(t in track.tags[j] for j in rows)
        assert listed[i] == sorted({t for j in rows for t in track.tags[j]})


@SETTINGS
@given(tracks(), segmenters)
def test_segments_tile_the_track_as_declared(track, segmenter):
    segs = segmenter.segments(track)
    n, (w, s) = len(track), segmenter.steps()
    if n == 0:
        assert segs == []
        return
    if n < w:
        assert [(x.start, x.stop) for x in segs] == [(0, n)]
    else:
        regular = (n - w) // s + 1
        tail = int((regular - 1) * s + w < n)  # one end-aligned window when the stride stops short
        assert len(segs) == regular + tail
        assert all(x.stop - x.start == w and x.start == i * s for i, x in enumerate(segs[:regular]))
        assert segs[-1].stop == n  # every track ends with a window ending at its last step
    for i, x in enumerate(segs):
        assert x.index == i and 0 <= x.start < x.stop <= n
        assert x.present_fraction == np.mean(track.present[x.start:x.stop])
        assert (x.start_tick, x.stop_tick) == (track.ticks[x.start], track.ticks[x.stop - 1] + 1)


weights = st.dictionaries(st.sampled_from(["speed.mean", "pos.max", "count.std", "tag.a"]), finite, min_size=1)


@SETTINGS
@given(tracks(), segmenters, weights, st.sampled_from(["inclusion", "avoidance", "filter"]), finite)
def test_score_matches_its_definition_and_ignores_key_order(track, segmenter, w, method, threshold):
    pred = [{"feature": "speed.max", "op": "<=", "value": threshold}]
    s = Strategy.from_dict({"method": method, "priority": w, "predicates": pred})
    flipped = Strategy.from_dict({"method": method, "priority": dict(reversed(list(w.items()))), "predicates": pred})
    f = compute_features(track, segmenter.segments(track), s.feature_keys())
    r, r2 = s.score(f), flipped.score(f)
    np.testing.assert_array_equal(r.priority, r2.priority)  # bitwise, whatever the declared order
    raw = sum(weight * f[k] for k, weight in sorted(w.items()))
    passed = ~np.isnan(f["speed.max"]) & (np.nan_to_num(f["speed.max"], nan=np.inf) <= threshold)
    np.testing.assert_array_equal(r.passed, passed)
    expected = {"inclusion": raw, "avoidance": -raw, "filter": np.where(passed, raw, -np.inf)}[method]
    np.testing.assert_allclose(r.priority, expected, rtol=1e-12, atol=1e-9)
    assert np.isnan(r.priority[np.isnan(raw) & (passed | (method != "filter"))]).all()
