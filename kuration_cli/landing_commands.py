"""``kuration check-landing`` and ``kuration run``: the two verbs on a landing zone.

  kuration check-landing DIR [--config FILE] [--universe-csv NAME] [--samples N] [--json]
  kuration run --landing DIR --storage OUT [--config FILE]

``check-landing`` checks a landing zone before anything runs (:mod:`kuration.landing.check`):
``curation.json``, the plugins, ``schema.json`` / ``strategy.json`` / ``output_spec.json``,
a sample of the recordings against the schema, their media references and the universe's
source ids. It prints one line per finding (level first) and a summary line, and exits 0
when nothing is an error, 2 when something is (a landing zone with an error is bad input).
``run`` materializes the whole graph on a landing zone (:mod:`kuration_cli.graph_run`).
"""

from __future__ import annotations

import argparse
import json

from kuration.cli import Command, ExitStatus
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


def add_check_landing_arguments(check: argparse.ArgumentParser) -> None:
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


def check_landing(args: argparse.Namespace) -> int:
    """Run ``kuration check-landing``; returns the exit status."""
    report = check_landing_zone(args.landing, config_url=args.config, universe_csv=args.universe_csv or None,
                                sample_limit=args.samples, media_refs=args.media_refs)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(report.render())
    return 0 if report.ok else EXIT_ERROR


CHECK_LANDING = Command(
    description="Check a landing zone as a run would read it: curation.json, the plugins, schema.json / "
                "strategy.json / output_spec.json, the references between them (the strategy against the "
                "schema; the spec against the schema, the segment features and the media providers; the "
                "quality policy against the spec; the rollout recipe's modalities against the spec, a "
                "store noted \"not configured\" when rollouts is unset and the spec lacks them), a sample of "
                "the recordings against the schema, their media references and the universe's source ids. "
                "Prints one line per finding and a summary.",
    add_arguments=add_check_landing_arguments, run=check_landing,
    exit_status=ExitStatus(ok="no finding is an error (warnings and notes are printed)",
                           bad_input="a finding is an error: the landing zone cannot run as it is"),
    examples=("landing/", "s3://bucket/landing --json", "landing/ --config team/curation.json --samples 10"),
)

RUN = Command(
    description="Materialize the whole asset graph on a landing zone through the Dagster instance, as the demo "
                "does: universe and split, every recording scored, the budget plan, the dataset and the rollout "
                "store.",
    add_arguments=add_run_arguments, run=run_main,
    exit_status=ExitStatus(ok="every run succeeded", checked="a run or a blocking check failed (it is named)",
                           bad_input="the graph cannot start: settings, plugins, the landing zone or the instance"),
    examples=("--landing landing/ --storage storage/",
              "--landing landing/ --storage storage/ --config team/curation.json"),
)


__all__ = ["CHECK_LANDING", "EXIT_ERROR", "RUN", "add_check_landing_arguments", "check_landing"]
