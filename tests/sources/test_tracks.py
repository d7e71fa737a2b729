"""tracks_from_ticks: one track per entity, absent is not zero, canonical entity order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.sources.schema import Schema
from kuration.sources import Ticks
from kuration.sources.tracks import tracks_from_ticks

MULTI = Schema.from_dict({
    "sample_hz": 10,
    "time": "t",
    "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [2]}, "speed": {"dtype": "int16"}},
    "globals": {"light": {"dtype": "int8"}},
    "media": {"cam": {"dtype": "uint8", "shape": [1], "provider": "npy_index"}},
    "tags": "tags",
})
SINGLE = Schema.from_dict({"sample_hz": 4, "time": "t", "fields": {"speed": {"dtype": "float64"}}})


def multi_ticks(rows: list[tuple[int, object]], light: dict[int, int] | None = None) -> Ticks:
    """Rows ``(tick, entity)``; values derived from the row so they can be checked."""
    light = light or {}
    return Ticks.from_columns(MULTI, "rec", {
        "t": [t for t, _ in rows],
        "agent": [e for _, e in rows],
        "pos": [[t, i] for i, (t, _) in enumerate(rows)],
        "speed": [100 + i for i in range(len(rows))],
        "light": [light.get(t, t) for t, _ in rows],
        "cam": [f"cam.npy#{i}" for i in range(len(rows))],
        "tags": [[f"row{i}"] for i in range(len(rows))],
    })


def by_entity(tracks):
    return {t.entity_id: t for t in tracks}


def test_absent_entity_is_not_present_zero_filled_with_real_globals():
    ticks = multi_ticks([(0, "a"), (0, "b"), (1, "a"), (2, "a"), (2, "b")], light={0: 5, 1: 6, 2: 7})
    tracks = by_entity(tracks_from_ticks(MULTI, ticks))
    b = tracks["b"]
    np.testing.assert_array_equal(b.ticks, [0, 1, 2])
    np.testing.assert_array_equal(b.present, [True, False, True])
    np.testing.assert_array_equal(b.values["pos"], [[0, 1], [0, 0], [2, 4]])  # row 1 zero-filled, masked
    np.testing.assert_array_equal(b.values["speed"], [101, 0, 104])
    np.testing.assert_array_equal(b.values["light"], [5, 6, 7])  # the tick's global, though b was absent
    assert list(b.media["cam"]) == ["cam.npy#1", None, "cam.npy#4"]
    assert b.tags == [("row1",), (), ("row4",)]
    assert tracks["a"].present.all() and len(tracks["a"]) == 3


def test_track_spans_first_to_last_appearance():
    ticks = multi_ticks([(0, "a"), (1, "a"), (1, "c"), (2, "a"), (3, "a"), (3, "c"), (4, "a")])
    c = by_entity(tracks_from_ticks(MULTI, ticks))["c"]
    np.testing.assert_array_equal(c.ticks, [1, 2, 3])
    np.testing.assert_array_equal(c.present, [True, False, True])
    assert c.duration_seconds == pytest.approx(0.3)


def test_ticks_without_any_row_are_skipped_not_invented():
    ticks = multi_ticks([(0, "a"), (1, "a"), (5, "a")])
    (a,) = tracks_from_ticks(MULTI, ticks)
    np.testing.assert_array_equal(a.ticks, [0, 1, 5])
    assert a.present.all()


def test_single_entity_schema_gives_one_track():
    ticks = Ticks.from_columns(SINGLE, "solo", {"t": [3, 4, 5], "speed": [1.0, 0.0, 2.0]})
    (track,) = tracks_from_ticks(SINGLE, ticks)
    assert (track.source_id, track.entity_id, len(track)) == ("solo", None, 3)
    np.testing.assert_array_equal(track.values["speed"], [1.0, 0.0, 2.0])  # a genuine zero stays present
    assert track.present.all()
    assert track.tags == [(), (), ()]
    assert tracks_from_ticks(SINGLE, ticks, "renamed")[0].source_id == "renamed"


def test_no_rows_no_tracks():
    assert tracks_from_ticks(SINGLE, Ticks.from_columns(SINGLE, "e", {"t": [], "speed": []})) == []


def test_canonical_entity_order_keeps_types_apart():
    entities = [10, "1", 2, 1, True, 1.0, (1, 2), b"x", "10", "2"]
    ticks = multi_ticks([(0, e) for e in entities])
    tracks = tracks_from_ticks(MULTI, ticks)
    ids = [t.entity_id for t in tracks]
    assert ids == [True, b"x", 1.0, 1, 2, 10, "1", "10", "2", (1, 2)]
    assert [type(e) for e in ids] == [bool, bytes, float, int, int, int, str, str, str, tuple]
    got = {(type(t.entity_id), t.entity_id): int(t.values["speed"][0]) for t in tracks}
    assert got[(int, 1)] == 103 and got[(str, "1")] == 101 and got[(bool, True)] == 104 and got[(float, 1.0)] == 105
    # the order does not depend on row order
    shuffled = tracks_from_ticks(MULTI, multi_ticks([(0, e) for e in reversed(entities)]))
    assert [t.entity_id for t in shuffled] == ids


def test_numpy_entity_ids_are_plain_values():
    ticks = Ticks.from_columns(MULTI, "rec", {
        "t": np.array([0, 1]), "agent": np.array([7, 7]), "pos": np.zeros((2, 2)), "speed": np.zeros(2, np.int16),
        "light": np.zeros(2, np.int8), "cam": ["c.npy#0", "c.npy#1"], "tags": [[], []],
    })
    (track,) = tracks_from_ticks(MULTI, ticks)
    assert track.entity_id == 7 and type(track.entity_id) is int
    assert len(track) == 2


def test_records_hold_fields_globals_media_and_markers():
    ticks = multi_ticks([(0, "a"), (0, "b"), (1, "a"), (2, "b")])
    b = by_entity(tracks_from_ticks(MULTI, ticks))["b"]
    records = list(b.records())
    assert [r["_tick"] for r in records] == [0, 1, 2]
    assert [r["_present"] for r in records] == [True, False, True]
    assert [r["_tags"] for r in records] == [("row1",), (), ("row3",)]
    assert records[1]["cam"] is None and records[2]["cam"] == "cam.npy#3"
    assert records[1]["light"] == 1 and records[1]["speed"] == 0
    assert set(records[0]) == {"pos", "speed", "light", "cam", "_tags", "_tick", "_present"}


def test_tracks_do_not_share_global_buffers():
    ticks = multi_ticks([(0, "a"), (0, "b"), (1, "a"), (1, "b")])
    a, b = tracks_from_ticks(MULTI, ticks)
    a.values["light"][0] = 99
    assert b.values["light"][0] == 0


# ---- property: presence patterns round-trip exactly --------------------------------

ENTITY = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "1", "-1"]))


@st.composite
def presence_patterns(draw):
    entities = draw(st.lists(ENTITY, min_size=1, max_size=5, unique_by=lambda e: (type(e), e)))
    n_ticks = draw(st.integers(1, 8))
    ticks = sorted(draw(st.sets(st.integers(0, 30), min_size=n_ticks, max_size=n_ticks)))
    present = {}
    for t in ticks:
        here = draw(st.lists(st.sampled_from(entities), unique_by=lambda e: (type(e), e), max_size=len(entities)))
        present[t] = here  # drawn order: rows within a tick in any order
    rows = [(t, e) for t in ticks for e in present[t]]
    return rows, draw(st.integers(0, 2**31))


@settings(max_examples=150, deadline=None)
@given(presence_patterns())
def test_every_present_row_round_trips_and_every_absent_slot_is_masked(pattern):
    rows, seed = pattern
    rng = np.random.default_rng(seed)
    n = len(rows)
    pos = rng.normal(size=(n, 2)).astype(np.float32)
    speed = rng.integers(-1000, 1000, size=n).astype(np.int16)
    light_by_tick = {t: int(rng.integers(-100, 100)) for t, _ in rows}
    ticks = Ticks.from_columns(MULTI, "prop", {
        "t": [t for t, _ in rows], "agent": [e for _, e in rows], "pos": pos, "speed": speed,
        "light": [light_by_tick[t] for t, _ in rows], "cam": [f"c.npy#{i}" for i in range(n)],
        "tags": [[str(i)] for i in range(n)],
    })
    tracks = tracks_from_ticks(MULTI, ticks)
    real_ticks = sorted({t for t, _ in rows})
    keyed = {(type(t.entity_id), t.entity_id): t for t in tracks}
    assert len(keyed) == len(tracks) == len({(type(e), e) for _, e in rows})

    seen = set()
    for i, (t, e) in enumerate(rows):
        track = keyed[(type(e), e)]
        slot = int(np.searchsorted(track.ticks, t))
        assert track.ticks[slot] == t and track.present[slot]
        np.testing.assert_array_equal(track.values["pos"][slot], pos[i])
        assert track.values["speed"][slot] == speed[i]
        assert track.media["cam"][slot] == f"c.npy#{i}" and track.tags[slot] == (str(i),)
        seen.add((type(e), e, t))
    for (kind, e), track in keyed.items():
        mine = [t for t, x in rows if (type(x), x) == (kind, e)]
        np.testing.assert_array_equal(track.ticks, [t for t in real_ticks if min(mine) <= t <= max(mine)])
        np.testing.assert_array_equal(track.values["light"], [light_by_tick[t] for t in track.ticks])
        for slot, t in enumerate(track.ticks.tolist()):
            if (kind, e, t) not in seen:
                assert not track.present[slot]
                assert not track.values["pos"][slot].any() and track.values["speed"][slot] == 0
                assert track.media["cam"][slot] is None and track.tags[slot] == ()
        assert track.present.sum() == len(mine)
