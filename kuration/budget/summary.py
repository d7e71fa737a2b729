"""What a budget plan amounts to, in the units people read: :func:`summarize_plan`.

The accounting block counts a time budget in seconds and a count budget in segments; a
dashboard and a log line want hours, the exclusions summed over the splits, and a
per-split table. This module only converts and adds up what the block already holds; it
recomputes nothing from the items (that is :func:`~kuration.budget.validate_budget_plan`'s
job) and formats no markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SplitAmounts:
    """One split's amounts in the summary's unit; ``utilization`` is admitted / requested
    (None when nothing was requested)."""

    requested: float
    candidate: float
    admitted: float
    emitted: float
    underfill: float
    utilization: float | None


@dataclass(frozen=True)
class PlanSummary:
    """``unit`` is ``hours`` (a time budget) or ``segments``; ``excluded`` counts the items
    left out by reason over every split, ``not_in_split`` included."""

    unit: str
    splits: dict[str, SplitAmounts]
    excluded: dict[str, int]
    tag_coverage: dict[str, Any]
    not_in_split_sources: int

    def rows(self) -> list[dict[str, Any]]:
        """One row a split, the unit in the amount columns' names."""
        u = "h" if self.unit == "hours" else "segments"
        return [{"split": name, f"requested ({u})": s.requested, f"candidate ({u})": s.candidate,
                 f"admitted ({u})": s.admitted, f"emitted ({u})": s.emitted,
                 "utilization": "" if s.utilization is None else f"{s.utilization:.1%}",
                 f"underfill ({u})": s.underfill}
                for name, s in self.splits.items()]

    def line(self) -> str:
        """``train: 4.01/4 h, val: 1/1 h, test: 0.5/0.5 h``: admitted against requested."""
        u = "h" if self.unit == "hours" else "segments"
        return ", ".join(f"{name}: {s.admitted:.3g}/{s.requested:.3g} {u}" for name, s in self.splits.items())


def summarize_plan(accounting: Mapping[str, Any]) -> PlanSummary:
    """The accounting block of a plan (``plan.accounting``) in hours or segments."""
    scale = 1 / 3600.0 if accounting["unit"] == "seconds" else 1.0
    splits: dict[str, SplitAmounts] = {}
    excluded: dict[str, int] = {}
    for name, block in accounting["splits"].items():
        amounts = {k: float(block[k]) * scale for k in ("requested", "candidate", "admitted", "emitted", "underfill")}
        splits[name] = SplitAmounts(**amounts, utilization=block["utilization"])
        for reason, figures in block["excluded"].items():
            excluded[reason] = excluded.get(reason, 0) + figures["items"]
    excluded["not_in_split"] = accounting["not_in_split"]["items"]
    return PlanSummary(
        unit="hours" if accounting["unit"] == "seconds" else accounting["unit"],
        splits=splits, excluded=excluded,
        tag_coverage={name: block["tag_coverage"] for name, block in accounting["splits"].items()},
        not_in_split_sources=accounting["not_in_split"]["sources"],
    )


__all__ = ["PlanSummary", "SplitAmounts", "summarize_plan"]
