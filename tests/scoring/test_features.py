"""Feature keys, built-in reducers (present timesteps only), tags and user features."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kuration.scoring.features import (
    REDUCERS,
    FeatureError,
    FeatureKey,
    compute_features,
    get_feature,
    parse_feature_key,
    register_feature,
    registered_features,
    segment_tags,
    unregister_feature,
)
from kuration.scoring.segments import Segmenter
from tests.scoring._tracks import SCHEMA, make_track

PRESENT = [True, True, False, True, False, False, True, True]
SPEED = [1.0, 4.0, 99.0, 2.0, 99.0, 99.0, 0.0, 5.0]  # 99 at absent rows is zeroed by make_track


@pytest.fixture
def track():
    return make_track(
        PRESENT,
        values={
            "speed": np.asarray(SPEED, dtype=np.float32),
            "braking": np.array([1, 0, 1, 1, 1, 1, 0, 1], dtype=bool),
            "pos": np.array([[3, 4, 0], [0, 0, 2], [9, 9, 9], [1, 2, 2], [9, 9, 9], [9, 9, 9], [0, 0, 0], [6, 8, 0]],
                            float),
            "temp": np.array([20, 21, 50, 22, 50, 50, 23, 24], float),
        },
        tags=[("brake",), ("brake", "brake"), ("brake",), ("horn", "brake"), ("horn",), (), ("horn",), ()],
    )


@pytest.fixture
def segs(track):
    # [0, 4) has present rows 0, 1, 3; [4, 8) has 6, 7; [2, 6) has 3 only
    return Segmenter(4, 2, unit="steps").segments(track)


def test_parse_feature_key_grammar():
    assert parse_feature_key("speed.mean") == FeatureKey("speed.mean", "field", "speed", "mean", None)
    assert parse_feature_key("pos[2].max") == FeatureKey("pos[2].max", "field", "pos", "max", 2)
    assert parse_feature_key("tag.lane.change") == FeatureKey("tag.lane.change", "tag", "lane.change")
    assert parse_feature_key("fn.curv") == FeatureKey("fn.curv", "fn", "curv")
    assert parse_feature_key("a.b.std").name == "a.b"  # the reducer is after the last dot


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("speed", r"feature key 'speed': expected '<field>\.<reducer>'"),
        ("speed.avg",
         r"feature key 'speed\.avg': unknown reducer 'avg'; valid reducers: \['mean', 'min', 'max', 'std', 'delta', "
         r"'frac'\]"),
        (".mean", r"feature key '\.mean'"),
        ("tag.", r"feature key 'tag\.': 'tag\.' needs a name"),
        ("fn.", r"'fn\.' needs a name"),
        ("pos[x].mean", r"malformed component index in 'pos\[x\]'"),
        ("pos[01].mean", r"malformed component index"),
        ("pos[" + "9" * 5000 + "].mean",
         r"feature key 'pos\[9{72}\.\.\.: component index in 'pos\[9+'\.\.\. is too large \(at most 9 digits\)"),
        ("", r"must be a non-empty string"),
        (3, r"feature key 3: must be a non-empty string"),
    ],
)
def test_parse_feature_key_syntax_errors(key, match):
    with pytest.raises(FeatureError, match=match):
        parse_feature_key(key)


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("sped.mean",
         r"feature key 'sped\.mean': unknown field 'sped'; schema fields and globals: \['braking', 'grid', 'pos', "
         r"'speed', 'temp'\]"),
        ("pos[3].mean",
         r"feature key 'pos\[3\]\.mean': component 3 out of range for field 'pos' with shape \[3\] \(valid 0\.\.2\)"),
        ("grid[4].min", r"component 4 out of range for field 'grid' with shape \[2, 2\] \(valid 0\.\.3\)"),
        ("speed[0].mean", r"field 'speed' is a scalar; drop the \[0\]"),
        ("frame.frac", r"'frame' is a media column; features read numeric fields and globals"),
        ("t.mean", r"'t' is the schema's time column"),
        ("events.frac", r"'events' is the schema's tag column"),
        ("fn.nope", r"no feature function 'nope' is registered; registered: \["),
    ],
)
def test_parse_feature_key_against_schema(key, match):
    with pytest.raises(FeatureError, match=match):
        parse_feature_key(key, SCHEMA)


def test_valid_keys_resolve_against_schema():
    for key in ["speed.frac", "braking.frac", "braking.mean", "pos.std", "pos[2].delta", "grid[3].max", "temp.mean",
                "tag.brake"]:
        parse_feature_key(key, SCHEMA)


def test_tag_keys_need_a_tag_column():
    from kuration.sources.schema import Schema

    schema = Schema.from_dict({"sample_hz": 1, "time": "t", "fields": {"x": {"dtype": "float32"}}})
    with pytest.raises(FeatureError, match=r"feature key 'tag\.brake': the schema declares no tag column"):
        parse_feature_key("tag.brake", schema)


def test_scalar_reducers_by_hand(track, segs):
    assert [(s.start, s.stop) for s in segs] == [(0, 4), (2, 6), (4, 8)]
    f = compute_features(track, segs, [f"speed.{r}" for r in REDUCERS])
    # segment 0: present speeds 1, 4, 2; segment 1: 2 only; segment 2: 0, 5
    np.testing.assert_allclose(f["speed.mean"], [7 / 3, 2.0, 2.5])
    np.testing.assert_allclose(f["speed.min"], [1.0, 2.0, 0.0])
    np.testing.assert_allclose(f["speed.max"], [4.0, 2.0, 5.0])
    np.testing.assert_allclose(f["speed.std"], [np.std([1, 4, 2]), 0.0, 2.5])
    np.testing.assert_allclose(f["speed.delta"], [1.0, 0.0, 5.0])
    np.testing.assert_allclose(f["speed.frac"], [1.0, 1.0, 0.5])  # numeric frac: nonzero
    assert all(a.dtype == np.float64 and a.shape == (3,) for a in f.values())


def test_bool_frac_counts_present_true_only(track, segs):
    f = compute_features(track, segs, ["braking.frac", "braking.mean", "braking.max"])
    # braking at present rows: 0:T 1:F 3:T | 3:T | 6:F 7:T ; absent rows 2, 4, 5 (True in the input) never count
    np.testing.assert_allclose(f["braking.frac"], [2 / 3, 1.0, 0.5])
    np.testing.assert_allclose(f["braking.mean"], f["braking.frac"])
    np.testing.assert_allclose(f["braking.max"], [1.0, 1.0, 1.0])


def test_globals_are_reduced_over_present_timesteps_too(track, segs):
    f = compute_features(track, segs, ["temp.mean", "temp.max"])
    np.testing.assert_allclose(f["temp.mean"], [(20 + 21 + 22) / 3, 22.0, 23.5])
    np.testing.assert_allclose(f["temp.max"], [22.0, 22.0, 24.0])  # the 50s at absent ticks never count


def test_vector_norms_and_components(track, segs):
    f = compute_features(track, segs, ["pos.mean", "pos.max", "pos.frac", "pos[1].mean", "pos[2].delta", "pos[0].min"])
    # norms at present rows: 0 -> 5, 1 -> 2, 3 -> 3, 6 -> 0, 7 -> 10
    np.testing.assert_allclose(f["pos.mean"], [(5 + 2 + 3) / 3, 3.0, 5.0])
    np.testing.assert_allclose(f["pos.max"], [5.0, 3.0, 10.0])
    np.testing.assert_allclose(f["pos.frac"], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(f["pos[1].mean"], [(4 + 0 + 2) / 3, 2.0, 4.0])
    np.testing.assert_allclose(f["pos[2].delta"], [2 - 0, 0.0, 0 - 0])
    np.testing.assert_allclose(f["pos[0].min"], [0.0, 1.0, 0.0])


def test_multi_dim_field_components_are_flattened_c_order():
    grid = np.arange(12, dtype=np.int16).reshape(3, 2, 2)
    track = make_track([True] * 3, values={"grid": grid})
    segs = Segmenter(3, 1, unit="steps").segments(track)
    f = compute_features(track, segs, ["grid[2].mean", "grid.max"])
    np.testing.assert_allclose(f["grid[2].mean"], [np.mean(grid[:, 1, 0])])
    np.testing.assert_allclose(f["grid.max"], [np.linalg.norm(grid[2])])


def test_all_absent_segment_is_nan_for_every_reducer():
    track = make_track([True, True, False, False, False, True], values={"speed": np.arange(6.0)}, tags=[("x",)] * 6)
    segs = Segmenter(2, 2, unit="steps").segments(track)
    f = compute_features(track, segs, [f"speed.{r}" for r in REDUCERS] + ["tag.x"])
    for r in REDUCERS:
        assert math.isnan(f[f"speed.{r}"][1]), r
        assert np.isfinite(f[f"speed.{r}"][[0, 2]]).all(), r
    assert f["tag.x"].tolist() == [2.0, 0.0, 1.0]  # a count is 0, not NaN


def test_nan_value_at_a_present_timestep_stays_in_its_segments():
    speed = np.array([1.0, np.nan, 3.0, 4.0, 5.0, 6.0])
    track = make_track([True] * 6, values={"speed": speed})
    segs = Segmenter(2, 2, unit="steps").segments(track)
    f = compute_features(track, segs, ["speed.mean", "speed.std", "speed.min", "speed.max"])
    for key, arr in f.items():
        assert math.isnan(arr[0]), key
        assert np.isfinite(arr[1:]).all(), key  # no leak through a running sum


def test_nan_at_an_absent_timestep_never_counts():
    track = make_track([True, False, True], values={"temp": np.array([1.0, np.nan, 3.0])})
    f = compute_features(track, Segmenter(3, 1, unit="steps").segments(track), ["temp.mean", "temp.std", "temp.min"])
    assert f["temp.mean"].tolist() == [2.0] and f["temp.std"].tolist() == [1.0] and f["temp.min"].tolist() == [1.0]


def test_tag_counts_present_timesteps_once_each(track, segs):
    f = compute_features(track, segs, ["tag.brake", "tag.horn", "tag.never"])
    # brake at present rows 0, 1 (twice in one tick: counted once), 3; horn at 3, 6 (row 4 absent)
    assert f["tag.brake"].tolist() == [3.0, 1.0, 0.0]
    assert f["tag.horn"].tolist() == [1.0, 1.0, 1.0]
    assert f["tag.never"].tolist() == [0.0, 0.0, 0.0]
    assert segment_tags(track, segs) == [["brake", "horn"], ["brake", "horn"], ["horn"]]


def test_repeated_keys_computed_once_and_empty_segments(track):
    assert list(compute_features(track, [], ["speed.mean", "tag.brake"])) == ["speed.mean", "tag.brake"]
    assert compute_features(track, [], ["speed.mean"])["speed.mean"].shape == (0,)
    segs = Segmenter(8, 1, unit="steps").segments(track)
    assert list(compute_features(track, segs, ["speed.max", "speed.max"])) == ["speed.max"]


def test_compute_features_names_a_missing_field(track, segs):
    with pytest.raises(FeatureError,
                       match=r"feature key 'wheel\.mean': track 'src'/'a' has no field 'wheel'; it has \["):
        compute_features(track, segs, ["wheel.mean"])
    with pytest.raises(FeatureError, match=r"field 'speed' is a scalar"):
        compute_features(track, segs, ["speed[0].mean"])
    with pytest.raises(FeatureError, match=r"component 5 out of range for field 'pos'"):
        compute_features(track, segs, ["pos[5].mean"])


def test_segments_from_another_track_are_rejected(track):
    long = make_track([True] * 20)
    segs = Segmenter(4, 4, unit="steps").segments(long)
    with pytest.raises(FeatureError, match=r"segment 2 \[8, 12\) does not fit track 'src'/'a' of 8 steps"):
        compute_features(track, segs, ["speed.mean"])


def test_std_is_chunked_without_changing_results(track, monkeypatch):
    import kuration.scoring.features as features

    segs = Segmenter(3, 1, unit="steps").segments(track)
    expected = compute_features(track, segs, ["speed.std"])["speed.std"]
    monkeypatch.setattr(features, "_GATHER_CHUNK", 4)
    np.testing.assert_allclose(compute_features(track, segs, ["speed.std"])["speed.std"], expected)


# -- user features -----------------------------------------------------------------------------

@pytest.fixture
def clean_registry():
    before = set(registered_features())
    yield
    for name in set(registered_features()) - before:
        unregister_feature(name)


def _n_steps(track, segment):
    return float(segment.stop - segment.start)


def test_register_and_compute_a_user_feature(track, segs, clean_registry):
    register_feature("n_steps_test", _n_steps)
    assert get_feature("n_steps_test") is _n_steps
    assert registered_features()["n_steps_test"].endswith("test_features:_n_steps")
    assert compute_features(track, segs, ["fn.n_steps_test"])["fn.n_steps_test"].tolist() == [4.0, 4.0, 4.0]
    parse_feature_key("fn.n_steps_test", SCHEMA)  # resolves once registered


def test_register_as_decorator_and_idempotent_reregistration(clean_registry):
    @register_feature("deco_test")
    def first(track, segment):
        return 1.0

    register_feature("deco_test", first)  # same function again: a no-op
    with pytest.raises(FeatureError,
                       match=r"register_feature\('deco_test'\): already registered to .*first; pass replace=True"):
        register_feature("deco_test", _n_steps)
    register_feature("deco_test", _n_steps, replace=True)
    assert get_feature("deco_test") is _n_steps


def test_unknown_user_feature_lists_registered_names(track, segs, clean_registry):
    register_feature("known_test", _n_steps)
    with pytest.raises(FeatureError,
                       match=r"feature fn\.missing_test: no feature function 'missing_test' is registered; registered: "
                             r"\[.*'known_test'"):
        get_feature("missing_test")
    with pytest.raises(FeatureError, match=r"no feature function 'missing_test'"):
        compute_features(track, segs, ["fn.missing_test"])


@pytest.mark.parametrize("name", ["", " x", 3])
def test_register_rejects_bad_names(name):
    with pytest.raises(FeatureError, match=r"register_feature: name must be a non-empty string"):
        register_feature(name, _n_steps)


def test_user_feature_errors_name_the_segment(track, segs, clean_registry):
    register_feature("bad_type_test", lambda t, s: "high")
    with pytest.raises(FeatureError,
                       match=r"feature 'fn\.bad_type_test' .* returned 'high' \(str\) for track 'src'/'a' segment 0"):
        compute_features(track, segs, ["fn.bad_type_test"])

    def boom(t, s):
        if s.index == 1:
            raise ZeroDivisionError("nope")
        return 0.0

    register_feature("boom_test", boom)
    with pytest.raises(FeatureError, match=r"failed on track 'src'/'a' segment 1 \[2, 6\): ZeroDivisionError: nope"):
        compute_features(track, segs, ["fn.boom_test"])


def test_user_feature_may_return_numpy_scalars_and_nan(track, segs, clean_registry):
    register_feature("np_test", lambda t, s: np.float32(s.index) if s.index else np.nan)
    out = compute_features(track, segs, ["fn.np_test"])["fn.np_test"]
    assert math.isnan(out[0]) and out[1:].tolist() == [1.0, 2.0]


def test_a_field_named_like_a_reserved_prefix_is_reported_ambiguous():
    from kuration.sources.schema import Schema

    schema = Schema.from_dict({"sample_hz": 1, "time": "t", "fields": {"tag": {"dtype": "float32"}}, "tags": "events"})
    with pytest.raises(FeatureError,
                       match=r"feature key 'tag\.mean': ambiguous: 'tag' is both a schema field and the reserved "
                             r"'tag\.' prefix"):
        parse_feature_key("tag.mean", schema)
    parse_feature_key("tag.brake", schema)  # a tag that is not a reducer name is unambiguous


def test_features_are_canonical_floats_whatever_zeros_and_nans_the_data_holds():
    """-0.0 comes out 0.0 and a signed NaN with a payload comes out as np.nan: a feature is
    hashed and written, and max over 0.0 and -0.0 returns either zero depending on the CPU."""
    signed_nan = np.array([0xFFF8000000000001], np.uint64).view(np.float64)[0]
    speed = np.array([-0.0, -0.0, -0.0, -0.0, 0.0, -0.0, signed_nan, 1.0])
    track = make_track([True] * 8, values={"speed": speed})
    segs = Segmenter(2, 2, unit="steps").segments(track)
    f = compute_features(track, segs, [f"speed.{r}" for r in REDUCERS])
    quiet_nan = np.array([np.nan]).view(np.uint64)[0]
    for key, values in f.items():
        bits = values.view(np.uint64)
        assert (bits[values == 0] == 0).all(), key
        assert (bits[np.isnan(values)] == quiet_nan).all(), key
    assert f["speed.max"][:2].tolist() == [0.0, 0.0] and np.isnan(f["speed.max"][3])
