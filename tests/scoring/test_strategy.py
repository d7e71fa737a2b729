"""Strategy: validation with key paths, scoring semantics of the three methods."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from kuration.scoring.features import register_feature, unregister_feature
from kuration.scoring.strategy import ScoreResult, Strategy, StrategyError
from tests.scoring._tracks import SCHEMA

BASE = {"method": "inclusion", "priority": {"speed.mean": 1.0}}


def S(**overrides) -> Strategy:
    return Strategy.from_dict({**BASE, **overrides})


def test_full_strategy_round_trips():
    data = {
        "name": "braking",
        "method": "avoidance",
        "priority": {"speed.std": 2, "tag.brake": 0.5},
        "predicates": [{"feature": "speed.mean", "op": ">", "value": 2}],
        "tags": ["brake", "horn"],
        "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": 1.5},
    }
    s = Strategy.from_dict(data)
    assert s.priority == {"speed.std": 2.0, "tag.brake": 0.5}
    assert s.selection.tag_coverage and s.selection.min_tag_frac == 0.1 and s.selection.max_group_overshoot == 1.5
    assert Strategy.from_dict(s.to_dict()) == s
    assert s.to_dict()["predicates"] == [{"feature": "speed.mean", "op": ">", "value": 2.0}]
    assert pickle.loads(pickle.dumps(s)) == s  # workers receive strategies by pickle


def test_defaults():
    s = S()
    assert s.predicates == () and s.tags == () and s.name is None
    assert s.selection.to_dict() == {"tag_coverage": False, "min_tag_frac": 0.0, "max_group_overshoot": None}


def test_feature_keys_sorted_unique_including_tags():
    s = S(
        priority={"speed.mean": 1, "tag.brake": 1},
        predicates=[{"feature": "speed.mean", "op": "<", "value": 1}, {"feature": "pos.max", "op": ">=", "value": 0}],
        tags=["horn", "brake"],
    )
    assert s.feature_keys() == ["pos.max", "speed.mean", "tag.brake", "tag.horn"]


def test_fingerprint_is_canonical():
    a = S(priority={"speed.mean": 1, "pos.max": 2})
    b = S(priority={"pos.max": 2.0, "speed.mean": 1.0})
    assert a.fingerprint() == b.fingerprint() and a == b and hash(a) == hash(b)
    assert a.fingerprint() != S(priority={"speed.mean": 1, "pos.max": 3}).fingerprint()
    assert a.fingerprint() != S(priority={"speed.mean": 1, "pos.max": 2}, method="avoidance").fingerprint()
    assert len(a.fingerprint()) == 64


def test_default_clip_aggregate():
    assert S().default_clip_aggregate == "max"
    assert S(method="avoidance").default_clip_aggregate == "mean"
    assert S(method="filter",
             predicates=[{"feature": "speed.mean", "op": ">", "value": 0}]).default_clip_aggregate == "max"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], r"^strategy: expected a mapping, got list"),
        ({**BASE, "prio": 1}, r"^strategy: unknown key\(s\) \['prio'\]; valid keys: \['name', 'method', 'priority'"),
        ({"priority": {"speed.mean": 1}},
         r"^strategy\.method: required; one of \['inclusion', 'avoidance', 'filter'\]"),
        ({**BASE, "method": "include"},
         r"^strategy\.method: must be one of \['inclusion', 'avoidance', 'filter'\], got 'include'"),
        ({"method": "inclusion"}, r"^strategy\.priority: required"),
        ({**BASE, "priority": {}}, r"^strategy\.priority: must be a non-empty mapping"),
        ({**BASE, "priority": ["speed.mean"]}, r"^strategy\.priority: must be a non-empty mapping"),
        ({**BASE, "priority": {"speed.avg": 1}},
         r"^strategy\.priority\['speed\.avg'\]: feature key 'speed\.avg': unknown reducer 'avg'"),
        ({**BASE, "priority": {"speed.mean": "1"}},
         r"^strategy\.priority\['speed\.mean'\]: weight must be a finite number, got '1'"),
        ({**BASE, "priority": {"speed.mean": float("inf")}},
         r"^strategy\.priority\['speed\.mean'\]: weight must be a finite number"),
        ({**BASE, "priority": {"speed.mean": True}},
         r"^strategy\.priority\['speed\.mean'\]: weight must be a finite number, got True"),
        ({**BASE, "predicates": {"feature": "x"}}, r"^strategy\.predicates: must be a list"),
        ({**BASE, "predicates": ["speed.mean > 1"]}, r"^strategy\.predicates\[0\]: must be a mapping"),
        (
            {**BASE,
             "predicates": [{"feature": "speed.mean", "op": ">", "value": 1},
                            {"feature": "speed.mean", "op": "=>", "value": 1}]},
            r"^strategy\.predicates\[1\]\.op: must be one of \['<', '<=', '>', '>=', '==', '!='\], got '=>'",
        ),
        ({**BASE, "predicates": [{"feature": "speed.mean", "op": ">"}]},
         r"^strategy\.predicates\[0\]\.value: required"),
        ({**BASE, "predicates": [{"feature": "speed.mean", "op": ">", "value": 1, "x": 1}]},
         r"^strategy\.predicates\[0\]: unknown key\(s\) \['x'\]"),
        ({**BASE, "predicates": [{"feature": "speed", "op": ">", "value": 1}]},
         r"^strategy\.predicates\[0\]\.feature: feature key 'speed'"),
        ({**BASE, "predicates": [{"feature": "speed.mean", "op": ">", "value": None}]},
         r"^strategy\.predicates\[0\]\.value: must be a finite number, got None"),
        ({**BASE, "predicates": [{"feature": "speed.mean", "op": ">", "value": float("nan")}]},
         r"^strategy\.predicates\[0\]\.value: must be a finite number"),
        ({**BASE, "method": "filter"}, r"^strategy\.predicates: method 'filter' needs at least one predicate"),
        ({**BASE, "tags": "brake"}, r"^strategy\.tags: must be a list of event tag names"),
        ({**BASE, "tags": ["brake", ""]}, r"^strategy\.tags\[1\]: must be a non-empty string"),
        ({**BASE, "tags": ["brake", "horn", "brake"]},
         r"^strategy\.tags\[2\]: 'brake' is listed twice \(first at strategy\.tags\[0\]\)"),
        ({**BASE, "selection": []}, r"^strategy\.selection: must be a mapping"),
        ({**BASE, "selection": {"coverage": True}},
         r"^strategy\.selection: unknown key\(s\) \['coverage'\]; valid keys: \['tag_coverage', 'min_tag_frac', "
         r"'max_group_overshoot'\]"),
        ({**BASE, "selection": {"tag_coverage": "yes"}},
         r"^strategy\.selection\.tag_coverage: must be true or false, got 'yes'"),
        ({**BASE, "selection": {"tag_coverage": True}}, r"^strategy\.selection\.tag_coverage: needs strategy\.tags"),
        ({**BASE, "selection": {"min_tag_frac": 1.5}},
         r"^strategy\.selection\.min_tag_frac: must be a number in \[0, 1\], got 1\.5"),
        ({**BASE, "selection": {"min_tag_frac": -0.1}}, r"^strategy\.selection\.min_tag_frac"),
        ({**BASE, "selection": {"max_group_overshoot": 0.5}},
         r"^strategy\.selection\.max_group_overshoot: must be a number >= 1 or null"),
        ({**BASE, "name": ""}, r"^strategy\.name: must be a non-empty string"),
    ],
)
def test_validation_errors_name_the_key_path(data, match):
    with pytest.raises(StrategyError, match=match):
        Strategy.from_dict(data)


def test_strategy_error_is_a_value_error():
    with pytest.raises(ValueError):
        Strategy.from_dict({})


def test_validate_against_schema():
    s = S(
        priority={"speed.mean": 1, "pos[2].max": 1},
        predicates=[{"feature": "braking.frac", "op": ">", "value": 0}],
        tags=["brake"],
    )
    assert s.validate_against(SCHEMA) is s
    with pytest.raises(StrategyError,
                       match=r"^strategy\.priority\['pos\[3\]\.max'\]: feature key 'pos\[3\]\.max': component 3 out of "
                             r"range"):
        S(priority={"pos[3].max": 1}).validate_against(SCHEMA)
    bad_pred = S(predicates=[{"feature": "speed.mean", "op": ">", "value": 0},
                             {"feature": "wheel.max", "op": ">", "value": 0}])
    with pytest.raises(StrategyError,
                       match=r"^strategy\.predicates\[1\]\.feature: feature key 'wheel\.max': unknown field 'wheel'"):
        bad_pred.validate_against(SCHEMA)
    with pytest.raises(StrategyError,
                       match=r"^strategy\.priority\['fn\.curv_test'\]: .*no feature function 'curv_test' is "
                             r"registered"):
        S(priority={"fn.curv_test": 1}).validate_against(SCHEMA)
    register_feature("curv_test", lambda t, s: 0.0)
    try:
        S(priority={"fn.curv_test": 1}).validate_against(SCHEMA)
    finally:
        unregister_feature("curv_test")


def test_tags_need_a_schema_tag_column():
    from kuration.sources.schema import Schema

    schema = Schema.from_dict({"sample_hz": 1, "time": "t", "fields": {"speed": {"dtype": "float32"}}})
    with pytest.raises(StrategyError,
                       match=r"^strategy\.tags\[0\]: feature key 'tag\.brake': the schema declares no tag column"):
        S(tags=["brake"]).validate_against(schema)


# -- scoring ------------------------------------------------------------------------------------

FEATURES = {
    "a.mean": np.array([1.0, 2.0, np.nan, 4.0]),
    "b.max": np.array([10.0, 0.0, 1.0, -1.0]),
}
PRED = [{"feature": "b.max", "op": ">=", "value": 0}]


def test_inclusion_is_the_weighted_sum_and_reports_predicates():
    s = Strategy.from_dict({"method": "inclusion", "priority": {"a.mean": 2, "b.max": 0.5}, "predicates": PRED})
    r = s.score(FEATURES)
    assert isinstance(r, ScoreResult) and len(r) == 4
    np.testing.assert_array_equal(r.priority, [7.0, 4.0, np.nan, 7.5])  # NaN stays NaN, predicates don't touch it
    assert r.passed.tolist() == [True, True, True, False]
    assert r.priority.dtype == np.float64 and r.passed.dtype == bool


def test_avoidance_negates():
    s = Strategy.from_dict({"method": "avoidance", "priority": {"a.mean": 2, "b.max": 0.5}})
    r = s.score(FEATURES)
    np.testing.assert_array_equal(r.priority, [-7.0, -4.0, np.nan, -7.5])
    assert r.passed.all()


def test_filter_gives_failing_segments_minus_inf():
    s = Strategy.from_dict({
        "method": "filter", "priority": {"b.max": 1},
        "predicates": [*PRED, {"feature": "a.mean", "op": "!=", "value": 2}],
    })
    r = s.score(FEATURES)
    # a.mean NaN fails even '!=' ; b.max -1 fails '>= 0' ; a.mean == 2 fails '!= 2'
    np.testing.assert_array_equal(r.priority, [10.0, -np.inf, -np.inf, -np.inf])
    assert r.passed.tolist() == [True, False, False, False]


def test_filter_keeps_nan_priority_of_passing_segment():
    s = Strategy.from_dict({"method": "filter", "priority": {"a.mean": 1}, "predicates": PRED})
    r = s.score(FEATURES)
    assert r.priority[0] == 1.0 and math.isnan(r.priority[2]) and r.priority[3] == -np.inf


@pytest.mark.parametrize(("op", "expected"),
                         [("<", [1, 0, 0, 0]), ("<=", [1, 1, 0, 0]), (">", [0, 0, 0, 1]), (">=", [0, 1, 0, 1]),
                          ("==", [0, 1, 0, 0]), ("!=", [1, 0, 0, 1])])
def test_each_op_and_nan_fails(op, expected):
    s = Strategy.from_dict({**BASE, "predicates": [{"feature": "a.mean", "op": op, "value": 2}]})
    assert s.score({"a.mean": FEATURES["a.mean"],
                    "speed.mean": np.zeros(4)}).passed.tolist() == [bool(e) for e in expected]


def test_inf_features_and_zero_weight_propagate_as_non_finite():
    s = Strategy.from_dict({"method": "inclusion", "priority": {"a.mean": 1, "b.max": 0}})
    r = s.score({"a.mean": np.array([np.inf, 1.0]), "b.max": np.array([1.0, np.inf])})
    assert r.priority[0] == np.inf and math.isnan(r.priority[1])  # 0 * inf is NaN, not 0


def test_score_needs_every_read_feature_and_one_length():
    s = Strategy.from_dict({"method": "inclusion", "priority": {"a.mean": 1}, "predicates": PRED, "tags": ["x"]})
    with pytest.raises(StrategyError, match=r"strategy\.score: missing feature\(s\) \['b\.max'\]; got \['a\.mean'\]"):
        s.score({"a.mean": np.zeros(2)})
    s.score({"a.mean": np.zeros(2), "b.max": np.zeros(2)})  # unweighted tags of interest are not needed to score
    with pytest.raises(StrategyError, match=r"one length"):
        s.score({"a.mean": np.zeros(2), "b.max": np.zeros(3)})


def test_score_of_zero_segments():
    r = S().score({"speed.mean": np.zeros(0)})
    assert r.priority.shape == (0,) and r.passed.shape == (0,)
