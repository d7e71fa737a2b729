"""``kur-inspect``, ``kur-diff`` and ``kur-check``: inspect, compare and gate committed datasets
from the shell or CI, local or on an object store (``s3://bucket/run1``; credentials and
endpoint from the environment, as for every fsspec URL).

  kur-inspect DATASET [--verify] [--json] [--html report.html] [--trusted]
  kur-diff LEFT RIGHT [--verify] [--json] [--html diff.html] [--trusted]
  kur-check DATASET --policy quality.json [--json] [--html report.html] [--trusted]

Exit status, the same for all three:

- 0: done; the dataset is valid (``--verify``) and every gate passed (``kur-check``);
  ``kur-diff`` exits 0 whether or not the datasets differ (the output says);
- 1: nothing could be judged: the dataset is not a readable committed dataset (missing, not
  committed, metadata changed after its commit), or the policy file is unreadable or invalid;
- 2: judged and failed: a shard failed verification, or a gate failed (the bad shards and
  failed gates are named on stderr, and in the JSON);
- 64: usage error (an unknown option, a missing argument).

``--json`` prints one JSON document on stdout whose top-level ``schema_version`` is bumped
when a key is renamed, removed or changes meaning; nothing else goes to stdout then, and no
progress bar is drawn. Without ``--json``, a verifying run draws a progress bar (rich) on
stderr when stderr is a terminal. ``--html`` also writes the self-contained HTML report.
Datasets are decoded as untrusted (see :mod:`kuration.inspect.report`) unless ``--trusted``.

Also runnable as ``python -m kuration.inspect.cli kur-inspect|kur-diff|kur-check ARGS``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from kuration.errors import KurationError
from kuration.inspect.compare import compare_datasets
from kuration.inspect.figures import budget_amount, shards_from_sources
from kuration.inspect.html import render_diff_html, render_report_html
from kuration.inspect.quality import check_quality, load_policy
from kuration.inspect.report import REPORT_SCHEMA_VERSION, DatasetReport, Progress, inspect_dataset
from kuration.numbers import format_hours, format_number, format_percent

EXIT_OK, EXIT_UNREADABLE, EXIT_FAILED, EXIT_USAGE = 0, 1, 2, 64

_EXIT_CODES = """exit status:
  0   done: valid, and every gate passed (kur-diff: compared, whether or not they differ)
  1   nothing could be judged: not a readable committed dataset, or an invalid policy file
  2   judged and failed: a shard failed verification, or a gate failed
  64  usage error"""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit status (argparse's own 2 is a failed gate here)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser(prog: str, description: str, examples: str) -> _Parser:
    return _Parser(prog=prog, description=description, epilog=f"examples:\n{examples}\n\n{_EXIT_CODES}",
                   formatter_class=argparse.RawDescriptionHelpFormatter)


def _common(parser: argparse.ArgumentParser, *, html: str, verify: str | None = None) -> None:
    """The options the tools share; ``verify``: the help of a ``--verify`` flag, if the tool has one."""
    if verify is not None:
        parser.add_argument("--verify", action="store_true", help=verify)
    parser.add_argument("--json", action="store_true", help="print one JSON document (schema_version keyed) instead "
                                                            "of text; no progress bar")
    parser.add_argument("--html", metavar="FILE", help=f"also write a self-contained HTML {html} to FILE")
    parser.add_argument("--trusted", action="store_true",
                        help="decode hdf5/parquet shards in process (default: in an isolated worker, as for an "
                             "artifact someone else wrote)")


@contextmanager
def _progress(enabled: bool, what: str) -> Iterator[Progress | None]:
    """A rich progress bar on stderr while the block runs, when ``enabled`` and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeRemainingColumn

    with Bar(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
             console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=None)

        def advance(done: int, total: int, _path: str) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=1, sort_keys=True, allow_nan=False, default=str))


def _write_html(path: str | None, text: str) -> None:
    if path:
        Path(path).write_text(text, encoding="utf-8")


def _guarded(prog: str, run: Callable[[], int]) -> int:
    try:
        return run()
    except (KurationError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE


def _report_text(report: DatasetReport) -> str:
    lines = [f"dataset {report.root}: {report.commit['state']}, run {report.commit['run_fingerprint'][:12]}, "
             f"{shards_from_sources(report)} ({report.output['container']}, "
             f"{report.output['shard_length']}-step shards, {report.output['short_policy']})"]
    for name, s in report.splits.items():
        duration = "" if s["hours"] is None else f", {format_hours(s['hours'])}"
        requested = "" if s["requested_hours"] is None else f" of {format_hours(s['requested_hours'])} requested"
        lines.append(f"  {name:<5} {s['shards']:>7,} shards {s['steps']:>10,} steps{duration}{requested}; "
                     f"{s['padded_shards']:,} padded ({s['pad_rows']:,} pad rows)")
    lines.append("  modalities: " + ", ".join(f"{m['name']} {m['dtype']}{m['shape']} ({m['kind']})"
                                              for m in report.modalities))
    if report.budget:
        unit = report.budget["unit"]
        for name, b in report.budget["splits"].items():
            if b["requested"] or b["admitted"]:
                lines.append(f"  budget {name}: requested {budget_amount(b['requested'], unit)}, admitted "
                             f"{budget_amount(b['admitted'], unit)}, emitted {budget_amount(b['emitted'], unit)} "
                             f"(utilization {format_percent(b['utilization']) or 'n/a'})")
    if report.priorities and report.priorities["edges"]:
        p = report.priorities
        lines.append(f"  plan items: {sum(p['admitted']):,} admitted, {sum(p['rejected']):,} rejected, "
                     f"{p['unrankable']:,} unrankable; priorities {format_number(p['edges'][0])} .. "
                     f"{format_number(p['edges'][-1])}")
    skipped = report.skipped_sources
    lines.append("  skipped sources: " + ("not recorded" if skipped is None else
                                          f"{len(skipped)}" + (f" (e.g. {next(iter(skipped))})" if skipped else "")))
    execution = report.execution
    lines.append(f"  execution: executor {execution['executor'] or 'not recorded'}, workers "
                 f"{execution['workers'] or 'not recorded'}, {execution['written_shards']} written / "
                 f"{execution['reused_shards']} reused shards")
    lines += [f"  warning: {w}" for w in report.warnings]
    lines += [f"  PROBLEM: {p}" for p in report.problems]
    v = report.verification
    if v["performed"]:
        lines.append(f"verification: {'VALID' if v['valid'] else 'INVALID'} ({v['shards_checked']:,} shards decoded"
                     f", {len(v['bad_shards'])} bad)")
    return "\n".join(lines)


def _verification_exit(prog: str, *reports: DatasetReport) -> int:
    """EXIT_FAILED, naming every bad shard and problem on stderr, when a verified report is
    not valid; EXIT_OK otherwise."""
    failed = [r for r in reports if r.verification["performed"] and not r.verification["valid"]]
    for report in failed:
        for bad in report.verification["bad_shards"]:
            print(f"{prog}: bad shard {bad['path']}: {bad['error']}", file=sys.stderr)
        for problem in report.verification["problems"]:
            print(f"{prog}: {problem}", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def inspect_main(argv: Sequence[str] | None = None) -> int:
    parser = _parser("kur-inspect", "Summarize a committed dataset from its manifest and config (no job, no corpus); "
                                    "--verify also decodes every shard.",
                     "  kur-inspect out/\n  kur-inspect out/ --verify            # in handoff or CI\n"
                     "  kur-inspect s3://bucket/run1 --json > report.json\n"
                     "  kur-inspect out/ --verify --html report.html")
    parser.add_argument("dataset", help="dataset directory, its dataset_manifest.json, or an fsspec URL")
    _common(parser, html="report",
            verify="decode every shard and check its size, SHA-256 and step count; exit 2 naming the bad ones")
    args = parser.parse_args(argv)

    def run() -> int:
        with _progress(args.verify and not args.json, "verifying shards") as progress:
            report = inspect_dataset(args.dataset, args.verify, untrusted=not args.trusted, progress=progress)
        _write_html(args.html, render_report_html(report))
        if args.json:
            _dump(report.to_dict())
        else:
            print(_report_text(report))
        return _verification_exit("kur-inspect", report)

    return _guarded("kur-inspect", run)


def diff_main(argv: Sequence[str] | None = None) -> int:
    parser = _parser("kur-diff", "Compare two committed datasets: shards added/removed/changed, split and modality "
                                 "changes, and differences in schema, strategy, output, pipeline, results, warnings.",
                     "  kur-diff runs/monday/ runs/tuesday/\n  kur-diff old/ s3://bucket/new --json > diff.json\n"
                     "  kur-diff old/ new/ --html diff.html")
    parser.add_argument("left", help="the dataset compared from (directory or URL)")
    parser.add_argument("right", help="the dataset compared to (directory or URL)")
    _common(parser, html="comparison", verify="also decode every shard of both (exit 2 when a side is invalid)")
    args = parser.parse_args(argv)

    def run() -> int:
        with _progress(args.verify and not args.json, "verifying shards") as progress:
            comparison = compare_datasets(args.left, args.right, args.verify, untrusted=not args.trusted,
                                          progress=progress)
        _write_html(args.html, render_diff_html(comparison))
        data = comparison.to_dict()
        if args.json:
            _dump(data)
        else:
            shards = data["shards"]
            print(f"{'identical' if comparison.identical else 'different'}: {len(shards['added'])} shards added, "
                  f"{len(shards['removed'])} removed, {len(shards['changed'])} changed, {shards['unchanged']} "
                  "unchanged")
            for name, split in data["splits"].items():
                if split["changed"]:
                    print(f"  split {name}: {split['left']} -> {split['right']}")
            for kind in ("added", "removed", "changed"):
                for m in data["modalities"][kind]:
                    print(f"  modality {kind}: {m['name']}")
            for section, diffs in data["sections"].items():
                for d in diffs[:20]:
                    print(f"  {section}{d['path']}: {d['change']} {json.dumps(d['left'], default=str)[:80]} -> "
                          f"{json.dumps(d['right'], default=str)[:80]}")
                if len(diffs) > 20:
                    print(f"  {section}: and {len(diffs) - 20} more differences")
        return _verification_exit("kur-diff", comparison.left, comparison.right)

    return _guarded("kur-diff", run)


def check_main(argv: Sequence[str] | None = None) -> int:
    parser = _parser("kur-check", "Judge a committed dataset against a quality policy (a JSON object of gates: "
                                  "min_sources, min_shards, required_modalities, verify, min_budget_utilization, "
                                  "max_skipped_sources); exit 2 when a gate fails.",
                     "  kur-check out/ --policy quality.json\n"
                     "  kur-check s3://bucket/run1 --policy quality.json --json > verdict.json\n\n"
                     "quality.json:\n  {\"min_sources\": 20, \"min_shards\": 1000, \"required_modalities\": [\"pos\", "
                     "\"frame\"],\n   \"verify\": true, \"min_budget_utilization\": 0.95, \"max_skipped_sources\": 0}")
    parser.add_argument("dataset", help="dataset directory, its dataset_manifest.json, or an fsspec URL")
    parser.add_argument("--policy", required=True, metavar="quality.json", help="the policy file")
    _common(parser, html="report of the inspected dataset")
    args = parser.parse_args(argv)

    def run() -> int:
        policy = load_policy(args.policy)
        with _progress(bool(policy.verify) and not args.json, "verifying shards") as progress:
            result = check_quality(args.dataset, policy, untrusted=not args.trusted, progress=progress)
        if result.report is not None:
            _write_html(args.html, render_report_html(result.report, gates=result.gates))
        if args.json:
            _dump({"schema_version": REPORT_SCHEMA_VERSION, "kind": "quality_result", "dataset": args.dataset,
                   "policy": policy.to_dict(),
                   **result.to_dict()})
        else:
            for gate in result.gates:
                print(f"{'PASS' if gate['passed'] else 'FAIL'}  {gate['gate']:<24} {gate['detail']}")
            for warning in result.warnings:
                print(f"warning: {warning}")
            print(f"kur-check: {result.verdict}")
        if not result.ok:
            for error in result.errors:
                print(f"kur-check: gate failed: {error}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK

    return _guarded("kur-check", run)


_TOOLS = {"kur-inspect": inspect_main, "kur-diff": diff_main, "kur-check": check_main}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kuration.inspect.cli TOOL ARGS``: TOOL is kur-inspect, kur-diff or kur-check."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in _TOOLS:
        print(f"usage: python -m kuration.inspect.cli {{{','.join(_TOOLS)}}} ARGS (--help for each)", file=sys.stderr)
        return EXIT_USAGE
    return _TOOLS[args[0]](args[1:])


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREADABLE", "EXIT_USAGE", "check_main", "diff_main", "inspect_main",
           "main"]

if __name__ == "__main__":
    sys.exit(main())
