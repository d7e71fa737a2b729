"""How the report's figures read in every rendering (text, Markdown, HTML) beyond what
:mod:`kuration.numbers` already says for every page (hours, percentages, plain figures):
bytes in binary units, and budget amounts in hours when the budget counts seconds. Empty
text for a figure not recorded."""

from __future__ import annotations

from typing import Any

from kuration.inspect.report import DatasetReport
from kuration.numbers import finite_float, format_bytes, format_hours, format_number


def size(value: Any) -> str:
    number = finite_float(value)
    return "" if number is None else format_bytes(number)


def budget_amount(value: Any, unit: str | None) -> str:
    """A budget block amount: hours when the budget counts seconds, else the count and its unit."""
    number = finite_float(value)
    if number is None:
        return ""
    if unit == "seconds":
        return format_hours(number / 3600)
    return f"{format_number(number)} {unit or ''}".rstrip()


def shards_from_sources(report: DatasetReport) -> str:
    """``3,322 shards from 39 of the 40 sources scored``: the sources with shards against the
    count every other page (universe, scoring, budget) shows, so a source the budget admitted
    nothing of reads as that, not as one gone missing (``(2 skipped)`` adds the sources
    scoring skipped); ``from 39 sources`` when the dataset does not record how many were
    scored."""
    head = f"{report.shards:,} shards from {report.sources:,}"
    if report.scored_sources is None:
        return f"{head} sources"
    skipped = len(report.skipped_sources or ())
    return f"{head} of the {report.scored_sources:,} sources scored" + (f" ({skipped:,} skipped)" if skipped else "")


def budget_unit(unit: str | None) -> str:
    """What :func:`budget_amount` reports amounts in."""
    return "hours" if unit == "seconds" else str(unit)


__all__ = ["budget_amount", "budget_unit", "shards_from_sources", "size"]
