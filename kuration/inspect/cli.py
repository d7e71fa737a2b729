"""``kuration inspect``, ``kuration diff`` and ``kuration check``: inspect, compare and gate
committed datasets from the shell or CI, local or on an object store (``s3://bucket/run1``;
credentials and endpoint from the environment, as for every fsspec URL).

  kuration inspect DATASET [--verify] [--json] [--html report.html] [--trusted]
  kuration diff LEFT RIGHT [--verify] [--json] [--html diff.html] [--trusted] [--exit-zero]
  kuration check DATASET --policy quality.json [--json] [--html report.html] [--trusted]

Exit status, as for every verb (:mod:`kuration.cli`): 0 done and passed; 1 a check failed
(``inspect --verify``: a shard failed verification; ``diff``: the datasets differ, or a side
failed ``--verify``; ``check``: a gate failed); 2 bad input (not a readable committed
dataset, an invalid policy file, a usage error). Seed 000's names for the same commands,
``kur-inspect``, ``kur-diff`` and ``kur-check``, stay as aliases with the exit status they
always had (``kuration_cli.aliases``).

``--json`` prints one JSON document on stdout whose top-level ``schema_version`` is bumped
when a key is renamed, removed or changes meaning; nothing else goes to stdout then, and no
progress bar is drawn. Without ``--json``, a verifying run draws a progress bar (rich) on
stderr when stderr is a terminal. ``--html`` also writes the self-contained HTML report.
Datasets are decoded as untrusted (see :mod:`kuration.inspect.report`) unless ``--trusted``.
Numbers print as on every other page (:mod:`kuration.numbers`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, Command, ExitStatus
from kuration.errors import KurationError
from kuration.inspect.compare import compare_datasets
from kuration.inspect.figures import budget_amount, shards_from_sources
from kuration.inspect.html import render_diff_html, render_report_html
from kuration.inspect.quality import check_quality, load_policy
from kuration.inspect.report import REPORT_SCHEMA_VERSION, DatasetReport, Progress, inspect_dataset
from kuration.numbers import format_hours, format_number, format_percent

#: How many differences of one config section ``diff`` prints (``--json`` has them all).
SHOWN_DIFFERENCES = 20
_UNREADABLE = "not a readable committed dataset (missing, not committed, or changed after its commit)"


def _common(parser: argparse.ArgumentParser, *, html: str, verify: str | None = None) -> None:
    """The options the three verbs share; ``verify``: the help of a ``--verify`` flag, if the verb has one."""
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
    """``run()``'s exit status; a dataset or policy that cannot be read is bad input, named on stderr."""
    try:
        return run()
    except (KurationError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def report_text(report: DatasetReport) -> str:
    """The report as ``kuration inspect`` prints it: a header line, one line per split, the
    modalities, the budget, the plan items, the skipped sources, the execution mode, warnings,
    problems and the verification verdict."""
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
                 f"{execution['workers'] or 'not recorded'}, {_count(execution['written_shards'])} written / "
                 f"{_count(execution['reused_shards'])} reused shards")
    lines += [f"  warning: {w}" for w in report.warnings]
    lines += [f"  PROBLEM: {p}" for p in report.problems]
    v = report.verification
    if v["performed"]:
        lines.append(f"verification: {'VALID' if v['valid'] else 'INVALID'} ({v['shards_checked']:,} shards decoded"
                     f", {len(v['bad_shards'])} bad)")
    return "\n".join(lines)


def _count(value: Any) -> str:
    return format_number(value) if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _verification_failed(prog: str, *reports: DatasetReport) -> bool:
    """Whether a verified report is not valid, naming every bad shard and problem on stderr."""
    failed = [r for r in reports if r.verification["performed"] and not r.verification["valid"]]
    for report in failed:
        for bad in report.verification["bad_shards"]:
            print(f"{prog}: bad shard {bad['path']}: {bad['error']}", file=sys.stderr)
        for problem in report.verification["problems"]:
            print(f"{prog}: {problem}", file=sys.stderr)
    return bool(failed)


def _add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset directory, its dataset_manifest.json, or an fsspec URL")
    _common(parser, html="report",
            verify="decode every shard and check its size, SHA-256 and step count; exit 1 naming the bad ones")


def _inspect(args: argparse.Namespace) -> int:
    def run() -> int:
        with _progress(args.verify and not args.json, "verifying shards") as progress:
            report = inspect_dataset(args.dataset, args.verify, untrusted=not args.trusted, progress=progress)
        _write_html(args.html, render_report_html(report))
        if args.json:
            _dump(report.to_dict())
        else:
            print(report_text(report))
        return EXIT_CHECK_FAILED if _verification_failed(args.prog, report) else EXIT_OK

    return _guarded(args.prog, run)


INSPECT = Command(
    description="Summarize a committed dataset from its manifest and config (no job, no corpus): splits, hours, "
                "modalities, budget, plan items, skipped sources; --verify also decodes every shard.",
    add_arguments=_add_inspect_arguments, run=_inspect,
    exit_status=ExitStatus(ok="done (with --verify: every shard is valid)",
                           checked="--verify: a shard failed verification (each bad one is named on stderr)",
                           bad_input=_UNREADABLE),
    examples=("out/", "out/ --verify            # in handoff or CI", "s3://bucket/run1 --json > report.json",
              "out/ --verify --html report.html"),
)


def _shown_pair(left: Any, right: Any) -> tuple[str, str]:
    """Both sides of a changed value as text: numbers as every page prints them, with as many
    more digits as it takes to tell them apart; anything else as (cut) JSON."""
    def text(value: Any, digits: int) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format_number(value, digits) if digits else repr(value)
        return json.dumps(value, default=str)[:80]

    for digits in (3, 6, 12):
        pair = text(left, digits), text(right, digits)
        if pair[0] != pair[1]:
            return pair
    return text(left, 0), text(right, 0)


def _split_change(left: Mapping[str, int], right: Mapping[str, int]) -> str:
    return ", ".join(f"{format_number(left[k])} -> {format_number(right[k])} {k}" for k in ("shards", "steps", "bytes")
                     if left[k] != right[k])


def diff_text(data: Mapping[str, Any]) -> list[str]:
    """A comparison's JSON form (:meth:`DatasetComparison.to_dict`) as ``kuration diff`` prints it."""
    shards = data["shards"]
    lines = [f"{'identical' if data['identical'] else 'different'}: {len(shards['added']):,} shards added, "
             f"{len(shards['removed']):,} removed, {len(shards['changed']):,} changed, {shards['unchanged']:,} "
             "unchanged"]
    lines += [f"  split {name}: {_split_change(split['left'], split['right'])}"
              for name, split in data["splits"].items() if split["changed"]]
    lines += [f"  modality {kind}: {m['name']}" for kind in ("added", "removed", "changed")
              for m in data["modalities"][kind]]
    for section, diffs in data["sections"].items():
        for d in diffs[:SHOWN_DIFFERENCES]:
            left, right = _shown_pair(d["left"], d["right"])
            lines.append(f"  {section}{d['path']}: {d['change']} {left} -> {right}")
        if len(diffs) > SHOWN_DIFFERENCES:
            lines.append(f"  {section}: and {len(diffs) - SHOWN_DIFFERENCES:,} more differences")
    return lines


def _add_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("left", help="the dataset compared from (directory or URL)")
    parser.add_argument("right", help="the dataset compared to (directory or URL)")
    _common(parser, html="comparison", verify="also decode every shard of both (exit 1 when a side is invalid)")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 when the datasets differ too (a report, not a gate: as git diff without "
                             "--exit-code); a side that fails --verify still exits 1")


def _diff(args: argparse.Namespace) -> int:
    def run() -> int:
        with _progress(args.verify and not args.json, "verifying shards") as progress:
            comparison = compare_datasets(args.left, args.right, args.verify, untrusted=not args.trusted,
                                          progress=progress)
        _write_html(args.html, render_diff_html(comparison))
        data = comparison.to_dict()
        if args.json:
            _dump(data)
        else:
            print("\n".join(diff_text(data)))
        if _verification_failed(args.prog, comparison.left, comparison.right):
            return EXIT_CHECK_FAILED
        return EXIT_OK if comparison.identical or args.exit_zero else EXIT_CHECK_FAILED

    return _guarded(args.prog, run)


DIFF = Command(
    description="Compare two committed datasets: shards added/removed/changed, split and modality changes, and "
                "differences in schema, strategy, output, pipeline, results, warnings. Exits 1 when they differ, "
                "as diff and git diff --exit-code do.",
    add_arguments=_add_diff_arguments, run=_diff,
    exit_status=ExitStatus(ok="the datasets are identical (with --exit-zero: compared, whether or not they differ)",
                           checked="they differ, or a side failed --verify (its bad shards are named on stderr)",
                           bad_input=f"a side is {_UNREADABLE}"),
    examples=("runs/monday/ runs/tuesday/", "old/ s3://bucket/new --json > diff.json",
              "old/ new/ --html diff.html --exit-zero"),
)


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset directory, its dataset_manifest.json, or an fsspec URL")
    parser.add_argument("--policy", required=True, metavar="quality.json", help="the policy file")
    _common(parser, html="report of the inspected dataset")


def _check(args: argparse.Namespace) -> int:
    def run() -> int:
        policy = load_policy(args.policy)
        with _progress(bool(policy.verify) and not args.json, "verifying shards") as progress:
            result = check_quality(args.dataset, policy, untrusted=not args.trusted, progress=progress)
        if result.report is not None:
            _write_html(args.html, render_report_html(result.report, gates=result.gates))
        if args.json:
            _dump({"schema_version": REPORT_SCHEMA_VERSION, "kind": "quality_result", "dataset": args.dataset,
                   "policy": policy.to_dict(), **result.to_dict()})
        else:
            for gate in result.gates:
                print(f"{'PASS' if gate['passed'] else 'FAIL'}  {gate['gate']:<24} {gate['detail']}")
            for warning in result.warnings:
                print(f"warning: {warning}")
            print(f"{args.prog}: {result.verdict}")
        if not result.ok:
            for error in result.errors:
                print(f"{args.prog}: gate failed: {error}", file=sys.stderr)
            return EXIT_CHECK_FAILED
        return EXIT_OK

    return _guarded(args.prog, run)


CHECK = Command(
    description="Judge a committed dataset against a quality policy: a JSON object of gates (min_sources, "
                "min_shards, required_modalities, verify, min_budget_utilization, max_skipped_sources), e.g.\n\n"
                "  {\"min_sources\": 20, \"min_shards\": 1000, \"required_modalities\": [\"pos\", \"frame\"],\n"
                "   \"verify\": true, \"min_budget_utilization\": 0.95, \"max_skipped_sources\": 0}",
    add_arguments=_add_check_arguments, run=_check,
    exit_status=ExitStatus(ok="every gate passed", checked="a gate failed (each is named on stderr)",
                           bad_input=f"the dataset is {_UNREADABLE}, or the policy file is unreadable or invalid"),
    examples=("out/ --policy quality.json", "s3://bucket/run1 --policy quality.json --json > verdict.json"),
)


__all__ = ["CHECK", "DIFF", "INSPECT", "SHOWN_DIFFERENCES", "diff_text", "report_text"]
