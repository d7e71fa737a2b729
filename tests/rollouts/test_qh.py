"""build_q_h: padding, masks and the TD linkage against a brute-force per-chain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.errors import RolloutStoreError
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.qh import Q_H_INPUT_PATHS, build_q_h, discounted_returns
from kuration.rollouts.schema import Q_H_ARRAY_NAMES, spec_of
from kuration.rollouts.normalize import normalize_rollout_records
from tests.rollouts.td_reference import brute_force_returns
from tests.rollouts.writer_records import sample_records


def columns_of(records: list) -> dict[str, np.ndarray]:
    return dict(normalize_rollout_records(records, config=RolloutZarrStoreConfig(store_dir="unused")).columns)


def test_every_array_has_the_schema_dtype_and_padding() -> None:
    columns = columns_of(sample_records())
    view = build_q_h(columns, discount_gamma=0.9)
    assert tuple(view) == Q_H_ARRAY_NAMES
    for name, array in view.items():
        assert array.dtype == np.dtype(spec_of(f"q_h/{name}").dtype), name
    counts = columns["steps/candidate_count"]
    width = int(counts.max())
    assert view["candidate_ids"].shape == (len(counts), width)
    pad = np.arange(width)[None, :] >= counts[:, None]
    assert (view["candidate_ids"][pad] == -1).all()
    assert not view["valid_action_mask"][pad].any() and not view["q_train_mask"][pad].any()
    assert np.isnan(view["one_step_labels"][pad]).all() and np.isnan(view["positions"][pad]).all()
    assert (view["reason_bits"][pad] == 0).all()
    real = view["candidate_ids"][~pad]
    assert (real == np.arange(len(columns["candidates/label"]))).all()


def test_q_train_mask_needs_valid_action_label_and_a_label_valid_target() -> None:
    columns = columns_of(sample_records())
    view = build_q_h(columns, discount_gamma=1.0)
    ids = view["candidate_ids"]
    real = ids >= 0
    target_ok = columns["targets/label_valid"][view["target_ids"]][:, None]
    expected = (columns["candidates/valid_action"][ids] & columns["candidates/label_valid"][ids]
                & np.isfinite(columns["candidates/label"][ids]) & target_ok & real)
    assert (view["q_train_mask"] == expected).all()
    # the label-invalid target (chain 1, step row 3) trains on nothing, though it has valid actions
    assert view["valid_action_mask"][3].any() and not view["q_train_mask"][3].any()
    # invalid candidates are masked with reason bits, never given a label
    invalid = real & ~view["valid_action_mask"]
    assert invalid.any() and (view["reason_bits"][invalid] != 0).all()
    assert np.isnan(view["one_step_labels"][invalid]).all()


def test_a_wider_recorded_shell_width_pads_further() -> None:
    view = build_q_h(columns_of(sample_records()), discount_gamma=1.0, widths={"A": 8})
    assert view["candidate_ids"].shape[1] == 8 and (view["candidate_ids"][:, 5:] == -1).all()


chains_strategy = st.lists(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=1, max_size=7), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(chains=chains_strategy, gamma=st.floats(1e-6, 1.0, exclude_min=False))
def test_td_linkage_matches_a_brute_force_loop(chains: list[list[float]], gamma: float) -> None:
    lengths = np.array([len(c) for c in chains])
    reward = np.array([r for c in chains for r in c], dtype=np.float32)
    first = np.cumsum(lengths) - lengths
    steps = np.arange(len(reward))
    last = np.repeat(first + lengths - 1, lengths)
    terminal = steps == last
    next_step = np.where(terminal, -1, steps + 1)
    columns = {
        "steps/rollout_id": np.repeat(np.arange(len(chains)), lengths),
        "steps/candidate_start": steps, "steps/candidate_count": np.ones(len(steps), np.int32),
        "steps/selected_shell_index": np.zeros(len(steps), np.int32), "steps/reward": reward,
        "steps/terminal": terminal, "steps/next_step_id": next_step,
        "rollouts/source_id": np.zeros(len(chains), np.int64), "rollouts/target_id": np.zeros(len(chains), np.int64),
        "targets/label_valid": np.array([True]),
        "candidates/valid_action": np.ones(len(steps), bool), "candidates/label_valid": np.ones(len(steps), bool),
        "candidates/label": np.zeros(len(steps), np.float32), "candidates/reason_bits": np.zeros(len(steps), np.uint32),
        "candidates/position": np.zeros((len(steps), 1), np.float32),
    }
    assert set(columns) == set(Q_H_INPUT_PATHS)
    view = build_q_h(columns, discount_gamma=gamma)
    assert view["td_return"].tolist() == brute_force_returns(chains, gamma)
    assert (view["td_next_state"] == next_step).all() and (view["td_terminal"] == terminal).all()
    assert (view["td_discount"] == np.where(terminal, 0.0, np.float32(gamma))).all()
    assert (view["td_reward"] == reward).all()


def test_gamma_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="discount_gamma"):
        build_q_h(columns_of(sample_records()), discount_gamma=0.0)


@pytest.mark.parametrize(("terminal", "next_step", "match"), [
    ([False, True], [5, -1], "outside 0..1"),
    ([False, False], [1, 0], "never reach a terminal"),
    ([False, True], [0, -1], "never reach a terminal"),
])
def test_broken_linkage_is_a_store_error(terminal: list[bool], next_step: list[int], match: str) -> None:
    with pytest.raises(RolloutStoreError, match=match):
        discounted_returns(np.ones(2, np.float32), np.array(terminal), np.array(next_step), 0.5)


def per_step_padding(columns: dict[str, np.ndarray], width_a: int) -> dict[str, np.ndarray]:
    """The padded S x A arrays built one shell slot at a time, in Python."""
    starts, counts = columns["steps/candidate_start"], columns["steps/candidate_count"]
    num_steps, width_p = len(starts), columns["candidates/position"].shape[1]
    out = {"candidate_ids": np.full((num_steps, width_a), -1, np.int64),
           "valid_action_mask": np.zeros((num_steps, width_a), bool),
           "one_step_labels": np.full((num_steps, width_a), np.nan, np.float32),
           "reason_bits": np.zeros((num_steps, width_a), np.uint32),
           "positions": np.full((num_steps, width_a, width_p), np.nan, np.float32)}
    for s in range(num_steps):
        for j in range(int(counts[s])):
            c = int(starts[s]) + j
            out["candidate_ids"][s, j] = c
            out["valid_action_mask"][s, j] = columns["candidates/valid_action"][c]
            out["one_step_labels"][s, j] = columns["candidates/label"][c]
            out["reason_bits"][s, j] = columns["candidates/reason_bits"][c]
            out["positions"][s, j] = columns["candidates/position"][c]
    return out


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(0, 5), min_size=1, max_size=12), width_p=st.integers(1, 3),
       extra_a=st.integers(0, 2), shuffled=st.booleans(), seed=st.integers(0, 2**16))
def test_padding_matches_a_per_slot_loop(counts: list[int], width_p: int, extra_a: int, shuffled: bool,
                                         seed: int) -> None:
    """Shells that tile candidates/ in order (the writer's layout) and shells stored in another
    order, with spare candidate rows (a store laid out otherwise): both pad like the loop."""
    rng = np.random.default_rng(seed)
    count = np.array(counts, dtype=np.int64)
    num_steps = len(count)
    order = rng.permutation(num_steps) if shuffled else np.arange(num_steps)
    starts = np.zeros(num_steps, np.int64)
    starts[order] = np.cumsum(count[order]) - count[order] + (2 if shuffled else 0)
    num_candidates = int(count.sum()) + (4 if shuffled else 0)
    columns = {
        "steps/rollout_id": np.zeros(num_steps, np.int64), "steps/candidate_start": starts,
        "steps/candidate_count": count.astype(np.int32), "steps/selected_shell_index": np.zeros(num_steps, np.int32),
        "steps/reward": np.ones(num_steps, np.float32), "steps/terminal": np.arange(num_steps) == num_steps - 1,
        "steps/next_step_id": np.where(np.arange(num_steps) == num_steps - 1, -1, np.arange(num_steps) + 1),
        "rollouts/source_id": np.zeros(1, np.int64), "rollouts/target_id": np.zeros(1, np.int64),
        "targets/label_valid": np.array([True]),
        "candidates/valid_action": rng.random(num_candidates) < 0.7,
        "candidates/label_valid": rng.random(num_candidates) < 0.7,
        "candidates/label": np.where(rng.random(num_candidates) < 0.2, np.nan,
                                     rng.normal(size=num_candidates)).astype(np.float32),
        "candidates/reason_bits": rng.integers(0, 8, num_candidates).astype(np.uint32),
        "candidates/position": rng.normal(size=(num_candidates, width_p)).astype(np.float32),
    }
    width_a = int(count.max()) + extra_a
    view = build_q_h(columns, discount_gamma=0.5, widths={"A": width_a})
    for name, expected in per_step_padding(columns, width_a).items():
        np.testing.assert_array_equal(view[name], expected, err_msg=name)
    ids = view["candidate_ids"]
    real = ids >= 0
    trainable = np.zeros_like(real)
    trainable[real] = (columns["candidates/valid_action"] & columns["candidates/label_valid"]
                       & np.isfinite(columns["candidates/label"]))[ids[real]]
    assert (view["q_train_mask"] == trainable).all()


def test_a_shell_outside_the_candidates_is_a_store_error() -> None:
    columns = columns_of(sample_records())
    columns["steps/candidate_start"] = columns["steps/candidate_start"] + 1
    with pytest.raises(RolloutStoreError, match="reaches outside candidates/"):
        build_q_h(columns, discount_gamma=1.0)
