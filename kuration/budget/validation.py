"""``validate_budget_plan``: the budget contract, checked on a plan's own items and block.

It recomputes from the items, and trusts neither the fill nor the stored accounting:

errors (the plan must not be used):
- a split's admitted amount exceeds its request by a whole admitted item or more, i.e.
  the admitted total minus the last admitted item (in fill order) is not below the request;
- a source or a group has admitted items in two splits, or a group's sources sit in two
  split pools;
- an admitted item is not ``ok`` (its priority is -inf, NaN or +inf, it is unscored, or
  its entity is absent from it);
- a group holds more than the split's group cap;
- the budget block disagrees with the items (admitted amount, item counts, and, for plans
  whose items carry ``present_seconds``, the admitted and the lost present seconds);
- a split with a non-zero request admits nothing (its pool is empty, or nothing in it can be
  ranked): a dataset built from it would silently lack that split;
- scored sources belong to no split (``not_in_split``): the resolved split does not know
  them, usually because the universe changed after it was resolved, or because the
  universe's source ids do not name the recordings that were scored.

warnings (the plan is usable, but someone should look):
- a split's request is larger than its whole scored pool, whatever the threshold (the
  warning gives both figures: no fill could have met that request);
- a split is underfilled by more than ``underfill_warn_fraction`` of its request.

The result is the uniform :class:`~kuration.checks.CheckResult`; its verdict gives each
split's admitted against its request (``train 4.01 h of 4 h requested (+0.3%, within one
60 s span)``) and its figures carry their unit in their names (hours for a time budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration.budget.fill import cut_tolerance
from kuration.budget.spans import UNRANKABLE
from kuration.checks import CheckResult, Figure, count, failed_verdict, first
from kuration.numbers import format_hours
from kuration.splits.stages import EXCLUSIVE_STAGES as SPLITS

_EXAMPLES = 5


@dataclass(frozen=True)
class BudgetValidation(CheckResult):
    """The budget contract's answer: ``ok`` when there are no errors; ``warnings`` never make
    a plan invalid."""


def _numpy(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def _spread(items: pa.Table, key: str, what: str) -> list[str]:
    """Keys of ``items`` found in more than one split."""
    if not items.num_rows:
        return []
    counted = items.group_by(key).aggregate([("split", "count_distinct"), ("split", "distinct")])
    bad = counted.filter(pc.greater(counted.column("split_count_distinct"), 1))
    return [f"{what}: {key} {k!r} is in splits {sorted(v)}"
            for k, v in zip(bad.column(key).to_pylist()[:_EXAMPLES], bad.column("split_distinct").to_pylist(),
                            strict=False)]


@dataclass(frozen=True)
class _PlanColumns:
    """The item columns the checks read, as numpy arrays and string codes."""

    unit: str
    weight: np.ndarray
    admitted: np.ndarray
    split: StringCodes
    groups: StringCodes
    rank: np.ndarray
    reasons: StringCodes
    #: ``None`` for plans stored before present seconds were recorded: nothing to check.
    present: np.ndarray | None
    unrankable: np.ndarray | None
    outside: np.ndarray

    @classmethod
    def of(cls, items: pa.Table, unit: str) -> _PlanColumns:
        weight = np.ones(items.num_rows) if unit == "segments" else _numpy(items, "seconds").astype(np.float64)
        reasons = string_codes(items.column("reason"))
        present = (_numpy(items, "present_seconds").astype(np.float64) if "present_seconds" in items.column_names
                   else None)
        return cls(unit, weight, _numpy(items, "admitted").astype(bool), string_codes(items.column("split")),
                   string_codes(items.column("group")), _numpy(items, "fill_rank"), reasons, present,
                   None if present is None else reasons.among(UNRANKABLE), reasons.among(("not_in_split",)))


@dataclass(frozen=True)
class _SplitCheck:
    """One split's share of the result: its errors, warnings, figures and verdict part."""

    errors: list[str]
    warnings: list[str]
    figures: dict[str, Figure]
    filled: str | None


def validate_budget_plan(items: pa.Table, accounting: dict[str, Any], *,
                         underfill_warn_fraction: float = 0.1) -> BudgetValidation:
    """Check a plan's ``items`` (with decision columns) against its ``accounting`` block."""
    unit = accounting["unit"]
    columns = _PlanColumns.of(items, unit)
    errors = _item_errors(items, columns)
    warnings: list[str] = []
    figures: dict[str, Figure] = {}
    filled: list[str] = []
    for name in SPLITS:
        split = _check_split(name, accounting["splits"].get(name, {}), columns,
                             underfill_warn_fraction=underfill_warn_fraction)
        errors += split.errors
        warnings += split.warnings
        figures.update(split.figures)
        if split.filled is not None:
            filled.append(split.filled)
    requested_total = sum(float(accounting["splits"].get(n, {}).get("requested", 0.0)) for n in SPLITS)
    figures[f"requested_{_figure_unit(unit)}"] = _in_figure_unit(requested_total, unit)
    figures[f"scored_pool_{_figure_unit(unit)}"] = _in_figure_unit(float(columns.weight.sum()), unit)
    figures["not_in_split_sources"] = len(_sources(items, columns.outside))
    verdict = "; ".join(filled) or "nothing requested, nothing admitted"
    if errors:
        verdict = failed_verdict(tuple(errors), "contract violation")
    elif warnings:
        verdict += f"; {failed_verdict(tuple(warnings), 'warning')}"
    return BudgetValidation(verdict, tuple(errors), tuple(warnings), figures)


def _item_errors(items: pa.Table, columns: _PlanColumns) -> list[str]:
    """What is wrong whatever the split: admitted items that cannot be ranked, sources and
    groups in two splits, scored sources in none."""
    errors: list[str] = []
    admitted = columns.admitted
    not_ok = admitted & ~string_codes(items.column("status")).among(("ok",))
    not_ok |= admitted & ~np.isfinite(_numpy(items, "priority"))
    if not_ok.any():
        rows = np.flatnonzero(not_ok)[:_EXAMPLES]
        errors.append(f"{int(not_ok.sum())} admitted item(s) without a finite priority, e.g. "
                      + ", ".join(_item(items, r) for r in rows))
    taken = items.filter(pa.array(admitted))
    errors += _spread(taken, "source_id", "admitted")
    errors += _spread(taken, "group", "admitted")
    errors += _spread(items.filter(pc.is_valid(items.column("split"))), "group", "pooled")
    return errors + _not_in_split(items, columns.outside)


def _check_split(name: str, block: dict[str, Any], columns: _PlanColumns, *,
                 underfill_warn_fraction: float) -> _SplitCheck:
    """One split against its block: within one item of its request, in agreement with the
    block, under its group cap, and not underfilled (or only warned about)."""
    unit, weight = columns.unit, columns.weight
    requested = float(block.get("requested", 0.0))
    in_split = columns.split.codes == columns.split.code(name)
    mine = columns.admitted & in_split
    total = float(weight[mine].sum())
    last = float(weight[mine][np.argmax(columns.rank[mine])]) if mine.any() else 0.0
    figures = _split_figures(name, unit, requested, total, last)
    filled = _filled(name, unit, requested, total, last) if requested > 0 or mine.any() else None
    errors: list[str] = []
    # Half the fill's tolerance: the fill keeps the total before its last item below
    # request - tolerance, and re-summing here drifts far less than that.
    if mine.any() and total - last >= requested - cut_tolerance(requested) / 2:
        errors.append(f"{name}: admitted {total:g} {unit} against {requested:g} requested; without its last "
                      f"admitted item ({last:g}) it is still {total - last:g}, more than one item over budget")
    errors += _block_disagreements(name, block, columns, in_split, total)
    cap = block.get("group_cap")
    if cap is not None and mine.any():
        names = columns.groups.names
        per_group = np.bincount(columns.groups.codes[mine], weights=weight[mine], minlength=len(names))
        over = np.flatnonzero(per_group > cap * (1 + 1e-9) + 1e-9)
        for g in over[:_EXAMPLES]:
            errors.append(f"{name}: group {names[g]!r} holds {per_group[g]:g} {unit}, over its cap of {cap:g}")
    pool = float(weight[in_split].sum())
    figures[f"{name}_pool_{_figure_unit(unit)}"] = _in_figure_unit(pool, unit)
    warnings: list[str] = []
    if requested > 0 and not mine.any():
        errors.append(_nothing_admitted(name, unit, requested, pool, columns.reasons, in_split,
                                        int(columns.outside.sum())))
    elif requested > 0:
        warnings += _underfill_warnings(name, block, unit, requested, total, pool,
                                        underfill_warn_fraction=underfill_warn_fraction)
    return _SplitCheck(errors, warnings, figures, filled)


def _block_disagreements(name: str, block: dict[str, Any], columns: _PlanColumns, in_split: np.ndarray,
                         total: float) -> list[str]:
    """Where the budget block and the items disagree: the admitted amount, the present
    seconds (when recorded) and the admitted item count."""
    unit = columns.unit
    mine = columns.admitted & in_split
    errors: list[str] = []
    if not np.isclose(total, float(block.get("admitted", -1.0)), rtol=1e-9, atol=1e-6):
        errors.append(f"{name}: the budget block says {block.get('admitted')!r} {unit} admitted, the items sum to "
                      f"{total:g}")
    present, unrankable = columns.present, columns.unrankable
    if present is not None and unrankable is not None:
        for key, mask in (("admitted_present_seconds", mine), ("lost_present_seconds", in_split & unrankable)):
            counted = float(present[mask].sum())
            if not np.isclose(counted, float(block.get(key, np.nan)), rtol=1e-9, atol=1e-6):
                errors.append(f"{name}: the budget block says {key} {block.get(key)!r}, the items sum to "
                              f"{counted:g}")
    if int(mine.sum()) != int(block.get("items", {}).get("admitted", -1)):
        errors.append(f"{name}: the budget block counts {block.get('items', {}).get('admitted')!r} admitted items, "
                      f"the items have {int(mine.sum())}")
    return errors


def _underfill_warnings(name: str, block: dict[str, Any], unit: str, requested: float, total: float, pool: float, *,
                        underfill_warn_fraction: float) -> list[str]:
    """The warning for a split that admitted something but less than it asked for."""
    underfill = max(0.0, requested - total)
    underfilled = f"{name}: underfilled by {underfill:g} of {requested:g} {unit} ({underfill / requested:.0%})"
    # A pool smaller than the request warns whatever the threshold: no fill could meet it.
    if pool < requested - cut_tolerance(requested):
        return [f"{underfilled}: the budget is larger than the split's whole scored pool "
                f"({_amount(requested, unit)} requested, {_amount(pool, unit)} in the pool). Lower "
                f"the {name} budget, or add recordings to {name}"]
    if underfill / requested > underfill_warn_fraction:
        excluded = ", ".join(f"{r} {v['items']}" for r, v in block.get("excluded", {}).items() if v["items"])
        return [f"{underfilled}; the pool's candidates hold {block.get('candidate', 0.0):g}. "
                f"Excluded items: {excluded or 'none'}"]
    return []


def _figure_unit(unit: str) -> str:
    return "segments" if unit == "segments" else "hours"


def _in_figure_unit(amount: float, unit: str) -> float:
    return amount if unit == "segments" else amount / 3600.0


def _amount(amount: float, unit: str) -> str:
    """``4 h`` for a time budget (held in seconds), ``12 segments`` for a count."""
    return f"{amount:,.0f} segments" if unit == "segments" else format_hours(amount / 3600.0)


def _sources(items: pa.Table, mask: np.ndarray) -> list[str]:
    """The distinct sources of the items under ``mask``, sorted."""
    if not mask.any():
        return []
    return sorted(set(items.column("source_id").filter(pa.array(mask)).to_pylist()))


def _not_in_split(items: pa.Table, outside: np.ndarray) -> list[str]:
    """The error for scored sources the resolved split does not assign (none when there are none)."""
    outside_sources = _sources(items, outside)
    if not outside_sources:
        return []
    scored = int(pc.count_distinct(items.column("source_id")).as_py())
    named = first((repr(s) for s in outside_sources), len(outside_sources))
    if len(outside_sources) == scored:
        return [f"not_in_split: none of the {count(scored, 'scored source')} is in the resolved split ({named}); the "
                "universe's source ids do not name the scored recordings. Universe source ids are paths relative to "
                "the recordings root: check them against the recordings (the universe_sources check), then "
                "re-materialize universe and resolved_splits"]
    verb = "is" if len(outside_sources) == 1 else "are"
    return [f"not_in_split: {len(outside_sources):,} of the {count(scored, 'scored source')} {verb} in no split "
            f"({named}); the resolved split does not assign them, so no budget can admit them. Re-materialize "
            "resolved_splits (extend the split) once the universe lists them, and check that their universe source "
            "ids resolve against the recordings root (the universe_sources check)"]


def _nothing_admitted(name: str, unit: str, requested: float, pool: float, reasons: StringCodes,
                      in_split: np.ndarray, outside: int) -> str:
    """The error for a split that requests something and admits nothing, saying why."""
    head = f"{name}: {_amount(requested, unit)} requested, nothing admitted"
    fix = f"add recordings to {name}, or request 0 for {name} if it is meant to be empty"
    if not in_split.any():
        why = f"no scored item is in the {name} split (its pool is empty)"
        if outside:
            why += f", while {count(outside, 'scored item')} belong to no split (see not_in_split)"
        return f"{head}: {why}. Re-materialize resolved_splits so {name} holds sources, {fix}"
    counts = np.bincount(reasons.codes[in_split] + 1, minlength=len(reasons.names) + 1)[1:]
    excluded = ", ".join(f"{reasons.names[k]} {int(counts[k])}" for k in np.argsort(-counts, kind="stable")
                         if counts[k])
    return (f"{head}: none of its pool's {count(int(in_split.sum()), 'item')} ({_amount(pool, unit)}) could be "
            f"admitted (excluded: {excluded}). Check the strategy's predicates and the scored_segments partitions' "
            f"priorities, {fix}")


def _split_figures(name: str, unit: str, requested: float, total: float, last: float) -> dict[str, Figure]:
    if unit == "segments":
        return {f"{name}_requested_segments": requested, f"{name}_admitted_segments": total}
    return {f"{name}_requested_hours": requested / 3600.0, f"{name}_admitted_hours": total / 3600.0,
            f"{name}_last_admitted_seconds": last}


def _filled(name: str, unit: str, requested: float, total: float, last: float) -> str:
    """``train 4.01 h of 4 h requested (+0.3%, within one 60 s span)``."""
    if unit == "segments":
        amount = f"{name} {total:,.0f} of {requested:,.0f} segments requested"
    else:
        amount = f"{name} {format_hours(total / 3600.0)} of {format_hours(requested / 3600.0)} requested"
    if requested <= 0:
        return f"{amount} (none requested)"
    if total == requested:
        return f"{amount} (exact)"
    change = f"{(total - requested) / requested:+.1%}"
    if total > requested and unit != "segments" and total - last < requested:
        return f"{amount} ({change}, within one {last:g} s span)"
    return f"{amount} ({change})"


@dataclass(frozen=True)
class StringCodes:
    codes: np.ndarray  # -1 for null
    names: list[str]

    def code(self, name: str) -> int:
        return self.names.index(name) if name in self.names else -2

    def among(self, names: tuple[str, ...]) -> np.ndarray:
        """Whether each value is one of ``names`` (null is not): one lookup-table pass."""
        table = np.array([name in names for name in self.names] + [False])  # code -1 (null) reads the last
        return table[self.codes]


def string_codes(column: pa.ChunkedArray) -> StringCodes:
    """A string column as integer codes: comparisons on millions of items stay in numpy."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return StringCodes(codes, encoded.dictionary.to_pylist())


def _item(items: pa.Table, row: int) -> str:
    index = "span_index" if "span_index" in items.column_names else "segment_index"
    return (f"{items.column('source_id')[row].as_py()}/{items.column('entity_id')[row].as_py()}"
            f"#{items.column(index)[row].as_py()} (status {items.column('status')[row].as_py()}, "
            f"priority {items.column('priority')[row].as_py()})")


__all__ = ["BudgetValidation", "StringCodes", "string_codes", "validate_budget_plan"]
