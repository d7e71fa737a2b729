"""MotionDirectionRecipe (computed for a whole shard at once, as arrays) against a
straightforward reference written here from the module doc: one step and one candidate at a
time, in plain Python floats. On random shards with absent rows, NaN and huge rows, batteries
under the reserve, moves that leave the site or go below ground and exact ties between
candidates, every record must be equal bit for bit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings

from kuration.canonical.floats import canonical_floats
from kuration.rollouts import MotionDirectionRecipe, RolloutSourceRef
from kuration.rollouts.demo_recipe import MAX_COORDINATE_M, MOTION_ACTIONS, MOTION_REASON_CODES, TARGET_KIND
from kuration.rollouts.records import CandidateShell, RolloutStepRecord, RolloutTargetRecord, RolloutWriteRecord
from tests.rollouts.recipe_shards import MOVES, assert_identical, shards, source

OOB = 1 << MOTION_REASON_CODES["out_of_bounds"]
BELOW = 1 << MOTION_REASON_CODES["below_ground"]
RESERVE = 1 << MOTION_REASON_CODES["battery_reserve"]


def distance(a: Any, b: Any) -> float:
    """The module doc's distance, summed in its fixed order."""
    dx, dy, dz = (float(a[i]) - float(b[i]) for i in range(3))
    return math.sqrt((dx * dx + dy * dy) + dz * dz)


def reference_records(recipe: MotionDirectionRecipe, data: dict[str, np.ndarray],
                      source: RolloutSourceRef) -> list[RolloutWriteRecord]:
    pos = data["pos"]
    n = len(pos)
    present = data["_present"] if "_present" in data else np.ones(n, bool)
    battery = data[recipe.battery] if recipe.battery is not None else None
    state = [np.concatenate([np.asarray(data[name][t], np.float32).ravel() for name in recipe.state_modalities])
             for t in range(n)]

    def usable(t: int) -> bool:
        coordinates_ok = all(math.isfinite(float(c)) and abs(float(c)) <= MAX_COORDINATE_M for c in pos[t])
        battery_ok = battery is None or math.isfinite(float(battery[t]))
        return bool(present[t]) and coordinates_ok and battery_ok and bool(np.isfinite(state[t]).all())

    def shell(t: int) -> tuple[list[list[float]], list[int], int]:
        """Candidate positions, reason bits and the selected index at state row t."""
        here, there = [float(c) for c in pos[t]], [float(c) for c in pos[t + 1]]
        moved = [there[i] - here[i] for i in range(3)]
        length = distance(there, here) if recipe.step_length_m is None else float(recipe.step_length_m)
        positions, bits, misses = [], [], []
        for _, name, direction in MOTION_ACTIONS:
            offset = [d * length for d in direction]
            candidate = [float(np.float32(here[i] + offset[i])) for i in range(3)]
            reason = 0
            if abs(candidate[0]) > recipe.site_half_extent_m or abs(candidate[1]) > recipe.site_half_extent_m:
                reason |= OOB
            if candidate[2] < recipe.ground_level_m:
                reason |= BELOW
            if battery is not None and float(battery[t]) < recipe.battery_reserve and name not in ("hover", "descend"):
                reason |= RESERVE
            positions.append(candidate)
            bits.append(reason)
            misses.append(distance(offset, moved))
        selected = min(range(len(misses)), key=lambda i: misses[i])  # the first of equal ones
        return positions, bits, selected

    records = []
    for start in range(0, n - 1, recipe.stride):
        if not usable(start):
            continue
        rows: list[int] = []
        t = start
        termination = ""
        while True:
            if len(rows) == recipe.chain_length:
                termination = "chain_length"
                break
            if t + 1 >= n or not present[t + 1]:
                termination = "track_end"
                break
            if not usable(t + 1):
                termination = "non_finite_state"
                break
            _, bits, selected = shell(t)
            if bits[selected] != 0:
                termination = "selected_invalid"
                break
            rows.append(t)
            t += 1
        if not rows:
            continue
        end = rows[-1] + 1
        wanted = end + recipe.horizon
        reachable = wanted < n and usable(wanted)
        target_row = wanted if reachable else max(r for r in range(end, min(wanted, n - 1) + 1) if usable(r))
        goal = canonical_floats(np.asarray(pos[target_row], np.float32))
        steps = []
        for t in rows:
            positions, bits, selected = shell(t)
            here_to_goal = distance(pos[t], goal)
            labels = [float(np.float32(here_to_goal - distance(p, goal))) if b == 0 else math.nan
                      for p, b in zip(positions, bits, strict=True)]
            valid = [b == 0 for b in bits]
            label_valid = [v and math.isfinite(label) for v, label in zip(valid, labels, strict=True)]
            trainable = [label for label, ok in zip(labels, label_valid, strict=True) if ok]
            reward = float(np.float32(labels[selected]))
            margin = float(np.float32(max(trainable) - reward)) if trainable else None
            payload = None
            if recipe.field_retention_policy == "full" and recipe.payload_modality in data:
                payload = np.array(data[recipe.payload_modality][t], np.uint8)
            shell_record = CandidateShell(
                action_ids=np.array([action_id for action_id, _, _ in MOTION_ACTIONS], np.int32),
                positions=canonical_floats(np.array(positions, np.float32)), valid_action=np.array(valid, bool),
                reason_bits=np.array(bits, np.uint32), labels=canonical_floats(np.array(labels, np.float32)),
                label_valid=np.array(label_valid, bool))
            steps.append(RolloutStepRecord(
                source_row=t, state=canonical_floats(state[t]), shell=shell_record, selected_shell_index=selected,
                reward=reward, audit_valid_candidates=sum(valid), audit_selected_margin=margin,
                selected_payload=payload))
        records.append(RolloutWriteRecord(
            source=source, target=RolloutTargetRecord(TARGET_KIND, goal, reachable), strategy_id=recipe.strategy_id,
            mixture_id=recipe.recipe_id, steps=tuple(steps), termination_reason=termination))
    return records


def chains_of(recipe: MotionDirectionRecipe, data: dict[str, np.ndarray],
              ref: RolloutSourceRef) -> list[RolloutWriteRecord]:
    """The recipe's chains, one record each (it returns them as batches)."""
    return [record for batch in recipe.records_for_shard(data, ref) for record in batch.to_records()]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shards())
def test_the_recipe_equals_the_per_step_reference_bit_for_bit(
        case: tuple[MotionDirectionRecipe, dict[str, np.ndarray]]) -> None:
    recipe, data = case
    ref = source(len(data["pos"]))
    assert_identical(chains_of(recipe, data, ref), reference_records(recipe, data, ref))


def test_the_reference_sees_what_the_random_shards_are_meant_to_cover() -> None:
    """Shards like the strategy's reach every termination reason, every reason bit and
    label-invalid targets, so the comparison is not vacuous."""
    rng = np.random.default_rng(13)
    seen: set[str] = set()
    for _ in range(300):
        n = int(rng.integers(2, 40))
        pos = np.cumsum(np.asarray(MOVES, float)[rng.integers(0, len(MOVES), n)], axis=0) + [158.5, 0, 1]
        pos[rng.integers(0, n)] = np.nan
        data = {"pos": pos.astype(np.float32), "vel": np.zeros((n, 3), np.float32),
                "battery": rng.choice([0.9, 0.1], n).astype(np.float32), "_present": rng.random(n) > 0.1}
        recipe = MotionDirectionRecipe(stride=2, chain_length=int(rng.integers(1, 6)), horizon=int(rng.integers(0, 8)))
        records = chains_of(recipe, data, source(n))
        assert_identical(records, reference_records(recipe, data, source(n)))
        for record in records:
            seen.add(record.termination_reason)
            seen |= {"target_invalid"} if not record.target.label_valid else set()
            for step in record.steps:
                bits = int(np.bitwise_or.reduce(step.shell.reason_bits))
                seen |= {name for name, bit in MOTION_REASON_CODES.items() if bits & (1 << bit)}
    assert seen >= {"chain_length", "track_end", "non_finite_state", "selected_invalid", "target_invalid",
                    *MOTION_REASON_CODES}


def test_exact_ties_select_the_lowest_action_id_in_both() -> None:
    # (1, 0, 1) is as close to east as to climb, (-1, 0, -1) to west as to descend, and a
    # drone that did not move is as close to every candidate (all of length 0)
    pos = np.array([[0, 0, 10], [1, 0, 11], [0, 0, 10], [0, 0, 10]], np.float32)
    data: dict[str, np.ndarray] = {"pos": pos, "vel": np.zeros((4, 3), np.float32),
                                   "battery": np.full(4, 0.9, np.float32)}
    recipe = MotionDirectionRecipe(stride=10, chain_length=3, horizon=0)
    [record] = chains_of(recipe, data, source(4))
    assert_identical([record], reference_records(recipe, data, source(4)))
    names = [MOTION_ACTIONS[step.selected_shell_index][1] for step in record.steps]
    assert names == ["east", "west", "hover"]
