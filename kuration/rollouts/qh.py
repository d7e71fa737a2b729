"""The derived ``q_h/`` training view, rebuilt from the factual step and candidate columns.

:func:`build_q_h` is pure numpy: it reads the factual arrays it needs (named by schema path
in :data:`Q_H_INPUT_PATHS`) and returns every array of :data:`Q_H_ARRAY_NAMES` with the
schema's dtype and padding. The writer persists its output as ``q_h/``; the reader's
``q_h_view(discount_gamma=g)`` and validation rebuild it and compare.

Semantics (seed 004):

- S rows (one per step), A columns (the widest shell). Shell order is kept: column ``j`` of
  row ``s`` is candidate ``candidate_start[s] + j``. Shorter shells pad with id -1, false
  masks, NaN labels and positions, reason bits 0.
- ``valid_action_mask`` is the actor-selectable mask. ``q_train_mask`` is stricter: a valid
  action, a label-valid candidate, a finite label and a label-valid target.
- TD linkage describes the factual selected action only: ``td_reward`` is the step's reward,
  ``td_next_state`` the next step id (-1 on a terminal step), ``td_discount`` gamma on a
  non-terminal transition and 0 on a terminal one, and ``td_return`` the discounted return
  of the selected chain, ``G_t = r_t + gamma * G_{t+1}`` (``G = r`` on a terminal step), in
  float64. Unselected candidates carry one-step labels, never TD targets.

The return is computed backwards along ``next_step_id`` one layer at a time (all chains at
once, one numpy pass per step of the longest chain), so the work is vectorised over chains
and each value is the same element-wise ``r + gamma * G`` a per-chain loop would compute:
the bytes do not depend on how chains are batched.

What it does not do: check the factual tables beyond what the computation needs. Broken TD
linkage (a next step out of range, a cycle, a terminal step with a next step) raises
:class:`RolloutStoreError`; every other contract is validation's job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.errors import RolloutStoreError
from kuration.canonical.floats import canonical_floats
from kuration.rollouts.schema import Q_H_ARRAY_NAMES

#: The factual arrays :func:`build_q_h` reads, by schema path.
Q_H_INPUT_PATHS: tuple[str, ...] = (
    "steps/rollout_id", "steps/candidate_start", "steps/candidate_count", "steps/selected_shell_index",
    "steps/reward", "steps/terminal", "steps/next_step_id",
    "rollouts/source_id", "rollouts/target_id", "targets/label_valid",
    "candidates/valid_action", "candidates/label_valid", "candidates/label", "candidates/reason_bits",
    "candidates/position",
)


def build_q_h(columns: Mapping[str, np.ndarray], *, discount_gamma: float,
              widths: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Every ``q_h/`` array from the factual ``columns`` (schema path -> array, at least
    :data:`Q_H_INPUT_PATHS`) at ``discount_gamma`` (``0 < gamma <= 1``).

    ``widths`` is the store's root attrs ``widths``: its ``"A"`` is the padded shell width
    (``None``, or no ``"A"``: the widest shell, which is what the writer records).

    Returns a dict keyed by :data:`Q_H_ARRAY_NAMES`, in that order, with the schema's
    dtypes; float arrays are canonical (one NaN, no ``-0.0``)."""
    gamma = float(discount_gamma)
    if not math.isfinite(gamma) or not 0.0 < gamma <= 1.0:
        raise ValueError(f"discount_gamma: expected 0 < gamma <= 1, found {discount_gamma!r}")
    missing = [path for path in Q_H_INPUT_PATHS if path not in columns]
    if missing:
        raise KeyError(f"build_q_h: missing factual columns {missing}")
    shells = _ShellLayout.of(columns, widths)
    rollout_ids = np.asarray(columns["steps/rollout_id"], dtype=np.int64)
    chains = {"source_ids": np.asarray(columns["rollouts/source_id"], dtype=np.int64)[rollout_ids],
              "target_ids": np.asarray(columns["rollouts/target_id"], dtype=np.int64)[rollout_ids]}
    out = {**_candidate_arrays(columns, shells, chains["target_ids"]), **chains, **_state_arrays(columns, gamma)}
    return {name: out[name] for name in Q_H_ARRAY_NAMES}


@dataclass(frozen=True)
class _ShellLayout:
    """Where each candidate goes in the padded S x A arrays. Every shell is a run of
    consecutive candidate ids from its start, so an array is filled by one scatter into a
    preallocated one, at the flat slot ``s * A + j`` of column j of row s (row-major order,
    which is candidate order within a shell)."""

    counts: np.ndarray
    width_a: int
    slots: np.ndarray
    #: The candidate id of each slot; None when the shells tile ``candidates/`` in order, so
    #: the columns are taken as they are.
    ids: np.ndarray | None
    num_candidates: int

    @classmethod
    def of(cls, columns: Mapping[str, np.ndarray], widths: Mapping[str, Any] | None) -> _ShellLayout:
        starts = np.asarray(columns["steps/candidate_start"], dtype=np.int64)
        counts = np.asarray(columns["steps/candidate_count"], dtype=np.int64)
        recorded_a = None if widths is None else widths.get("A")
        width_a = int(counts.max(initial=0)) if recorded_a is None else int(recorded_a)
        if counts.size and (counts.min() < 0 or counts.max() > width_a):
            raise RolloutStoreError(f"build_q_h: shell widths must be within 0..{width_a}, found "
                                    f"{int(counts.min())}..{int(counts.max())}")
        slots = np.flatnonzero(np.arange(width_a, dtype=np.int64)[None, :] < counts[:, None])
        total = int(counts.sum())
        num_candidates = len(columns["candidates/valid_action"])
        expected_starts = np.cumsum(counts) - counts
        ids: np.ndarray | None = None
        if total != num_candidates or not np.array_equal(starts, expected_starts):
            ids = np.repeat(starts - expected_starts, counts) + np.arange(total, dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= num_candidates):
                raise RolloutStoreError(f"build_q_h: a shell reaches outside candidates/ (candidate ids "
                                        f"{int(ids.min())}..{int(ids.max())}, {num_candidates} rows)")
        return cls(counts=counts, width_a=width_a, slots=slots, ids=ids, num_candidates=num_candidates)

    def gathered(self, values: Any, dtype: type) -> np.ndarray:
        """A candidate column in slot order."""
        array: np.ndarray = np.asarray(values, dtype=dtype)
        return array if self.ids is None else array[self.ids]

    def padded(self, values: np.ndarray, dtype: type, fill: float | int | bool) -> np.ndarray:
        """``values`` (one row per slot) scattered into S x A (x trailing), ``fill`` elsewhere."""
        tail = values.shape[1:]
        num_steps = len(self.counts)
        array: np.ndarray = np.full((num_steps * self.width_a, *tail), fill, dtype=dtype)
        if values.ndim == 1:
            array[self.slots] = values
        elif values.size:  # a row of several values moves as one opaque record: one copy per slot
            _records(array)[self.slots] = _records(np.ascontiguousarray(values, dtype=dtype))
        return array.reshape(num_steps, self.width_a, *tail)


def _candidate_arrays(columns: Mapping[str, np.ndarray], shells: _ShellLayout, target_ids: np.ndarray
                      ) -> dict[str, np.ndarray]:
    """The padded per-candidate arrays: ids, masks, one-step labels, reason bits, positions
    (``target_ids``: each step's target)."""
    target_label_valid = np.asarray(columns["targets/label_valid"], dtype=bool)[target_ids]
    valid = shells.gathered(columns["candidates/valid_action"], bool)
    # Canonical before the scatter: the NaN fill is canonical already, so the padded arrays are too.
    label = canonical_floats(shells.gathered(columns["candidates/label"], np.float32))
    position = canonical_floats(shells.gathered(columns["candidates/position"], np.float32))
    trainable = valid & shells.gathered(columns["candidates/label_valid"], bool) & np.isfinite(label) \
        & np.repeat(target_label_valid, shells.counts)
    ids = np.arange(shells.num_candidates, dtype=np.int64) if shells.ids is None else shells.ids
    return {
        "candidate_ids": shells.padded(ids, np.int64, -1),
        "valid_action_mask": shells.padded(valid, np.bool_, False),
        "q_train_mask": shells.padded(trainable, np.bool_, False),
        "one_step_labels": shells.padded(label, np.float32, np.nan),
        "reason_bits": shells.padded(shells.gathered(columns["candidates/reason_bits"], np.uint32), np.uint32, 0),
        "positions": shells.padded(position, np.float32, np.nan),
    }


def _state_arrays(columns: Mapping[str, np.ndarray], gamma: float) -> dict[str, np.ndarray]:
    """The per-state arrays: the step ids, the selected action and its TD linkage and return."""
    reward = canonical_floats(np.asarray(columns["steps/reward"], dtype=np.float32))
    terminal = np.asarray(columns["steps/terminal"], dtype=bool)
    next_step = np.asarray(columns["steps/next_step_id"], dtype=np.int64)
    return {
        "step_ids": np.arange(len(reward), dtype=np.int64),
        "selected_action_index": np.asarray(columns["steps/selected_shell_index"], dtype=np.int32),
        "td_reward": reward,
        # -1 on terminal steps in a sound store; not masked, so a bad link shows
        "td_next_state": next_step.copy(),
        "td_discount": np.where(terminal, np.float32(0.0), np.float32(gamma)).astype(np.float32),
        "td_terminal": terminal.copy(),
        "td_return": canonical_floats(discounted_returns(reward, terminal, next_step, gamma)),
    }


def _records(array: np.ndarray) -> np.ndarray:
    """A C-contiguous array of rows seen as one void record per row (the row's bytes)."""
    width = array.dtype.itemsize * math.prod(array.shape[1:])
    return array.reshape(len(array), -1).view(np.dtype((np.void, width)))[:, 0]


def discounted_returns(reward: np.ndarray, terminal: np.ndarray, next_step_id: np.ndarray,
                       discount_gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma * G_{next(t)}`` (``G = r`` on a terminal step) for every step, in
    float64, following ``next_step_id`` backwards from the terminal steps one layer at a time.

    Raises :class:`RolloutStoreError` when the linkage does not end every chain at a
    terminal step (a next step out of range, a cycle, a non-terminal step without one)."""
    r = np.asarray(reward, dtype=np.float32).astype(np.float64)
    terminal = np.asarray(terminal, dtype=bool)
    nxt = np.asarray(next_step_id, dtype=np.int64)
    gamma = np.float64(discount_gamma)
    num_steps = len(r)
    returns = np.full(num_steps, np.nan, dtype=np.float64)
    resolved = terminal.copy()
    returns[terminal] = r[terminal]
    pending = np.flatnonzero(~terminal)
    bad = pending[(nxt[pending] < 0) | (nxt[pending] >= num_steps)]
    if bad.size:
        raise RolloutStoreError(f"steps/next_step_id: non-terminal step {int(bad[0])} links to "
                                f"{int(nxt[bad[0]])}, outside 0..{num_steps - 1} ({bad.size} such steps)")
    while pending.size:
        ready = resolved[nxt[pending]]
        if not ready.any():
            raise RolloutStoreError(f"steps/next_step_id: steps {pending[:5].tolist()} never reach a terminal "
                                    f"step ({pending.size} steps in a cycle or a broken chain)")
        layer = pending[ready]
        returns[layer] = r[layer] + gamma * returns[nxt[layer]]
        resolved[layer] = True
        pending = pending[~ready]
    return returns


__all__ = ["Q_H_INPUT_PATHS", "build_q_h", "discounted_returns"]
