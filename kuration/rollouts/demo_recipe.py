"""The built-in rollout recipe: discretized motion directions, labelled by one-step progress
toward the recorded future position. Made for the demo drone corpus, and usable on any
dataset whose shards hold a 3-D position per timestep (x, y horizontal, z up, metres).

**Actions.** At every recorded state the shell holds the same eleven candidates, in this
order (the shell index is the action id, :data:`MOTION_ACTIONS`):

====  ==========  ==============================
 id    name        unit direction (x, y, z)
====  ==========  ==============================
 0     hover       (0, 0, 0)
 1     north       (0, 1, 0)
 2     northeast   (1, 1, 0) / sqrt 2
 3     east        (1, 0, 0)
 4     southeast   (1, -1, 0) / sqrt 2
 5     south       (0, -1, 0)
 6     southwest   (-1, -1, 0) / sqrt 2
 7     west        (-1, 0, 0)
 8     northwest   (-1, 1, 0) / sqrt 2
 9     climb       (0, 0, 1)
 10    descend     (0, 0, -1)
====  ==========  ==============================

A candidate leads to ``pos_t + direction * length``, where ``length`` is the recorded
displacement's length over the step (``|pos[t+1] - pos[t]|``), or ``step_length_m`` when
configured. Candidate positions are rounded to float32 (what the store keeps) before they
are checked and labelled, so the stored position, its reason bits and its label agree.

**Validity** (reason bits, :data:`MOTION_REASON_CODES`, version
:data:`~kuration.rollouts.schema.INVALID_REASON_VERSION`): ``out_of_bounds`` when the
candidate's ``|x|`` or ``|y|`` exceeds ``site_half_extent_m`` (a position on the bound is
inside); ``below_ground`` when its ``z`` is below ``ground_level_m``; ``battery_reserve``
when the state's battery is below ``battery_reserve`` and the action is neither hover nor
descend. A candidate may carry several bits. An invalid candidate's label is NaN and
``label_valid`` False: invalidity is never a low score.

**Label** (one-step progress, metres): ``|pos_t - target| - |candidate - target|``;
positive moves toward the target. Every distance is summed in float64 in the fixed order
``(dx*dx + dy*dy) + dz*dz``, so a label has the same bits on every CPU (and hover's is
exactly 0). **Selected action**: the candidate whose displacement
``direction * length`` is closest to the recorded displacement (ties: the lowest id, so a
drone that did not move selects hover). **Reward**: the selected candidate's label.

**Chains** start at rows ``0, stride, 2 * stride, ...`` of each shard and follow the
recording for at most ``chain_length`` steps. A chain ends, and the store keeps why
(:data:`TERMINATION_REASONS`):

- ``chain_length``: it took ``chain_length`` steps;
- ``track_end``: the next recorded state does not exist (the shard ends: its pad rows are
  already trimmed away) or the entity is absent there (presence mask False);
- ``non_finite_state``: the next row is present but its position, battery or state holds
  NaN or infinity (or a coordinate beyond :data:`MAX_COORDINATE_M`, which no recording
  holds and whose labels would overflow float32). Such a row is never labelled: it is not a state, a chain ends before
  it and none starts at it (the decision for broken recordings: terminate, not refuse,
  so one bad row does not cost a whole dataset);
- ``selected_invalid``: the recorded action is invalid under the rules (flying on under
  the battery reserve, leaving the site): the chain ends before that step.

A chain that would end before its first step (its start row is absent or non-finite, has
no next state, or selects an invalid action) is not produced.

**Target** (kind ``recorded_future_position``): the recorded position ``horizon`` steps
after the chain's end (the state its last step reached). When that row is past the
recorded track, absent, or non-finite, the target's ``label_valid`` is False and its value
is the last usable recorded position before it: the labels are still one-step labels
against that position, but the store's ``q_train_mask`` excludes them.

**State** vector: the ``state_modalities`` of the row, each flattened, concatenated in the
order given (default ``pos``, ``vel``, ``battery``: 7 floats), as float32. **Payload**:
with ``field_retention_policy="full"`` each step keeps its row of ``payload_modality``
(default ``frame``, uint8) when the dataset has it; ``"compact"`` keeps none.

The computation runs for a whole shard at once, as array operations over all rows, chains
and candidates, and the shard's chains leave as one
:class:`~kuration.rollouts.records.RolloutChainBatch` of those arrays: no object is built
per chain or step.

What it deliberately does not do: simulate dynamics (a candidate's position is a straight
step), or plan beyond one step (labels are one-step, the reward of the recorded action).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.errors import RolloutInputError, shown
from kuration.canonical.floats import canonical_floats
from kuration.output.spec import MODALITY_NAME, PRESENT
from kuration.rollouts.records import RolloutChainBatch, RolloutSourceRef

_DIAGONAL = 1.0 / math.sqrt(2.0)
#: The action vocabulary, in shell order: (id, name, unit direction x, y, z).
MOTION_ACTIONS: tuple[tuple[int, str, tuple[float, float, float]], ...] = (
    (0, "hover", (0.0, 0.0, 0.0)),
    (1, "north", (0.0, 1.0, 0.0)),
    (2, "northeast", (_DIAGONAL, _DIAGONAL, 0.0)),
    (3, "east", (1.0, 0.0, 0.0)),
    (4, "southeast", (_DIAGONAL, -_DIAGONAL, 0.0)),
    (5, "south", (0.0, -1.0, 0.0)),
    (6, "southwest", (-_DIAGONAL, -_DIAGONAL, 0.0)),
    (7, "west", (-1.0, 0.0, 0.0)),
    (8, "northwest", (-_DIAGONAL, _DIAGONAL, 0.0)),
    (9, "climb", (0.0, 0.0, 1.0)),
    (10, "descend", (0.0, 0.0, -1.0)),
)
ACTION_IDS: dict[str, int] = {name: action_id for action_id, name, _ in MOTION_ACTIONS}
_ACTION_IDS = np.array([action_id for action_id, _, _ in MOTION_ACTIONS], dtype=np.int32)
_DIRECTIONS = np.array([direction for _, _, direction in MOTION_ACTIONS], dtype=np.float64)
#: Actions that stay valid under the battery reserve: the ones that do not spend it on travel.
_RESERVE_ACTIONS = np.isin(_ACTION_IDS, [ACTION_IDS["hover"], ACTION_IDS["descend"]])

#: Reason-code table (name -> bit position) of :class:`MotionDirectionRecipe`.
MOTION_REASON_CODES: dict[str, int] = {"out_of_bounds": 0, "below_ground": 1, "battery_reserve": 2}
#: Why a chain ends (see the module doc).
TERMINATION_REASONS = ("chain_length", "track_end", "non_finite_state", "selected_invalid")
TARGET_KIND = "recorded_future_position"
#: Coordinates beyond this (metres) are treated like NaN: not a recorded state.
MAX_COORDINATE_M = 1e12
RETENTION_POLICIES = ("compact", "full")


def _positive_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise RolloutInputError(f"MotionDirectionRecipe.{name}: must be a whole number >= {minimum}, got "
                                f"{shown(value)}")
    return int(value)


def _finite(value: Any, name: str, *, low: float | None = None, high: float | None = None,
            positive: bool = False) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    number = float(value) if ok else math.nan
    if (not math.isfinite(number) or (positive and number <= 0) or (low is not None and number < low)
            or (high is not None and number > high)):
        bounds = "a positive number" if positive else f"a finite number in [{low}, {high}]" if low is not None \
            else "a finite number"
        raise RolloutInputError(f"MotionDirectionRecipe.{name}: must be {bounds}, got {shown(value)}")
    return number


def _modality_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not MODALITY_NAME.match(value):
        raise RolloutInputError(f"MotionDirectionRecipe.{name}: must be a modality name (letters, digits, _; "
                                f"starting with a letter), got {shown(value)}")
    return value


@dataclass(frozen=True)
class _Track:
    """One shard's arrays, checked and converted: what the recipe computes on."""

    pos: np.ndarray  # float64 [n, 3]
    battery: np.ndarray | None  # float64 [n]
    state: np.ndarray  # float32 [n, D_s]
    present: np.ndarray  # bool [n]: the entity is recorded on the row
    usable: np.ndarray  # bool [n]: present, and position, battery and state finite
    payload: np.ndarray | None  # uint8 [n, ...]


@dataclass(frozen=True)
class _Shells:
    """Per state row t (0..n-2, the rows with a successor): the candidate positions (float32
    values held in float64), reason bits, and the selected shell index."""

    positions: np.ndarray  # float64 [n-1, A, 3]
    reason_bits: np.ndarray  # uint32 [n-1, A]
    selected: np.ndarray  # int [n-1]


@dataclass(frozen=True)
class _Chains:
    """The shard's chains (those with at least one step), in start-row order, and their
    steps flattened chain after chain: step ``i`` is state row ``step_rows[i]`` of chain
    ``step_chain[i]``."""

    starts: np.ndarray  # int [C]: the first state row
    lengths: np.ndarray  # int [C]: steps, >= 1
    terminations: list[str]  # [C]
    target_rows: np.ndarray  # int [C]: the row whose recorded position is the target
    target_valid: np.ndarray  # bool [C]
    step_rows: np.ndarray  # int [M], M = lengths.sum()
    step_chain: np.ndarray  # int [M]


def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance over the last axis (x, y, z), summed in the fixed order
    ``(dx*dx + dy*dy) + dz*dz`` with elementwise float64 operations, so a distance has the
    same bits on every CPU and in every array shape (``np.linalg.norm`` of one vector is a
    BLAS dot product, whose kernel may fuse or reorder the sum: the hover candidate, at the
    state itself, would then not always score exactly 0)."""
    d = a - b
    x, y, z = d[..., 0], d[..., 1], d[..., 2]
    return np.sqrt((x * x + y * y) + z * z)


@dataclass(frozen=True)
class MotionDirectionRecipe:
    """Discretized motion directions with one-step progress labels; see the module doc.

    Options (keyword, all recorded in :meth:`params`):

    - ``position``: the position modality (float ``[3]``: x, y, z up, metres);
    - ``battery``: the battery modality (float scalar, 0..1), or None to drop the reserve rule;
    - ``state_modalities``: the modalities the state vector is made of, in order;
    - ``payload_modality``: kept per step with ``field_retention_policy="full"`` (uint8);
    - ``stride`` (states between chain starts), ``chain_length`` (steps at most),
      ``horizon`` (steps from the chain's end to its target);
    - ``step_length_m``: a fixed candidate step length; None uses the recorded one;
    - ``site_half_extent_m``, ``ground_level_m``, ``battery_reserve``: the validity rules;
    - ``field_retention_policy``: ``"compact"`` or ``"full"``.
    """

    position: str = "pos"
    battery: str | None = "battery"
    state_modalities: tuple[str, ...] = ("pos", "vel", "battery")
    payload_modality: str | None = "frame"
    stride: int = 8
    chain_length: int = 16
    horizon: int = 10
    step_length_m: float | None = None
    site_half_extent_m: float = 160.0
    ground_level_m: float = 0.0
    battery_reserve: float = 0.15
    field_retention_policy: str = "compact"
    strategy_id: str = field(default="recorded_action_v1", init=False)

    def __post_init__(self) -> None:
        _modality_name(self.position, "position")
        if self.battery is not None:
            _modality_name(self.battery, "battery")
        if self.payload_modality is not None:
            _modality_name(self.payload_modality, "payload_modality")
        given: Any = self.state_modalities  # a caller may pass anything; the annotation is what we keep
        if isinstance(given, str) or not isinstance(given, (tuple, list)) or not given:
            raise RolloutInputError("MotionDirectionRecipe.state_modalities: must be a non-empty tuple of modality "
                                    f"names, got {shown(self.state_modalities)}")
        names = tuple(_modality_name(m, "state_modalities") for m in self.state_modalities)
        if len(set(names)) != len(names):
            raise RolloutInputError(f"MotionDirectionRecipe.state_modalities: {list(names)} names a modality twice")
        object.__setattr__(self, "state_modalities", names)
        _positive_int(self.stride, "stride", 1)
        _positive_int(self.chain_length, "chain_length", 1)
        _positive_int(self.horizon, "horizon", 0)
        if self.step_length_m is not None:
            _finite(self.step_length_m, "step_length_m", positive=True)
        _finite(self.site_half_extent_m, "site_half_extent_m", positive=True)
        _finite(self.ground_level_m, "ground_level_m")
        _finite(self.battery_reserve, "battery_reserve", low=0.0, high=1.0)
        if self.field_retention_policy not in RETENTION_POLICIES:
            raise RolloutInputError(f"MotionDirectionRecipe.field_retention_policy: must be one of "
                                    f"{list(RETENTION_POLICIES)}, got {shown(self.field_retention_policy)}")

    # -- the RolloutRecipe protocol ------------------------------------------------------

    @property
    def recipe_id(self) -> str:
        return "motion_direction_v1"

    @property
    def reason_codes(self) -> dict[str, int]:
        return dict(MOTION_REASON_CODES)

    @property
    def required_modalities(self) -> tuple[str, ...]:
        wanted = [self.position, *([self.battery] if self.battery else []), *self.state_modalities]
        return tuple(dict.fromkeys(wanted))

    def params(self) -> dict[str, Any]:
        """Every option, JSON-able: what the generation fingerprints and records."""
        return {
            "position": self.position, "battery": self.battery, "state_modalities": list(self.state_modalities),
            "payload_modality": self.payload_modality, "stride": int(self.stride),
            "chain_length": int(self.chain_length), "horizon": int(self.horizon),
            "step_length_m": None if self.step_length_m is None else float(self.step_length_m),
            "site_half_extent_m": float(self.site_half_extent_m), "ground_level_m": float(self.ground_level_m),
            "battery_reserve": float(self.battery_reserve), "field_retention_policy": self.field_retention_policy,
            "strategy_id": self.strategy_id, "target_kind": TARGET_KIND,
            "actions": [[action_id, name] for action_id, name, _ in MOTION_ACTIONS],
        }

    def records_for_shard(self, arrays: Mapping[str, np.ndarray],
                          source: RolloutSourceRef) -> list[RolloutChainBatch]:
        """The chains of one shard (``arrays`` trimmed to its recorded steps, with
        ``_present`` when the dataset has a presence mask), in start-row order, as one
        :class:`~kuration.rollouts.records.RolloutChainBatch` (``to_records()`` gives one
        record per chain); an empty list when the shard has no chains."""
        track = self._checked(arrays, source)
        if len(track.pos) < 2 or not track.usable.any():
            return []
        shells = self._shells(track)
        chains = self._chains(track, shells)
        if not len(chains.starts):
            return []
        return [self._batch(track, shells, chains, source)]

    # -- the computation -----------------------------------------------------------------

    def _checked(self, arrays: Mapping[str, np.ndarray], source: RolloutSourceRef) -> _Track:
        where = f"{self.recipe_id} on {getattr(source, 'shard_path', '?')}"
        if not isinstance(source, RolloutSourceRef):
            raise RolloutInputError(f"{where}: source must be a RolloutSourceRef, got {type(source).__name__}")
        if not isinstance(arrays, Mapping):
            raise RolloutInputError(f"{where}: arrays must be a mapping of modality -> numpy array, got "
                                    f"{type(arrays).__name__}")

        def array(name: str, kinds: str, what: str) -> np.ndarray:
            if name not in arrays:
                raise RolloutInputError(f"{where}: no modality {name!r} (the shard has {sorted(arrays)}); declare it "
                                        "in the dataset's output spec, or configure the recipe to use another")
            value = arrays[name]
            if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
                found = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
                raise RolloutInputError(f"{where}: modality {name!r} must be a numpy array of {what}, got {found}")
            return value

        pos = array(self.position, "f", "floats")
        if pos.ndim != 2 or pos.shape[1] != 3:
            raise RolloutInputError(f"{where}: position {self.position!r} must have shape [steps, 3] (x, y, z), got "
                                    f"{list(pos.shape)}")
        n = pos.shape[0]
        if n != source.n_states:
            raise RolloutInputError(f"{where}: {self.position!r} has {n} rows but the source records n_states="
                                    f"{source.n_states}; pass arrays trimmed to the shard's recorded steps")

        def rows_of(name: str, value: np.ndarray) -> None:
            if value.ndim < 1 or value.shape[0] != n:
                raise RolloutInputError(f"{where}: modality {name!r} has shape {list(value.shape)}, expected {n} rows "
                                        f"like {self.position!r}")

        present = np.ones(n, dtype=bool)
        if PRESENT in arrays:
            mask = array(PRESENT, "b", "bools")
            rows_of(PRESENT, mask)
            if mask.ndim != 1:
                raise RolloutInputError(f"{where}: {PRESENT} must have shape [steps], got {list(mask.shape)}")
            present = mask.copy()
        battery = None
        if self.battery is not None:
            raw = array(self.battery, "f", "floats")
            rows_of(self.battery, raw)
            if raw.ndim != 1:
                raise RolloutInputError(f"{where}: battery {self.battery!r} must have shape [steps], got "
                                        f"{list(raw.shape)}")
            battery = raw.astype(np.float64)
        parts = []
        for name in self.state_modalities:
            value = array(name, "fiub", "numbers")
            rows_of(name, value)
            parts.append(value.reshape(n, int(np.prod(value.shape[1:]))).astype(np.float32))  # n may be 0
        state = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.float32)
        payload = None
        kept = self.payload_modality
        if self.field_retention_policy == "full" and kept is not None and kept in arrays:
            payload = array(kept, "u", "uint8")
            rows_of(kept, payload)
            if payload.dtype != np.uint8:
                raise RolloutInputError(f"{where}: payload {kept!r} must be uint8, got {payload.dtype}")
        pos64 = pos.astype(np.float64)
        with np.errstate(invalid="ignore"):
            sane = (np.abs(pos64) <= MAX_COORDINATE_M).all(axis=1)  # False for NaN too
        usable = present & sane & np.isfinite(state).all(axis=1)
        if battery is not None:
            usable &= np.isfinite(battery)
        return _Track(pos64, battery, state, present, usable, payload)

    def _shells(self, track: _Track) -> _Shells:
        here, there = track.pos[:-1], track.pos[1:]
        with np.errstate(invalid="ignore", over="ignore"):  # rows that are not states hold anything
            moved = there - here
            length = _distance(there, here) if self.step_length_m is None \
                else np.full(len(here), float(self.step_length_m))
            offsets = _DIRECTIONS[None, :, :] * length[:, None, None]
            # Rounded to what the store keeps, so position, reason bits and label agree.
            positions = (here[:, None, :] + offsets).astype(np.float32).astype(np.float64)
            bits = np.zeros(positions.shape[:2], dtype=np.uint32)
            half = float(self.site_half_extent_m)
            outside = (np.abs(positions[..., 0]) > half) | (np.abs(positions[..., 1]) > half)
            bits |= outside.astype(np.uint32) << MOTION_REASON_CODES["out_of_bounds"]
            below = positions[..., 2] < float(self.ground_level_m)
            bits |= below.astype(np.uint32) << MOTION_REASON_CODES["below_ground"]
            if track.battery is not None:
                low = track.battery[:-1] < float(self.battery_reserve)
                reserve = low[:, None] & ~_RESERVE_ACTIONS[None, :]
                bits |= reserve.astype(np.uint32) << MOTION_REASON_CODES["battery_reserve"]
            miss = _distance(offsets, moved[:, None, :])
        selected = np.argmin(np.where(np.isfinite(miss), miss, np.inf), axis=1)  # first minimum: lowest id
        return _Shells(positions, bits, selected)

    def _chains(self, track: _Track, shells: _Shells) -> _Chains:
        """Where every chain of the shard starts and ends, why, and its target row, for all
        start rows at once (the walk of the module doc, as array operations)."""
        n = len(track.pos)
        rows = np.arange(n)
        selected_bits = shells.reason_bits[rows[:-1], shells.selected]
        # Row t steps on to t+1 when t+1 is a usable state and the recorded action is valid;
        # the last row never does (no next state).
        blocked = np.ones(n, dtype=bool)
        blocked[:-1] = ~(track.usable[1:] & (selected_bits == 0))
        # The first blocked row at or after each row: where a chain reaching it stops.
        stop = np.minimum.accumulate(np.where(blocked, rows, n)[::-1])[::-1]
        starts = rows[:-1:self.stride]
        lengths = np.minimum(stop[starts] - starts, self.chain_length)
        made = track.usable[starts] & (lengths > 0)
        starts, lengths = starts[made], lengths[made]
        ends = starts + lengths  # the row each chain's last step reached: a usable state
        after = ends + 1  # the row a chain stopped short of, when it did
        ran_out = (ends == n - 1) | ~track.present[np.minimum(after, n - 1)]
        broken = ~track.usable[np.minimum(after, n - 1)]
        terminations = np.where(lengths == self.chain_length, "chain_length",
                                np.where(ran_out, "track_end",
                                         np.where(broken, "non_finite_state", "selected_invalid"))).tolist()
        wanted = ends + self.horizon
        last_row = np.minimum(wanted, n - 1)
        target_valid = (wanted < n) & track.usable[last_row]
        # Else the last usable row up to the horizon (ends[c] is one, so there is one).
        last_usable = np.maximum.accumulate(np.where(track.usable, rows, -1))
        target_rows = np.where(target_valid, wanted, last_usable[last_row])
        step_chain = np.repeat(np.arange(len(starts)), lengths)
        first_step = np.cumsum(lengths) - lengths
        step_rows = starts[step_chain] + np.arange(len(step_chain)) - first_step[step_chain]
        return _Chains(starts, lengths, terminations, target_rows, target_valid, step_rows, step_chain)

    def _batch(self, track: _Track, shells: _Shells, chains: _Chains, source: RolloutSourceRef) -> RolloutChainBatch:
        """``chains`` as one batch: every label, reward and audit value computed for all
        steps at once, and each column one array over all chains, steps or candidates (a
        step of two overlapping chains is its row's values, copied into both)."""
        goals = canonical_floats(track.pos[chains.target_rows].astype(np.float32))  # [C, 3]
        rows, chain = chains.step_rows, chains.step_chain
        goal = goals.astype(np.float64)[chain]  # [M, 3]
        bits = shells.reason_bits[rows]  # [M, A]
        valid = bits == 0
        progress = _distance(track.pos[rows], goal)[:, None] - _distance(shells.positions[rows], goal[:, None, :])
        labels = canonical_floats(np.where(valid, progress, np.nan).astype(np.float32))  # [M, A]
        label_valid = valid & np.isfinite(labels)
        selected = shells.selected[rows]
        rewards = labels[np.arange(len(rows)), selected]
        best = np.where(label_valid, labels, -np.inf).max(axis=1)
        margins = (best.astype(np.float64) - rewards.astype(np.float64)).astype(np.float32)
        # A step with no trainable label has no margin to measure: NaN is "unavailable" (a guard: a
        # chain step's selected action is valid, so its label is trainable and it has one).
        margins[~label_valid.any(axis=1)] = np.nan
        width = len(_ACTION_IDS)
        return RolloutChainBatch(
            source=source, strategy_id=self.strategy_id, mixture_id=self.recipe_id, target_kind=TARGET_KIND,
            target_values=goals, target_label_valid=chains.target_valid, chain_lengths=chains.lengths,
            termination_reasons=chains.terminations, source_rows=rows, states=canonical_floats(track.state[rows]),
            shell_counts=np.full(len(rows), width), selected_shell_index=selected, rewards=rewards,
            action_ids=np.tile(_ACTION_IDS, len(rows)),
            positions=canonical_floats(shells.positions[rows].astype(np.float32)).reshape(-1, 3),
            valid_action=valid.ravel(), reason_bits=bits.ravel(), labels=labels.ravel(),
            label_valid=label_valid.ravel(), audit_valid_candidates=valid.sum(axis=1), audit_selected_margin=margins,
            selected_payload=None if track.payload is None else track.payload[rows])


__all__ = ["ACTION_IDS", "MAX_COORDINATE_M", "MOTION_ACTIONS", "MOTION_REASON_CODES", "RETENTION_POLICIES",
           "TARGET_KIND", "TERMINATION_REASONS", "MotionDirectionRecipe"]
