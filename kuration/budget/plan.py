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
from kuration.budget.fill import ADMITTED_REASONS, CODE, REASONS, FillSelection, fill_split, tiebreak_keys
from kuration.budget.options import SPLITS, BudgetError, BudgetOptions
from kuration.budget.spans import segment_items, span_items
from kuration.budget.split_pools import GroupOf, SplitPools, seeded_hash, pools_from_assignments, seeded_pools
from kuration.strategy import Strategy

#: Columns the plan adds to the items; ``reason`` is one of :data:`kuration.budget.fill.REASONS`.
DECISION_COLUMNS = ("split", "group", "reason", "admitted", "fill_rank", "reserved_for", "emitted_steps")
_STATUS_REASON = {"filtered": "filtered", "non_finite": "non_finite", "unscored": "unscored"}


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

    def admitted_ids(self) -> list[tuple[str, str, int]]:
        table = self.admitted()
        return list(zip(table.column("source_id").to_pylist(), table.column("entity_id").to_pylist(),
                        table.column(self.index_column).to_pylist()))


def _selection(strategy: Strategy) -> FillSelection:
    sel = strategy.selection
    if sel.tag_coverage and sel.min_tag_frac <= 0:
        raise BudgetError(
            "strategy.selection.min_tag_frac: is 0 with tag_coverage on, so the tag reserve could hold nothing; set "
            "a positive fraction of the budget (e.g. 0.1), or turn tag_coverage off"
        )
    return FillSelection(tuple(strategy.tags), sel.tag_coverage, sel.min_tag_frac, sel.max_group_overshoot)


def _per_item(column: pa.ChunkedArray, mapping: dict[str, Any], default: Any) -> tuple[np.ndarray, list[str]]:
    """Map a string column through ``mapping`` via its dictionary (one lookup per distinct value)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    names = encoded.dictionary.to_pylist()
    values = np.array([mapping.get(name, default) for name in names], dtype=object)
    return values[encoded.indices.to_numpy()] if len(encoded) else np.zeros(0, object), names


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


def _tiebreak(items: pa.Table, index_column: str, seed: int) -> np.ndarray:
    src = pc.dictionary_encode(items.column("source_id")).combine_chunks()
    ent = pc.dictionary_encode(items.column("entity_id")).combine_chunks()
    src_hash = np.array([seeded_hash(seed, f"s\0{v}") for v in src.dictionary.to_pylist()], np.uint64)
    ent_hash = np.array([seeded_hash(seed, f"e\0{v}") for v in ent.dictionary.to_pylist()], np.uint64)
    return tiebreak_keys(src.indices.to_numpy(), src_hash, ent.indices.to_numpy(), ent_hash,
                         items.column(index_column).to_numpy())


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
        raise BudgetError("group_of: resolved splits carry their own groups; pass split_assignments or group_of, not both")
    selection = _selection(strategy)
    clip = options.clip_aggregate or strategy.default_clip_aggregate
    counting = options.unit == "segments"
    items = segment_items(segments) if counting else span_items(segments, options, clip_aggregate=clip)
    index_column = "segment_index" if counting else "span_index"
    n = items.num_rows
    weight = np.ones(n) if counting else items.column("seconds").to_numpy().astype(np.float64)
    status = items.column("status").combine_chunks().cast(pa.string()).to_numpy(zero_copy_only=False) if n else np.zeros(0, object)
    requested = options.requested()

    sources = sorted(set(pc.unique(items.column("source_id")).to_pylist())) if n else []
    if split_assignments is not None:
        pools = pools_from_assignments(split_assignments, sources)
    else:
        ok = status == "ok"
        per_source: dict[str, float] = {s: 0.0 for s in sources}
        source_col = items.column("source_id").to_numpy(zero_copy_only=False) if n else np.zeros(0, object)
        for s, w in zip(source_col[ok], weight[ok]):
            per_source[s] += w
        pools = seeded_pools(per_source, requested, seed=options.seed, group_of=group_of) if sources else SplitPools({}, {}, "seeded_partition")
    split, _ = _per_item(items.column("source_id"), pools.split_of, "")
    group_name, _ = _per_item(items.column("source_id"), pools.group_of, "")
    group_codes = np.unique(group_name.astype(str), return_inverse=True)[1].astype(np.int64) if n else np.zeros(0, np.int64)

    reason = np.full(n, -1, np.int8)
    for st, why in _STATUS_REASON.items():
        reason[status == st] = CODE[why]
    reason[split == ""] = CODE["not_in_split"]
    fill_rank = np.full(n, -1, np.int64)
    reserved_for = np.full(n, None, dtype=object)
    priority = items.column("priority").to_numpy()
    tiebreak = _tiebreak(items, index_column, options.seed) if n else np.zeros(0, np.uint64)
    tag_items = _tag_items(items.column("tags"), selection.tags) if n else {t: np.zeros(0, np.int64) for t in selection.tags}
    fills = {}
    for name in SPLITS:
        candidates = np.flatnonzero((split == name) & (reason == -1))
        fills[name] = fill_split(
            name, candidates, priority=priority, tiebreak=tiebreak, weight=weight, group=group_codes,
            tag_items=tag_items, requested=requested[name], selection=selection, whole_units=counting,
            reason=reason, fill_rank=fill_rank, reserved_for=reserved_for,
        )
    assert (reason >= 0).all(), "every item gets a reason"
    admitted = np.isin(reason, [CODE[r] for r in ADMITTED_REASONS])
    steps = items.column("steps").to_numpy()
    emitted = np.where(admitted, options.chunking.emitted_steps(steps) if options.chunking else steps, 0)

    accounting = budget_accounting(
        items, reason=reason, split=split, weight=weight, emitted_steps=emitted, fills=fills, pools=pools,
        options=options, clip_aggregate=clip, tags=selection.tags, tag_items=tag_items,
    )
    decided = items.append_column("split", pa.array(np.where(split == "", None, split).tolist(), pa.string()))
    decided = decided.append_column("group", pa.array(np.where(group_name == "", None, group_name).tolist(), pa.string()))
    decided = decided.append_column("reason", pa.DictionaryArray.from_arrays(
        pa.array(reason.astype(np.int32)), pa.array(list(REASONS), pa.string())))
    decided = decided.append_column("admitted", pa.array(admitted))
    decided = decided.append_column("fill_rank", pa.array(fill_rank))
    decided = decided.append_column("reserved_for", pa.array(reserved_for.tolist(), pa.string()))
    decided = decided.append_column("emitted_steps", pa.array(emitted.astype(np.int64)))
    _assert_exclusive(decided)
    return BudgetPlan(decided, accounting, options, strategy.to_dict())


def _assert_exclusive(items: pa.Table) -> None:
    """By construction no source or group is admitted to two splits; assert it anyway, on
    the plan as it will be stored."""
    admitted = items.filter(items.column("admitted"))
    for key in ("source_id", "group"):
        pairs = admitted.group_by(key).aggregate([("split", "count_distinct")])
        bad = pairs.filter(pc.greater(pairs.column("split_count_distinct"), 1))
        if bad.num_rows:
            raise AssertionError(f"budget plan: {key} {bad.column(key)[0].as_py()!r} admitted to more than one split")


__all__ = ["BudgetPlan", "DECISION_COLUMNS", "plan_budget"]
