"""The budget block: per split, what was requested, what the pool offered, what was
admitted and what the writer will emit, and every exclusion by reason.

This block is the contract later written into the dataset manifest's budget block and
``config.json``. Amounts in the request's unit (seconds for hours, segments for a count)
are plain keys (``requested``, ``candidate``, ``admitted``, ``emitted``, ``underfill``,
``overshoot``, ``last_admitted``, ``group_cap``, ``reserve_bound``); seconds are always
given as well (``*_seconds``).

Present data. An item's seconds count every step, the entity's absent ones included; its
``present_seconds`` (see :mod:`kuration.budget.spans`) count the steps it was seen. Per split
the block gives the present seconds of the pool, the candidates and the admitted items,
every exclusion's present seconds, and ``lost_present_seconds``: the present data in items
that could not be ranked at all (``non_finite``, ``unscored``, ``absent``), as opposed to
items the budget, the group cap or the strategy's predicates left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.budget.fill import ADMITTED_REASONS, CANDIDATE_REASONS, CODE, REASONS, SplitFill, reason_in
from kuration.budget.options import BudgetOptions
from kuration.budget.spans import UNRANKABLE
from kuration.budget.split_pools import SplitPools
from kuration.splits.stages import EXCLUSIVE_STAGES

#: Exclusions reported per split: every reason but admission and ``not_in_split`` (which has
#: no split and is reported once). The :data:`~kuration.budget.spans.UNRANKABLE` ones hold
#: the present data the plan lost.
SPLIT_EXCLUSIONS = tuple(r for r in REASONS if r not in (*ADMITTED_REASONS, "not_in_split"))
EXAMPLES = 10


def _sum(mask: np.ndarray, values: np.ndarray) -> float:
    return float(values[mask].sum()) if mask.any() else 0.0


@dataclass(frozen=True)
class ItemDecisions:
    """What a plan decided for each item, as parallel arrays in the items' canonical order."""

    #: The item's :data:`~kuration.budget.fill.CODE`.
    reason: np.ndarray
    #: Index into :data:`EXCLUSIVE_STAGES`, -1 for none.
    split_code: np.ndarray
    #: The item's source's code.
    source_code: np.ndarray
    #: What the item costs the budget: seconds, or 1 per segment for a count.
    weight: np.ndarray
    #: Real steps the writer emits for it (0 unless admitted).
    emitted_steps: np.ndarray
    #: Tag -> the ascending items carrying it.
    tag_items: dict[str, np.ndarray]


@dataclass(frozen=True)
class _Measures:
    """The per-item amounts and reason masks every split's block sums, computed once; per
    split they are only and-ed with its mask."""

    seconds: np.ndarray
    present: np.ndarray
    emitted_seconds: np.ndarray
    dropped_tail_seconds: np.ndarray
    admitted: np.ndarray
    considered: np.ndarray
    unrankable: np.ndarray

    @classmethod
    def of(cls, items: pa.Table, decisions: ItemDecisions) -> _Measures:
        hz = items.column("sample_hz").to_numpy()
        steps = items.column("steps").to_numpy()
        reason = decisions.reason
        return cls(
            seconds=items.column("seconds").to_numpy(),
            present=items.column("present_seconds").to_numpy(),
            emitted_seconds=decisions.emitted_steps / hz,
            dropped_tail_seconds=(steps - decisions.emitted_steps) / hz,
            admitted=reason_in(reason, ADMITTED_REASONS),
            considered=reason_in(reason, CANDIDATE_REASONS),
            unrankable=reason_in(reason, UNRANKABLE),
        )


def budget_accounting(
    items: pa.Table,
    decisions: ItemDecisions,
    *,
    fills: dict[str, SplitFill],
    pools: SplitPools,
    options: BudgetOptions,
    clip_aggregate: str,
    tags: tuple[str, ...],
) -> dict[str, Any]:
    """The budget block for a plan: the request, the pools, one block per split and the totals."""
    unit = options.unit
    measures = _Measures.of(items, decisions)
    requested = options.requested()
    blocks = {name: _split_block(k, requested[name], fills[name], decisions, measures, unit=unit, tags=tags)
              for k, name in enumerate(EXCLUSIVE_STAGES)}
    reason = decisions.reason
    outside = reason == CODE["not_in_split"]
    return {
        "unit": unit,
        "clip_aggregate": clip_aggregate,
        "span_steps": options.span_steps,
        "span_seconds": options.span_seconds,
        "chunking": None if options.chunking is None else options.to_dict()["chunking"],
        "seed": options.seed,
        "pools": _pools_block(pools),
        "not_in_split": {
            "sources": len(pools.not_in_split), "items": int(outside.sum()), "seconds": _sum(outside, measures.seconds),
            "examples": list(pools.not_in_split[:EXAMPLES]),
        },
        "splits": blocks,
        "totals": _totals(blocks, reason, unit),
    }


def _split_block(k: int, requested: float, fill: SplitFill, decisions: ItemDecisions, measures: _Measures, *,
                 unit: str, tags: tuple[str, ...]) -> dict[str, Any]:
    """The block of split ``k`` (its index into :data:`EXCLUSIVE_STAGES`)."""
    reason, weight, seconds, present = decisions.reason, decisions.weight, measures.seconds, measures.present
    in_split = decisions.split_code == k
    candidate = in_split & measures.considered
    took = in_split & measures.admitted
    admitted_amount = float(weight[took].sum()) if took.any() else 0.0
    emitted_amount = (_sum(took, measures.emitted_seconds) if unit == "seconds"
                      else float(np.count_nonzero(took & (decisions.emitted_steps > 0))))
    underfill = max(0.0, requested - admitted_amount)
    return {
        "requested": requested,
        "pool": _sum(in_split, weight),
        "candidate": _sum(candidate, weight),
        "admitted": admitted_amount,
        "emitted": emitted_amount,
        "requested_seconds": requested if unit == "seconds" else None,
        "pool_seconds": _sum(in_split, seconds),
        "candidate_seconds": _sum(candidate, seconds),
        "admitted_seconds": _sum(took, seconds),
        "emitted_seconds": _sum(took, measures.emitted_seconds),
        "dropped_tail_seconds": _sum(took, measures.dropped_tail_seconds),
        "pool_present_seconds": _sum(in_split, present),
        "candidate_present_seconds": _sum(candidate, present),
        "admitted_present_seconds": _sum(took, present),
        "lost_present_seconds": _sum(in_split & measures.unrankable, present),
        "items": {
            "pool": int(in_split.sum()), "candidate": int(candidate.sum()), "admitted": int(took.sum()),
            "reserved": int((in_split & (reason == CODE["reserved"])).sum()),
        },
        "underfill": underfill,
        "underfill_fraction": underfill / requested if requested > 0 else 0.0,
        "utilization": admitted_amount / requested if requested > 0 else None,
        "overshoot": max(0.0, admitted_amount - requested),
        "last_admitted": fill.last_admitted,
        "groups": fill.groups,
        "group_cap": fill.group_cap,
        "reserve_bound": fill.reserve_bound if fill.tags else None,
        "sources_admitted": int(np.count_nonzero(np.bincount(decisions.source_code[took]))),
        "excluded": {
            r: {"items": int(m.sum()), "seconds": _sum(m, seconds), "present_seconds": _sum(m, present)}
            for r in SPLIT_EXCLUSIONS for m in [in_split & (reason == CODE[r])]
        },
        "tag_coverage": _tag_coverage(fill, tags, decisions.tag_items, took),
    }


def _pools_block(pools: SplitPools) -> dict[str, Any]:
    """Where the pools came from, and how many sources and groups each split holds."""
    return {
        "origin": pools.origin,
        "sources": {s: sum(1 for v in pools.split_of.values() if v == s) for s in EXCLUSIVE_STAGES},
        "groups": {s: len({pools.group_of[src] for src, v in pools.split_of.items() if v == s})
                   for s in EXCLUSIVE_STAGES},
    }


def _totals(blocks: dict[str, dict[str, Any]], reason: np.ndarray, unit: str) -> dict[str, Any]:
    """The splits' amounts summed, and the exclusions counted over every item."""
    return {
        "requested_seconds": sum(b["requested_seconds"] or 0.0
                                 for b in blocks.values()) if unit == "seconds" else None,
        "admitted_seconds": sum(b["admitted_seconds"] for b in blocks.values()),
        "emitted_seconds": sum(b["emitted_seconds"] for b in blocks.values()),
        "dropped_tail_seconds": sum(b["dropped_tail_seconds"] for b in blocks.values()),
        "admitted_present_seconds": sum(b["admitted_present_seconds"] for b in blocks.values()),
        "lost_present_seconds": sum(b["lost_present_seconds"] for b in blocks.values()),
        "non_finite_items": int((reason == CODE["non_finite"]).sum()),
        "absent_items": int((reason == CODE["absent"]).sum()),
        "filtered_items": int((reason == CODE["filtered"]).sum()),
        "group_cap_items": int((reason == CODE["group_cap"]).sum()),
    }


def _tag_coverage(fill: SplitFill, tags: tuple[str, ...], tag_items: dict[str, np.ndarray],
                  took: np.ndarray) -> dict[str, dict]:
    out = {}
    for tag in tags:
        carriers = tag_items.get(tag, np.zeros(0, np.int64))
        entry = {"admitted_items": int(took[carriers].sum()) if len(carriers) else 0}
        reserve = fill.tags.get(tag)
        if reserve is not None:
            entry["reserve"] = reserve["reserve"]
        out[tag] = entry
    return out


__all__ = ["SPLIT_EXCLUSIONS", "ItemDecisions", "budget_accounting"]
