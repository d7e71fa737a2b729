"""Self-contained HTML for an inspection report and for a comparison (``--html``).

One file, no network: the style is inline, the charts are inline SVG, there is no script,
font, image or link to anything outside the file, so the report opens the same from a CI
artifact store, an e-mail or an air-gapped machine. Every string that comes from a dataset
(paths, source ids, errors, config values) goes through :func:`html.escape`, so a source id
such as ``<script>`` is shown, never run.

Charts, each ``<svg class="chart" data-chart="NAME">`` (a stable hook for browser tests):

- ``hours_per_split``: hours requested against hours emitted, per split (steps over the
  recorded ``sample_hz``; a bar per figure that is known);
- ``shard_lengths``: how many shards have each length (``n_steps``), binned when there are
  more distinct lengths than :data:`MAX_BARS`;
- ``priorities``: the priority histogram of the admitted and of the rejected plan items.

Every mark is a ``rect`` with class ``bar``, a ``data-value`` and a ``<title>`` tooltip;
its height is proportional to its value. A chart without data draws the text "no data"
(class ``no-data``), never an empty frame.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from kuration import storage
from kuration.inspect.compare import SECTIONS, DatasetComparison
from kuration.inspect.figures import budget_amount, budget_unit, shards_from_sources, size
from kuration.inspect.report import DatasetReport
from kuration.numbers import format_hours, format_number, format_percent

#: Most bars a histogram draws; more distinct values are binned.
MAX_BARS = 40
#: Most rows a list of shards or differences shows; the rest are counted.
MAX_ROWS = 200

_WIDTH, _HEIGHT, _PAD = 640, 220, 36
_COLOURS = {"requested": "#9aa5b1", "emitted": "#2f6fb3", "shards": "#2f6fb3", "admitted": "#2e8b57",
            "rejected": "#c0504d"}
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#1d232a;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #d5dbe1}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d5dbe1;padding:.2em .6em;text-align:left;
vertical-align:top}th{background:#f1f4f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,monospace;word-break:break-all}.bad{color:#b02a2a;font-weight:600}
.ok{color:#1f7a3f;font-weight:600}svg.chart{display:block;margin:.5em 0;background:#fbfcfd;border:1px solid #e3e7eb}
.legend span{display:inline-block;margin-right:1.2em}.swatch{display:inline-block;width:.9em;height:.9em;
margin-right:.3em;vertical-align:-.1em}
"""


def _e(value: Any) -> str:
    return escape(value if isinstance(value, str) else json.dumps(value, default=str), quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_number(value) or "–"
    return _e(value)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Sequence[bool] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            right = i < len(numeric) and numeric[i]
            cells.append(f"<td class=\"n\">{_num(cell)}</td>" if right else f"<td>{_cell(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return _e(value)
    if isinstance(value, (int, float)) or value is None:
        return _num(value)
    return f"<code>{_e(value)}</code>"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>\n")


def _no_data(name: str, why: str) -> str:
    return (f"<svg class=\"chart\" data-chart=\"{name}\" width=\"{_WIDTH}\" height=\"60\" viewBox=\"0 0 {_WIDTH} 60\" "
            f"role=\"img\"><text class=\"no-data\" x=\"{_WIDTH // 2}\" y=\"35\" text-anchor=\"middle\" "
            f"fill=\"#6b7785\">no data: {_e(why)}</text></svg>")


def bar_chart(name: str, groups: Sequence[tuple[str, Sequence[tuple[str, float, str]]]], *, unit: str,
              empty: str) -> str:
    """Grouped bars: ``groups`` is ``[(label, [(series, value, tooltip), ...]), ...]``.
    Bars of value 0 are drawn with no height (their tooltip still tells); a chart whose
    values are all zero or absent draws "no data"."""
    values = [v for _, bars in groups for _, v, _ in bars]
    top = max(values, default=0.0)
    if not values or top <= 0:
        return _no_data(name, empty)
    plot_w, plot_h = _WIDTH - 2 * _PAD, _HEIGHT - 2 * _PAD
    slot = plot_w / len(groups)
    marks = [f"<line x1=\"{_PAD}\" y1=\"{_HEIGHT - _PAD}\" x2=\"{_WIDTH - _PAD}\" y2=\"{_HEIGHT - _PAD}\" "
             "stroke=\"#8a96a3\"/>",
             f"<text x=\"4\" y=\"{_PAD - 12}\" font-size=\"11\" fill=\"#4a5561\">max {_num(top)} {_e(unit)}</text>"]
    for g, (label, bars) in enumerate(groups):
        width = max(1.0, (slot * 0.8) / max(1, len(bars)))
        for b, (series, value, tooltip) in enumerate(bars):
            height = plot_h * value / top
            x = _PAD + g * slot + slot * 0.1 + b * width
            marks.append(f"<rect class=\"bar\" data-series=\"{_e(series)}\" data-value=\"{value!r}\" "
                         f"x=\"{x:.2f}\" y=\"{_HEIGHT - _PAD - height:.2f}\" width=\"{width:.2f}\" "
                         f"height=\"{height:.2f}\" fill=\"{_COLOURS.get(series, '#2f6fb3')}\">"
                         f"<title>{_e(tooltip)}</title></rect>")
        if g % -(-len(groups) // 10) == 0:  # at most about ten labels, so they never overlap
            marks.append(f"<text x=\"{_PAD + (g + 0.5) * slot:.2f}\" y=\"{_HEIGHT - _PAD + 14}\" font-size=\"11\" "
                         f"text-anchor=\"middle\" fill=\"#4a5561\">{_e(label)}</text>")
    legend = sorted({series for _, bars in groups for series, _, _ in bars})
    return (f"<div class=\"legend\">{''.join(_swatch(s) for s in legend)}</div>"
            f"<svg class=\"chart\" data-chart=\"{name}\" width=\"{_WIDTH}\" height=\"{_HEIGHT}\" "
            f"viewBox=\"0 0 {_WIDTH} {_HEIGHT}\" role=\"img\">{''.join(marks)}</svg>")


def _swatch(series: str) -> str:
    return f"<span><i class=\"swatch\" style=\"background:{_COLOURS.get(series, '#2f6fb3')}\"></i>{_e(series)}</span>"


def hours_chart(report: DatasetReport) -> str:
    if report.sample_hz is None:
        return _no_data("hours_per_split", "the config records no sample_hz")
    groups = []
    for name, split in report.splits.items():
        bars = []
        if split["requested_hours"] is not None:
            bars.append(("requested", split["requested_hours"],
                         f"{name}: {format_hours(split['requested_hours'])} requested"))
        bars.append(("emitted", split["hours"], f"{name}: {format_hours(split['hours'])} emitted in "
                                                f"{split['shards']:,} shards"))
        groups.append((name, bars))
    return bar_chart("hours_per_split", groups, unit="h", empty="no split requested or holds any hours")


def _binned(counts: dict[int, int]) -> list[tuple[str, int]]:
    """(label, shards) per length, or per range of lengths when there are too many."""
    if len(counts) <= MAX_BARS:
        return [(str(k), v) for k, v in sorted(counts.items())]
    low, high = min(counts), max(counts)
    width = -(-(high - low + 1) // MAX_BARS)
    bins: dict[int, int] = {}
    for length, n in counts.items():
        start = low + (length - low) // width * width
        bins[start] = bins.get(start, 0) + n
    return [(f"{s}–{s + width - 1}", n) for s, n in sorted(bins.items())]


def lengths_chart(report: DatasetReport) -> str:
    groups = [(label, [("shards", float(n), f"{n:,} shards of {label} steps")])
              for label, n in _binned(report.shard_lengths)]
    return bar_chart("shard_lengths", groups, unit="shards", empty="the dataset holds no shards")


def priorities_chart(report: DatasetReport) -> str:
    p = report.priorities
    if not p or not p["edges"]:
        return _no_data("priorities", "no budget plan with ranked items is recorded")
    edges = p["edges"]
    groups = []
    for i in range(len(edges) - 1):
        label = f"{edges[i]:.3g}"
        bars = [(series, float(p[series][i]), f"{p[series][i]:,} {series} items with priority in "
                                              f"[{edges[i]:.4g}, {edges[i + 1]:.4g})")
                for series in ("admitted", "rejected") if p[series][i]]
        groups.append((label, bars))
    return bar_chart("priorities", groups, unit="items", empty="no ranked items")


def _verification_html(verification: dict[str, Any]) -> str:
    if not verification.get("performed"):
        return "<p>Not verified (run with <code>--verify</code> to decode every shard).</p>"
    if verification["valid"]:
        return f"<p class=\"ok\">valid: {verification['shards_checked']:,} shards decoded and matched.</p>"
    rows = [(b["path"], b["error"]) for b in verification["bad_shards"][:MAX_ROWS]]
    more = len(verification["bad_shards"]) - len(rows)
    return (f"<p class=\"bad\">INVALID: {len(verification['bad_shards']):,} of {verification['shards_checked']:,} "
            f"shards failed.</p>" + (_table(["shard", "error"], rows) if rows else "")
            + (f"<p>and {more:,} more</p>" if more > 0 else "")
            + "".join(f"<p class=\"bad\">{_e(p)}</p>" for p in verification["problems"]))


def render_report_html(report: DatasetReport, *, gates: Sequence[Mapping[str, Any]] = ()) -> str:
    """The inspection report as one self-contained HTML document; with ``gates`` (a
    :class:`~kuration.inspect.quality.QualityResult`'s), a table of them first."""
    split_rows = [(name, s["shards"], s["steps"], size(s["bytes"]), format_hours(s["hours"]),
                   format_hours(s["requested_hours"]), s["padded_shards"], s["pad_rows"])
                  for name, s in report.splits.items()]
    parts = [f"<h1>Dataset report: <code>{_e(report.root)}</code></h1>"]
    if gates:
        failed = sum(not g["passed"] for g in gates)
        parts += ["<h2>Quality gates</h2>",
                  f"<p class=\"{'bad' if failed else 'ok'}\">{failed} of {len(gates)} gates failed</p>",
                  _table(["gate", "result", "value", "threshold", "detail"],
                         [(g["gate"], "pass" if g["passed"] else "FAIL", g["value"], g["threshold"], g["detail"])
                          for g in gates])]
    parts += [_table(["commit", "value"], [(k, v) for k, v in report.commit.items()]),
             "<h2>Splits</h2>",
             _table(["split", "shards", "steps", "bytes", "hours", "requested hours", "padded shards", "pad rows"],
                    split_rows, numeric=[False, *[True] * 7]),
             f"<p>{shards_from_sources(report)}; container {_e(report.output['container'])}, shard length "
             f"{report.output['shard_length']}, short policy {_e(report.output['short_policy'])}; sample rate "
             f"{_num(report.sample_hz)} Hz.</p>",
             "<h2>Hours per split: requested and emitted</h2>", hours_chart(report),
             "<h2>Shard lengths (n_steps)</h2>", lengths_chart(report),
             "<h2>Priorities of admitted and rejected items</h2>", priorities_chart(report)]
    if report.priorities:
        parts.append(_table(["reason", "items"], list(report.priorities["reasons"].items()), numeric=[False, True]))
    parts.append("<h2>Budget</h2>")
    if report.budget:
        unit = report.budget["unit"]
        parts.append(f"<p>in {_e(budget_unit(unit))}</p>")
        parts.append(_table(["split", "requested", "candidate", "admitted", "emitted", "utilization", "underfill"],
                            [(name, *(budget_amount(b[k], unit) for k in ("requested", "candidate", "admitted",
                                                                          "emitted")),
                              format_percent(b["utilization"]), budget_amount(b["underfill"], unit))
                             for name, b in report.budget["splits"].items()],
                            numeric=[False, *[True] * 6]))
    else:
        parts.append("<p>The manifest records no budget block.</p>")
    parts += ["<h2>Modalities</h2>",
              _table(["name", "dtype", "shape", "kind", "source"],
                     [(m["name"], m["dtype"], m["shape"], m["kind"], m["source"]) for m in report.modalities]),
              "<h2>Skipped sources</h2>",
              ("<p>not recorded by this dataset's config</p>" if report.skipped_sources is None else
               _table(["source", "error"], list(report.skipped_sources.items())) if report.skipped_sources else
               "<p>none</p>"),
              "<h2>Warnings and problems</h2>",
              ("<ul>" + "".join(f"<li>{_e(w)}</li>" for w in report.warnings) + "</ul>") if report.warnings
              else "<p>no warnings</p>",
              "".join(f"<p class=\"bad\">{_e(p)}</p>" for p in report.problems),
              "<h2>Verification</h2>", _verification_html(report.verification),
              "<h2>Execution</h2>", _table(["key", "value"], list(report.execution.items())),
              "<h2>Provenance</h2>",
              _table(["key", "value"], [(k, v if not isinstance(v, dict) or len(v) <= 8 else f"{len(v)} entries")
                                        for k, v in report.provenance.items()])]
    return _page(f"Dataset report: {report.root}", "".join(parts))


def _bounded(rows: list[Any]) -> tuple[list[Any], str]:
    more = len(rows) - MAX_ROWS
    return rows[:MAX_ROWS], (f"<p>and {more:,} more</p>" if more > 0 else "")


def render_diff_html(comparison: DatasetComparison) -> str:
    """The comparison as one self-contained HTML document."""
    data = comparison.to_dict()
    shards = data["shards"]
    parts = [f"<h1>Dataset comparison</h1><p>left <code>{_e(comparison.left.root)}</code><br>right "
             f"<code>{_e(comparison.right.root)}</code></p>",
             f"<p class=\"{'ok' if comparison.identical else 'bad'}\">"
             f"{'identical' if comparison.identical else 'different'}</p>",
             "<h2>Shards</h2>",
             _table(["added", "removed", "changed", "unchanged"],
                    [(len(shards["added"]), len(shards["removed"]), len(shards["changed"]), shards["unchanged"])],
                    numeric=[True] * 4)]
    for kind in ("added", "removed"):
        if shards[kind]:
            rows, more = _bounded([(p,) for p in shards[kind]])
            parts += [f"<h3>{kind}</h3>", _table(["path"], rows), more]
    if shards["changed"]:
        rows, more = _bounded([(c["path"], c["left_sha256"], c["right_sha256"]) for c in shards["changed"]])
        parts += ["<h3>changed</h3>", _table(["path", "left sha256", "right sha256"], rows), more]
    parts += ["<h2>Splits</h2>",
              _table(["split", "left shards", "right shards", "left steps", "right steps", "left bytes", "right bytes"],
                     [(name, s["left"]["shards"], s["right"]["shards"], s["left"]["steps"], s["right"]["steps"],
                       s["left"]["bytes"], s["right"]["bytes"]) for name, s in data["splits"].items()],
                     numeric=[False, *[True] * 6]),
              "<h2>Modalities</h2>"]
    modalities = data["modalities"]
    rows = ([("added", m["name"], None, m) for m in modalities["added"]]
            + [("removed", m["name"], m, None) for m in modalities["removed"]]
            + [("changed", c["name"], c["left"], c["right"]) for c in modalities["changed"]])
    parts.append(_table(["change", "modality", "left", "right"], rows) if rows else "<p>no change</p>")
    for section in SECTIONS:
        diffs = data["sections"][section]
        parts.append(f"<h2>{_e(section)}</h2>")
        if not diffs:
            parts.append("<p>no difference</p>")
            continue
        # Values as exact JSON: a difference in the fifth digit, or "1" against 1, stays visible.
        rows, more = _bounded([(d["path"] or "(the whole section)", d["change"],
                                json.dumps(d["left"], default=str), json.dumps(d["right"], default=str))
                               for d in diffs])
        parts += [_table(["path", "change", "left", "right"], rows), more]
    return _page("Dataset comparison", "".join(parts))


def write_report_html(report: DatasetReport, url: str | os.PathLike[str]) -> str:
    """Render ``report`` and write it to ``url`` (a local path or fsspec URL) atomically, so
    a reader never sees half a report; returns the URL written."""
    return storage.write_bytes_atomic(url, render_report_html(report).encode("utf-8"))


__all__ = ["MAX_BARS", "bar_chart", "render_diff_html", "render_report_html", "write_report_html"]
