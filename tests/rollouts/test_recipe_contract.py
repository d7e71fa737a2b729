"""The rollout recipe contract (:class:`kuration.testing.RolloutRecipeContract`) over the
built-in motion-direction recipe (compact, and keeping each step's frame) and a user's
one-step recipe."""

from __future__ import annotations

import numpy as np

from kuration.rollouts import MotionDirectionRecipe
from kuration.testing import RolloutRecipeContract
from tests.rollouts.user_recipes import OneStepRecipe


def flight(rows: int, *, start, step, battery: float, absent=()) -> dict[str, np.ndarray]:
    """A drone flying a straight line: position, velocity, battery, a frame per row, presence."""
    pos = (np.asarray(start, np.float32) + np.arange(rows, dtype=np.float32)[:, None] * np.asarray(step, np.float32))
    present = np.ones(rows, bool)
    present[list(absent)] = False
    return {"pos": pos, "vel": np.repeat(np.asarray(step, np.float32)[None] * 10, rows, axis=0),
            "battery": np.linspace(battery, battery - 0.1, rows).astype(np.float32),
            "frame": (np.arange(rows)[:, None, None] * np.ones((2, 3))).astype(np.uint8), "_present": present}


FLIGHTS = [flight(16, start=(0, 0, 10), step=(1, 0, 0), battery=0.9),
           flight(11, start=(5, 5, 20), step=(0, 1, 0.5), battery=0.5, absent=(4,)),
           flight(16, start=(-10, 3, 2), step=(0.5, -0.5, -1), battery=0.12)]  # descends into the ground, low battery


class TestMotionDirectionRecipe(RolloutRecipeContract):
    def make_recipe(self):
        return MotionDirectionRecipe(stride=4, chain_length=5, horizon=3)

    def shards(self):
        return FLIGHTS


class TestMotionDirectionRecipeKeepingFrames(TestMotionDirectionRecipe):
    def make_recipe(self):
        return MotionDirectionRecipe(stride=3, chain_length=4, horizon=2, field_retention_policy="full")


class TestOneStepRecipe(RolloutRecipeContract):
    def make_recipe(self):
        return OneStepRecipe()

    def shards(self):
        return [{"pos": f["pos"]} for f in FLIGHTS]
