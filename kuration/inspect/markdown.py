"""A :class:`~kuration.inspect.report.DatasetReport` as Markdown: what the Dagster UI shows on
the ``dataset_manifest`` materialization, readable without opening a file.

Figures read as on every other page (:mod:`kuration.numbers`: three significant digits,
percentages to one decimal, bytes in binary units); every cell is one line, and ``|`` and
``<`` from the dataset are escaped so a source id cannot end a table row or open an HTML tag.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kuration.inspect.report import DatasetReport
from kuration.inspect.figures import budget_amount, budget_unit, shards_from_sources, size
from kuration.numbers import format_hours, format_number, format_percent

#: How many skipped sources, warnings and problems are listed (the report keeps them all).
LISTED = 10


def _cell(value: Any) -> str:
    text = " ".join(str(value).split())
    return text.replace("|", "\\|").replace("<", "&lt;")


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _listed(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    lines = ["", f"**{title}** ({len(items):,})", ""]
    lines += [f"- {_cell(item)}" for item in items[:LISTED]]
    if len(items) > LISTED:
        lines.append(f"- ... and {len(items) - LISTED:,} more")
    return lines


def report_markdown(report: DatasetReport) -> str:
    """The report's summary table first, then modalities, budget, priorities, skipped
    sources, warnings and problems (each section only when it has something to say)."""
    output, commit = report.output, report.commit
    lines = [f"**{shards_from_sources(report)}**, {output['container']}, "
             f"{output['shard_length']}-step shards ({output['short_policy']}); commit `{commit['state']}`, "
             f"manifest `{(commit['manifest_sha256'] or '')[:12]}`", ""]
    lines += _table(["split", "shards", "steps", "hours", "requested", "bytes", "padded shards", "pad rows"], (
        (name, f"{s['shards']:,}", f"{s['steps']:,}", format_hours(s["hours"]), format_hours(s["requested_hours"]),
         size(s["bytes"]), f"{s['padded_shards']:,}", f"{s['pad_rows']:,}")
        for name, s in report.splits.items()))
    lines += ["", "**Modalities**", ""]
    lines += _table(["name", "kind", "dtype", "shape", "from"], (
        (m["name"], m["kind"], m["dtype"], "x".join(map(str, m["shape"])) or "scalar", m["source"])
        for m in report.modalities))
    if report.budget:
        unit = report.budget.get("unit")
        lines += ["", f"**Budget** ({budget_unit(unit)})", ""]
        lines += _table(["split", "requested", "admitted", "emitted", "utilization", "underfill"], (
            (name, budget_amount(b["requested"], unit), budget_amount(b["admitted"], unit),
             budget_amount(b["emitted"], unit), format_percent(b["utilization"]),
             budget_amount(b["underfill"], unit))
            for name, b in report.budget["splits"].items()))
    if report.priorities and report.priorities["edges"]:
        p = report.priorities
        lines += ["", f"**Plan items**: {sum(p['admitted']):,} admitted, {sum(p['rejected']):,} ranked and left out, "
                      f"{p['unrankable']:,} not rankable; priorities from {format_number(p['edges'][0])} to "
                      f"{format_number(p['edges'][-1])}"]
    skipped = report.skipped_sources
    if skipped:
        lines += _listed("Skipped sources", [f"{source}: {error}" for source, error in skipped.items()])
    lines += _listed("Warnings", report.warnings)
    lines += _listed("Problems", report.problems)
    verification = report.verification
    if verification.get("performed"):
        lines += ["", f"**Verification**: {'valid' if verification['valid'] else 'INVALID'}, "
                      f"{verification['shards_checked']:,} shards decoded, {len(verification['bad_shards']):,} bad"]
    return "\n".join(lines)


__all__ = ["report_markdown"]
