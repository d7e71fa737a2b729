"""``hours_selection_review``: why each item was or was not admitted, without rescoring.

It reads only a plan's items and budget block (from a :class:`BudgetPlan`, anything that
carries one as ``.budget_plan``, or a storage root holding a stored plan) and explains:
per split, utilization and underfill, the present data lost to items that could not be
ranked; the priorities at the cut (the lowest admitted and
the best left out); counts and seconds per reason; tag coverage; and a bounded set of
example items per split (the best admitted, the reserved, the last admitted, the first
left out for budget or group cap, and filtered or non-finite ones). ``explain`` answers for
one item. Renders as text (:meth:`SelectionReview.render`) and as a dict (:meth:`to_dict`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration.budget.fill import ADMITTED_REASONS, REASONS
from kuration.budget.plan import BudgetPlan
from kuration.budget.plan_store import read_budget_plan
from kuration.errors import BudgetError
from kuration.numbers import format_hours, format_number, format_percent
from kuration.splits.stages import EXCLUSIVE_STAGES

_WHY = {
    "reserved": "admitted first as the best {tag} item, so the tag survives the cut",
    "admitted": "admitted: fill rank {rank} with priority {priority:.6g}, while the split was below its budget",
    "budget_full": "not admitted: the {split} budget was reached before its turn (fill rank {rank}, priority "
                   "{priority:.6g})",
    "group_cap": "not admitted: group {group!r} would have gone over the {split} group cap while the budget had room",
    "not_requested": "not admitted: the {split} split requests nothing",
    "filtered": "never admissible: every overlapping segment failed the strategy's predicates (priority -inf)",
    "non_finite": "never admissible: a NaN or +inf priority among its segments; fix the feature, then re-score",
    "unscored": "never admissible: no scored segment overlaps it (a gap between windows, or a table whose segments do "
                "not cover the track)",
    "absent": "never admissible: its entity is absent from every window overlapping it, so there is nothing to rank",
    "not_in_split": "never admissible: its source is in none of the resolved splits",
}


def _plan_of(result: Any) -> BudgetPlan:
    if isinstance(result, BudgetPlan):
        return result
    plan = getattr(result, "budget_plan", None)
    if isinstance(plan, BudgetPlan):
        return plan
    if isinstance(result, (str, os.PathLike)):
        return read_budget_plan(result)
    raise BudgetError(
        f"hours_selection_review: needs a BudgetPlan, a result carrying one as .budget_plan, or a storage root; got "
        f"{type(result).__name__}"
    )


@dataclass(frozen=True)
class SelectionReview:
    plan: BudgetPlan
    max_examples: int = 5

    @property
    def unit(self) -> str:
        return self.plan.accounting["unit"]

    def _key(self, table: pa.Table, row: int) -> dict[str, Any]:
        index = self.plan.index_column
        out = {c: table.column(c)[row].as_py() for c in
               ("source_id", "entity_id", index, "split", "group", "priority", "seconds", "fill_rank", "tags")}
        out["reason"] = table.column("reason")[row].as_py()
        out["why"] = self._why(out, table.column("reserved_for")[row].as_py())
        return out

    def _why(self, item: dict[str, Any], tag: str | None) -> str:
        priority = item["priority"]
        return _WHY[item["reason"]].format(
            tag=repr(tag), rank=item["fill_rank"], priority=priority if priority is not None else float("nan"),
            split=item["split"], group=item["group"])

    def _examples(self, table: pa.Table, reason: str, *, last: bool = False) -> list[dict[str, Any]]:
        mine = table.filter(pc.equal(table.column("reason").cast(pa.string()), reason))
        if not mine.num_rows:
            return []
        rank = mine.column("fill_rank").to_numpy()
        order = np.argsort(rank, kind="stable")
        rows = order[-self.max_examples:][::-1] if last else order[: self.max_examples]
        return [self._key(mine, int(r)) for r in rows]

    def split_review(self, name: str) -> dict[str, Any]:
        block = self.plan.accounting["splits"][name]
        items = self.plan.items
        mine = items.filter(pc.equal(items.column("split"), name)) if items.num_rows else items
        priority = mine.column("priority").to_numpy() if mine.num_rows else np.zeros(0)
        reasons = (mine.column("reason").cast(pa.string()).to_numpy(zero_copy_only=False) if mine.num_rows
                   else np.zeros(0, object))
        admitted = np.isin(reasons, ADMITTED_REASONS)
        left_out = reasons == "budget_full"
        return {
            "requested": block["requested"], "candidate": block["candidate"], "admitted": block["admitted"],
            "emitted": block["emitted"], "utilization": block["utilization"], "underfill": block["underfill"],
            "dropped_tail_seconds": block["dropped_tail_seconds"],
            "admitted_present_seconds": block.get("admitted_present_seconds"),
            "lost_present_seconds": block.get("lost_present_seconds"),
            "priority": {
                "admitted_max": float(priority[admitted].max()) if admitted.any() else None,
                "admitted_min": float(priority[admitted].min()) if admitted.any() else None,
                "best_left_out": float(priority[left_out].max()) if left_out.any() else None,
            },
            "reasons": {r: v for r, v in block["excluded"].items() if v["items"]} | {
                "admitted": {"items": block["items"]["admitted"], "seconds": block["admitted_seconds"]}},
            "tag_coverage": block["tag_coverage"],
            "group_cap": block["group_cap"],
            "examples": {
                "best_admitted": self._examples(mine, "admitted"),
                "reserved": self._examples(mine, "reserved"),
                "last_admitted": self._examples(mine, "admitted", last=True)[:1],
                "first_left_out": self._examples(mine, "budget_full"),
                "group_cap": self._examples(mine, "group_cap"),
                "filtered": self._examples(mine, "filtered"),
                "non_finite": self._examples(mine, "non_finite"),
            },
        }

    def to_dict(self) -> dict[str, Any]:
        acc = self.plan.accounting
        return {
            "unit": self.unit,
            "clip_aggregate": acc["clip_aggregate"],
            "spans": {"span_steps": acc["span_steps"], "span_seconds": acc["span_seconds"]},
            "pools": acc["pools"],
            "not_in_split": acc["not_in_split"],
            "splits": {name: self.split_review(name) for name in EXCLUSIVE_STAGES},
        }

    def explain(self, source_id: str, entity_id: str, index: int) -> str:
        """One item's decision in a sentence (raises ``KeyError`` for an unknown item)."""
        items = self.plan.items
        mask = pc.and_(pc.and_(pc.equal(items.column("source_id"), source_id),
                               pc.equal(items.column("entity_id"), entity_id)),
                       pc.equal(items.column(self.plan.index_column), index))
        rows = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
        if not len(rows):
            raise KeyError(f"no item {source_id!r} / {entity_id!r} / {self.plan.index_column} {index} in this plan")
        item = self._key(items, int(rows[0]))
        return (f"{source_id} / {entity_id} / {self.plan.index_column} {index} ({item['split'] or 'no split'}): "
                f"{item['why']}")

    def render(self) -> str:
        data = self.to_dict()
        unit = self.unit
        fmt = _duration if unit == "seconds" else (lambda v: f"{v:g} segments")
        spans = data["spans"]
        span = (f"{spans['span_steps']}-step spans" if spans["span_steps"] else
                f"{spans['span_seconds']:g} s spans" if spans["span_seconds"] else "whole-track spans")
        lines = [f"budget review ({span}, clip_aggregate {data['clip_aggregate']}, pools from "
                 f"{data['pools']['origin']})"]
        if data["not_in_split"]["sources"]:
            lines.append(f"  {data['not_in_split']['sources']} scored source(s) in no split, e.g. "
                         f"{data['not_in_split']['examples'][:3]}")
        for name, split in data["splits"].items():
            if not split["requested"] and not split["candidate"]:
                continue
            util = "n/a" if split["utilization"] is None else format_percent(split["utilization"])
            lines.append(f"{name}: requested {fmt(split['requested'])}, admitted {fmt(split['admitted'])} ({util}), "
                         f"emitted {fmt(split['emitted'])}, candidates {fmt(split['candidate'])}")
            if split["underfill"]:
                lines.append(f"  underfilled by {fmt(split['underfill'])}: the pool ran out of admissible items")
            if split["lost_present_seconds"]:
                lines.append(f"  present data lost in items that could not be ranked (non_finite, unscored, absent): "
                             f"{_duration(split['lost_present_seconds'])}")
            p = split["priority"]
            if p["admitted_min"] is not None:
                cut = "" if p["best_left_out"] is None else f"; best left out {p['best_left_out']:.6g}"
                lines.append(f"  priority of admitted {p['admitted_min']:.6g} .. {p['admitted_max']:.6g}{cut}")
            lines.append("  " + ", ".join(f"{r} {v['items']}" for r, v in split["reasons"].items()))
            covered = [f"{t} in {c['admitted_items']} admitted"
                       + (f" (reserve: {c['reserve']})" if "reserve" in c else "")
                       for t, c in split["tag_coverage"].items()]
            if covered:
                lines.append("  tags: " + ", ".join(covered))
            for kind, examples in split["examples"].items():
                for ex in examples[: 2 if kind.startswith("best") else 1]:
                    lines.append(f"  [{kind}] {ex['source_id']} / {ex['entity_id']} / "
                                 f"{self.plan.index_column} {ex[self.plan.index_column]}: {ex['why']}")
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    # the unit that keeps the figure readable; the figure itself as every page prints one
    if seconds >= 3600:
        return format_hours(seconds / 3600)
    if seconds >= 60:
        return f"{format_number(seconds / 60)} min"
    return f"{format_number(seconds)} s"


def hours_selection_review(result: Any, *, max_examples: int = 5) -> SelectionReview:
    """Explain a budget plan (or a write result carrying one, or a storage root)."""
    if max_examples < 1:
        raise BudgetError(f"max_examples: must be at least 1, got {max_examples!r}")
    return SelectionReview(_plan_of(result), max_examples)


__all__ = ["REASONS", "SelectionReview", "hours_selection_review"]
