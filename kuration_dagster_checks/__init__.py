"""The Dagster side of Kuration's checks, shared by every asset package.

:func:`asset_check_result` turns the core's :class:`~kuration.checks.CheckResult` into an
``AssetCheckResult``: the verdict is its description (the line the UI's check history
shows), the figures a Markdown table, and the errors and warnings are listed only when
there are any. The severity rule lives in the core (``CheckResult.severity``), so no check
repeats it. :func:`markdown_table` is the one table renderer the assets' metadata uses.
Nothing here decides whether something is valid.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from kuration.checks import CheckResult

#: How many errors or warnings a check's metadata lists; the core result keeps them all.
LISTED = 20


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{value:,}"
    if isinstance(value, numbers.Real):
        # Three significant digits below a thousand (4.01, 0.333); whole numbers above it.
        return f"{value:.3g}" if abs(float(value)) < 1000 else f"{value:,.0f}"
    # A cell is one line, and '|' or '<' would end it or open an HTML tag.
    text = " ".join(str(value).split())
    return text.replace("|", "\\|").replace("<", "&lt;")


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


def figures_table(figures: Mapping[str, Any]) -> MetadataValue:
    return markdown_table(({"figure": k, "value": v} for k, v in figures.items()), columns=["figure", "value"])


def _listed(lines: Sequence[str]) -> MetadataValue:
    shown = list(lines[:LISTED])
    if len(lines) > LISTED:
        shown.append(f"... and {len(lines) - LISTED:,} more")
    return MetadataValue.json(shown)


def asset_check_result(result: CheckResult, **target: Any) -> AssetCheckResult:
    """``result`` as Dagster reports it. ``target`` (``asset_key``, ``check_name``) names the
    check when an asset step yields it."""
    metadata: dict[str, MetadataValue] = {}
    if result.figures:
        metadata["figures"] = figures_table(result.figures)
    if result.errors:
        metadata["errors"] = _listed(result.errors)
    if result.warnings:
        metadata["warnings"] = _listed(result.warnings)
    severity = AssetCheckSeverity.WARN if result.severity == "warn" else AssetCheckSeverity.ERROR
    return AssetCheckResult(passed=result.passed, severity=severity, description=result.verdict, metadata=metadata,
                            **target)


__all__ = ["asset_check_result", "figures_table", "markdown_table"]
