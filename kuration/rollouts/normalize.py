"""Normalize rollout records into the factual tables of :mod:`kuration.rollouts.schema`, with
no I/O: :func:`normalize_rollout_records` returns a :class:`RolloutTables`, which
:mod:`kuration.rollouts.writer` writes.

The input is any mix of :class:`~kuration.rollouts.records.RolloutWriteRecord` (one chain)
and :class:`~kuration.rollouts.records.RolloutChainBatch` (many chains of one source as
columns), their chains stored in the order given. Each item becomes raw columns
(:mod:`kuration.rollouts._raw_columns`: a run of records by one C-level pass per field over
their steps and one numpy join, a batch by its columns, checked for kind, rank and row count),
the pieces are joined with one ``np.concatenate`` per column, and the rules run once on the
joined columns, the same code for records and batches, so the same chains give the same
bytes either way. A failed vectorised check names the culprit as
``records[i].steps[j].<field>`` (``.shell[k].<field>`` for a candidate) for a record and as
``records[i].<field>[row] (chain c, step j[, shell[k]])`` for a batch, ``row`` indexing the
batch's own column; refusals raise :class:`RolloutInputError`. Float columns go through
:func:`kuration.canonical.floats.canonical_floats` (one NaN, no ``-0.0``), so the same
records give the same columns on every CPU.

What it does not do: derive ``q_h/`` (:mod:`kuration.rollouts.qh`), build the manifest or
choose the zarr layout (:mod:`kuration.rollouts.writer`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.canonical.floats import canonical_floats
from kuration.errors import RolloutInputError, shown
from kuration.rollouts._raw_columns import (
    BATCH_FIELDS,
    CANDIDATE_KEYS,
    INT32_MAX,
    INT64_MAX,
    Where,
    batch_column,
    batch_columns,
    batch_texts,
    float_vector,
    nonempty_text,
    record_columns,
    refuse_rows,
)
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.records import RolloutChainBatch, RolloutChainInput, RolloutWriteRecord
from kuration.rollouts.schema import VOCABULARIES

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
#: An all-zero digest binds a source to nothing (validation refuses it in a store).
_NO_DIGEST = "0" * 64


@dataclass(frozen=True)
class RolloutTables:
    """The normalized store content before it is written: every factual column by schema
    path, each group's vocabularies, the widths (``P``, ``D_s``, ``D_t``, ``A``,
    ``payload``) and the row counts per table."""

    columns: Mapping[str, np.ndarray]
    vocabularies: Mapping[str, Mapping[str, list[str]]]
    widths: Mapping[str, Any]
    counts: Mapping[str, int]


class _Vocabulary:
    """Strings -> int32 codes in first-appearance order (deterministic for the same records)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def code(self, text: str) -> int:
        return self.codes.setdefault(text, len(self.codes))

    @property
    def values(self) -> list[str]:
        return list(self.codes)


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise RolloutInputError(f"{where}: expected an int >= {minimum}, found {shown(value)}")
    return int(value)


_CHAIN_VOCABULARIES = ("shard_paths", "entities", "splits", "kinds", "strategy_ids", "mixture_ids",
                       "termination_reasons")


class _Chains:
    """The chain-level tables as the input items add their chains: sources (one row per
    shard), targets (equal targets of one source stored once), the vocabularies (codes in
    first-appearance order) and, per chain, its ids, codes, step count and input item."""

    def __init__(self) -> None:
        self.source_rows: dict[tuple[str, str, str], int] = {}
        self.source_info: list[tuple[str, str, str, str, int]] = []
        self.target_rows: dict[tuple[int, str, bool, bytes], int] = {}
        self.target_info: list[tuple[int, str, np.ndarray, bool]] = []
        self.vocab = {name: _Vocabulary() for name in _CHAIN_VOCABULARIES}
        self.width_t: int | None = None
        self.source: list[int] = []
        self.target: list[int] = []
        self.strategy: list[int] = []
        self.mixture: list[int] = []
        self.termination: list[int] = []
        self.lengths: list[int] = []
        self.item: list[int] = []
        self.in_item: list[int] = []

    def source_id(self, source: Any, where: str) -> int:
        path = nonempty_text(source.shard_path, f"{where}.shard_path")
        sha = source.shard_sha256
        if not isinstance(sha, str) or not _SHA256_HEX.match(sha):
            raise RolloutInputError(f"{where}.shard_sha256: expected 64 lowercase hex digits, found {shown(sha)}")
        if sha == _NO_DIGEST:
            raise RolloutInputError(f"{where}.shard_sha256: all zeros, which binds the source to no shard; pass the "
                                    "SHA-256 the dataset manifest records for it")
        entity = nonempty_text(source.entity, f"{where}.entity")
        split = nonempty_text(source.split, f"{where}.split")
        n_states = _int(source.n_states, f"{where}.n_states", minimum=1)
        key = (path, sha, entity)
        source_id = self.source_rows.get(key)
        if source_id is None:
            source_id = self.source_rows[key] = len(self.source_info)
            self.source_info.append((path, sha, entity, split, n_states))
        elif self.source_info[source_id][3:] != (split, n_states):
            known = self.source_info[source_id]
            raise RolloutInputError(
                f"{where}: shard {path!r} (sha256 {sha[:12]}..., entity {entity!r}) was given with split {known[3]!r} "
                f"and n_states {known[4]} before, now {split!r} and {n_states}; one shard has one split and one state "
                "count")
        return source_id

    def add(self, *, item: int, in_item: int, source_id: int, kind: str, value: np.ndarray, label_valid: bool,
            strategy: str, mixture: str, termination: str, length: int, value_where: str) -> None:
        """One chain, its strings checked already and ``value`` a canonical float32 vector."""
        if self.width_t is None:
            self.width_t = len(value)
        elif len(value) != self.width_t:
            raise RolloutInputError(f"{value_where}: width D_t {len(value)}, but earlier targets have {self.width_t}")
        target_key = (source_id, kind, label_valid, value.tobytes())
        target_id = self.target_rows.get(target_key)
        if target_id is None:
            target_id = self.target_rows[target_key] = len(self.target_info)
            self.target_info.append((source_id, kind, value, label_valid))
        self.source.append(source_id)
        self.target.append(target_id)
        self.strategy.append(self.vocab["strategy_ids"].code(strategy))
        self.mixture.append(self.vocab["mixture_ids"].code(mixture))
        self.termination.append(self.vocab["termination_reasons"].code(termination))
        self.lengths.append(length)
        self.item.append(item)
        self.in_item.append(in_item)

    def add_record(self, record: RolloutWriteRecord, item: int) -> Sequence[Any]:
        """Add a record's chain; returns its steps (a non-empty sequence, not yet checked)."""
        where = f"records[{item}]"
        source_id = self.source_id(record.source, f"{where}.source")
        target = record.target
        kind = nonempty_text(target.kind, f"{where}.target.kind")
        value = float_vector(target.value, f"{where}.target.value")
        if not isinstance(target.label_valid, (bool, np.bool_)):
            raise RolloutInputError(f"{where}.target.label_valid: expected a bool, found {shown(target.label_valid)}")
        strategy = nonempty_text(record.strategy_id, f"{where}.strategy_id")
        mixture = nonempty_text(record.mixture_id, f"{where}.mixture_id")
        termination = nonempty_text(record.termination_reason, f"{where}.termination_reason")
        steps: Any = record.steps
        if not isinstance(steps, Sequence) or isinstance(steps, (str, bytes)) or not steps:
            raise RolloutInputError(f"{where}.steps: a chain needs at least one step, found {shown(record.steps)}")
        self.add(item=item, in_item=0, source_id=source_id, kind=kind, value=value,
                 label_valid=bool(target.label_valid), strategy=strategy, mixture=mixture, termination=termination,
                 length=len(steps), value_where=f"{where}.target.value")
        return steps

    def add_batch(self, batch: RolloutChainBatch, item: int) -> None:
        """Add a batch's chains after checking its per-chain columns (names, kinds, ``C`` rows)."""
        where = f"records[{item}]"
        source_id = self.source_id(batch.source, f"{where}.source")
        strategy = nonempty_text(batch.strategy_id, f"{where}.strategy_id")
        mixture = nonempty_text(batch.mixture_id, f"{where}.mixture_id")
        lengths = batch_column(batch, item, "chain_lengths", "iu", 1, None, "")
        num_chains = len(lengths)
        if not num_chains:
            raise RolloutInputError(f"{where}.chain_lengths: a batch needs at least one chain, found none")
        refuse_rows(lengths < 1, lengths, f"{where}.chain_lengths", "is not >= 1 (a chain needs at least one step)")
        rows = f"len(chain_lengths) {num_chains}"
        values = batch_column(batch, item, "target_values", "fiu", 2, num_chains, rows)
        values = canonical_floats(values.astype(np.float32))
        label_valid = batch_column(batch, item, "target_label_valid", "b", 1, num_chains, rows)
        kinds = batch_texts(batch.target_kind, f"{where}.target_kind", num_chains, rows, one_for_all=True)
        reasons = batch_texts(batch.termination_reasons, f"{where}.termination_reasons", num_chains, rows,
                               one_for_all=False)
        for c in range(num_chains):
            self.add(item=item, in_item=c, source_id=source_id, kind=kinds[c], value=values[c],
                     label_valid=bool(label_valid[c]), strategy=strategy, mixture=mixture, termination=reasons[c],
                     length=int(lengths[c]), value_where=f"{where}.target_values[{c}]")


class _Locator:
    """Names a row of the joined step and candidate columns as the input it came from:
    ``records[i].steps[j].<field>`` and ``records[i].steps[j].shell[k].<field>`` for a
    record; ``records[i].<field>[row] (chain c, step j[, shell[k]])`` for a batch, ``row``
    being the row of the batch's own column."""

    def __init__(self, chains: _Chains, is_batch: list[bool]) -> None:
        lengths = np.asarray(chains.lengths, dtype=np.int64)
        self.lengths = lengths
        self.is_batch = is_batch
        self.chain_item = np.asarray(chains.item, dtype=np.int64)
        self.chain_in_item = np.asarray(chains.in_item, dtype=np.int64)
        self.first_step = np.cumsum(lengths) - lengths
        self.num_steps = int(lengths.sum())
        self.step_rollout = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        self.step_index = np.arange(self.num_steps, dtype=np.int64) - self.first_step[self.step_rollout]
        # Every item adds at least one chain, and items add theirs in order: the first
        # occurrence of each item among the chains is its first chain.
        _, item_first_chain = np.unique(self.chain_item, return_index=True)
        self.item_first_step = self.first_step[item_first_chain]
        self.candidate_start = np.zeros(0, dtype=np.int64)
        self.candidate_step = np.zeros(0, dtype=np.int64)

    def set_counts(self, counts: np.ndarray) -> None:
        self.candidate_start = np.cumsum(counts) - counts
        self.candidate_step = np.repeat(np.arange(self.num_steps, dtype=np.int64), counts)

    def _step_parts(self, step: int) -> tuple[int, int, int]:
        chain = int(self.step_rollout[step])
        return int(self.chain_item[chain]), int(self.chain_in_item[chain]), int(self.step_index[step])

    def step(self, step: int, field: str | None = None) -> str:
        item, chain, index = self._step_parts(step)
        if not self.is_batch[item]:
            return f"records[{item}].steps[{index}]" + ("" if field is None else f".{field}")
        row = step - int(self.item_first_step[item])
        name = "steps" if field is None else BATCH_FIELDS.get(field, field)
        return f"records[{item}].{name}[{row}] (chain {chain}, step {index})"

    def candidate(self, candidate: int, field: str) -> str:
        step = int(self.candidate_step[candidate])
        item, chain, index = self._step_parts(step)
        shell_index = candidate - int(self.candidate_start[step])
        if not self.is_batch[item]:
            return f"records[{item}].steps[{index}].shell[{shell_index}].{field}"
        row = candidate - int(self.candidate_start[self.item_first_step[item]])
        return f"records[{item}].{field}[{row}] (chain {chain}, step {index}, shell[{shell_index}])"

    def column(self, item: int, field: str) -> str:
        """Where a whole column of item ``item`` comes from (for a width mismatch)."""
        if self.is_batch[item]:
            return f"records[{item}].{BATCH_FIELDS.get(field, field)}"
        shell = "shell." if field in CANDIDATE_KEYS else ""
        return f"records[{item}].steps[0].{shell}{field}"


def normalize_rollout_records(records: Iterable[RolloutChainInput], *,
                              config: RolloutZarrStoreConfig) -> RolloutTables:
    """Validate ``records`` and build every factual column (no I/O).

    ``records`` may mix :class:`RolloutWriteRecord` (one chain) and
    :class:`RolloutChainBatch` (many chains of one source, as columns): the store holds
    their chains in the order given, and the same chains give the same columns (so the
    same store bytes) whichever way they come.

    Refused with :class:`RolloutInputError` naming ``records[i].steps[j].<field>`` (a
    record) or ``records[i].<field>[row]`` (a batch): no records; an empty chain; an empty
    strategy, mixture, target kind or termination reason; a shard SHA-256 that is not 64
    lowercase hex digits; shell arrays of unequal length; reason bits 0 on an invalid
    candidate, nonzero on a valid one or outside the declared table; a ``label_valid``
    candidate with a non-finite label or an invalid action; a finite label on an invalid
    action (it must be NaN); a selected index out of range or selecting an invalid action;
    a non-finite reward; an audit count above the shell width or an infinite audit margin;
    a source row outside the source's states; widths (P, D_s, D_t, payload) that differ
    between rows. A batch is also refused, naming the field, for a column of the wrong
    dtype kind or rank, row counts that do not match ``chain_lengths`` / ``shell_counts``
    sums, no chains, or a chain length or shell count below 1."""
    items = list(records)
    if not items:
        raise RolloutInputError("records: no rollout chains to write (a store holds at least one)")
    chains = _Chains()
    # Consecutive records are converted as one run (one C-level pass per field over all
    # their steps); each batch is its own piece. Pieces are joined once per column.
    plan: list[tuple[int, list[Any] | RolloutChainBatch]] = []
    run: list[Any] | None = None
    for i, item in enumerate(items):
        if isinstance(item, RolloutWriteRecord):
            steps = chains.add_record(item, i)
            if run is None:
                run = []
                plan.append((i, run))
            run.extend(steps)
        elif isinstance(item, RolloutChainBatch):
            chains.add_batch(item, i)
            run = None
            plan.append((i, item))
        else:
            raise RolloutInputError(f"records[{i}]: expected a RolloutWriteRecord or a RolloutChainBatch, found "
                                    f"{type(item).__name__}")
    locate = _Locator(chains, [isinstance(item, RolloutChainBatch) for item in items])
    item_steps = np.bincount(locate.chain_item, weights=locate.lengths, minlength=len(items)).astype(np.int64)
    pieces: list[dict[str, np.ndarray]] = []
    for first_item, part in plan:
        if isinstance(part, RolloutChainBatch):
            pieces.append(batch_columns(part, first_item, int(item_steps[first_item]), config))
        else:
            run_start = int(locate.item_first_step[first_item])
            pieces.append(record_columns(part, lambda s, field=None, o=run_start: locate.step(o + s, field), config))
    owners = [first_item for first_item, _ in plan]
    raw = {key: _joined_pieces(pieces, owners, key, locate) for key in pieces[0]}
    return _tables(chains, locate, raw, config)


def _joined_pieces(pieces: list[dict[str, np.ndarray]], owners: list[int], key: str, locate: _Locator) -> np.ndarray:
    """One column over every piece (one ``np.concatenate``); a piece whose width differs
    from the first piece's is named."""
    parts = [piece[key] for piece in pieces]
    if len(parts) == 1:
        return parts[0]
    first = parts[0].shape[1:]
    for part, owner in zip(parts, owners, strict=True):
        if part.shape[1:] != first:
            raise RolloutInputError(f"{locate.column(owner, key)}: width {part.shape[1:]}, but "
                                    f"{locate.column(owners[0], key)} has {first}; every chain has the same")
    return np.concatenate(parts)


def _tables(chains: _Chains, locate: _Locator, raw: dict[str, np.ndarray], config: RolloutZarrStoreConfig
            ) -> RolloutTables:
    """Every factual column from the joined raw columns: the rules checked on them (the one
    place they are, for records and batches alike), then the derived ids and links."""
    counts = raw["shell_counts"]
    locate.set_counts(counts)
    columns = _checked_step_columns(raw, locate.step)
    columns.update(_checked_candidate_columns(raw, locate.candidate, config))
    selected_id = _checked_steps_in_shells(columns, counts, chains, locate)
    columns.update(_link_columns(counts, selected_id, chains, locate))
    columns.update(_source_columns(chains))
    columns.update(_target_columns(chains))
    payload = columns.get("steps/selected_payload")
    widths = {
        "P": int(columns["candidates/position"].shape[1]),
        "D_s": int(columns["steps/state"].shape[1]),
        "D_t": int(chains.width_t or 0),
        "A": int(counts.max()),
        "payload": None if payload is None else [int(n) for n in payload.shape[1:]],
    }
    table_counts = {"sources": len(chains.source_info), "targets": len(chains.target_info),
                    "rollouts": len(locate.lengths), "steps": locate.num_steps,
                    "candidates": len(columns["candidates/valid_action"])}
    vocabularies = {group: {attr: chains.vocab[attr].values for attr in names.values()}
                    for group, names in VOCABULARIES.items()}
    return RolloutTables(columns=columns, vocabularies=vocabularies, widths=widths, counts=table_counts)


def _checked_steps_in_shells(columns: Mapping[str, np.ndarray], counts: np.ndarray, chains: _Chains,
                             locate: _Locator) -> np.ndarray:
    """The per-step rules that need the shells and the sources (a source row inside its
    shard, the selected index and the audit count inside the shell, the selected candidate
    valid); returns the selected candidate id of every step."""
    n_states = np.asarray([info[4] for info in chains.source_info], dtype=np.int64)[
        np.asarray(chains.source, dtype=np.int64)][locate.step_rollout]
    bad = np.flatnonzero(columns["steps/source_row"] >= n_states)
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{locate.step(s, 'source_row')}: {int(columns['steps/source_row'][s])} is outside "
                                f"the source's {int(n_states[s])} states")
    selected = columns["steps/selected_shell_index"].astype(np.int64)
    bad = np.flatnonzero(selected >= counts)
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{locate.step(s, 'selected_shell_index')}: {int(selected[s])} is out of range for a "
                                f"shell of {int(counts[s])} candidates")
    audit = columns["steps/audit_valid_candidates"]
    bad = np.flatnonzero(audit > counts)
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{locate.step(s, 'audit_valid_candidates')}: {int(audit[s])} valid candidates, but "
                                f"the shell has {int(counts[s])} (validation refuses such a store)")
    selected_id = locate.candidate_start + selected
    bad = np.flatnonzero(~columns["candidates/valid_action"][selected_id])
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{locate.step(s, 'selected_shell_index')}: selects candidate {int(selected[s])}, "
                                "which is not a valid action (the recorded action must be actor-valid)")
    return selected_id


def _link_columns(counts: np.ndarray, selected_id: np.ndarray, chains: _Chains, locate: _Locator
                  ) -> dict[str, np.ndarray]:
    """The ids and links of steps, candidates and chains: row ids are positions, a chain's
    steps and a step's shell are contiguous, and the TD link ends on each chain's last step."""
    step_rollout, lengths, candidate_start = locate.step_rollout, locate.lengths, locate.candidate_start
    terminal = locate.step_index == (lengths[step_rollout] - 1)
    step_ids = np.arange(locate.num_steps, dtype=np.int64)
    num_candidates = int(counts.sum())
    strategy = np.asarray(chains.strategy, dtype=np.int32)
    mixture = np.asarray(chains.mixture, dtype=np.int32)
    return {
        "steps/step_id": step_ids,
        "steps/rollout_id": step_rollout,
        "steps/step_index": locate.step_index.astype(np.int32),
        "steps/candidate_start": candidate_start.astype(np.int64),
        "steps/candidate_count": counts.astype(np.int32),
        "steps/selected_candidate_id": selected_id.astype(np.int64),
        "steps/terminal": terminal,
        "steps/next_step_id": np.where(terminal, np.int64(-1), step_ids + 1),
        "candidates/candidate_id": np.arange(num_candidates, dtype=np.int64),
        "candidates/step_id": locate.candidate_step,
        "candidates/shell_index": (np.arange(num_candidates, dtype=np.int64)
                                   - np.repeat(candidate_start, counts)).astype(np.int32),
        "candidates/strategy_code": np.repeat(strategy[step_rollout], counts),
        "candidates/mixture_code": np.repeat(mixture[step_rollout], counts),
        "rollouts/rollout_id": np.arange(len(lengths), dtype=np.int64),
        "rollouts/source_id": np.asarray(chains.source, dtype=np.int64),
        "rollouts/target_id": np.asarray(chains.target, dtype=np.int64),
        "rollouts/strategy_code": strategy,
        "rollouts/mixture_code": mixture,
        "rollouts/first_step": locate.first_step.astype(np.int64),
        "rollouts/num_steps": lengths.astype(np.int32),
        "rollouts/termination_code": np.asarray(chains.termination, dtype=np.int32),
    }


def _source_columns(chains: _Chains) -> dict[str, np.ndarray]:
    """The ``sources/`` table: one row per shard, its strings coded in first-appearance order."""
    info, vocab = chains.source_info, chains.vocab
    return {
        "sources/source_id": np.arange(len(info), dtype=np.int64),
        "sources/shard_sha256": np.frombuffer(b"".join(bytes.fromhex(row[1]) for row in info),
                                              dtype=np.uint8).reshape(len(info), 32).copy(),
        "sources/shard_path_code": np.asarray([vocab["shard_paths"].code(row[0]) for row in info], np.int32),
        "sources/entity_code": np.asarray([vocab["entities"].code(row[2]) for row in info], np.int32),
        "sources/split_code": np.asarray([vocab["splits"].code(row[3]) for row in info], np.int32),
        "sources/n_states": np.asarray([row[4] for row in info], np.int32),
    }


def _target_columns(chains: _Chains) -> dict[str, np.ndarray]:
    """The ``targets/`` table: equal targets of one source stored once, in first-appearance order."""
    info = chains.target_info
    return {
        "targets/target_id": np.arange(len(info), dtype=np.int64),
        "targets/source_id": np.asarray([t[0] for t in info], dtype=np.int64),
        "targets/kind_code": np.asarray([chains.vocab["kinds"].code(t[1]) for t in info], dtype=np.int32),
        "targets/value": np.stack([t[2] for t in info]).reshape(len(info), chains.width_t or 0),
        "targets/label_valid": np.asarray([t[3] for t in info], dtype=bool),
    }


def _check_int_range(values: np.ndarray, field: str, where: Where, low: int, high: int) -> np.ndarray:
    """``values`` after refusing the first row outside ``low..high``."""
    bad = np.flatnonzero((values < low) | (values > high))
    if bad.size:
        row = int(bad[0])
        raise RolloutInputError(f"{where(row, field)}: expected an int in {low}..{high}, found {int(values[row])} "
                                f"({bad.size} rows in all)")
    return values


def _checked_step_columns(raw: Mapping[str, np.ndarray], where: Where) -> dict[str, np.ndarray]:
    """The per-step rules on the joined raw columns, and the step columns in store dtypes."""
    source_row = _check_int_range(raw["source_row"], "source_row", where, 0, INT64_MAX)
    selected = _check_int_range(raw["selected_shell_index"], "selected_shell_index", where, 0, INT32_MAX)
    audit = _check_int_range(raw["audit_valid_candidates"], "audit_valid_candidates", where, -1, INT32_MAX)
    reward = raw["reward"]
    bad = np.flatnonzero(~np.isfinite(reward))
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{where(s, 'reward')}: {reward[s]} is not finite (every selected transition "
                                "needs an explicit finite reward)")
    with np.errstate(over="ignore"):
        reward32 = canonical_floats(reward.astype(np.float32))
    bad = np.flatnonzero(~np.isfinite(reward32))
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{where(s, 'reward')}: {reward[s]} overflows float32")
    with np.errstate(over="ignore"):
        margin = canonical_floats(raw["audit_selected_margin"].astype(np.float32))
    bad = np.flatnonzero(np.isinf(margin))
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{where(s, 'audit_selected_margin')}: {raw['audit_selected_margin'][s]} is infinite "
                                "in float32 (a margin is finite, or NaN when unavailable)")
    columns: dict[str, np.ndarray] = {
        "steps/source_row": source_row.astype(np.int64, copy=False),
        "steps/selected_shell_index": selected.astype(np.int32),
        "steps/reward": reward32,
        "steps/audit_valid_candidates": audit.astype(np.int32),
        "steps/audit_selected_margin": margin,
        "steps/state": canonical_floats(raw["state"].astype(np.float32, copy=False)),
    }
    if "selected_payload" in raw:
        columns["steps/selected_payload"] = raw["selected_payload"]
    return columns


def _checked_candidate_columns(raw: Mapping[str, np.ndarray], where: Where, config: RolloutZarrStoreConfig
                               ) -> dict[str, np.ndarray]:
    """The per-candidate rules on the joined raw columns, and the candidate columns in store
    dtypes."""
    action, position, valid = raw["action_ids"], raw["positions"], raw["valid_action"]
    reason, label, label_valid = raw["reason_bits"], raw["labels"], raw["label_valid"]

    def refuse(mask: np.ndarray, field: str, what: str) -> None:
        bad = np.flatnonzero(mask)
        if bad.size:
            raise RolloutInputError(f"{where(int(bad[0]), field)}: {what} ({bad.size} candidates in all)")

    refuse((action < 0) | (action > np.iinfo(np.int32).max), "action_ids", "outside 0..2**31-1")
    refuse((reason < 0) | (reason > np.iinfo(np.uint32).max), "reason_bits", "outside the uint32 range")
    reason = reason.astype(np.uint32, copy=False)
    refuse(valid & (reason != 0), "reason_bits", "nonzero on a valid candidate (bits are 0 exactly where "
           "valid_action is True)")
    refuse(~valid & (reason == 0), "reason_bits", "0 on an invalid candidate (an invalid action needs a reason bit "
           "from the store's reason_codes)")
    declared = np.uint32(config.declared_reason_mask)
    refuse((reason & ~declared) != 0, "reason_bits", f"has a bit outside the declared reason table "
           f"{dict(config.reason_codes)}")
    finite = np.isfinite(label)
    refuse(label_valid & ~valid, "label_valid", "True on an invalid action (label_valid implies valid_action)")
    refuse(label_valid & ~finite, "labels", "not finite on a label_valid candidate")
    refuse(np.isinf(label), "labels", "infinite; an unavailable label is NaN and an available one is finite")
    refuse(~valid & finite, "labels", "finite on an invalid action; it must be NaN (invalid actions are masked, "
           "never low or zero labels)")
    if label.dtype.kind == "f" and label.dtype.itemsize > 4:  # only a wider float can overflow float32
        refuse(np.abs(np.where(finite, label, 0.0)) > np.finfo(np.float32).max, "labels", "overflows float32")
    return {
        "candidates/action_id": action.astype(np.int32),
        "candidates/position": canonical_floats(position.astype(np.float32, copy=False)),
        "candidates/valid_action": valid,
        "candidates/reason_bits": reason,
        "candidates/label": canonical_floats(label.astype(np.float32, copy=False)),
        "candidates/label_valid": label_valid,
    }


__all__ = ["RolloutTables", "normalize_rollout_records"]
