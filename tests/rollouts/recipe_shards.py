"""Random shards for the demo recipe's tests (absent rows, NaN and huge rows, batteries at and
under the reserve, moves leaving the site or going below ground, exact ties), and a
bit-for-bit comparison of records."""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kuration.rollouts import MotionDirectionRecipe, RolloutSourceRef


def assert_identical(got: Any, expected: Any, where: str = "records") -> None:
    """Equal bit for bit: arrays in dtype, shape and bytes; scalars in type and value."""
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), where
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape), where
        assert got.tobytes() == expected.tobytes(), f"{where}: {got} != {expected}"
    elif is_dataclass(expected) and not isinstance(expected, type):
        assert type(got) is type(expected), where
        for item in fields(expected):
            assert_identical(getattr(got, item.name), getattr(expected, item.name), f"{where}.{item.name}")
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_identical(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(expected), f"{where}: {type(got)} != {type(expected)}"
        assert got == expected or (got != got and expected != expected), f"{where}: {got!r} != {expected!r}"


# Moves with exact ties between candidates: (0, 0, 0) (every candidate equally far, with
# the recorded length 0), (1, 0, 1) (east and climb), (-1, 0, -1) (west and descend).
MOVES = [(0, 0, 0), (1, 0, 0), (0, -1.5, 0), (0.7, 0.7, 0), (0, 0, 1), (0, 0, -1), (2, 1, -0.5), (0.01, 0, 0),
         (1, 0, 1), (-1, 0, -1), (-0.3, 2.5, 0.25)]


@st.composite
def shards(draw: st.DrawFn) -> tuple[MotionDirectionRecipe, dict[str, np.ndarray]]:
    n = draw(st.integers(0, 40))
    moves = draw(st.lists(st.sampled_from(MOVES), min_size=n, max_size=n))
    start = draw(st.tuples(st.floats(-161, 161), st.floats(-161, 161), st.floats(-1, 3)))
    pos = (np.asarray(start) + np.cumsum(np.asarray(moves, float).reshape(n, 3), axis=0)).astype(np.float32)
    rows = st.integers(0, max(n - 1, 0))
    if n:
        pos[draw(st.lists(rows, max_size=3))] = np.nan
        pos[draw(st.lists(rows, max_size=1)), draw(st.integers(0, 2))] = 2e12  # beyond MAX_COORDINATE_M
    battery = np.asarray(draw(st.lists(st.sampled_from([0.9, 0.16, 0.15, 0.1499, 0.0, math.nan]), min_size=n,
                                       max_size=n)), np.float32)
    vel = np.zeros((n, 3), np.float32)
    if n:
        vel[draw(st.lists(rows, max_size=1))] = np.inf
    data = {"pos": pos, "vel": vel, "battery": battery,
            "frame": np.arange(n * 6, dtype=np.uint8).reshape(n, 2, 3)}
    if draw(st.booleans()):
        data["_present"] = np.asarray(draw(st.lists(st.sampled_from([True, True, True, False]), min_size=n,
                                                    max_size=n)), bool)
    recipe = MotionDirectionRecipe(
        stride=draw(st.integers(1, 5)), chain_length=draw(st.integers(1, 8)), horizon=draw(st.integers(0, 8)),
        step_length_m=draw(st.none() | st.sampled_from([0.5, 3.0])), battery=draw(st.sampled_from(["battery", None])),
        field_retention_policy=draw(st.sampled_from(["compact", "full"])))
    return recipe, data


def source(n: int) -> RolloutSourceRef:
    return RolloutSourceRef("train/rec_0_shard0000.npz", "b" * 64, "str:'drone_07'", "train", n)
