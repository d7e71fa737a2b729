"""Split constraints: leakage between stages, evaluated purely, enforced separately.

``evaluate_constraints`` returns one :class:`ConstraintResult` per declared constraint and
never raises; ``enforce`` decides what raises (``error``) and what logs (``warn``). The
Dagster ``split_leakage`` check wraps the first; ``resolve_splits`` calls both.

Beyond Cuvis.AI, ``no_split_overlap`` is group-aware: two samples sharing a ``group``
(which defaults to the sample's source) in two different stages are leakage, because
frames of one recording, one site or one operator in both train and test inflate every
metric. ``predict`` is excluded throughout; it may overlap the other stages.

:func:`leakage_check` turns a report and the stages' sample counts into the uniform
:class:`~kuration.checks.CheckResult` (:class:`LeakageCheck`, which keeps the report) that the
``split_leakage`` check shows.

Offender lists are sorted as text, as Cuvis.AI sorts them. For ``no_split_overlap`` the
offenders are the samples that leak: those in more than one of train / val / test, and
those whose group is. So a violation always counts at least one sample, also when the
stages share groups but no sample.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from kuration.checks import CheckResult, first
from kuration.errors import SplitConstraintError, SplitLeakageError
from kuration.splits.config import LEAKAGE_MODES, Constraint, ConstraintKind, constraints_for_leakage_check
from kuration.splits.sample_ref import SampleRef
from kuration.splits.stages import EXCLUSIVE_STAGES
from kuration.splits.universe import Universe

logger = logging.getLogger(__name__)

#: How many offending uids / sources / groups a result keeps (the count is always exact).
MAX_LISTED = 50


@dataclass(frozen=True)
class ConstraintResult:
    """The outcome of one constraint.

    ``status`` is ``satisfied``, ``violated``, or ``unavailable`` (the labels the
    constraint needs cannot be had; never silently ``satisfied``). ``offending`` lists the
    first :data:`MAX_LISTED` offending uids or sources in text order, ``count`` is how many
    there are; ``shared_groups`` names the groups found in more than one stage.
    """

    kind: str
    severity: str
    status: str
    count: int = 0
    offending: tuple[str, ...] = ()
    shared_groups: tuple[str, ...] = ()
    group_count: int = 0
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("violated", "unavailable")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "severity": self.severity, "status": self.status, "count": self.count,
            "offending": list(self.offending), "shared_groups": list(self.shared_groups),
            "group_count": self.group_count, "reason": self.reason,
        }


@dataclass(frozen=True)
class LeakageReport:
    """Every constraint's result. ``ok`` is False when an ``error``-severity one failed."""

    results: tuple[ConstraintResult, ...]

    @property
    def errors(self) -> tuple[ConstraintResult, ...]:
        return tuple(r for r in self.results if r.severity == "error" and r.failed)

    @property
    def warnings(self) -> tuple[ConstraintResult, ...]:
        return tuple(r for r in self.results if r.severity == "warn" and r.failed)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        failed = [r for r in self.results if r.failed]
        if not failed:
            checked = ", ".join(r.kind for r in self.results) or "no constraints declared"
            return f"no leakage ({checked})"
        return "; ".join(f"{r.kind} [{r.severity}] {r.status}: {r.reason}" for r in failed)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "results": [r.to_dict() for r in self.results]}


#: What a satisfied constraint means, for the verdict.
_HOLDS = {
    ConstraintKind.NO_SPLIT_OVERLAP.value: "no sample or group in two stages",
    ConstraintKind.NO_SOURCE_OVERLAP.value: "no source in two stages",
    ConstraintKind.NO_TRAIN_ANOMALOUS.value: "no anomalous sample in train",
}


@dataclass(frozen=True)
class LeakageCheck(CheckResult):
    """The ``split_leakage`` answer; ``report`` is None when the split could not be read."""

    report: LeakageReport | None = None
    counts: Mapping[str, int] = field(default_factory=dict)


def _failure(r: ConstraintResult) -> str:
    offenders = f" (first: {first(r.offending, r.count)})" if r.offending else ""
    return f"{r.kind} {r.status}: {r.reason}{offenders}"


def leakage_check(report: LeakageReport, counts: Mapping[str, int]) -> LeakageCheck:
    """``report``'s verdict with the stages' sample counts: errors for failed ``error``
    constraints, warnings for failed ``warn`` ones, the first offenders named."""
    sizes = ", ".join(f"{stage} {counts[stage]:,}" for stage in EXCLUSIVE_STAGES if stage in counts)
    figures: dict[str, int | str] = {f"{stage}_samples": n for stage, n in counts.items()}
    for r in report.results:
        figures[f"{r.kind}.status"] = f"{r.status} ({r.severity})"
        figures[f"{r.kind}.offending_count"] = r.count
        if r.shared_groups:
            figures[f"{r.kind}.shared_groups"] = first(r.shared_groups, r.group_count, shown=10)
        if r.offending:
            figures[f"{r.kind}.first_offenders"] = first(r.offending, r.count, shown=5)
    failed = [r for r in report.results if r.failed]
    if failed:
        verdict = "; ".join(_failure(r) for r in failed) + f" ({sizes} samples)"
    elif report.results:
        verdict = "; ".join(_HOLDS.get(r.kind, f"{r.kind} holds") for r in report.results) + f" ({sizes} samples)"
    else:
        verdict = f"no leakage constraint declared, nothing checked ({sizes} samples)"
    return LeakageCheck(
        verdict, tuple(_failure(r) for r in report.errors), tuple(_failure(r) for r in report.warnings),
        figures=figures, report=report, counts=dict(counts),
    )


def _overlap_pairs(keys: Mapping[str, np.ndarray]) -> list[tuple[str, str, np.ndarray]]:
    """Pairwise intersections of the exclusive stages' key sets, empty pairs dropped."""
    out = []
    for a, b in combinations(EXCLUSIVE_STAGES, 2):
        shared = np.intersect1d(keys.get(a, np.empty(0)), keys.get(b, np.empty(0)))
        if len(shared):
            out.append((a, b, shared))
    return out


def _union_sorted(pairs: list[tuple[str, str, np.ndarray]]) -> np.ndarray:
    return np.unique(np.concatenate([shared for _, _, shared in pairs])) if pairs else np.empty(0)


def _split_overlap(
    severity: str,
    stages: Mapping[str, tuple[np.ndarray, np.ndarray]],
    uid_names: Callable[[np.ndarray], list[str]],
    group_names: Callable[[np.ndarray], list[str]],
) -> ConstraintResult:
    """``stages``: per exclusive stage, (sample keys, each sample's group key), aligned."""
    uid_pairs = _overlap_pairs({s: np.unique(keys) for s, (keys, _) in stages.items()})
    group_pairs = _overlap_pairs({s: np.unique(groups) for s, (_, groups) in stages.items()})
    if not uid_pairs and not group_pairs:
        return ConstraintResult(ConstraintKind.NO_SPLIT_OVERLAP.value, severity, "satisfied")
    shared_uids = _union_sorted(uid_pairs)
    groups = _union_sorted(group_pairs)
    leaking = np.unique(np.concatenate([
        keys[np.isin(keys, shared_uids) | np.isin(of_group, groups)] for keys, of_group in stages.values()
    ]))
    reasons = [f"{len(shared)} sample(s) shared between {a} and {b}" for a, b, shared in uid_pairs]
    for a, b, shared in group_pairs:
        names = group_names(shared[:5])
        more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
        reasons.append(f"{len(shared)} group(s) in both {a} and {b}: {', '.join(map(repr, names))}{more}")
    return ConstraintResult(
        ConstraintKind.NO_SPLIT_OVERLAP.value, severity, "violated",
        count=len(leaking), offending=tuple(heapq.nsmallest(MAX_LISTED, uid_names(leaking))),
        shared_groups=tuple(group_names(groups[:MAX_LISTED])), group_count=len(groups),
        reason="; ".join(reasons),
    )


def _sources_spanning(severity: str, source_keys: Mapping[str, np.ndarray],
                      names: Callable[[np.ndarray], list[str]]) -> ConstraintResult:
    spanning = _union_sorted(_overlap_pairs(source_keys))
    if not len(spanning):
        return ConstraintResult(ConstraintKind.NO_SOURCE_OVERLAP.value, severity, "satisfied")
    return ConstraintResult(
        ConstraintKind.NO_SOURCE_OVERLAP.value, severity, "violated", count=len(spanning),
        offending=tuple(names(spanning[:MAX_LISTED])),
        reason=f"{len(spanning)} source(s) span more than one of train/val/test",
    )


def evaluate_constraints(
    stages: Mapping[str, np.ndarray],
    universe: Universe,
    constraints: Sequence[Constraint],
) -> LeakageReport:
    """Evaluate each constraint over resolved stage positions. Pure; never raises."""
    def stage_codes(codes: np.ndarray) -> dict[str, np.ndarray]:
        return {s: np.unique(codes[np.asarray(stages.get(s, []), np.int64)]) for s in EXCLUSIVE_STAGES}

    rows_of = {s: np.unique(np.asarray(stages.get(s, []), np.int64)) for s in EXCLUSIVE_STAGES}
    group_names = np.asarray(universe.group_names, dtype=object)
    source_names = np.asarray(universe.source_names, dtype=object)
    results: list[ConstraintResult] = []
    for c in constraints:
        severity = c.severity.value
        if c.kind == ConstraintKind.NO_SPLIT_OVERLAP:
            results.append(_split_overlap(
                severity, {st: (rows, universe.group_codes[rows]) for st, rows in rows_of.items()},
                universe.uids, lambda codes: group_names[codes].tolist(),
            ))
        elif c.kind == ConstraintKind.NO_SOURCE_OVERLAP:
            results.append(_sources_spanning(
                severity, stage_codes(universe.source_codes), lambda codes: source_names[codes].tolist()
            ))
        elif c.kind == ConstraintKind.NO_TRAIN_ANOMALOUS:
            attrs = universe.attributes(frozenset({"category_ids"}))
            if "category_ids" not in attrs.loaded:
                results.append(ConstraintResult(
                    c.kind.value, severity, "unavailable",
                    reason="no category labels in the universe (no annotation files), so anomalous samples cannot be "
                           "told apart",
                ))
                continue
            train = np.asarray(stages.get("train", []), np.int64)
            anomalous = train[attrs.anomalous_rows(len(universe))[train]]
            sources = np.unique(universe.source_codes[anomalous])
            if len(sources):
                results.append(ConstraintResult(
                    c.kind.value, severity, "violated", count=len(sources),
                    offending=tuple(source_names[sources[:MAX_LISTED]].tolist()),
                    reason=f"{len(sources)} source(s) with an anomalous sample in train ({len(anomalous)} samples)",
                ))
            else:
                results.append(ConstraintResult(c.kind.value, severity, "satisfied"))
    return LeakageReport(tuple(results))


def enforce(report: LeakageReport) -> LeakageReport:
    """Log ``warn`` failures; raise on ``error`` ones (``SplitLeakageError`` for overlap)."""
    for r in report.warnings:
        logger.warning("split constraint %s %s: %s", r.kind, r.status, r.reason)
    if report.errors:
        message = "split constraint(s) failed: " + "; ".join(f"{r.kind} {r.status} ({r.reason})" for r in report.errors)
        hint = (
            " Fix the selectors so train/val/test share no sample and no group (regenerate with "
            "resolve-splits --group-by group), or lower the policy to 'warn' deliberately."
        )
        if any(r.kind == ConstraintKind.NO_SPLIT_OVERLAP.value for r in report.errors):
            raise SplitLeakageError(message + hint)
        raise SplitConstraintError(message)
    return report


def evaluate_leakage(
    train: Sequence[SampleRef], val: Sequence[SampleRef], test: Sequence[SampleRef], *, mode: str = "error"
) -> LeakageReport:
    """The ``no_split_overlap`` check (uids and groups) over lists of refs. Pure."""
    if mode not in LEAKAGE_MODES:
        raise ValueError(f"leakage mode must be one of {list(LEAKAGE_MODES)}, got {mode!r}")
    if mode == "off":
        return LeakageReport(())
    def keys(values: Sequence[str | None]) -> np.ndarray:
        return np.asarray(values, dtype=object).astype(str)

    stages = {
        name: (keys([r.uid for r in refs]), keys([r.group for r in refs]))
        for name, refs in (("train", train), ("val", val), ("test", test))
    }
    (constraint,) = constraints_for_leakage_check(mode)
    return LeakageReport((_split_overlap(
        constraint.severity.value, stages, lambda a: [str(x) for x in a], lambda a: [str(x) for x in a],
    ),))


def validate_leakage(
    train: Sequence[SampleRef], val: Sequence[SampleRef], test: Sequence[SampleRef], *, mode: str = "error"
) -> LeakageReport:
    """Assert train/val/test share no uid and no group: ``error`` raises, ``warn`` logs, ``off`` skips."""
    return enforce(evaluate_leakage(train, val, test, mode=mode))
