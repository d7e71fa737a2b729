"""``kuration-demo``: materialize every asset on the bundled demo corpus and say what came out.

Writes the demo landing zone (with its ``curation.json``), then does what ``kuration run``
does on it (:mod:`kuration_cli.graph_run`): the asset graph's five jobs in order
(split, scoring, budget plan, dataset, rollout store; assets and their checks) on the
Dagster instance in ``$DAGSTER_HOME`` (sqlite, so the runs show up in ``dagster dev``
afterwards), printing sample counts, split sizes, hours admitted and emitted, check
results, a review of the selection and where every artifact is, ending with the validated
rollout store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kuration-demo",
        description="Materialize the whole Kuration asset graph on the bundled demo corpus and print what was "
                    "produced.",
    )
    parser.add_argument("--out", default="demo_output",
                        help="folder for the demo landing zone and artifacts (default: demo_output)")
    parser.add_argument("--seed", type=int, default=7, help="demo corpus seed (default: 7)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the stratified split (default: 0)")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve()
    landing, storage_root = out / "landing", out / "storage"
    if not os.environ.get("DAGSTER_HOME"):
        print("kuration-demo: DAGSTER_HOME is not set; run through scripts/demo.sh, or export DAGSTER_HOME=<repo root>",
              file=sys.stderr)
        return 2

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
    print(f"demo landing zone: {zone.recordings} recordings ({zone.hours:.2f} h, {zone.entities} drone flights), "
          f"{zone.clips} clips, {zone.sites} sites -> {zone.root}")

    def review() -> None:
        from kuration.budget import hours_selection_review

        print("\n" + hours_selection_review(str(storage_root), max_examples=2).render())

    try:
        outcome = run_graph(str(landing), str(storage_root), after_budget=review)
    except GraphRunSetupError as exc:
        print(f"kuration-demo: {exc}", file=sys.stderr)
        return 2
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
