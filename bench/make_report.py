"""Render bench/REPORT.md from bench/results.json (what ``bench/run_all`` writes).

    python bench/make_report.py [--results bench/results.json] [--out bench/REPORT.md]

Runs alone on an existing results.json; standard library only. The report has a header
saying when, where and in which mode the benches ran; a summary of every bench (ok or
failed, targets met and missed); every scaling exponent in one table; then one section per
bench with each figure of its ``report`` key (see bench/_report.py): the value, the in-run
baseline it is a ratio against, the target it is held to and whether it is met. A bench
that failed shows its error and the tail of its stderr; one whose JSON has no ``report``
key says so. A malformed results.json stops with :class:`ResultsError`, naming the file,
the field and what is wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
FORMAT = 1
STATUSES = ("ok", "failed")
FIGURE_FIELDS = {"name": str, "unit": str, "baseline": str, "note": str}


class ResultsError(ValueError):
    """results.json is not what bench/run_all writes."""


# --------------------------------------------------------------------------- loading


def _need(obj: Any, key: str, kind: type | tuple[type, ...], where: str, *, nullable: bool = False) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ResultsError(f"{where}: missing field {key!r}")
    value = obj[key]
    if value is None and nullable:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # bool is an int
        names = "/".join(k.__name__ for k in kinds)
        raise ResultsError(f"{where}: field {key!r} must be {names}{' or null' if nullable else ''}, "
                           f"not {type(value).__name__} {value!r:.60}")
    return value


def check_figure(fig: Any, where: str) -> None:
    """Raise :class:`ResultsError` unless ``fig`` is a figure as bench/_report.py makes it."""
    if not isinstance(fig, dict):
        raise ResultsError(f"{where}: a figure must be an object, not {type(fig).__name__}")
    for key, kind in FIGURE_FIELDS.items():
        _need(fig, key, kind, where)
    value = _need(fig, "value", (int, float), where, nullable=True)
    if value is not None and not math.isfinite(value):
        raise ResultsError(f"{where}: field 'value' must be a finite number or null, not {value!r}")
    _need(fig, "target", str, where, nullable=True)
    _need(fig, "met", bool, where, nullable=True)


def check_results(data: Any, source: str) -> dict[str, Any]:
    """``data`` if it is a results.json as bench/run_all writes it, else :class:`ResultsError`."""
    if not isinstance(data, dict):
        raise ResultsError(f"{source}: the top level must be an object, not {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ResultsError(f"{source}: field 'format' must be {FORMAT}, not {data.get('format')!r} "
                           "(re-run bench/run_all to write a current results.json)")
    for key in ("mode", "started_at", "finished_at"):
        _need(data, key, str, source)
    _need(data, "commit", str, source, nullable=True)
    machine = _need(data, "machine", dict, source)
    _need(machine, "cpu_count", int, f"{source}: machine", nullable=True)
    benches = _need(data, "benches", list, source)
    seen = set()
    for i, bench in enumerate(benches):
        where = f"{source}: benches[{i}]"
        name = _need(bench, "name", str, where)
        where = f"{source}: benches[{i}] ({name})"
        if name in seen:
            raise ResultsError(f"{where}: the bench appears twice")
        seen.add(name)
        status = _need(bench, "status", str, where)
        if status not in STATUSES:
            raise ResultsError(f"{where}: field 'status' must be one of {list(STATUSES)}, not {status!r}")
        if status == "failed":
            _need(bench, "error", str, where)
            continue
        output = _need(bench, "output", dict, where)
        if "report" in output:
            figures = _need(output, "report", list, f"{where}: output")
            for j, fig in enumerate(figures):
                check_figure(fig, f"{where}: output.report[{j}]")
    return data


def load_results(path: Path) -> dict[str, Any]:
    """The checked content of results.json at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read it ({exc.strerror}); run bench/run_all first") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    return check_results(data, str(path))


# --------------------------------------------------------------------------- rendering


def _cell(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _number(value: float) -> str:
    if value == 0 or 0.001 <= abs(value) < 1e6:
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:.3g}"


def format_value(fig: dict[str, Any]) -> str:
    value, unit = fig["value"], fig["unit"]
    if value is None:
        return "not measured"
    if unit == "x":
        return f"{_number(value)}×"
    if unit == "fraction":
        return f"{value:.3f} ({100 * value:.1f}%)"
    if unit == "exponent":
        return f"{value:.3f}"
    return f"{_number(value)} {unit}"


def format_met(fig: dict[str, Any]) -> str:
    if fig["target"] is None:
        return "no target"
    if fig["met"] is None:
        return "not judged"
    return "yes" if fig["met"] else "**no**"


def _machine_lines(machine: dict[str, Any]) -> list[str]:
    simd = machine.get("simd") or {}
    lines = [f"- CPUs: {machine.get('cpu_count')} ({machine.get('cpu_model') or 'model unknown'}), "
             f"memory {machine.get('memory_gib', '?')} GiB, {machine.get('platform', '')}".rstrip(", ")]
    if simd:
        lines.append(f"- SIMD (numpy {simd.get('numpy', '?')}): baseline {', '.join(simd.get('baseline', [])) or '-'}; "
                     f"dispatched, available here: {', '.join(simd.get('dispatch_available', [])) or '-'}")
        if simd.get("dispatch_missing"):
            lines.append(f"- SIMD dispatch targets this CPU lacks: {', '.join(simd['dispatch_missing'])}")
    if machine.get("python"):
        lines.append(f"- Python {machine['python']}")
    if machine.get("load_average_at_start") is not None:
        lines.append(f"- load average at start: {', '.join(str(x) for x in machine['load_average_at_start'])}")
    return lines


def _figures(bench: dict[str, Any]) -> list[dict[str, Any]] | None:
    if bench["status"] != "ok":
        return None
    return bench["output"].get("report")


def _summary_row(bench: dict[str, Any]) -> str:
    figures = _figures(bench)
    if bench["status"] == "failed":
        return f"| {bench['name']} | **failed** | | | | |"
    if figures is None:
        return f"| {bench['name']} | ok, no `report` key | | | | |"
    met = sum(f["target"] is not None and f["met"] is True for f in figures)
    missed = sum(f["target"] is not None and f["met"] is False for f in figures)
    unjudged = sum(f["target"] is not None and f["met"] is None for f in figures)
    return f"| {bench['name']} | ok | {len(figures)} | {met} | {missed} | {unjudged} |"


def render(results: dict[str, Any], source: str = "bench/results.json") -> str:
    """REPORT.md's text for ``results`` (checked by :func:`check_results`)."""
    benches = results["benches"]
    failed = [b["name"] for b in benches if b["status"] == "failed"]
    dirty = results.get("dirty_files") or []
    mode = results["mode"]
    mode_text = {"quick": "quick (each script's smaller sizes; figures are noisier and sizes differ from the "
                          "full run's)", "full": "full (each script's default sizes)"}.get(mode, mode)
    out = [
        "# Benchmark report",
        "",
        f"Generated by `bench/make_report.py` from `{source}` (written by `bench/run_all`); do not edit by hand.",
        "",
        f"- measured: {results['started_at']} to {results['finished_at']}",
        f"- mode: {mode_text}",
        f"- commit: {results.get('commit') or 'unknown'}"
        + (f" with uncommitted changes in {', '.join(dirty)}" if dirty else ""),
        *_machine_lines(results["machine"]),
        *([f"- kept from earlier runs (`run_all --merge`), each section says when it ran: "
           f"{', '.join(results['kept_from_earlier_runs'])}"] if results.get("kept_from_earlier_runs") else []),
        f"- benches: {len(benches)} run, {len(benches) - len(failed)} ok, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else ""),
        "",
        "Each figure is a ratio against a baseline measured in the same run (the baseline column says which, "
        "and which way round), unless its unit is seconds, a fraction or an exponent. A target is the one the "
        "bench script and bench/README.md state; \"no target\" means none is stated. Timings are best of the "
        "script's repeats on a shared machine: compare figures within a run, not across machines.",
        "",
        "## Summary",
        "",
        "| bench | status | figures | targets met | targets missed | targets not judged |",
        "|---|---|---|---|---|---|",
        *[_summary_row(b) for b in benches],
        "",
    ]
    exponents = [(b["name"], f) for b in benches for f in (_figures(b) or []) if f["unit"] == "exponent"]
    out += ["## Scaling exponents", ""]
    if exponents:
        out += ["| bench | figure | exponent | fitted over | target | met |", "|---|---|---|---|---|---|"]
        out += [f"| {_cell(name)} | {_cell(f['name'])} | {format_value(f)} | {_cell(f['baseline'])} | "
                f"{_cell(f['target'] or '')} | {format_met(f)} |" for name, f in exponents]
    else:
        out.append("No bench in this run reported a scaling exponent.")
    out.append("")
    for bench in benches:
        out += _bench_section(bench)
    return "\n".join(out).rstrip() + "\n"


def _bench_section(bench: dict[str, Any]) -> list[str]:
    command = " ".join(["python", bench.get("script", "?"), *bench.get("args", [])])
    out = [f"## {bench['name']}", "", f"`{command}`"]
    facts = []
    if bench.get("seconds") is not None:
        facts.append(f"ran {bench['seconds']:.0f} s")
    if bench.get("started_at"):
        facts.append(f"started {bench['started_at']}")
    if bench.get("commit"):
        facts.append(f"commit {bench['commit']}")
    if bench.get("load_average_at_start"):
        facts.append(f"load average at start {', '.join(str(x) for x in bench['load_average_at_start'])}")
    if facts:
        out[-1] += f" ({', '.join(facts)})"
    out.append("")
    if bench["status"] == "failed":
        out += [f"**Failed:** {_cell(bench['error'])}", ""]
        tail = bench.get("stderr_tail") or ""
        if tail.strip():
            out += ["stderr (last lines):", "", "```", tail.rstrip().replace("```", "'''"), "```", ""]
        return out
    figures = bench["output"].get("report")
    if figures is None:
        out += ["This bench's JSON has no `report` key, so it has no figures in the uniform format; its full "
                "output is in results.json.", ""]
        return out
    if not figures:
        out += ["The `report` key is empty: no figure was measured.", ""]
        return out
    out += ["| figure | value | baseline (in-run) | target | met | note |", "|---|---|---|---|---|---|"]
    out += [f"| {_cell(f['name'])} | {format_value(f)} | {_cell(f['baseline'])} | {_cell(f['target'] or '')} | "
            f"{format_met(f)} | {_cell(f['note'])} |" for f in figures]
    out.append("")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results.json")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "REPORT.md")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.results)
    except ResultsError as exc:
        print(f"make_report: {exc}", file=sys.stderr)
        return 2
    try:
        source = str(args.results.resolve().relative_to(BENCH_DIR.parent))
    except ValueError:
        source = str(args.results)
    args.out.write_text(render(results, source), encoding="utf-8")
    print(f"make_report: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
