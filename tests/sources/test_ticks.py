"""Ticks.from_columns: the validation every adapter shares (raw columns, no file format)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kuration.sources.schema import Schema
from kuration.sources.entities import entity_key
from kuration.sources import TickDataError, Ticks

MULTI = Schema.from_dict({
    "sample_hz": 10, "time": "t", "entity": "e",
    "fields": {"v": {"dtype": "float32", "shape": [3]}, "n": {"dtype": "uint8"}},
    "media": {"cam": {"dtype": "uint8", "shape": [1], "provider": "npy_index"}},
})


def build(**changes):
    raw = {"t": [0, 0, 1], "e": ["a", "b", "a"], "v": [[0, 1, 2]] * 3, "n": [1, 2, 3],
           "cam": ["c.npy#0", "c.npy#1", "c.npy#2"]}
    raw.update(changes)
    return Ticks.from_columns(MULTI, "src", raw)


def where(column: str, row: int) -> str:
    return re.escape(f"src: column {column!r}, row {row}") + ".*"


def test_good_rows():
    ticks = build()
    assert ticks.columns["v"].dtype == np.float32 and ticks.columns["v"].shape == (3, 3)
    assert ticks.columns["n"].dtype == np.uint8 and list(ticks.entity) == ["a", "b", "a"]


def test_undeclared_columns_are_ignored():
    assert "other" not in build(other=[object(), None, "x"]).columns


@pytest.mark.parametrize(
    ("changes", "column", "row", "hint"),
    [
        ({"e": ["a", "b"]}, "e", 2, "column has 2 rows, the time column has 3"),
        ({"n": [1, 2, 3, 4]}, "n", 3, "column has 4 rows"),
        ({"cam": ["c.npy#0"]}, "cam", 1, "column has 1 rows"),
        ({"e": ["a", float("nan"), "a"]}, "e", 1, "not finite"),
        ({"e": ["a", {"id": 1}, "a"]}, "e", 1, "no canonical form"),
        ({"e": ["a", ["b"], "a"]}, "e", 1, "no canonical form"),
        ({"e": [1, np.int64(1), 1]}, "e", 1, "entity 1 appears twice at tick 0"),
        ({"t": ["0", "0", "1"]}, "t", 0, "time must be a number"),
        ({"t": [0, None, 1]}, "t", 1, "time must be a number"),
        ({"t": [0.0, float("inf"), 1.0]}, "t", 1, "not a whole number"),
        ({"n": [1, 256, 3]}, "n", 1, r"value 256 does not fit declared uint8 \[0, 255\]"),
        ({"n": [1, -1, 3]}, "n", 1, "does not fit declared uint8"),
        ({"n": [1, True, "x"]}, "n", 2, "is not a number"),
        ({"n": [1, None, 3]}, "n", 1, "null value"),
        ({"v": [[0, 1, 2], [0, None, 2], [0, 1, 2]]}, "v", 1, "is not numeric"),
        ({"v": [[0, 1, 2], [0, 1, 2], [0, 1]]}, "v", 2, r"expected shape \[3\] \(3 values\), got \[2\]"),
        ({"v": np.zeros((3, 1, 3))}, "v", 0, r"expected shape \[3\], got \[1, 3\]"),
        ({"v": np.array([[1e39, 0, 0]] * 3)}, "v", 0, "overflows declared float32"),
        ({"v": np.array(["1", "2", "3"])}, "v", 0, "is not a number"),
        ({"cam": ["c.npy#0", None, "c.npy#2"]}, "cam", 1, "media reference must be a non-empty string"),
    ],
)
def test_bad_rows_name_source_column_and_row(changes, column, row, hint):
    with pytest.raises(TickDataError, match=where(column, row) + hint):
        build(**changes)


def test_one_true_and_one_point_zero_are_different_entities():
    ticks = build(e=[1, True, 1.0], t=[0, 0, 0])
    assert [type(e) for e in ticks.entity] == [int, bool, float]


def test_flat_rows_are_reshaped_but_transposed_layouts_are_not():
    schema = Schema.from_dict({"sample_hz": 1, "time": "t", "fields": {"m": {"dtype": "float64", "shape": [2, 3]}}})
    ticks = Ticks.from_columns(schema, "src", {"t": [0, 1], "m": np.arange(12).reshape(2, 6)})
    np.testing.assert_array_equal(ticks.columns["m"][1], [[6, 7, 8], [9, 10, 11]])
    with pytest.raises(TickDataError, match=where("m", 0) + r"expected shape \[2, 3\], got \[3, 2\]"):
        Ticks.from_columns(schema, "src", {"t": [0, 1], "m": np.zeros((2, 3, 2))})


def test_empty_source_has_declared_shapes():
    ticks = Ticks.from_columns(MULTI, "src", {"t": [], "e": [], "v": [], "n": [], "cam": []})
    assert len(ticks) == 0 and ticks.columns["v"].shape == (0, 3) and ticks.columns["n"].dtype == np.uint8


def test_sample_grid_is_a_fraction_of_a_sample_at_any_rate():
    fast = Schema.from_dict({"sample_hz": 1000, "time": "ts", "time_unit": "seconds",
                             "fields": {"x": {"dtype": "float32"}}})
    ok = Ticks.from_columns(fast, "src", {"ts": np.arange(10_000) / 1000 + 120.0, "x": np.zeros(10_000)})
    np.testing.assert_array_equal(ok.tick, np.arange(120_000, 130_000))
    with pytest.raises(TickDataError, match=where("ts", 1) + r"0\.0014 s is not on the 1000 Hz sample grid"):
        Ticks.from_columns(fast, "src", {"ts": [0.0, 0.0014], "x": [0.0, 0.0]})


@pytest.mark.parametrize("dictionary", [False, True])
def test_a_float_zero_is_one_entity_whatever_its_sign(dictionary):
    import pyarrow as pa

    entities = [-0.0, 0.0, -0.0, 0.0]
    column = pa.array(entities).dictionary_encode() if dictionary else np.array(entities)
    ticks = build(e=column, t=[0, 1, 2, 3], v=[[0, 1, 2]] * 4, n=[1] * 4, cam=["c.npy#0"] * 4)
    assert len(set(ticks.entity_codes.tolist())) == 1
    assert [entity_key(e) for e in ticks.entity] == ["float:0.0"] * 4
