"""``kuration``: one command for your own data.

  kuration check-landing DIR [--config FILE] [--universe-csv NAME] [--samples N] [--json]
  kuration run --landing DIR --storage OUT [--config FILE]

``check-landing`` checks a landing zone before anything runs (:mod:`kuration.landing.check`):
``curation.json``, the plugins, ``schema.json`` / ``strategy.json`` / ``output_spec.json``,
a sample of the recordings against the schema, their media references and the universe's
source ids. It prints one line per finding (level first) and a summary line, and exits 0
when nothing is an error, 2 when something is. ``run`` materializes the whole graph on a
landing zone (:mod:`kuration_cli.graph_run`).

Each subcommand is one ``add_<name>_command(commands)`` that builds its parser and sets the
function that runs it (``handler``), so a command is added in one place.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from kuration.landing.check import MEDIA_REFS, SAMPLE_LIMIT, check_landing_zone
from kuration_cli.graph_run import add_run_arguments, run_main

#: Exit status when the command ran and found an error (argparse uses 2 for usage errors too).
EXIT_ERROR = 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def add_check_landing_command(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check-landing", help="check a landing zone before running (exit 2 on an error)",
        description="Check a landing zone as a run would read it: curation.json, the plugins, schema.json / "
                    "strategy.json / output_spec.json, a sample of the recordings against the schema, their media "
                    "references and the universe's source ids. Prints one line per finding and a summary; exits 0 "
                    "when no finding is an error, 2 otherwise.",
    )
    check.add_argument("landing", metavar="DIR", help="the landing zone: a local folder or an fsspec URL (s3://...)")
    check.add_argument("--config", metavar="FILE", default=None,
                       help="read the curation settings from FILE instead of DIR/curation.json (as KURATION_CONFIG "
                            "does); KURATION_* overrides still apply")
    check.add_argument("--universe-csv", metavar="NAME", default="universe.csv",
                       help="the universe file, relative to DIR (default: universe.csv); an empty NAME means the "
                            "universe is the recordings, one sample per file")
    check.add_argument("--samples", metavar="N", type=_positive, default=SAMPLE_LIMIT,
                       help=f"how many recordings to read against the schema, spread over the sorted list "
                            f"(default: {SAMPLE_LIMIT})")
    check.add_argument("--media-refs", metavar="N", type=_positive, default=MEDIA_REFS,
                       help=f"how many media references to decode per media column of each sampled recording "
                            f"(default: {MEDIA_REFS})")
    check.add_argument("--json", action="store_true", help="print the findings as one JSON object instead of lines")
    check.set_defaults(handler=check_landing)


def check_landing(args: argparse.Namespace) -> int:
    """Run ``kuration check-landing``; returns the exit status."""
    report = check_landing_zone(args.landing, config_url=args.config, universe_csv=args.universe_csv or None,
                                sample_limit=args.samples, media_refs=args.media_refs)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(report.render())
    return 0 if report.ok else EXIT_ERROR


def add_run_command(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run", help="materialize the whole graph on a landing zone (exit 1 when a blocking check fails)",
        description="Materialize the whole asset graph on a landing zone through the Dagster instance, as the demo "
                    "does: universe and split, every recording scored, the budget plan, the dataset and the rollout "
                    "store. Exits 0 when every run succeeds, 1 when a run or blocking check fails (naming it), 2 "
                    "when the graph cannot start.",
    )
    add_run_arguments(run)
    run.set_defaults(handler=run_main)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kuration",
        description="Curate your own recordings with Kuration.",
        epilog="Examples:\n  kuration check-landing landing/\n  kuration check-landing s3://bucket/landing --json\n"
               "  kuration check-landing landing/ --config team/curation.json --samples 10\n"
               "  kuration run --landing landing/ --storage storage/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_check_landing_command(commands)
    add_run_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))
