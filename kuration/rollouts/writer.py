"""Write a rollout replay store: normalize :class:`RolloutWriteRecord` chains into the factual
tables of :mod:`kuration.rollouts.schema`, derive ``q_h/``, bind the manifest sidecar.

:func:`write_rollout_zarr_store` is the direct write: it *replaces* ``store_dir`` (remove,
then write). A killed direct write leaves a torn store; the crash-safe path is
:func:`kuration.rollouts.promote.write_rollout_store_atomically`, which writes a temp sibling
with this function and promotes it.

Plan, then act: :func:`normalize_rollout_records` validates every input item and builds every
column, then :func:`write_rollout_zarr_store` writes them. The input is any mix of
:class:`~kuration.rollouts.records.RolloutWriteRecord` (one chain) and
:class:`~kuration.rollouts.records.RolloutChainBatch` (many chains of one source as columns),
their chains stored in the order given. Each item becomes raw columns (a run of records: one
C-level pass per field over their steps and one numpy join; a batch: its columns, checked for
kind, rank and row count), the pieces are joined with one ``np.concatenate`` per column, and
the rules run once on the joined columns, the same code for records and batches, so the same
chains give the same bytes either way. A failed vectorised check names the culprit as
``records[i].steps[j].<field>`` (``.shell[k].<field>`` for a candidate) for a record and as
``records[i].<field>[row] (chain c, step j[, shell[k]])`` for a batch, ``row`` indexing the
batch's own column; refusals raise :class:`RolloutInputError`.

Layout choices (zarr 3.1.6, zstd level 0; figures in ``bench/README.md``, where ~1M candidate
rows make a 38 MB store of 159 files):

- Every array is chunked on its row axis so a chunk holds about 1 MB uncompressed
  (:data:`TARGET_CHUNK_BYTES`), bounded by the row count: per-chunk codec and file overhead
  stops mattering above a few hundred KB, and 1 MB keeps a 256-row random read cheap.
- Wide arrays (``candidates/position``, ``steps/state``, ``steps/selected_payload`` and the
  padded ``q_h/`` S x A arrays) are written as zarr shards of up to :data:`SHARD_CHUNKS`
  chunks, so a large store stays a few hundred files; their inner chunk stays the unit a
  random read decodes. ``q_h_chunk_states`` (config) sets the q_h inner chunk in rows.
- Writes use ``write_empty_chunks=True``: every chunk exists on disk, so a deleted chunk is
  detectable (zarr 3.1 would silently read it as the fill value).
- Float columns go through :func:`kuration.canonical.floats.canonical_floats` (one NaN, no ``-0.0``),
  so the same records give the same chunk bytes on every CPU.

Determinism: the persisted config excludes ``store_dir`` and the sidecar has no clock time,
so the same records and config give byte-identical stores (every chunk, every ``zarr.json``,
the sidecar) under the same Python/numpy/zarr/Kuration versions. The sidecar's ``runtime``
block names those versions, so ``manifest_sha256`` changes when they do, by design: it
records what wrote the store.
"""

from __future__ import annotations

import math
import os
import platform
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration._version import __version__ as kuration_version
from kuration.errors import RolloutInputError, check_keys, shown
from kuration.canonical.floats import canonical_floats
from kuration.canonical.hashing import canonical_digest, canonical_json, readable_json
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.qh import build_q_h
from kuration.rollouts.records import (
    CandidateShell,
    RolloutChainBatch,
    RolloutChainInput,
    RolloutStepRecord,
    RolloutWriteRecord,
)
from kuration.rollouts.schema import (
    ARRAYS,
    DEFAULT_LABEL_SUPPORT,
    DEFAULT_RETURN_SEMANTICS,
    DEFAULT_TARGET_PROTOCOL,
    INVALID_REASON_VERSION,
    MANIFEST_FILENAME,
    Q_H_GROUP,
    Q_H_REWARD_METRIC,
    Q_H_TD_SEMANTICS,
    REQUIRED_ROOT_ATTRS,
    ROLLOUT_ZARR_SCHEMA_ID,
    ROLLOUT_ZARR_SCHEMA_VERSION,
    TABLES,
    VOCABULARIES,
    ArraySpec,
)
from kuration.storage import is_remote, local_path, remove_tree, write_bytes_atomic

#: Uncompressed bytes a chunk aims at (rows are chosen to reach it, bounded by the row count).
TARGET_CHUNK_BYTES = 1 << 20
#: Most inner chunks one shard file of a wide array holds.
SHARD_CHUNKS = 16
#: Arrays written as zarr shards: the factual arrays with a trailing dimension of their own
#: width, and every padded q_h S x A array.
SHARDED_ARRAYS = frozenset({
    "candidates/position", "steps/state", "steps/selected_payload", "targets/value",
    "q_h/candidate_ids", "q_h/valid_action_mask", "q_h/q_train_mask", "q_h/one_step_labels",
    "q_h/reason_bits", "q_h/positions",
})
#: Keys ``manifest_context`` may carry into the sidecar.
MANIFEST_CONTEXT_KEYS = ("invocation", "generation", "lineage")

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
#: An all-zero digest binds a source to nothing (validation refuses it in a store).
_NO_DIGEST = "0" * 64


@dataclass(frozen=True)
class RolloutZarrWriteResult:
    """Summary of one write. Counts are rows of the materialized tables; ``chunking`` maps
    each array path to ``{"chunks": [...], "shards": [...] | None}`` as written."""

    store_dir: str
    num_rollouts: int
    num_steps: int
    num_candidates: int
    num_sources: int
    num_targets: int
    manifest_path: str
    manifest_sha256: str
    chunking: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class RolloutTables:
    """The normalized store content before it is written: every factual column by schema
    path, each group's vocabularies, the widths (``P``, ``D_s``, ``D_t``, ``A``,
    ``payload``) and the row counts per table."""

    columns: Mapping[str, np.ndarray]
    vocabularies: Mapping[str, Mapping[str, list[str]]]
    widths: Mapping[str, Any]
    counts: Mapping[str, int]


# -- normalize ----------------------------------------------------------------------------


class _Vocabulary:
    """Strings -> int32 codes in first-appearance order (deterministic for the same records)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def code(self, text: str) -> int:
        return self.codes.setdefault(text, len(self.codes))

    @property
    def values(self) -> list[str]:
        return list(self.codes)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RolloutInputError(f"{where}: expected a non-empty string, found {shown(value)}")
    return value


def _int(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise RolloutInputError(f"{where}: expected an int >= {minimum}, found {shown(value)}")
    return int(value)


_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)
_CHAIN_VOCABULARIES = ("shard_paths", "entities", "splits", "kinds", "strategy_ids", "mixture_ids",
                       "termination_reasons")
#: A batch's name for a per-step field where it differs from the record's (a column is plural).
_BATCH_FIELDS = {"source_row": "source_rows", "state": "states", "reward": "rewards"}
#: The raw per-candidate columns every input item gives, joined over the items before the
#: rules run (names as in the records).
_CANDIDATE_KEYS = ("action_ids", "positions", "valid_action", "reason_bits", "labels", "label_valid")
_PAYLOAD_MISSING = ("missing, but field_retention_policy='full' keeps a payload for every step (use 'compact' to "
                    "store none)")


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
        path = _text(source.shard_path, f"{where}.shard_path")
        sha = source.shard_sha256
        if not isinstance(sha, str) or not _SHA256_HEX.match(sha):
            raise RolloutInputError(f"{where}.shard_sha256: expected 64 lowercase hex digits, found {shown(sha)}")
        if sha == _NO_DIGEST:
            raise RolloutInputError(f"{where}.shard_sha256: all zeros, which binds the source to no shard; pass the "
                                    "SHA-256 the dataset manifest records for it")
        entity = _text(source.entity, f"{where}.entity")
        split = _text(source.split, f"{where}.split")
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
        kind = _text(target.kind, f"{where}.target.kind")
        value = _float_vector(target.value, f"{where}.target.value")
        if not isinstance(target.label_valid, (bool, np.bool_)):
            raise RolloutInputError(f"{where}.target.label_valid: expected a bool, found {shown(target.label_valid)}")
        strategy = _text(record.strategy_id, f"{where}.strategy_id")
        mixture = _text(record.mixture_id, f"{where}.mixture_id")
        termination = _text(record.termination_reason, f"{where}.termination_reason")
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
        strategy = _text(batch.strategy_id, f"{where}.strategy_id")
        mixture = _text(batch.mixture_id, f"{where}.mixture_id")
        lengths = _batch_column(batch, item, "chain_lengths", "iu", 1, None, "")
        num_chains = len(lengths)
        if not num_chains:
            raise RolloutInputError(f"{where}.chain_lengths: a batch needs at least one chain, found none")
        _refuse_rows(lengths < 1, lengths, f"{where}.chain_lengths", "is not >= 1 (a chain needs at least one step)")
        rows = f"len(chain_lengths) {num_chains}"
        values = _batch_column(batch, item, "target_values", "fiu", 2, num_chains, rows)
        values = canonical_floats(values.astype(np.float32))
        label_valid = _batch_column(batch, item, "target_label_valid", "b", 1, num_chains, rows)
        kinds = _batch_texts(batch.target_kind, f"{where}.target_kind", num_chains, rows, one_for_all=True)
        reasons = _batch_texts(batch.termination_reasons, f"{where}.termination_reasons", num_chains, rows,
                               one_for_all=False)
        for c in range(num_chains):
            self.add(item=item, in_item=c, source_id=source_id, kind=kinds[c], value=values[c],
                     label_valid=bool(label_valid[c]), strategy=strategy, mixture=mixture, termination=reasons[c],
                     length=int(lengths[c]), value_where=f"{where}.target_values[{c}]")


def _refuse_rows(mask: np.ndarray, values: np.ndarray, where: str, what: str) -> None:
    """Refuse the first row of a batch column where ``mask`` holds, naming ``where[row]``."""
    bad = np.flatnonzero(mask)
    if bad.size:
        row = int(bad[0])
        raise RolloutInputError(f"{where}[{row}]: {shown(values[row].item())} {what} ({bad.size} rows in all)")


def _batch_texts(value: Any, where: str, count: int, rows: str, *, one_for_all: bool) -> list[str]:
    """A batch's per-chain strings: ``count`` non-empty strings (or one for all chains when
    ``one_for_all``)."""
    if isinstance(value, str) and one_for_all:
        return [_text(value, where)] * count
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        one = "a string or " if one_for_all else ""
        raise RolloutInputError(f"{where}: expected {one}a sequence of {count} strings, found {shown(value)}")
    if len(value) != count:
        raise RolloutInputError(f"{where}: {len(value)} strings, but {rows}; give one per chain")
    texts = list(value)
    for c, text in enumerate(texts):
        _text(text, f"{where}[{c}]")
    return [str(text) for text in texts]


def _batch_column(batch: RolloutChainBatch, item: int, name: str, kinds: str, ndim: int | None,
                  rows: int | None, rows_label: str) -> np.ndarray:
    """The batch's column ``name`` as an array of a dtype kind in ``kinds`` (``"u1"``: uint8
    only) with ``ndim`` dimensions (None: at least 2) and ``rows`` rows (None: any), or a
    refusal naming ``records[item].<name>``. A uint64 int column is returned as int64 (numpy
    would join it with signed ints as floats)."""
    where = f"records[{item}].{name}"
    try:
        array = np.asarray(getattr(batch, name))
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{where}: expected an array: {exc}") from None
    uint8_only = kinds == "u1"
    kind_ok = array.dtype == np.uint8 if uint8_only else array.dtype.kind in kinds
    if not kind_ok or (array.ndim < 2 if ndim is None else array.ndim != ndim):
        shape = "an N-D (N >= 2)" if ndim is None else f"a {ndim}-D"
        kind = "uint8" if uint8_only else _KIND_NAMES[kinds]
        raise RolloutInputError(f"{where}: expected {shape} {kind} array, found dtype {array.dtype} shape "
                                f"{array.shape}")
    if rows is not None and len(array) != rows:
        raise RolloutInputError(f"{where}: {len(array)} rows, but {rows_label}; every row of the batch has one entry")
    if array.dtype == np.uint64 and kinds == "iu":
        _refuse_rows(array > np.uint64(_INT64_MAX), array, where, "is outside the int64 range")
        array = array.astype(np.int64)
    return array


def _batch_columns(batch: RolloutChainBatch, item: int, num_steps: int, config: RolloutZarrStoreConfig
                   ) -> dict[str, np.ndarray]:
    """A batch's raw step and candidate columns, checked for kind, rank and row count (the
    rules run on the joined columns)."""
    steps = f"sum(chain_lengths) {num_steps}"
    counts = _batch_column(batch, item, "shell_counts", "iu", 1, num_steps, steps)
    _refuse_rows(counts < 1, counts, f"records[{item}].shell_counts", "is not >= 1 (a shell needs a candidate)")
    columns = {
        "source_row": _batch_column(batch, item, "source_rows", "iu", 1, num_steps, steps),
        "selected_shell_index": _batch_column(batch, item, "selected_shell_index", "iu", 1, num_steps, steps),
        "reward": _batch_column(batch, item, "rewards", "fiu", 1, num_steps, steps).astype(np.float64),
        "state": _batch_column(batch, item, "states", "fiu", 2, num_steps, steps),
        "shell_counts": counts.astype(np.int64, copy=False),
    }
    columns["audit_valid_candidates"] = np.full(num_steps, -1, dtype=np.int64) \
        if batch.audit_valid_candidates is None \
        else _batch_column(batch, item, "audit_valid_candidates", "iu", 1, num_steps, steps)
    columns["audit_selected_margin"] = np.full(num_steps, np.nan) if batch.audit_selected_margin is None \
        else _batch_column(batch, item, "audit_selected_margin", "fiu", 1, num_steps, steps).astype(np.float64)
    if config.field_retention_policy == "full":
        if batch.selected_payload is None:
            raise RolloutInputError(f"records[{item}].selected_payload: {_PAYLOAD_MISSING}")
        columns["selected_payload"] = _batch_column(batch, item, "selected_payload", "u1", None, num_steps, steps)
    candidates = f"sum(shell_counts) {int(counts.sum())}"
    for name, kinds in zip(_CANDIDATE_KEYS, _CANDIDATE_KINDS, strict=True):
        ndim = 2 if name == "positions" else 1
        columns[name] = _batch_column(batch, item, name, kinds, ndim, int(counts.sum()), candidates)
    return columns


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
        name = "steps" if field is None else _BATCH_FIELDS.get(field, field)
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
            return f"records[{item}].{_BATCH_FIELDS.get(field, field)}"
        shell = "shell." if field in _CANDIDATE_KEYS else ""
        return f"records[{item}].steps[0].{shell}{field}"


def normalize_rollout_records(records: Iterable[RolloutChainInput], *,
                              config: RolloutZarrStoreConfig) -> RolloutTables:
    """Validate ``records`` and build every factual column (no I/O).

    ``records`` may mix :class:`RolloutWriteRecord` (one chain) and
    :class:`RolloutChainBatch` (many chains of one source, as columns): the store holds
    their chains in the order given, and the same chains give the same columns (so the
    same store bytes) whichever way they come. Raises :class:`RolloutInputError` naming
    the input item, row and field of a violation (see :func:`write_rollout_zarr_store`
    for what is refused)."""
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
            pieces.append(_batch_columns(part, first_item, int(item_steps[first_item]), config))
        else:
            run_start = int(locate.item_first_step[first_item])
            pieces.append(_record_columns(part, lambda s, field=None, o=run_start: locate.step(o + s, field), config))
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
    candidate_start = locate.candidate_start
    step_rollout = locate.step_rollout
    lengths = locate.lengths
    num_rollouts, num_steps = len(lengths), locate.num_steps

    # Per-step checks that need the shells and the sources.
    n_states = np.asarray([info[4] for info in chains.source_info], dtype=np.int64)[
        np.asarray(chains.source, dtype=np.int64)][step_rollout]
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
    selected_id = candidate_start + selected
    bad = np.flatnonzero(~columns["candidates/valid_action"][selected_id])
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{locate.step(s, 'selected_shell_index')}: selects candidate {int(selected[s])}, "
                                "which is not a valid action (the recorded action must be actor-valid)")

    first_step, step_index = locate.first_step, locate.step_index
    terminal = step_index == (lengths[step_rollout] - 1)
    step_ids = np.arange(num_steps, dtype=np.int64)
    columns.update({
        "steps/step_id": step_ids,
        "steps/rollout_id": step_rollout,
        "steps/step_index": step_index.astype(np.int32),
        "steps/candidate_start": candidate_start.astype(np.int64),
        "steps/candidate_count": counts.astype(np.int32),
        "steps/selected_candidate_id": selected_id.astype(np.int64),
        "steps/terminal": terminal,
        "steps/next_step_id": np.where(terminal, np.int64(-1), step_ids + 1),
    })
    num_candidates = len(columns["candidates/valid_action"])
    strategy = np.asarray(chains.strategy, dtype=np.int32)
    mixture = np.asarray(chains.mixture, dtype=np.int32)
    columns.update({
        "candidates/candidate_id": np.arange(num_candidates, dtype=np.int64),
        "candidates/step_id": locate.candidate_step,
        "candidates/shell_index": (np.arange(num_candidates, dtype=np.int64)
                                   - np.repeat(candidate_start, counts)).astype(np.int32),
        "candidates/strategy_code": np.repeat(strategy[step_rollout], counts),
        "candidates/mixture_code": np.repeat(mixture[step_rollout], counts),
        "rollouts/rollout_id": np.arange(num_rollouts, dtype=np.int64),
        "rollouts/source_id": np.asarray(chains.source, dtype=np.int64),
        "rollouts/target_id": np.asarray(chains.target, dtype=np.int64),
        "rollouts/strategy_code": strategy,
        "rollouts/mixture_code": mixture,
        "rollouts/first_step": first_step.astype(np.int64),
        "rollouts/num_steps": lengths.astype(np.int32),
        "rollouts/termination_code": np.asarray(chains.termination, dtype=np.int32),
    })
    source_info, target_info, vocab, width_t = chains.source_info, chains.target_info, chains.vocab, chains.width_t
    num_sources = len(source_info)
    columns.update({
        "sources/source_id": np.arange(num_sources, dtype=np.int64),
        "sources/shard_sha256": np.frombuffer(b"".join(bytes.fromhex(info[1]) for info in source_info),
                                              dtype=np.uint8).reshape(num_sources, 32).copy(),
        "sources/shard_path_code": np.asarray([vocab["shard_paths"].code(i[0]) for i in source_info], np.int32),
        "sources/entity_code": np.asarray([vocab["entities"].code(i[2]) for i in source_info], np.int32),
        "sources/split_code": np.asarray([vocab["splits"].code(i[3]) for i in source_info], np.int32),
        "sources/n_states": np.asarray([i[4] for i in source_info], np.int32),
    })
    num_targets = len(target_info)
    columns.update({
        "targets/target_id": np.arange(num_targets, dtype=np.int64),
        "targets/source_id": np.asarray([t[0] for t in target_info], dtype=np.int64),
        "targets/kind_code": np.asarray([vocab["kinds"].code(t[1]) for t in target_info], dtype=np.int32),
        "targets/value": np.stack([t[2] for t in target_info]).reshape(num_targets, width_t or 0),
        "targets/label_valid": np.asarray([t[3] for t in target_info], dtype=bool),
    })
    vocabularies = {group: {attr: vocab[attr].values for attr in names.values()}
                    for group, names in VOCABULARIES.items()}
    payload = columns.get("steps/selected_payload")
    widths = {
        "P": int(columns["candidates/position"].shape[1]),
        "D_s": int(columns["steps/state"].shape[1]),
        "D_t": int(width_t or 0),
        "A": int(counts.max()),
        "payload": None if payload is None else [int(n) for n in payload.shape[1:]],
    }
    table_counts = {"sources": num_sources, "targets": num_targets, "rollouts": num_rollouts,
                    "steps": num_steps, "candidates": num_candidates}
    return RolloutTables(columns=columns, vocabularies=vocabularies, widths=widths, counts=table_counts)


def _float_vector(value: Any, where: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{where}: expected a 1-D float vector: {exc}") from None
    if array.ndim != 1 or array.dtype.kind not in "fiu":
        raise RolloutInputError(f"{where}: expected a 1-D numeric vector, found dtype {array.dtype} shape "
                                f"{array.shape}")
    return canonical_floats(array.astype(np.float32))


def _all_of(types: set[type], accepted: tuple[type, ...], refused: tuple[type, ...] = (bool, np.bool_)) -> bool:
    return all(issubclass(t, accepted) and not issubclass(t, refused) for t in types)


def _check_instances(items: Sequence[Any], expected: type, where: Callable[[int], str]) -> None:
    """Refuse the first item that is not an ``expected``. One C-level pass over the types is
    the fast path; the per-item loop runs only when some type differs."""
    if set(map(type, items)) <= {expected}:
        return
    for i, item in enumerate(items):
        if not isinstance(item, expected):
            raise RolloutInputError(f"{where(i)}: expected a {expected.__name__}, found {type(item).__name__}")


def _attribute_lists(items: list[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """One list per attribute, each built by a C-level ``map``: no per-item tuple, since
    allocating one tuple per step wakes the cyclic GC, which then walks every record."""
    return [list(map(attrgetter(name), items)) for name in names]


_STEP_FIELDS = ("source_row", "state", "shell", "selected_shell_index", "reward", "audit_valid_candidates",
                "audit_selected_margin", "selected_payload")
#: The dtype kinds of the candidate columns (:data:`_CANDIDATE_KEYS`), for records and batches.
_CANDIDATE_KINDS = ("iu", "fiu", "b", "iu", "fiu", "b")

#: ``where(row, field)``: the input location of a joined row (see :class:`_Locator`).
_Where = Callable[..., str]


def _record_columns(steps: list[Any], where: _Where, config: RolloutZarrStoreConfig) -> dict[str, np.ndarray]:
    """The raw step and candidate columns of a run of records' steps (``where`` names the
    run's step ``s``), checked for type and shape only: each field is collected by one
    C-level pass and joined by one numpy call; the rules run on the joined columns."""
    _check_instances(steps, RolloutStepRecord, where)
    source_row, state, shells, selected, reward, audit_count, margin_values, payloads = \
        _attribute_lists(steps, _STEP_FIELDS)
    columns: dict[str, np.ndarray] = {
        "source_row": _int_column(source_row, "source_row", where, 0, _INT64_MAX),
        "selected_shell_index": _int_column(selected, "selected_shell_index", where, 0, _INT32_MAX),
        "reward": _float_column(reward, "reward", where),
    }
    if _has_none(audit_count):  # unavailable (None) is written as -1, so a measured 0 stays 0
        available = np.fromiter((v is not None for v in audit_count), dtype=bool, count=len(steps))
        known = _int_column([0 if v is None else v for v in audit_count], "audit_valid_candidates", where, -1,
                            _INT32_MAX)
        columns["audit_valid_candidates"] = np.where(available, known, np.int64(-1))
    else:
        columns["audit_valid_candidates"] = _int_column(audit_count, "audit_valid_candidates", where, -1,
                                                        _INT32_MAX)
    if _has_none(margin_values):
        margin_values = [math.nan if v is None else v for v in margin_values]
    columns["audit_selected_margin"] = _float_column(margin_values, "audit_selected_margin", where)
    columns["state"] = _joined(state, field="state", where=where, accept=_is_numeric, want="a 1-D numeric vector",
                               item_ndim=1, stack=True, width_label="width D_s")
    if config.field_retention_policy == "full":
        if _has_none(payloads):
            missing = next(s for s, payload in enumerate(payloads) if payload is None)
            raise RolloutInputError(f"{where(missing, 'selected_payload')}: {_PAYLOAD_MISSING}")
        columns["selected_payload"] = _joined(payloads, field="selected_payload", where=where,
                                              accept=lambda d: d == np.uint8, want="a uint8 array", item_ndim=None,
                                              stack=True, width_label="payload shape")
    _check_instances(shells, CandidateShell, lambda s: where(s, "shell"))
    counts = _lengths([shell.action_ids for shell in shells], "shell.action_ids", where)
    columns["shell_counts"] = counts
    fields = _attribute_lists(shells, _CANDIDATE_KEYS)
    for name, kinds, parts in zip(_CANDIDATE_KEYS, _CANDIDATE_KINDS, fields, strict=True):
        columns[name] = _shell_concat(parts, name, where, kinds, counts)
    return columns


def _has_none(values: list[Any]) -> bool:
    # By type, not ``None in values``: that compares with ==, which an ndarray answers elementwise.
    return type(None) in set(map(type, values))


def _lengths(parts: list[Any], field: str, where: _Where) -> np.ndarray:
    try:
        return np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    except TypeError:
        for s, part in enumerate(parts):
            if not hasattr(part, "__len__") or np.ndim(part) == 0:
                raise RolloutInputError(f"{where(s, field)}: expected a 1-D array, found {shown(part)}") from None
        raise


def _int_column(values: list[Any], name: str, where: _Where, low: int, high: int) -> np.ndarray:
    """``values`` (one Python or numpy int per step, bools refused) as int64. The range
    ``low..high`` is checked on the joined column (:func:`_check_int_range`); here it only
    words the refusal of a value that is no int or does not fit int64."""
    if _all_of(set(map(type, values)), (int, np.integer)):
        try:
            array = np.asarray(values)
        except (TypeError, ValueError, OverflowError):
            array = np.zeros(0, dtype=object)
        if array.ndim == 1 and (array.dtype.kind == "i" or (
                array.dtype.kind == "u" and (not array.size or array.max() <= _INT64_MAX))):
            return array.astype(np.int64, copy=False)
    for s, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not -_INT64_MAX - 1 <= int(value) <= _INT64_MAX:
            raise RolloutInputError(f"{where(s, name)}: expected an int in {low}..{high}, found {shown(value)}")
    raise RolloutInputError(f"steps.{name}: values are not integers")  # unreachable in practice


def _float_column(values: list[Any], name: str, where: _Where) -> np.ndarray:
    """``values`` (one Python or numpy number per step) as float64. ``None`` and bools are
    refused by name: numpy would read them as NaN and 1.0."""
    if _all_of(set(map(type, values)), (int, float, np.integer, np.floating)):
        return np.asarray(values, dtype=np.float64)
    for s, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise RolloutInputError(f"{where(s, name)}: expected a number, found {shown(value)}")
    raise RolloutInputError(f"steps.{name}: expected one number per step")  # unreachable in practice


def _is_numeric(dtype: np.dtype) -> bool:
    return dtype.kind in "fiu"


def _joined(parts: list[Any], *, field: str, where: _Where, accept: Any, want: str, item_ndim: int | None,
            stack: bool, width_label: str) -> np.ndarray:
    """The per-step arrays ``parts`` stacked (one row per step) or concatenated (one row per
    candidate). The fast path is one numpy call; when it fails or gives the wrong dtype or
    shape, the culprit step is found and named (``accept(dtype)`` and ``item_ndim``, None
    for any, say what each part must be; every part has the same shape past the row axis)."""
    array = np.zeros(0)
    ok = False
    try:
        array = np.asarray(parts) if stack else np.concatenate(parts)
        ok = accept(array.dtype) and (array.ndim >= 2 if item_ndim is None else array.ndim == item_ndim + stack)
    except (TypeError, ValueError):
        pass
    if ok:
        return array
    first = np.asarray(parts[0])
    for s, part in enumerate(parts):
        item = np.asarray(part)
        if not accept(item.dtype) or (item.ndim < 1 if item_ndim is None else item.ndim != item_ndim):
            raise RolloutInputError(f"{where(s, field)}: expected {want}, found dtype {item.dtype} shape {item.shape}")
        kept = 0 if stack else 1  # stacked parts share their whole shape, concatenated ones their width
        if item.shape[kept:] != first.shape[kept:]:
            raise RolloutInputError(f"{where(s, field)}: {width_label} {item.shape[kept:]}, but step 0 has "
                                    f"{first.shape[kept:]}; every step has the same")
    raise RolloutInputError(f"{field}: cannot join the per-step arrays")


_KIND_NAMES = {"b": "bool", "iu": "integer", "fiu": "numeric"}


def _shell_concat(parts: list[Any], field: str, where: _Where, kinds: str, counts: np.ndarray) -> np.ndarray:
    """One shell array per step, joined into one row per candidate. Every shell array has one
    entry per candidate (``counts``); the first step where one does not is named."""
    lengths = _lengths(parts, f"shell.{field}", where)
    bad = np.flatnonzero(lengths != counts)
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{where(s, f'shell.{field}')}: {int(lengths[s])} entries, but the shell has "
                                f"{int(counts[s])} action_ids; every shell array has one entry per candidate")
    item_ndim = 2 if field == "positions" else 1
    return _joined(parts, field=f"shell.{field}", where=where, accept=lambda d: d.kind in kinds,
                   want=f"a {item_ndim}-D {_KIND_NAMES[kinds]} array", item_ndim=item_ndim, stack=False,
                   width_label="width P")


def _check_int_range(values: np.ndarray, field: str, where: _Where, low: int, high: int) -> np.ndarray:
    """``values`` after refusing the first row outside ``low..high``."""
    bad = np.flatnonzero((values < low) | (values > high))
    if bad.size:
        row = int(bad[0])
        raise RolloutInputError(f"{where(row, field)}: expected an int in {low}..{high}, found {int(values[row])} "
                                f"({bad.size} rows in all)")
    return values


def _checked_step_columns(raw: Mapping[str, np.ndarray], where: _Where) -> dict[str, np.ndarray]:
    """The per-step rules on the joined raw columns, and the step columns in store dtypes."""
    source_row = _check_int_range(raw["source_row"], "source_row", where, 0, _INT64_MAX)
    selected = _check_int_range(raw["selected_shell_index"], "selected_shell_index", where, 0, _INT32_MAX)
    audit = _check_int_range(raw["audit_valid_candidates"], "audit_valid_candidates", where, -1, _INT32_MAX)
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


def _checked_candidate_columns(raw: Mapping[str, np.ndarray], where: _Where, config: RolloutZarrStoreConfig
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


# -- write ---------------------------------------------------------------------------------


def _chunk_rows(spec: ArraySpec, shape: tuple[int, ...], config: RolloutZarrStoreConfig) -> int:
    rows = shape[0]
    row_bytes = max(1, int(np.dtype(spec.dtype).itemsize * math.prod(shape[1:])))
    wanted: int | None = None
    if spec.group == Q_H_GROUP and len(shape) > 1:
        wanted = config.q_h_chunk_states
    elif spec.path == "steps/selected_payload":
        wanted = config.selected_payload_chunk_steps
    if wanted is None:
        wanted = max(1, -(-TARGET_CHUNK_BYTES // row_bytes))
    return max(1, min(wanted, rows))


def _layout(spec: ArraySpec, shape: tuple[int, ...], config: RolloutZarrStoreConfig
            ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    rows = _chunk_rows(spec, shape, config)
    chunks = (rows, *shape[1:])
    if spec.path not in SHARDED_ARRAYS or shape[0] <= rows:
        return chunks, None
    per_shard = min(SHARD_CHUNKS, -(-shape[0] // rows))
    return chunks, (rows * per_shard, *shape[1:])


def _fill_value(spec: ArraySpec) -> Any:
    if spec.unavailable is not None:
        return spec.unavailable
    return False if spec.dtype == "bool" else 0


def _write_array(group: Any, spec: ArraySpec, data: np.ndarray, config: RolloutZarrStoreConfig) -> dict[str, Any]:
    from zarr.codecs import ZstdCodec

    # Float columns are canonical already (normalize and build_q_h make them so): no copy here.
    data = np.ascontiguousarray(np.asarray(data, dtype=spec.dtype))
    chunks, shards = _layout(spec, data.shape, config)
    array = group.create_array(spec.name, shape=data.shape, dtype=spec.dtype, chunks=chunks, shards=shards,
                               compressors=ZstdCodec(level=0, checksum=False), fill_value=_fill_value(spec),
                               config={"write_empty_chunks": True})
    array[...] = data
    return {"chunks": list(chunks), "shards": None if shards is None else list(shards)}


def write_rollout_zarr_store(
    store_dir: str | os.PathLike[str],
    records: Iterable[RolloutChainInput],
    *,
    return_semantics: str = DEFAULT_RETURN_SEMANTICS,
    discount_gamma: float = 1.0,
    target_protocol_version: str = DEFAULT_TARGET_PROTOCOL,
    reason_code_version: str = INVALID_REASON_VERSION,
    reason_codes: Mapping[str, int] | None = None,
    field_retention_policy: str = "compact",
    source_dataset_version: str = "unknown-source-version",
    split_manifest_hash: str = "unknown-split-manifest",
    q_h_chunk_states: int | None = None,
    selected_payload_chunk_steps: int | None = None,
    oracle_id: str = "unspecified-oracle",
    label_support_semantics: str = DEFAULT_LABEL_SUPPORT,
    manifest_context: Mapping[str, Any] | None = None,
) -> RolloutZarrWriteResult:
    """Replace the local directory ``store_dir`` with a rollout store written from ``records``:
    :class:`RolloutWriteRecord` and :class:`RolloutChainBatch` items in any mix, their chains
    stored in the order given (the same chains give the same bytes as records or batches).

    Keyword options are the :class:`RolloutZarrStoreConfig` fields (``reason_codes=None``:
    :data:`~kuration.rollouts.config.DEFAULT_REASON_CODES`). ``manifest_context`` may carry
    ``invocation``, ``generation`` and ``lineage`` JSON objects from the caller; they go into
    the sidecar as given.

    Refused with :class:`RolloutInputError` naming ``records[i].steps[j].<field>`` (a
    record) or ``records[i].<field>[row]`` (a batch), before anything is written: no
    records; an empty chain; an empty strategy, mixture, target kind or termination reason;
    a shard SHA-256 that is not 64 lowercase hex digits; shell arrays of unequal length;
    reason bits 0 on an invalid candidate, nonzero on a valid one or outside the declared
    table; a ``label_valid`` candidate with a non-finite label or an invalid action; a
    finite label on an invalid action (it must be NaN); a selected index out of range or
    selecting an invalid action; a non-finite reward; an audit count above the shell width
    or an infinite audit margin; a source row outside the source's states; widths (P, D_s,
    D_t, payload) that differ between rows. A batch is also refused, naming the field, for
    a column of the wrong dtype kind or rank, row counts that do not match ``chain_lengths``
    / ``shell_counts`` sums, no chains, or a chain length or shell count below 1.

    Writes the five factual tables, ``q_h/`` (built by :func:`build_q_h` at
    ``discount_gamma``), the sidecar :data:`MANIFEST_FILENAME` and, last, the root attrs
    with ``manifest_sha256``. Remote URLs are refused (local paths only)."""
    if is_remote(store_dir):
        raise RolloutInputError(f"store_dir: {os.fspath(store_dir)!r} is a remote URL; rollout stores are written to "
                                "a local path (write locally, then copy the finished store)")
    config = RolloutZarrStoreConfig(
        store_dir=os.fspath(local_path(store_dir)), return_semantics=return_semantics,
        discount_gamma=discount_gamma, target_protocol_version=target_protocol_version,
        reason_code_version=reason_code_version,
        **({} if reason_codes is None else {"reason_codes": reason_codes}),
        field_retention_policy=field_retention_policy, source_dataset_version=source_dataset_version,
        split_manifest_hash=split_manifest_hash, q_h_chunk_states=q_h_chunk_states,
        selected_payload_chunk_steps=selected_payload_chunk_steps, oracle_id=oracle_id,
        label_support_semantics=label_support_semantics)
    context = _checked_context(manifest_context)
    tables = normalize_rollout_records(records, config=config)
    return write_rollout_tables(config, tables, manifest_context=context)


def _checked_context(context: Mapping[str, Any] | None) -> dict[str, Any]:
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise RolloutInputError(f"manifest_context: expected a mapping, found {type(context).__name__}")
    check_keys(context, MANIFEST_CONTEXT_KEYS, where="manifest_context", error=RolloutInputError)
    return _json_mapping(context, "manifest_context")


def _json_mapping(values: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``values`` as a dict, refused unless canonical JSON can hold it."""
    try:
        canonical_json(dict(values))
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{name}: not JSON-serializable ({exc}); pass plain dicts, lists, strings and "
                                "finite numbers") from None
    return dict(values)


def build_manifest(config: RolloutZarrStoreConfig, tables: RolloutTables,
                   manifest_context: Mapping[str, Any]) -> dict[str, Any]:
    """The sidecar content: schema, config, counts, widths, reason codes, invocation,
    generation context, lineage and runtime. No clock time, so it is reproducible."""
    import zarr

    columns = tables.columns
    source_paths = tables.vocabularies["sources"]["shard_paths"]
    sources = [
        {"shard_path": source_paths[int(code)], "shard_sha256": bytes(digest).hex()}
        for code, digest in zip(columns["sources/shard_path_code"], columns["sources/shard_sha256"], strict=True)
    ]
    return {
        **_store_identity(config, tables),
        "invocation": manifest_context.get("invocation"),
        "generation": manifest_context.get("generation"),
        "lineage": {
            "split_manifest_hash": config.split_manifest_hash,
            "source_dataset_version": config.source_dataset_version,
            "num_sources": int(tables.counts["sources"]),
            "sources_sha256": canonical_digest(sources),
            "caller": manifest_context.get("lineage"),
        },
        "runtime": {"python": platform.python_version(), "numpy": np.__version__, "zarr": zarr.__version__,
                    "kuration": kuration_version},
    }


def _store_identity(config: RolloutZarrStoreConfig, tables: RolloutTables) -> dict[str, Any]:
    """What both the root attrs and the sidecar record: schema, config, counts, widths and
    the reason-code table."""
    return {
        "schema_id": ROLLOUT_ZARR_SCHEMA_ID,
        "schema_version": ROLLOUT_ZARR_SCHEMA_VERSION,
        "config": config.persisted(),
        "counts": dict(tables.counts),
        "widths": dict(tables.widths),
        "reason_codes": {"version": config.reason_code_version, "bits": dict(config.reason_codes)},
    }


#: Root attrs the writer sets itself; ``extra_root_attrs`` may not name them.
WRITER_ROOT_ATTRS = frozenset({*REQUIRED_ROOT_ATTRS, "manifest_sha256"})


def _checked_root_attrs(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise RolloutInputError(f"extra_root_attrs: expected a mapping, found {type(extra).__name__}")
    if not all(isinstance(key, str) and key for key in extra):
        raise RolloutInputError(f"extra_root_attrs: keys must be non-empty strings, found {sorted(map(repr, extra))}")
    taken = sorted(key for key in extra if key in WRITER_ROOT_ATTRS)
    if taken:
        raise RolloutInputError(f"extra_root_attrs: {taken} are root attrs the writer sets itself; use other names")
    return _json_mapping(extra, "extra_root_attrs")


def write_rollout_tables(config: RolloutZarrStoreConfig, tables: RolloutTables, *,
                         manifest_context: Mapping[str, Any] | None = None,
                         extra_root_attrs: Mapping[str, Any] | None = None) -> RolloutZarrWriteResult:
    """Write already-normalized ``tables`` to ``config.store_dir`` (replacing it): the I/O
    half of :func:`write_rollout_zarr_store`.

    ``extra_root_attrs`` (JSON values under names the writer does not set, see
    :data:`WRITER_ROOT_ATTRS`) go into the root attrs in the same final update as
    ``manifest_sha256``, so a crash never leaves a committed store without them (packing's
    ``packing`` archive is one). Refused with :class:`RolloutInputError` before anything is
    written."""
    import zarr

    extra = _checked_root_attrs(extra_root_attrs)
    store_dir = local_path(config.store_dir).resolve()
    q_h = build_q_h(tables.columns, discount_gamma=config.discount_gamma, widths=tables.widths)
    manifest = build_manifest(config, tables, dict(manifest_context or {}))
    manifest_sha256 = canonical_digest(manifest)

    remove_tree(store_dir)
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    root = zarr.open_group(str(store_dir), mode="w", zarr_format=3)
    chunking: dict[str, dict[str, Any]] = {}
    for group_name in (*TABLES, Q_H_GROUP):
        attrs: dict[str, Any] = dict(tables.vocabularies.get(group_name, {}))
        if group_name == Q_H_GROUP:
            attrs = {"return_semantics": config.return_semantics, "discount_gamma": config.discount_gamma,
                     "td_semantics": Q_H_TD_SEMANTICS, "reward_metric": Q_H_REWARD_METRIC}
        group = root.create_group(group_name, attributes=attrs)
        for spec in ARRAYS:
            if spec.group != group_name:
                continue
            data = q_h[spec.name] if group_name == Q_H_GROUP else tables.columns.get(spec.path)
            if data is None:
                if spec.required:
                    raise AssertionError(f"normalize produced no {spec.path}")  # a bug here, not bad input
                continue
            chunking[spec.path] = _write_array(group, spec, data, config)
    manifest_path = store_dir / MANIFEST_FILENAME
    write_bytes_atomic(manifest_path, readable_json(manifest))
    # Commit last: the root attrs (with the manifest digest) are what a reader trusts.
    root.attrs.update({**extra, **_store_identity(config, tables), "manifest_sha256": manifest_sha256})
    counts = tables.counts
    return RolloutZarrWriteResult(
        store_dir=str(store_dir), num_rollouts=counts["rollouts"], num_steps=counts["steps"],
        num_candidates=counts["candidates"], num_sources=counts["sources"], num_targets=counts["targets"],
        manifest_path=str(manifest_path), manifest_sha256=manifest_sha256, chunking=chunking)


__all__ = [
    "MANIFEST_CONTEXT_KEYS", "SHARDED_ARRAYS", "SHARD_CHUNKS", "TARGET_CHUNK_BYTES", "WRITER_ROOT_ATTRS",
    "RolloutTables", "RolloutZarrWriteResult", "build_manifest", "normalize_rollout_records", "write_rollout_tables",
    "write_rollout_zarr_store",
]
