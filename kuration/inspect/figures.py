"""How the report's figures read in every rendering (text, Markdown, HTML): durations in
hours to two decimals, fractions as percentages to one, bytes in binary units, and budget
amounts in hours when the budget counts seconds. Empty text for a figure not recorded."""

from __future__ import annotations

from typing import Any

from kuration.numbers import finite_float, format_bytes


def hours(value: Any) -> str:
    number = finite_float(value)
    return "" if number is None else f"{number:,.2f} h"


def percent(value: Any) -> str:
    number = finite_float(value)
    return "" if number is None else f"{number:.1%}"


def size(value: Any) -> str:
    number = finite_float(value)
    return "" if number is None else format_bytes(number)


def budget_amount(value: Any, unit: str | None) -> str:
    """A budget block amount: hours when the budget counts seconds, else the count and its unit."""
    number = finite_float(value)
    if number is None:
        return ""
    if unit == "seconds":
        return hours(number / 3600)
    return f"{number:,.0f} {unit or ''}".rstrip()


def budget_unit(unit: str | None) -> str:
    """What :func:`budget_amount` reports amounts in."""
    return "hours" if unit == "seconds" else str(unit)


__all__ = ["budget_amount", "budget_unit", "hours", "percent", "size"]
