"""Typed, presentation-free projections of store rows: one step and its candidate shell.

The arrays keep unavailable values as sentinels (NaN for floats, -1 for integer counts and
ids); these projections decode them as ``None``, so a consumer never mistakes an unavailable
audit for a measured 0, a missing label for a score, or a terminal step's -1 for a row id.
Codes come back as the strings they stand for, and reason bits as the reason names of the
store's own reason table. Every value is read from the factual tables through
:meth:`~kuration.rollouts.store_rows.StoreRows.array_rows` (only the chunks that hold the step
and its shell), never from the derived ``q_h/`` view; the reader implements that protocol and
calls :func:`step_view` on itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.errors import RolloutInputError, RolloutStoreError, shown
from kuration.rollouts.store_rows import StoreRows


@dataclass(frozen=True)
class CandidateView:
    """One candidate action of a shell. ``label`` is None where the oracle gave none (always
    for an invalid action); ``reasons`` names the set reason bits (empty when valid)."""

    candidate_id: int
    shell_index: int
    action_id: int
    position: tuple[float, ...]
    valid_action: bool
    reasons: tuple[str, ...]
    label: float | None
    label_valid: bool


@dataclass(frozen=True)
class StepView:
    """One recorded state and its selected transition, with the chain and source it belongs
    to. ``next_step_id`` is None on a terminal step; the audits are None when unavailable."""

    step_id: int
    rollout_id: int
    step_index: int
    source_id: int
    shard_path: str
    source_row: int
    state: tuple[float, ...]
    strategy_id: str
    mixture_id: str
    termination_reason: str
    reward: float
    terminal: bool
    next_step_id: int | None
    selected_shell_index: int
    audit_valid_candidates: int | None
    audit_selected_margin: float | None
    candidates: tuple[CandidateView, ...]

    @property
    def selected(self) -> CandidateView:
        return self.candidates[self.selected_shell_index]


def _one(reader: StoreRows, path: str, row: int) -> Any:
    return reader.array_rows(path, np.asarray([row], dtype=np.int64))[0]


def _float_or_none(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _count_or_none(value: Any) -> int | None:
    number = int(value)
    return None if number == -1 else number


def _decoded(reader: StoreRows, table: str, name: str, code: Any) -> str:
    values = reader.vocabulary(table, name)
    index = int(code)
    if not 0 <= index < len(values):
        raise RolloutStoreError(f"{reader.store_dir}: {table} code {index} is outside its {len(values)} {name}; "
                                "the store is damaged (validate it)")
    return values[index]


def _reason_names(bits: int, table: dict[str, int]) -> tuple[str, ...]:
    names = tuple(name for name, bit in sorted(table.items(), key=lambda item: item[1]) if bits >> bit & 1)
    known = sum(1 << bit for bit in table.values())
    if bits & ~known:
        return (*names, f"undeclared:{bits & ~known:#x}")
    return names


def step_view(reader: StoreRows, step_id: int) -> StepView:
    """The typed projection of ``steps[step_id]`` and its shell (see the module doc).
    :class:`RolloutInputError` for a step id outside the store; :class:`RolloutStoreError`
    when its links point outside the store."""
    if isinstance(step_id, bool) or not isinstance(step_id, (int, np.integer)):
        raise RolloutInputError(f"step_view: step_id must be an integer, got {shown(step_id)}")
    steps = int(reader.counts["steps"])
    if not 0 <= int(step_id) < steps:
        raise RolloutInputError(f"step_view: step_id {int(step_id)} is outside 0..{steps - 1}")
    row = int(step_id)
    rollout = int(_one(reader, "steps/rollout_id", row))
    start = int(_one(reader, "steps/candidate_start", row))
    count = int(_one(reader, "steps/candidate_count", row))
    if not 0 <= rollout < int(reader.counts["rollouts"]) or count < 1 or start < 0 \
            or start + count > int(reader.counts["candidates"]):
        raise RolloutStoreError(f"{reader.store_dir}: steps[{row}] links outside the store (rollout {rollout}, "
                                f"candidates {start}..{start + count - 1}); the store is damaged (validate it)")
    selected = int(_one(reader, "steps/selected_shell_index", row))
    if not 0 <= selected < count:
        raise RolloutStoreError(f"{reader.store_dir}: steps[{row}].selected_shell_index {selected} is outside its "
                                f"shell of {count}; the store is damaged (validate it)")
    source = int(_one(reader, "rollouts/source_id", rollout))
    shell = np.arange(start, start + count, dtype=np.int64)
    reasons_table = dict(reader.attrs["reason_codes"]["bits"])
    columns = {name: reader.array_rows(f"candidates/{name}", shell)
               for name in ("shell_index", "action_id", "position", "valid_action", "reason_bits", "label",
                            "label_valid")}
    candidates = tuple(
        CandidateView(candidate_id=start + i, shell_index=int(columns["shell_index"][i]),
                      action_id=int(columns["action_id"][i]),
                      position=tuple(float(v) for v in columns["position"][i]),
                      valid_action=bool(columns["valid_action"][i]),
                      reasons=_reason_names(int(columns["reason_bits"][i]), reasons_table),
                      label=_float_or_none(columns["label"][i]), label_valid=bool(columns["label_valid"][i]))
        for i in range(count))
    return StepView(
        step_id=row, rollout_id=rollout, step_index=int(_one(reader, "steps/step_index", row)), source_id=source,
        shard_path=_decoded(reader, "sources", "shard_paths", _one(reader, "sources/shard_path_code", source)),
        source_row=int(_one(reader, "steps/source_row", row)),
        state=tuple(float(v) for v in _one(reader, "steps/state", row)),
        strategy_id=_decoded(reader, "rollouts", "strategy_ids", _one(reader, "rollouts/strategy_code", rollout)),
        mixture_id=_decoded(reader, "rollouts", "mixture_ids", _one(reader, "rollouts/mixture_code", rollout)),
        termination_reason=_decoded(reader, "rollouts", "termination_reasons",
                                    _one(reader, "rollouts/termination_code", rollout)),
        reward=float(_one(reader, "steps/reward", row)), terminal=bool(_one(reader, "steps/terminal", row)),
        next_step_id=_count_or_none(_one(reader, "steps/next_step_id", row)),
        selected_shell_index=selected,
        audit_valid_candidates=_count_or_none(_one(reader, "steps/audit_valid_candidates", row)),
        audit_selected_margin=_float_or_none(_one(reader, "steps/audit_selected_margin", row)),
        candidates=candidates,
    )


__all__ = ["CandidateView", "StepView", "step_view"]
