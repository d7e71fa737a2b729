"""What a rollout store is written from: one :class:`RolloutWriteRecord` per rollout chain.

The records are the boundary between generation (a :class:`~kuration.rollouts.generation.RolloutRecipe`
turning committed dataset shards into chains) and storage (the writer normalizing them into
the factual tables of :mod:`kuration.rollouts.schema`). They hold plain numpy arrays and
strings; nothing here knows about zarr.

A chain starts at one recorded state of one source (a dataset shard), aims at one target,
and steps through recorded states. At every step the recipe offers a full *shell* of
candidate actions; each candidate has a validity flag with reason bits, and a one-step label
from the oracle where the label exists. The recorded action is the selected candidate. The
chain ends for a reason the recipe names (``termination_reason``), which the store keeps.

``None`` in an optional audit field means "unavailable"; the store writes it as NaN for a
float and -1 for an integer count, so a measured 0 stays 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RolloutSourceRef:
    """The recorded source a chain was generated from: one committed dataset shard.

    ``shard_sha256`` is the hex SHA-256 the dataset manifest records for the shard;
    ``shard_path`` is its path relative to the dataset root (``train/shard_000012.npz``).
    """

    shard_path: str
    shard_sha256: str
    entity: str
    split: str
    n_states: int


@dataclass(frozen=True)
class RolloutTargetRecord:
    """What the chain is asked to reach, under the store's target protocol.

    ``value`` is a float vector (for the demo recipe: the recorded future position).
    ``label_valid`` is False when the target state itself cannot give labels (for example
    the recording ends before the horizon); its candidates are then never trainable.
    """

    kind: str
    value: np.ndarray
    label_valid: bool = True


@dataclass(frozen=True)
class CandidateShell:
    """The full shell of candidate actions at one state, in shell order (length ``A_s``).

    - ``action_ids``: int, the recipe's action vocabulary id of each candidate.
    - ``positions``: float ``[A_s, P]``, where each candidate leads (the q_h ``positions``).
    - ``valid_action``: bool, actor-selectable.
    - ``reason_bits``: uint32, why a candidate is invalid (bit positions from the store's
      reason-code table); 0 exactly where ``valid_action`` is True.
    - ``labels``: float32 one-step oracle labels, NaN where unavailable. An invalid
      candidate's label is NaN, never a low or zero score.
    - ``label_valid``: bool, the label exists and is finite; implies ``valid_action``.
    """

    action_ids: np.ndarray
    positions: np.ndarray
    valid_action: np.ndarray
    reason_bits: np.ndarray
    labels: np.ndarray
    label_valid: np.ndarray

    def __len__(self) -> int:
        return int(len(self.action_ids))


@dataclass(frozen=True)
class RolloutStepRecord:
    """One recorded state of a chain and the action the recording took from it.

    - ``source_row``: the state's row in the source shard (0-based, pad rows excluded).
    - ``state``: float vector describing the state (the recipe's choice of modalities).
    - ``selected_shell_index``: the recorded action's index in ``shell``; it must be valid.
    - ``reward``: the explicit reward of the selected action (the one the TD linkage
      uses); a missing (non-finite) reward is refused.
    - ``audit_valid_candidates`` / ``audit_selected_margin``: optional audit measurements
      (the number of valid candidates; best label minus the selected label). ``None`` is
      unavailable.
    - ``selected_payload``: an optional heavy payload of the selected transition (the
      demo keeps the camera frame), stored only when the retention policy asks for it.
    """

    source_row: int
    state: np.ndarray
    shell: CandidateShell
    selected_shell_index: int
    reward: float
    audit_valid_candidates: int | None = None
    audit_selected_margin: float | None = None
    selected_payload: np.ndarray | None = None


@dataclass(frozen=True)
class RolloutWriteRecord:
    """One rollout chain: source, target, the strategy and mixture that generated it, its
    steps in order, and why it ended. The last step is the terminal transition."""

    source: RolloutSourceRef
    target: RolloutTargetRecord
    strategy_id: str
    mixture_id: str
    steps: tuple[RolloutStepRecord, ...]
    termination_reason: str


__all__ = ["CandidateShell", "RolloutSourceRef", "RolloutStepRecord", "RolloutTargetRecord", "RolloutWriteRecord"]
