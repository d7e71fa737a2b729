"""The Dagster side of Kuration's checks, shared by every asset package.

:func:`asset_check_result` turns the core's :class:`~kuration.checks.CheckResult` into an
``AssetCheckResult``: the verdict is its description (the line the UI's check history
shows), the figures a Markdown table whose values carry the unit their name declares
(``train_admitted_hours`` shows ``4.01 h``, ``bytes`` shows ``132.0 MiB``), and the errors and
warnings are Markdown lists, present only when there are any; the figures a check names as
worth following over time are numbers as well, which the UI plots. The severity rule lives in
the core (``CheckResult.severity``), so no check repeats it. :func:`markdown_table` is the
one table renderer the assets' metadata uses; every number in it reads as the core writes
numbers (:mod:`kuration.numbers`: ``4.01``, ``3,322``, ``132.0 MiB``), so a figure reads the
same here as in a verdict, the inspect report or a command's output. Nothing here decides
whether something is valid.
"""

from __future__ import annotations

import fnmatch
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dagster import AssetCheckEvaluation, AssetCheckResult, AssetCheckSeverity, MetadataValue

from kuration.checks import CheckResult
from kuration.numbers import format_bytes, format_hours, format_number, rounded

#: How many errors or warnings a check's metadata lists; the core result keeps them all.
LISTED = 20


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real):
        return format_number(value)
    return _inline(str(value)).replace("|", "\\|")  # a '|' would end the cell


def _inline(text: str) -> str:
    # One line of text as Markdown shows it: '<' would open an HTML tag the UI swallows, and
    # a '*' (a glob, a product) would start emphasis.
    return " ".join(text.split()).replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def markdown_table(rows: Iterable[Mapping[str, Any]], *, columns: Sequence[str] | None = None,
                   more: int = 0) -> MetadataValue:
    """A Markdown table of ``rows`` (``columns`` default to the first row's keys); ``more``
    adds a last row saying how many rows were left out."""
    rows = list(rows)
    columns = list(columns if columns is not None else (rows[0] if rows else []))
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    if more:
        lines.append("| " + " | ".join([f"... {more:,} more", *[""] * (len(columns) - 1)]) + " |")
    return MetadataValue.md("\n".join(lines))


def figure_text(name: str, value: Any) -> Any:
    """``value`` with the unit ``name`` ends in: ``_hours`` -> ``4.01 h``, ``_seconds`` ->
    ``60 s``, ``bytes`` -> ``132.0 MiB``; other values as they are (a table cell formats them)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return value
    number = float(value)
    if name.endswith("_hours"):
        return format_hours(number)
    if name.endswith("_seconds"):
        return f"{format_number(number)} s"
    if name == "bytes" or name.endswith("_bytes"):
        return format_bytes(number)
    return value


def figures_table(figures: Mapping[str, Any], *, columns: tuple[str, str] = ("figure", "value")) -> MetadataValue:
    """A two-column table of ``figures``, each value in the unit its name declares."""
    name, value = columns
    return markdown_table(({name: k, value: figure_text(k, v)} for k, v in figures.items()), columns=list(columns))


def markdown_list(lines: Sequence[str], *, limit: int = LISTED) -> MetadataValue:
    """A Markdown bullet list of the first ``limit`` lines, and how many more there are."""
    shown = [f"- {_inline(line)}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"- ... and {len(lines) - limit:,} more")
    return MetadataValue.md("\n".join(shown))


def plotted_numbers(figures: Mapping[str, Any], patterns: Sequence[str] = ("*",)) -> dict[str, MetadataValue]:
    """The figures whose names match one of ``patterns`` (``fnmatch``: ``*_samples``) and whose
    values are finite numbers (not bools), as numeric metadata, which the UI plots from one
    materialization or check evaluation to the next; floats to three significant digits."""
    numbers_only: dict[str, MetadataValue] = {}
    for name, value in figures.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            numbers_only[name] = (MetadataValue.int(int(value)) if isinstance(value, numbers.Integral)
                                  else MetadataValue.float(rounded(float(value))))
    return numbers_only


def asset_check_result(result: CheckResult, *, plotted: Sequence[str] = (), **target: Any) -> AssetCheckResult:
    """``result`` as Dagster reports it. ``plotted``: patterns of the figures worth following
    from one evaluation to the next (counts of what was checked or found wrong), which are
    numbers as well as cells of the figures table, so the check's page plots them.
    ``target`` (``asset_key``, ``check_name``) names the check when an asset step yields it."""
    metadata: dict[str, MetadataValue] = {}
    if result.figures:
        metadata["figures"] = figures_table(result.figures)
    if result.errors:
        metadata["errors"] = markdown_list(result.errors)
    if result.warnings:
        metadata["warnings"] = markdown_list(result.warnings)
    if plotted:
        metadata.update(plotted_numbers(result.figures, plotted))
    severity = AssetCheckSeverity.WARN if result.severity == "warn" else AssetCheckSeverity.ERROR
    return AssetCheckResult(passed=result.passed, severity=severity, description=result.verdict, metadata=metadata,
                            **target)


def failed_only_as_warning(evaluation: AssetCheckEvaluation | None) -> bool:
    """Whether a stored check evaluation is a failure at WARN severity: what
    :func:`asset_check_result` reports for a result with warnings and no errors (usable, in
    Kuration's terms), read back by the automation condition."""
    return evaluation is not None and not evaluation.passed and evaluation.severity == AssetCheckSeverity.WARN


__all__ = ["asset_check_result", "failed_only_as_warning", "figure_text", "figures_table", "markdown_list",
           "markdown_table", "plotted_numbers"]
