"""``kuration-demo``: materialize every asset on the bundled demo corpus and say what came out.

Writes the demo landing zone, then runs the asset graph's five jobs in order (split,
scoring, budget plan, dataset, rollout store; assets and their checks) on the Dagster instance in
``$DAGSTER_HOME`` (sqlite, so the runs show up in ``dagster dev`` afterwards), and prints
sample counts, split sizes, hours admitted and emitted, check results, a review of the
selection and where every artifact is, ending with the validated rollout store.
"""

from __future__ import annotations

import argparse
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
    os.environ["KURATION_LANDING_ZONE"] = str(landing)
    os.environ["KURATION_STORAGE_ROOT"] = str(storage_root)

    from dagster import DagsterInstance

    from kuration.demo_corpus import write_demo_landing_zone, write_demo_quality_policy
    from kuration.landing import list_recordings
    from kuration_assets.scoring_assets import SOURCE_PARTITIONS
    from kuration_definitions import build_definitions

    zone = write_demo_landing_zone(landing, seed=args.seed)
    write_demo_quality_policy(landing)  # the gates the dataset_quality check shows
    print(f"demo landing zone: {zone.recordings} recordings ({zone.hours:.2f} h, {zone.entities} drone flights), "
          f"{zone.clips} clips, {zone.sites} sites -> {zone.root}")

    if not os.environ.get("DAGSTER_HOME"):
        print("kuration-demo: DAGSTER_HOME is not set; run through scripts/demo.sh, or export DAGSTER_HOME=<repo root>",
              file=sys.stderr)
        return 2
    instance = DagsterInstance.get()
    defs = build_definitions()
    print(f"instance: DAGSTER_HOME={os.environ['DAGSTER_HOME']} (open it with scripts/ui.sh)")

    splits = defs.resolve_job_def("curate_splits").execute_in_process(
        instance=instance,
        run_config={
            "ops": {"resolved_splits": {"config": {"strategy": "stratified", "seed": args.split_seed}}},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        },
        raise_on_error=False,
    )
    _report("curate_splits", splits)

    sources = list_recordings(zone.recordings_root)
    instance.add_dynamic_partitions(SOURCE_PARTITIONS, list(sources))
    first, last = next(iter(sources)), next(reversed(sources))
    scoring = defs.resolve_job_def("score_recordings").execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last},
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
    _report("score_recordings", scoring)

    # The budget run's defaults (4 h train, 1 h val, 0.5 h test of 60 s spans) fill about a
    # third of the demo corpus, so the cut, the tag reserve and the group cap all show.
    budget = defs.resolve_job_def("fill_budget").execute_in_process(
        instance=instance,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
    _report("fill_budget", budget)
    if budget.success:
        from kuration.budget import hours_selection_review

        print("\n" + hours_selection_review(str(storage_root), max_examples=2).render())

    dataset = defs.resolve_job_def("build_dataset").execute_in_process(
        instance=instance,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
    _report("build_dataset", dataset)

    rollouts = defs.resolve_job_def("build_rollouts").execute_in_process(
        instance=instance,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
    _report("build_rollouts", rollouts)
    results = (splits, scoring, budget, dataset, rollouts)
    checks = [e for r in results for e in r.get_asset_check_evaluations()]
    return 0 if all(r.success for r in results) and all(e.passed for e in checks) else 1


#: Metadata worth a line in the demo's report, in this order.
_SHOWN = ("samples", "sources", "groups", "universe_hash", "request", "status", "leakage",
          "train_samples", "train_groups", "val_samples", "val_groups", "test_samples", "test_groups",
          "train_requested", "train_admitted", "train_emitted", "val_requested", "val_admitted", "val_emitted",
          "test_requested", "test_admitted", "test_emitted", "excluded",
          "train_shards", "val_shards", "test_shards", "train_emitted_hours", "val_emitted_hours", "test_emitted_hours",
          "commit_state", "rollouts", "steps", "candidates", "manifest_sha256", "split_manifest_hash",
          "path", "manifest", "splits_json", "assignments", "report", "budget_json", "html_report")


def _report(job: str, result) -> None:
    print(f"\n{job}: run {result.run_id} {'SUCCESS' if result.success else 'FAILURE'}")
    partitions = []
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        meta = {k: v.value for k, v in mat.metadata.items()}
        if mat.partition is not None:
            partitions.append(meta)
            continue
        print(f"  asset {mat.asset_key.to_user_string()}")
        for key in _SHOWN:
            if key in meta:
                value = meta[key]
                print(f"    {key:<20} {value:.3f}" if isinstance(value, float) else f"    {key:<20} {value}")
    if partitions:
        skipped = [m for m in partitions if m.get("skipped_error")]
        segments = sum(m["segments"] for m in partitions)
        hours = sum(m["hours"] for m in partitions)
        cached = sum(1 for m in partitions if m["status"] == "cached")
        print(f"  asset scored_segments: {len(partitions)} partitions ({cached} from cache), {segments} segments "
              f"covering {hours:.2f} track-hours (one track per drone), "
              f"{sum(m['non_finite'] for m in partitions)} non-finite, {len(skipped)} skipped")
        for m in skipped:
            print(f"    skipped: {m['skipped_error']}")
        print(f"    files under  {os.environ['KURATION_STORAGE_ROOT']}/scored_segments/")
    for evaluation in result.get_asset_check_evaluations():
        verdict = "PASSED" if evaluation.passed else f"FAILED ({evaluation.severity.value})"
        name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
        print(f"  check {name:<34} {verdict}")
        if evaluation.description:
            print(f"        {evaluation.description}")


if __name__ == "__main__":
    sys.exit(main())
