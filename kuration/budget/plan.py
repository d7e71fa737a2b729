"""``plan_budget``: scored segments in, the admitted spans and their accounting out.

Plan, then act: this decides *what* the writer will emit (which spans of which tracks, in
which split) without reading a single recording, so a plan can be reviewed, checked and
stored before any shard is written. The steps, each in its own module:

1. items (:mod:`kuration.budget.spans`): spans for hours, segments for a count;
2. pools (:mod:`kuration.budget.split_pools`): each source in exactly one split;
3. fill (:mod:`kuration.budget.fill`): per split, best first, with the tag reserve, the
   group cap and the one-span boundary;
4. accounting (:mod:`kuration.budget.accounting`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration.budget.accounting import ItemDecisions, budget_accounting
from kuration.budget.fill import (
    ADMITTED_REASONS, CODE, REASONS, FillItems, FillSelection, fill_split, reason_in, tiebreak_keys,
)
from kuration.budget.options import BudgetOptions
from kuration.budget.spans import STATUS_CODE, STATUSES, segment_items, sorted_codes, span_items
from kuration.budget.split_pools import GroupOf, SplitPools, seeded_hash, pools_from_assignments, seeded_pools
from kuration.errors import BudgetError
from kuration.scoring.strategy import Strategy
from kuration.splits.stages import EXCLUSIVE_STAGES

#: Indexed by status code: an item that is not ``ok`` has the reason of its status's name;
#: an ``ok`` one (-1) is left to the fill.
_STATUS_REASON = np.array([-1 if name == "ok" else CODE[name] for name in STATUSES], np.int8)


@dataclass(frozen=True)
class BudgetPlan:
    """Every item (span or segment) with its split, group and decision, and the budget
    block (:func:`kuration.budget.accounting.budget_accounting`).

    ``items`` is in canonical order (source, entity, index); ``index_column`` is
    ``span_index`` for hours and ``segment_index`` for a count. Admitted ids are
    ``(source_id, entity_id, <index_column>)``.
    """

    items: pa.Table
    accounting: dict[str, Any]
    options: BudgetOptions
    strategy: dict[str, Any]

    @property
    def index_column(self) -> str:
        return "segment_index" if self.options.unit == "segments" else "span_index"

    def admitted(self) -> pa.Table:
        """The admitted items, in canonical (source, entity, index) order."""
        return self.items.filter(self.items.column("admitted"))


def _selection(strategy: Strategy) -> FillSelection:
    sel = strategy.selection
    if sel.tag_coverage and sel.min_tag_frac <= 0:
        raise BudgetError(
            "strategy.selection.min_tag_frac: is 0 with tag_coverage on, so the tag reserve could hold nothing; set "
            "a positive fraction of the budget (e.g. 0.1), or turn tag_coverage off"
        )
    return FillSelection(tuple(strategy.tags), sel.tag_coverage, sel.min_tag_frac, sel.max_group_overshoot)


def _status_codes(column: pa.ChunkedArray) -> np.ndarray:
    """The items' status as codes into :data:`STATUSES`, whatever dictionary the column uses."""
    array = column.combine_chunks()
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    lookup = np.array([STATUS_CODE[name] for name in array.dictionary.to_pylist()] or [0], np.int8)
    return lookup[array.indices.to_numpy()] if len(array) else np.zeros(0, np.int8)


def _tag_items(tags: pa.ChunkedArray, wanted: tuple[str, ...]) -> dict[str, np.ndarray]:
    """For each wanted tag, the ascending item indices that carry it."""
    array = tags.combine_chunks()
    flat = pc.list_flatten(array)
    owner = pc.list_parent_indices(array).to_numpy()
    out = {}
    for tag in wanted:
        hits = pc.equal(flat, tag).to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0, bool)
        out[tag] = np.unique(owner[hits]).astype(np.int64)
    return out


def _tiebreak(source_code: np.ndarray, source_names: list[str], items: pa.Table, index_column: str,
              seed: int) -> np.ndarray:
    # Entity names coded chunk by chunk (a chunk holds a handful of names), so the column is
    # never copied into one array first.
    codes: list[np.ndarray] = []
    names: list[str] = []
    for chunk in items.column("entity_id").chunks:
        encoded = pc.dictionary_encode(chunk)
        codes.append(encoded.indices.to_numpy().astype(np.int64) + len(names))
        names += encoded.dictionary.to_pylist()
    src_hash = np.array([seeded_hash(seed, f"s\0{v}") for v in source_names], np.uint64)
    ent_hash = np.array([seeded_hash(seed, f"e\0{v}") for v in names], np.uint64)
    return tiebreak_keys(source_code, src_hash, np.concatenate(codes), ent_hash, items.column(index_column).to_numpy())


@dataclass(frozen=True)
class _SourcePools:
    """Each item's source as a code, and each source's split and group (decided once per
    distinct source, then indexed by code)."""

    #: Distinct source ids in code order (sorted).
    names: list[str]
    #: Per item: its source's code.
    code: np.ndarray
    pools: SplitPools
    #: Per source code, then one -1 for "none": index into :data:`EXCLUSIVE_STAGES`.
    split_of_source: np.ndarray
    #: Sorted group names.
    group_names: list[str]
    #: Per source code, then one -1 for "none": index into :attr:`group_names`.
    group_of_source: np.ndarray
    #: Per item: its split's index into :data:`EXCLUSIVE_STAGES`, -1 for none.
    split_code: np.ndarray
    #: Per item: its group's index into :attr:`group_names`, -1 for none.
    group_code: np.ndarray


def plan_budget(
    segments: pa.Table,
    options: BudgetOptions,
    *,
    strategy: Strategy,
    split_assignments: pa.Table | None = None,
    group_of: GroupOf = None,
) -> BudgetPlan:
    """Plan the budget over ``segments`` (scored segment tables of any number of sources,
    in any order). With ``split_assignments`` (resolved splits) the pools follow the split;
    without, sources are partitioned by ``group_of`` with ``options.seed``. Raises
    :class:`BudgetError` on an invalid request, before filling anything."""
    if split_assignments is not None and group_of is not None:
        raise BudgetError("group_of: resolved splits carry their own groups; pass split_assignments or group_of, not "
                          "both")
    selection = _selection(strategy)
    clip = options.clip_aggregate or strategy.default_clip_aggregate
    counting = options.unit == "segments"
    items = segment_items(segments) if counting else span_items(segments, options, clip_aggregate=clip)
    weight = np.ones(items.num_rows) if counting else items.column("seconds").to_numpy().astype(np.float64)
    status = _status_codes(items.column("status"))
    sources = _source_pools(items, status, weight, options, split_assignments=split_assignments, group_of=group_of)
    split_code = sources.split_code
    fill_items = _fill_items(items, sources, weight, status, selection,
                             index_column="segment_index" if counting else "span_index", seed=options.seed)
    requested = options.requested()
    fills = {}
    for k, name in enumerate(EXCLUSIVE_STAGES):
        candidates = np.flatnonzero((split_code == k) & (fill_items.reason == -1))
        fills[name] = fill_split(candidates, fill_items, requested=requested[name], selection=selection,
                                 whole_units=counting)
    reason = fill_items.reason
    assert (reason >= 0).all(), "every item gets a reason"
    admitted = reason_in(reason, ADMITTED_REASONS)
    _assert_exclusive(admitted, sources.code, sources.group_code, split_code)
    steps = items.column("steps").to_numpy()
    emitted = np.where(admitted, options.chunking.emitted_steps(steps) if options.chunking else steps, 0)

    decisions = ItemDecisions(reason=reason, split_code=split_code, source_code=sources.code, weight=weight,
                              emitted_steps=emitted, tag_items=fill_items.tag_items)
    accounting = budget_accounting(items, decisions, fills=fills, pools=sources.pools, options=options,
                                   clip_aggregate=clip, tags=selection.tags)
    decided = _decided_items(items, sources, fill_items, admitted, emitted, tags=selection.tags)
    return BudgetPlan(decided, accounting, options, strategy.to_dict())


def _source_pools(items: pa.Table, status: np.ndarray, weight: np.ndarray, options: BudgetOptions, *,
                  split_assignments: pa.Table | None, group_of: GroupOf) -> _SourcePools:
    """Every source in one split pool: the resolved split's, else a seeded partition of the
    groups weighed by their rankable items."""
    source_code, source_names = sorted_codes(items.column("source_id"))
    names = source_names.to_pylist()
    if split_assignments is not None:
        pools = pools_from_assignments(split_assignments, names)
    elif names:
        ok_weight = np.bincount(source_code, weights=np.where(status == STATUS_CODE["ok"], weight, 0.0),
                                minlength=len(names))
        pools = seeded_pools(dict(zip(names, ok_weight.tolist(), strict=True)), options.requested(),
                             seed=options.seed, group_of=group_of)
    else:
        pools = SplitPools({}, {}, "seeded_partition")
    split_of_source = np.array([EXCLUSIVE_STAGES.index(pools.split_of[s]) if s in pools.split_of else -1
                                for s in names] + [-1], np.int8)
    group_names = sorted(set(pools.group_of.values()))
    group_index = {g: i for i, g in enumerate(group_names)}
    group_of_source = np.array([group_index[pools.group_of[s]] if s in pools.group_of else -1 for s in names]
                               + [-1], np.int64)
    return _SourcePools(names, source_code, pools, split_of_source, group_names, group_of_source,
                        split_of_source[source_code], group_of_source[source_code])


def _fill_items(items: pa.Table, sources: _SourcePools, weight: np.ndarray, status: np.ndarray,
                selection: FillSelection, *, index_column: str, seed: int) -> FillItems:
    """The arrays the fill reads and writes. An item's reason starts as its status's, or
    ``not_in_split``; the fill decides the rest (-1)."""
    n = items.num_rows
    reason = _STATUS_REASON[status]
    reason[sources.split_code < 0] = CODE["not_in_split"]
    priority = items.column("priority").to_numpy()
    tiebreak = (_tiebreak(sources.code, sources.names, items, index_column, seed) if n
                else np.zeros(0, np.uint64))
    tag_items = (_tag_items(items.column("tags"), selection.tags) if n
                 else {t: np.zeros(0, np.int64) for t in selection.tags})
    return FillItems(priority, tiebreak, weight, sources.group_code, tag_items, reason, np.full(n, -1, np.int64),
                     np.full(n, -1, np.int16))


def _decided_items(items: pa.Table, sources: _SourcePools, fill_items: FillItems, admitted: np.ndarray,
                   emitted: np.ndarray, *, tags: tuple[str, ...]) -> pa.Table:
    """``items`` with the plan's decision columns: split, group, reason, admitted,
    fill_rank, reserved_for and emitted_steps."""
    n = items.num_rows
    per_source_split = pa.array([None if k < 0 else EXCLUSIVE_STAGES[k] for k in sources.split_of_source[:-1]]
                                + [None], pa.string())
    per_source_group = pa.array([None if g < 0 else sources.group_names[g] for g in sources.group_of_source[:-1]]
                                + [None], pa.string())
    code_array = pa.array(sources.code) if n else pa.array([], pa.int64())
    tags_wanted = list(tags)
    reserved_tag = fill_items.reserved_tag
    decided = items.append_column("split", per_source_split.take(code_array))
    decided = decided.append_column("group", per_source_group.take(code_array))
    decided = decided.append_column("reason", pa.DictionaryArray.from_arrays(
        pa.array(fill_items.reason.astype(np.int32)), pa.array(list(REASONS), pa.string())))
    decided = decided.append_column("admitted", pa.array(admitted))
    decided = decided.append_column("fill_rank", pa.array(fill_items.fill_rank))
    decided = decided.append_column("reserved_for", pa.array(tags_wanted + [None], pa.string()).take(
        pa.array(np.where(reserved_tag < 0, len(tags_wanted), reserved_tag))))
    return decided.append_column("emitted_steps", pa.array(emitted.astype(np.int64)))


def _assert_exclusive(admitted: np.ndarray, source_code: np.ndarray, group_code: np.ndarray,
                      split_code: np.ndarray) -> None:
    """By construction no source or group is admitted to two splits; assert it anyway."""
    split = split_code[admitted]
    for what, code in (("source", source_code), ("group", group_code)):
        code = code[admitted] + 1  # group -1 (none) counts as a code of its own
        # Splits per code by counting, linear in the items (a unique over pairs sorts them).
        splits_of = sum((np.bincount(code[split == k], minlength=int(code.max(initial=0)) + 1) > 0).astype(np.int64)
                        for k in np.unique(split))
        if np.any(splits_of > 1):
            raise AssertionError(f"budget plan: a {what} was admitted to more than one split")


__all__ = ["BudgetPlan", "plan_budget"]
