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

A recipe that computes whole arrays per source (a vectorised one) hands the writer a
:class:`RolloutChainBatch` instead: many chains of one source as columns, which the writer
joins with one ``np.concatenate`` per column instead of visiting a Python object per step.
The writer takes any mix of records and batches (:data:`RolloutChainInput`), and the same
chains give the same store bytes either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

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


@dataclass(frozen=True)
class RolloutChainBatch:
    """Many rollout chains of ONE source as columns: the columnar twin of a run of
    :class:`RolloutWriteRecord` that share ``source``, ``strategy_id`` and ``mixture_id``.

    Three row axes, each in order: ``C`` chains; ``S = sum(chain_lengths)`` steps, the
    chains' steps one chain after another; ``N = sum(shell_counts)`` candidates, the
    steps' shells one step after another (each shell in shell order). Arrays may be numpy
    arrays or anything ``np.asarray`` turns into one of the stated kind (int, bool, numeric).

    Per chain (``C`` rows):

    - ``target_kind``: one string for every chain, or a sequence of ``C`` strings.
    - ``target_values``: numeric ``[C, D_t]``; ``target_label_valid``: bool ``[C]`` (see
      :class:`RolloutTargetRecord`). Equal targets of one source are stored once, as for records.
    - ``chain_lengths``: int ``[C]``, each >= 1 (a chain's step count).
    - ``termination_reasons``: a sequence of ``C`` non-empty strings.

    Per step (``S`` rows; fields as in :class:`RolloutStepRecord`):

    - ``source_rows``: int; ``states``: numeric ``[S, D_s]``; ``shell_counts``: int, each
      >= 1 (the step's shell width ``A_s``); ``selected_shell_index``: int, into the step's
      shell; ``rewards``: numeric, finite.
    - optional ``audit_valid_candidates``: int, -1 where unavailable;
      ``audit_selected_margin``: numeric, NaN where unavailable; ``selected_payload``:
      uint8 ``[S, ...]`` (needed when the retention policy is ``"full"``). ``None``: all
      unavailable.

    Per candidate (``N`` rows; fields as in :class:`CandidateShell`): ``action_ids`` int,
    ``positions`` numeric ``[N, P]``, ``valid_action`` bool, ``reason_bits`` int,
    ``labels`` numeric (NaN where unavailable), ``label_valid`` bool.

    The writer refuses a batch whose columns do not match these shapes and kinds, naming
    the field, and applies the records' rules row by row, naming ``records[i].<field>[row]``.
    """

    source: RolloutSourceRef
    strategy_id: str
    mixture_id: str
    target_kind: str | Sequence[str]         # one, or [C]
    target_values: np.ndarray                # [C, D_t] numeric
    target_label_valid: np.ndarray           # [C] bool
    chain_lengths: np.ndarray                # [C] int >= 1
    termination_reasons: Sequence[str]       # [C]
    source_rows: np.ndarray                  # [S] int
    states: np.ndarray                       # [S, D_s] numeric
    shell_counts: np.ndarray                 # [S] int >= 1
    selected_shell_index: np.ndarray         # [S] int
    rewards: np.ndarray                      # [S] numeric, finite
    action_ids: np.ndarray                   # [N] int
    positions: np.ndarray                    # [N, P] numeric
    valid_action: np.ndarray                 # [N] bool
    reason_bits: np.ndarray                  # [N] int
    labels: np.ndarray                       # [N] numeric
    label_valid: np.ndarray                  # [N] bool
    audit_valid_candidates: np.ndarray | None = None  # [S] int, -1 unavailable
    audit_selected_margin: np.ndarray | None = None   # [S] numeric, NaN unavailable
    selected_payload: np.ndarray | None = None        # [S, ...] uint8

    def to_records(self) -> tuple[RolloutWriteRecord, ...]:
        """The same chains as one :class:`RolloutWriteRecord` each (audit -1 and NaN become
        ``None``), for code that wants the per-chain view; the writer stores both alike.
        Assumes a well-formed batch: the writer, not this method, checks batches."""
        lengths = np.asarray(self.chain_lengths, dtype=np.int64)
        counts = np.asarray(self.shell_counts, dtype=np.int64)
        step_ends = np.cumsum(lengths)
        candidate_ends = np.cumsum(counts)
        kinds = [self.target_kind] * len(lengths) if isinstance(self.target_kind, str) else list(self.target_kind)
        audit = None if self.audit_valid_candidates is None else np.asarray(self.audit_valid_candidates)
        margin = None if self.audit_selected_margin is None else np.asarray(self.audit_selected_margin)
        records = []
        for c, end in enumerate(step_ends):
            steps = []
            for s in range(int(end - lengths[c]), int(end)):
                rows = slice(int(candidate_ends[s] - counts[s]), int(candidate_ends[s]))
                shell = CandidateShell(
                    action_ids=np.asarray(self.action_ids)[rows], positions=np.asarray(self.positions)[rows],
                    valid_action=np.asarray(self.valid_action)[rows], reason_bits=np.asarray(self.reason_bits)[rows],
                    labels=np.asarray(self.labels)[rows], label_valid=np.asarray(self.label_valid)[rows])
                steps.append(RolloutStepRecord(
                    source_row=int(self.source_rows[s]), state=np.asarray(self.states)[s], shell=shell,
                    selected_shell_index=int(self.selected_shell_index[s]), reward=float(self.rewards[s]),
                    audit_valid_candidates=None if audit is None or audit[s] == -1 else int(audit[s]),
                    audit_selected_margin=None if margin is None or np.isnan(margin[s]) else float(margin[s]),
                    selected_payload=None if self.selected_payload is None else np.asarray(self.selected_payload)[s]))
            records.append(RolloutWriteRecord(
                source=self.source, strategy_id=self.strategy_id, mixture_id=self.mixture_id,
                target=RolloutTargetRecord(kind=kinds[c], value=np.asarray(self.target_values)[c],
                                           label_valid=bool(self.target_label_valid[c])),
                steps=tuple(steps), termination_reason=self.termination_reasons[c]))
        return tuple(records)


#: One item of the writer's input: a chain as a record, or many chains of one source as columns.
RolloutChainInput: TypeAlias = RolloutWriteRecord | RolloutChainBatch


__all__ = [
    "CandidateShell", "RolloutChainBatch", "RolloutChainInput", "RolloutSourceRef", "RolloutStepRecord",
    "RolloutTargetRecord", "RolloutWriteRecord",
]
