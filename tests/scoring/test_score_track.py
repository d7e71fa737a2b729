"""score_track: the per-track segment table (columns, types, rows, determinism)."""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

from kuration.scoring.track import EntityIdError, entity_key, score_track, segment_table_schema
from kuration.scoring.segments import Segmenter
from kuration.sources.ticks import Ticks
from kuration.scoring.strategy import Strategy
from kuration.sources.tracks import tracks_from_ticks
from tests.scoring import _user_features
from tests.scoring._tracks import SCHEMA, make_track

STRATEGY = Strategy.from_dict({
    "method": "filter",
    "priority": {"speed.mean": 1.0, "fn.present_steps_x2": 0.5},
    "predicates": [{"feature": "braking.frac", "op": ">=", "value": 0.5}],
    "tags": ["brake", "horn"],
})
LEADING = ["source_id", "entity_id", "segment_index", "start", "stop", "start_tick", "stop_tick", "seconds",
           "present_fraction", "track_steps", "sample_hz"]
FEATURES = ["braking.frac", "fn.present_steps_x2", "speed.mean", "tag.brake", "tag.horn"]
TRAILING = ["tags", "priority", "passed"]


def _ticks() -> Ticks:
    rows = [  # (t, agent, speed, braking, events) ; agent 2 is missing at ticks 2 and 3
        (0, "car", 1.0, True, ["brake"]), (0, 2, 5.0, False, []),
        (1, "car", 2.0, True, []), (1, 2, 6.0, True, ["horn"]),
        (2, "car", 3.0, False, ["horn", "brake"]),
        (3, "car", 4.0, False, []),
        (4, "car", 5.0, True, []), (4, 2, 7.0, True, ["brake"]),
        (5, "car", 6.0, True, None), (5, 2, 8.0, False, None),
    ]
    n = len(rows)
    raw = {
        "t": [r[0] for r in rows], "agent": [r[1] for r in rows],
        "speed": np.array([r[2] for r in rows], np.float32), "braking": np.array([r[3] for r in rows]),
        "pos": np.zeros((n, 3)), "grid": np.zeros((n, 2, 2), np.int16), "temp": np.array([20.0 + r[0] for r in rows]),
        "frame": [f"frames/{i}.npy" for i in range(n)], "events": [r[4] for r in rows],
    }
    return Ticks.from_columns(SCHEMA, "run-7", raw)


@pytest.fixture
def tracks():
    return tracks_from_ticks(SCHEMA, _ticks())


def test_schema_columns_in_order():
    schema = segment_table_schema(STRATEGY)
    assert schema.names == LEADING + FEATURES + TRAILING
    types = dict(zip(schema.names, schema.types, strict=True))
    assert types["source_id"] == pa.string() and types["entity_id"] == pa.string()
    for name in ["segment_index", "start", "stop", "start_tick", "stop_tick"]:
        assert types[name] == pa.int64()
    assert types["track_steps"] == pa.int64()
    for name in ["seconds", "present_fraction", "sample_hz", "priority", *FEATURES]:
        assert types[name] == pa.float64()
    assert types["tags"] == pa.list_(pa.string()) and types["passed"] == pa.bool_()


def test_score_track_rows_and_values(tracks):
    car, two = (t for t in tracks if t.entity_id == "car"), (t for t in tracks if t.entity_id == 2)
    car, two = next(car), next(two)
    seg = Segmenter(0.4, 0.2)  # 4 steps, stride 2 at 10 Hz
    table = score_track(two, segmenter=seg, strategy=STRATEGY)
    assert table.schema == segment_table_schema(STRATEGY)
    assert table.num_rows == 2
    rows = table.to_pylist()
    assert [r["entity_id"] for r in rows] == ["int:2", "int:2"]
    assert [(r["start"], r["stop"], r["start_tick"], r["stop_tick"]) for r in rows] == [(0, 4, 0, 4), (2, 6, 2, 6)]
    assert [r["segment_index"] for r in rows] == [0, 1]
    assert [r["seconds"] for r in rows] == [0.4, 0.4]
    assert [r["present_fraction"] for r in rows] == [0.5, 0.5]
    # the whole track, not the windows
    assert [(r["track_steps"], r["sample_hz"]) for r in rows] == [(len(two), 10.0)] * 2
    assert [r["speed.mean"] for r in rows] == [5.5, 7.5]  # absent ticks 2, 3 are not zeros
    assert [r["fn.present_steps_x2"] for r in rows] == [4.0, 4.0]
    assert [r["braking.frac"] for r in rows] == [0.5, 0.5]
    assert [r["tag.brake"] for r in rows] == [0.0, 1.0] and [r["tag.horn"] for r in rows] == [1.0, 0.0]
    assert [r["tags"] for r in rows] == [["horn"], ["brake"]]
    assert [r["priority"] for r in rows] == [5.5 + 2.0, 7.5 + 2.0] and all(r["passed"] for r in rows)

    rows = score_track(car, segmenter=seg, strategy=STRATEGY).to_pylist()
    assert [r["source_id"] for r in rows] == ["run-7", "run-7"] and rows[0]["entity_id"] == "str:'car'"
    assert [r["tags"] for r in rows] == [["brake", "horn"], ["brake", "horn"]]
    assert [r["braking.frac"] for r in rows] == [0.5, 0.5]
    assert rows[0]["priority"] == 2.5 + 4.0


def test_filter_rejections_are_minus_inf_in_the_table(tracks):
    car = next(t for t in tracks if t.entity_id == "car")
    rows = score_track(car, segmenter=Segmenter(2, 2, unit="steps"), strategy=STRATEGY).to_pylist()
    assert [r["passed"] for r in rows] == [True, False, True]
    assert rows[1]["priority"] == -math.inf


def test_empty_track_gives_an_empty_table_of_the_same_schema():
    table = score_track(make_track([]), segmenter=Segmenter(1, 1), strategy=STRATEGY)
    assert table.num_rows == 0 and table.schema == segment_table_schema(STRATEGY)
    assert pa.concat_tables([table, table]).num_rows == 0


def test_short_track_is_one_segment(tracks):
    car = next(t for t in tracks if t.entity_id == "car")
    table = score_track(car, segmenter=Segmenter(60, 30), strategy=STRATEGY)
    assert table.num_rows == 1 and table["stop"].to_pylist() == [6] and table["seconds"].to_pylist() == [0.6]


def test_all_absent_segment_is_non_finite_not_zero():
    track = make_track([True, False, False], values={"speed": np.array([3.0, 0, 0], np.float32)})
    s = Strategy.from_dict({"method": "inclusion", "priority": {"speed.max": 1}})
    rows = score_track(track, segmenter=Segmenter(1, 1, unit="steps"), strategy=s).to_pylist()
    assert rows[0]["priority"] == 3.0 and math.isnan(rows[1]["priority"]) and math.isnan(rows[2]["speed.max"])
    assert rows[1]["tags"] == [] and rows[1]["present_fraction"] == 0.0


def test_deterministic_and_concatenable(tracks):
    seg = Segmenter(0.3, 0.1)
    first = [score_track(t, segmenter=seg, strategy=STRATEGY) for t in tracks]
    again = [score_track(t, segmenter=seg, strategy=STRATEGY) for t in tracks]
    assert all(a.equals(b) for a, b in zip(first, again, strict=True))
    assert pa.concat_tables(first).num_rows == sum(t.num_rows for t in first)


def test_user_feature_rebuilt_in_a_spawned_worker_by_importing_its_module(tracks):
    car = next(t for t in tracks if t.entity_id == "car")
    seg = Segmenter(3, 1, unit="steps")
    expected = score_track(car, segmenter=seg, strategy=STRATEGY).to_pylist()
    # An executor, not multiprocessing.Pool: a worker that dies (say, it cannot import a module)
    # makes a Pool wait forever, while the executor raises BrokenProcessPool at once.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        # a fresh worker that never imported the registering module has nothing under that name
        with pytest.raises(Exception, match=r"no feature function 'present_steps_x2' is registered"):
            pool.submit(score_track, car, segmenter=seg, strategy=STRATEGY).result(timeout=300)
        # unpickling score_in_worker imports _user_features, which registers the feature
        assert pool.submit(_user_features.score_in_worker, car, seg, STRATEGY).result(timeout=300) == expected


@pytest.mark.parametrize(
    ("entity", "key"),
    [
        (None, "none:None"), (True, "bool:True"), (1, "int:1"), (np.int64(1), "int:1"), (np.bool_(False), "bool:False"),
        (1.5, "float:1.5"), (np.float32(0.5), "float:0.5"), ("a", "str:'a'"), ("1", "str:'1'"),
        (np.str_("a"), "str:'a'"),
        (b"a", "bytes:b'a'"), ((1, "a"), "tuple:(int:1,str:'a')"), (frozenset({2, 1}), "frozenset:{int:1,int:2}"),
        ((), "tuple:()"),
    ],
)
def test_entity_key_is_type_tagged(entity, key):
    assert entity_key(entity) == key


@pytest.mark.parametrize("entity",
                         [float("nan"), float("inf"), [1], {"a": 1}, object(), (1, [2]), np.datetime64("2024-01-01")])
def test_entity_key_rejects_non_canonical_ids(entity):
    with pytest.raises(EntityIdError, match=r"entity id .* (has no canonical representation|non-finite)"):
        entity_key(entity)


def test_entity_keys_of_equal_looking_ids_differ():
    keys = [entity_key(e) for e in [1, "1", 1.0, True, (1,), b"1"]]
    assert len(set(keys)) == len(keys)
