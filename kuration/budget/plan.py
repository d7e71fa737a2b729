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

from kuration.budget.accounting import budget_accounting
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
    index_column = "segment_index" if counting else "span_index"
    n = items.num_rows
    weight = np.ones(n) if counting else items.column("seconds").to_numpy().astype(np.float64)
    status = _status_codes(items.column("status"))
    requested = options.requested()

    # Everything per source is decided once per distinct source and then indexed by code.
    source_code, source_names = sorted_codes(items.column("source_id"))
    source_names = source_names.to_pylist()
    if split_assignments is not None:
        pools = pools_from_assignments(split_assignments, source_names)
    elif source_names:
        ok_weight = np.bincount(source_code, weights=np.where(status == STATUS_CODE["ok"], weight, 0.0),
                                minlength=len(source_names))
        pools = seeded_pools(dict(zip(source_names, ok_weight.tolist(), strict=True)), requested, seed=options.seed,
                             group_of=group_of)
    else:
        pools = SplitPools({}, {}, "seeded_partition")
    split_of_source = np.array([EXCLUSIVE_STAGES.index(pools.split_of[s]) if s in pools.split_of else -1
                                for s in source_names] + [-1], np.int8)
    group_names = sorted(set(pools.group_of.values()))
    group_index = {g: i for i, g in enumerate(group_names)}
    group_of_source = np.array([group_index[pools.group_of[s]] if s in pools.group_of else -1 for s in source_names]
                               + [-1], np.int64)
    split_code = split_of_source[source_code]
    group_code = group_of_source[source_code]

    reason = _STATUS_REASON[status]
    reason[split_code < 0] = CODE["not_in_split"]
    fill_rank = np.full(n, -1, np.int64)
    reserved_tag = np.full(n, -1, np.int16)
    priority = items.column("priority").to_numpy()
    tiebreak = _tiebreak(source_code, source_names, items, index_column, options.seed) if n else np.zeros(0, np.uint64)
    tag_items = _tag_items(items.column("tags"), selection.tags) if n else {t: np.zeros(0, np.int64)
                                                                            for t in selection.tags}
    fill_items = FillItems(priority, tiebreak, weight, group_code, tag_items, reason, fill_rank, reserved_tag)
    fills = {}
    for k, name in enumerate(EXCLUSIVE_STAGES):
        candidates = np.flatnonzero((split_code == k) & (reason == -1))
        fills[name] = fill_split(candidates, fill_items, requested=requested[name], selection=selection,
                                 whole_units=counting)
    assert (reason >= 0).all(), "every item gets a reason"
    admitted = reason_in(reason, ADMITTED_REASONS)
    _assert_exclusive(admitted, source_code, group_code, split_code)
    steps = items.column("steps").to_numpy()
    emitted = np.where(admitted, options.chunking.emitted_steps(steps) if options.chunking else steps, 0)

    accounting = budget_accounting(
        items, reason=reason, split_code=split_code, source_code=source_code, weight=weight, emitted_steps=emitted,
        fills=fills, pools=pools, options=options, clip_aggregate=clip, tags=selection.tags, tag_items=tag_items,
    )
    per_source_split = pa.array([None if k < 0 else EXCLUSIVE_STAGES[k] for k in split_of_source[:-1]] + [None],
                                pa.string())
    per_source_group = pa.array([None if g < 0 else group_names[g] for g in group_of_source[:-1]] + [None], pa.string())
    code_array = pa.array(source_code) if n else pa.array([], pa.int64())
    tags_wanted = list(selection.tags)
    decided = items.append_column("split", per_source_split.take(code_array))
    decided = decided.append_column("group", per_source_group.take(code_array))
    decided = decided.append_column("reason", pa.DictionaryArray.from_arrays(
        pa.array(reason.astype(np.int32)), pa.array(list(REASONS), pa.string())))
    decided = decided.append_column("admitted", pa.array(admitted))
    decided = decided.append_column("fill_rank", pa.array(fill_rank))
    decided = decided.append_column("reserved_for", pa.array(tags_wanted + [None], pa.string()).take(
        pa.array(np.where(reserved_tag < 0, len(tags_wanted), reserved_tag))))
    decided = decided.append_column("emitted_steps", pa.array(emitted.astype(np.int64)))
    return BudgetPlan(decided, accounting, options, strategy.to_dict())


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
