"""MotionDirectionRecipe emits one RolloutChainBatch per shard, built from its arrays. The
batch must hold exactly what the recipe's previous per-record construction produced (kept
here as the reference, verbatim but for its name), field for field and bit for bit, and the
store written from the batches must be byte for byte the store written from their records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kuration.canonical.floats import canonical_floats
from kuration.rollouts import MotionDirectionRecipe, RolloutChainBatch, RolloutSourceRef, write_rollout_zarr_store
from kuration.rollouts.demo_recipe import _ACTION_IDS, TARGET_KIND, _distance
from kuration.rollouts.records import CandidateShell, RolloutStepRecord, RolloutTargetRecord, RolloutWriteRecord
from tests.rollouts.recipe_shards import MOVES, assert_identical, shards, source


def previous_records(recipe: MotionDirectionRecipe, data: dict[str, np.ndarray],
                     ref: RolloutSourceRef) -> list[RolloutWriteRecord]:
    """The recipe's output before it emitted batches: its own checks, shells and chains,
    then one CandidateShell, RolloutStepRecord and RolloutWriteRecord per step and chain
    (the removed ``MotionDirectionRecipe._records``)."""
    track = recipe._checked(data, ref)
    if len(track.pos) < 2 or not track.usable.any():
        return []
    shells = recipe._shells(track)
    chains = recipe._chains(track, shells)
    if not len(chains.starts):
        return []
    goals = canonical_floats(track.pos[chains.target_rows].astype(np.float32))  # [C, 3]
    rows, chain = chains.step_rows, chains.step_chain
    goal = goals.astype(np.float64)[chain]  # [M, 3]
    valid_rows = shells.reason_bits == 0  # [n-1, A]
    valid = valid_rows[rows]
    progress = _distance(track.pos[rows], goal)[:, None] - _distance(shells.positions[rows], goal[:, None, :])
    labels = canonical_floats(np.where(valid, progress, np.nan).astype(np.float32))  # [M, A]
    label_valid = valid & np.isfinite(labels)
    selected = shells.selected[rows]
    rewards = labels[np.arange(len(rows)), selected]
    best = np.where(label_valid, labels, -np.inf).max(axis=1)
    margins = (best.astype(np.float64) - rewards.astype(np.float64)).astype(np.float32)
    counts = valid.sum(axis=1).tolist()
    position_rows = list(canonical_floats(shells.positions.astype(np.float32)))
    bit_rows, valid_row_views = list(shells.reason_bits), list(valid_rows)
    state_rows = list(canonical_floats(track.state))
    payload_rows = None if track.payload is None else list(np.array(track.payload, dtype=np.uint8))
    action_ids = np.broadcast_to(_ACTION_IDS, (len(rows), len(_ACTION_IDS)))
    action_id_rows, label_rows, label_valid_rows = list(action_ids.copy()), list(labels), list(label_valid)
    targets = [RolloutTargetRecord(kind=TARGET_KIND, value=value, label_valid=ok)
               for value, ok in zip(goals, chains.target_valid.tolist(), strict=True)]
    steps: list[RolloutStepRecord] = []
    for i, (t, choice, reward, count, margin, measured) in enumerate(zip(
            rows.tolist(), selected.tolist(), rewards.tolist(), counts, margins.tolist(),
            label_valid.any(axis=1).tolist(), strict=True)):
        shell = CandidateShell(action_ids=action_id_rows[i], positions=position_rows[t],
                               valid_action=valid_row_views[t], reason_bits=bit_rows[t], labels=label_rows[i],
                               label_valid=label_valid_rows[i])
        steps.append(RolloutStepRecord(
            source_row=t, state=state_rows[t], shell=shell, selected_shell_index=choice, reward=reward,
            audit_valid_candidates=count, audit_selected_margin=margin if measured else None,
            selected_payload=None if payload_rows is None else payload_rows[t]))
    records = []
    first = 0
    for target, length, termination in zip(targets, chains.lengths.tolist(), chains.terminations, strict=True):
        records.append(RolloutWriteRecord(source=ref, target=target, strategy_id=recipe.strategy_id,
                                          mixture_id=recipe.recipe_id, steps=tuple(steps[first:first + length]),
                                          termination_reason=termination))
        first += length
    return records


def emitted(recipe: MotionDirectionRecipe, data: dict[str, np.ndarray], ref: RolloutSourceRef) -> list[Any]:
    """What the recipe returns: one batch of this shard's chains, or nothing."""
    items = recipe.records_for_shard(data, ref)
    assert isinstance(items, list) and len(items) <= 1
    for batch in items:
        assert isinstance(batch, RolloutChainBatch) and batch.source == ref and len(batch.chain_lengths) >= 1
    return items


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shards())
def test_the_batch_holds_what_the_per_record_construction_made(
        case: tuple[MotionDirectionRecipe, dict[str, np.ndarray]]) -> None:
    recipe, data = case
    ref = source(len(data["pos"]))
    expected = previous_records(recipe, data, ref)
    items = emitted(recipe, data, ref)
    assert bool(items) == bool(expected)  # no chains: no batch at all, never an empty one
    assert_identical([record for batch in items for record in batch.to_records()], expected)


def test_shards_without_chains_give_an_empty_list() -> None:
    recipe = MotionDirectionRecipe(stride=1, chain_length=3, horizon=0)
    one_row = {"pos": np.zeros((1, 3), np.float32), "vel": np.zeros((1, 3), np.float32),
               "battery": np.ones(1, np.float32)}
    absent = {"pos": np.zeros((4, 3), np.float32), "vel": np.zeros((4, 3), np.float32),
              "battery": np.ones(4, np.float32), "_present": np.zeros(4, bool)}
    # every recorded move flies on under the battery reserve: each would-be chain ends before its first step
    east = np.array([[1, 0, 10], [2, 0, 10], [3, 0, 10], [4, 0, 10]], np.float32)
    drained: dict[str, np.ndarray] = {"pos": east,
                                      "vel": np.zeros((4, 3), np.float32), "battery": np.zeros(4, np.float32)}
    cases: list[dict[str, np.ndarray]] = [one_row, absent, drained]
    for data in cases:
        ref = source(len(data["pos"]))
        assert recipe.records_for_shard(data, ref) == [] and previous_records(recipe, data, ref) == []


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("retention", ["compact", "full"])
def test_a_store_from_the_batches_is_the_store_from_their_records_byte_for_byte(tmp_path: Path,
                                                                                  retention: str) -> None:
    rng = np.random.default_rng(4)
    recipe = MotionDirectionRecipe(stride=2, chain_length=5, horizon=3, field_retention_policy=retention)
    batches: list[RolloutChainBatch] = []
    for i in range(25):
        n = int(rng.integers(2, 40))
        pos = np.cumsum(np.asarray(MOVES, float)[rng.integers(0, len(MOVES), n)], axis=0) + [158.0, -20, 1.5]
        pos[rng.integers(0, n)] = np.nan
        data = {"pos": pos.astype(np.float32), "vel": rng.normal(0, 1, (n, 3)).astype(np.float32),
                "battery": rng.choice([0.9, 0.1], n).astype(np.float32), "_present": rng.random(n) > 0.05,
                "frame": rng.integers(0, 255, (n, 2, 3), dtype=np.uint8)}
        ref = RolloutSourceRef(f"train/rec_{i}_shard0000.npz", f"{i + 1:064x}", "str:'drone'", "train", n)
        batches += emitted(recipe, data, ref)
    records = [record for batch in batches for record in batch.to_records()]
    assert len(batches) > 10 and len(records) > 2 * len(batches)  # shards with several chains, not a vacuous store
    options: dict[str, Any] = {"reason_codes": recipe.reason_codes, "field_retention_policy": retention,
                               "discount_gamma": 0.9}
    from_batches = write_rollout_zarr_store(tmp_path / "batches", batches, **options)
    write_rollout_zarr_store(tmp_path / "records", records, **options)
    assert from_batches.num_rollouts == len(records)
    assert _files(tmp_path / "batches") == _files(tmp_path / "records")
