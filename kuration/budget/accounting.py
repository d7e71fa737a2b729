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


def budget_accounting(
    items: pa.Table,
    *,
    reason: np.ndarray,
    split_code: np.ndarray,
    source_code: np.ndarray,
    weight: np.ndarray,
    emitted_steps: np.ndarray,
    fills: dict[str, SplitFill],
    pools: SplitPools,
    options: BudgetOptions,
    clip_aggregate: str,
    tags: tuple[str, ...],
    tag_items: dict[str, np.ndarray],
) -> dict[str, Any]:
    """The budget block for a plan. ``split_code`` is each item's index into :data:`EXCLUSIVE_STAGES`
    (-1 for none), ``source_code`` its source's code."""
    unit = options.unit
    seconds = items.column("seconds").to_numpy()
    present = items.column("present_seconds").to_numpy()
    hz = items.column("sample_hz").to_numpy()
    steps = items.column("steps").to_numpy()
    emitted_seconds = emitted_steps / hz
    # Reason masks built once, each in one pass; per split they are only and-ed with it.
    admitted = reason_in(reason, ADMITTED_REASONS)
    considered = reason_in(reason, CANDIDATE_REASONS)
    unrankable = reason_in(reason, UNRANKABLE)
    requested = options.requested()
    blocks: dict[str, Any] = {}
    for k, name in enumerate(EXCLUSIVE_STAGES):
        fill = fills[name]
        in_split = split_code == k
        candidate = in_split & considered
        took = in_split & admitted
        admitted_amount = float(weight[took].sum()) if took.any() else 0.0
        emitted_amount = (_sum(took, emitted_seconds) if unit == "seconds"
                          else float(np.count_nonzero(took & (emitted_steps > 0))))
        underfill = max(0.0, requested[name] - admitted_amount)
        blocks[name] = {
            "requested": requested[name],
            "pool": _sum(in_split, weight),
            "candidate": _sum(candidate, weight),
            "admitted": admitted_amount,
            "emitted": emitted_amount,
            "requested_seconds": requested[name] if unit == "seconds" else None,
            "pool_seconds": _sum(in_split, seconds),
            "candidate_seconds": _sum(candidate, seconds),
            "admitted_seconds": _sum(took, seconds),
            "emitted_seconds": _sum(took, emitted_seconds),
            "dropped_tail_seconds": _sum(took, (steps - emitted_steps) / hz),
            "pool_present_seconds": _sum(in_split, present),
            "candidate_present_seconds": _sum(candidate, present),
            "admitted_present_seconds": _sum(took, present),
            "lost_present_seconds": _sum(in_split & unrankable, present),
            "items": {
                "pool": int(in_split.sum()), "candidate": int(candidate.sum()), "admitted": int(took.sum()),
                "reserved": int((in_split & (reason == CODE["reserved"])).sum()),
            },
            "underfill": underfill,
            "underfill_fraction": underfill / requested[name] if requested[name] > 0 else 0.0,
            "utilization": admitted_amount / requested[name] if requested[name] > 0 else None,
            "overshoot": max(0.0, admitted_amount - requested[name]),
            "last_admitted": fill.last_admitted,
            "groups": fill.groups,
            "group_cap": fill.group_cap,
            "reserve_bound": fill.reserve_bound if fill.tags else None,
            "sources_admitted": int(np.count_nonzero(np.bincount(source_code[took]))),
            "excluded": {
                r: {"items": int(m.sum()), "seconds": _sum(m, seconds), "present_seconds": _sum(m, present)}
                for r in SPLIT_EXCLUSIONS for m in [in_split & (reason == CODE[r])]
            },
            "tag_coverage": _tag_coverage(fill, tags, tag_items, took),
        }
    outside = reason == CODE["not_in_split"]
    return {
        "unit": unit,
        "clip_aggregate": clip_aggregate,
        "span_steps": options.span_steps,
        "span_seconds": options.span_seconds,
        "chunking": None if options.chunking is None else options.to_dict()["chunking"],
        "seed": options.seed,
        "pools": {
            "origin": pools.origin,
            "sources": {s: sum(1 for v in pools.split_of.values() if v == s) for s in EXCLUSIVE_STAGES},
            "groups": {s: len({pools.group_of[src] for src, v in pools.split_of.items() if v == s})
                       for s in EXCLUSIVE_STAGES},
        },
        "not_in_split": {
            "sources": len(pools.not_in_split), "items": int(outside.sum()), "seconds": _sum(outside, seconds),
            "examples": list(pools.not_in_split[:EXAMPLES]),
        },
        "splits": blocks,
        "totals": {
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
        },
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


__all__ = ["SPLIT_EXCLUSIONS", "budget_accounting"]
