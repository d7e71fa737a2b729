"""``kuration demo``: materialize every asset on the bundled demo corpus and say what came out.

Writes the demo landing zone (with its ``curation.json``), then does what ``kuration run``
does on it (:mod:`kuration_cli.graph_run`): the asset graph's five jobs in order
(split, scoring, budget plan, dataset, rollout store; assets and their checks) on the
Dagster instance in ``$DAGSTER_HOME`` (sqlite, so the runs show up in ``dagster dev``
afterwards), printing sample counts, split sizes, hours admitted and emitted, check
results, a review of the selection and where every artifact is, ending with the validated
rollout store. ``python -m kuration_definitions.demo_job`` runs the same command (the old
name ``kuration-demo`` is an alias for this release, ``kuration_cli.aliases``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, Command, ExitStatus, run_command
from kuration.numbers import format_hours


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo_output",
                        help="folder for the demo landing zone and artifacts (default: demo_output)")
    parser.add_argument("--seed", type=int, default=7, help="demo corpus seed (default: 7)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the stratified split (default: 0)")


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    landing, storage_root = out / "landing", out / "storage"
    if not os.environ.get("DAGSTER_HOME"):
        print(f"{args.prog}: DAGSTER_HOME is not set; run through scripts/demo.sh, or export DAGSTER_HOME=<repo root>",
              file=sys.stderr)
        return EXIT_BAD_INPUT

    from kuration import storage
    from kuration.demo.corpus import write_demo_landing_zone, write_demo_quality_policy
    from kuration_cli.graph_run import GraphRunSetupError, run_graph

    zone = write_demo_landing_zone(landing, seed=args.seed)
    write_demo_quality_policy(landing)  # the gates the dataset_quality check shows
    # The settings every run reads (kuration run, the sensor, the UI): the budget fills about
    # a third of the demo corpus (4 h train, 1 h val, 0.5 h test of 60 s spans), so the cut,
    # the tag reserve and the group cap all show.
    storage.write_bytes_atomic(str(landing / "curation.json"), json.dumps({
        "recordings": "recordings",
        "segment_window": 10, "segment_stride": 5,
        "budget": {"train_hours": 4, "val_hours": 1, "test_hours": 0.5, "span_seconds": 60},
        "split": {"strategy": "stratified", "seed": args.split_seed, "val_ratio": 0.2, "test_ratio": 0.2},
    }, indent=1).encode())
    print(f"demo landing zone: {zone.recordings} recordings ({format_hours(zone.hours)}, {zone.entities} drone "
          f"flights), {zone.clips} clips, {zone.sites} sites -> {zone.root}")

    def review() -> None:
        from kuration.budget import hours_selection_review

        print("\n" + hours_selection_review(str(storage_root), max_examples=2).render())

    try:
        outcome = run_graph(str(landing), str(storage_root), after_budget=review)
    except GraphRunSetupError as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK if outcome.ok else EXIT_CHECK_FAILED


DEMO = Command(
    description="Materialize the whole Kuration asset graph on the bundled demo corpus and print what was produced.",
    add_arguments=_add_arguments, run=_run,
    exit_status=ExitStatus(ok="every run succeeded", checked="a run or a blocking check failed (it is named)",
                           bad_input="DAGSTER_HOME is not set, or the graph cannot start"),
    examples=("--out demo_output", "--out /tmp/demo --seed 3"),
)


def main(argv: Sequence[str] | None = None) -> int:
    """``kuration demo`` from Python or ``python -m kuration_definitions.demo_job``."""
    prog = "kuration demo"
    return run_command(DEMO, DEMO.parser(prog), sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
