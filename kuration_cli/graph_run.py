"""``kuration run``: materialize the whole asset graph on a landing zone, through the instance.

The same path serves the bundled demo (``kuration-demo`` writes the demo landing zone, then
runs this) and a team's own recordings. In order, each a run on the Dagster instance so it
shows in the UI afterwards, under its job, and can be re-executed there (see
:func:`_create_run`):

1. ``curate_splits``: the universe, its ``universe_sources`` check and the resolved split
   (which extends itself when the universe grew);
2. the recordings under the recordings root are registered as ``scored_segments``
   partitions, and ``score_recordings`` scores them in one multi-partition run (unchanged
   ones come from the score cache);
3. ``fill_budget``, ``build_dataset`` and ``build_rollouts`` (not run, and not a failure,
   when the rollout store is disabled or not configured: see
   :func:`kuration.landing.references.rollout_plan`).

Every setting comes from the landing zone's ``curation.json`` and its ``KURATION_*``
overrides (:mod:`kuration.landing.curation_config`), as for a sensor-launched run. The landing
zone is opened once before anything runs (:func:`kuration.landing.open_landing_zone`), and
each run carries its fingerprint as a tag: a run that finds the files changed fails rather
than curate with two versions. The first run that fails stops the rest: a blocking check
that fails is named with its verdict, and the exit status is 1. Settings that cannot be read,
files that do not fit together, or a plugin that cannot be imported exit 2 before anything
runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kuration import storage
from kuration.numbers import format_hours, format_number

if TYPE_CHECKING:
    from kuration.landing import LandingZone

#: The graph's jobs, in the order ``kuration run`` runs them.
JOB_ORDER = ("curate_splits", "score_recordings", "fill_budget", "build_dataset", "build_rollouts")

#: Metadata worth a line in the summary, in this order; a table (an asset's per-stage or
#: per-split summary: stage_table, budget, splits) is printed under its name, a row a line.
_SHOWN = ("samples", "sources", "groups", "universe_hash", "request", "status", "leakage",
          "resolution_mode", "kept_samples", "newly_assigned_samples", "removed_samples", "stage_table",
          "train_samples", "val_samples", "test_samples",
          # budget_plan's table and what each split admitted, in the unit its budget counts
          "budget",
          *(f"{split}_admitted_{unit}" for split in ("train", "val", "test") for unit in ("hours", "segments")),
          "excluded", "written_shards", "reused_shards", "splits", "train_shards", "val_shards", "test_shards",
          "train_emitted_hours", "val_emitted_hours", "test_emitted_hours",
          "commit_state", "rollouts", "steps", "candidates", "manifest_sha256", "split_manifest_hash",
          "path", "manifest", "splits_json", "assignments", "report", "budget_json", "html_report")

#: The instance ``kuration run`` uses when ``DAGSTER_HOME`` is unset: beside the artifacts.
DEFAULT_HOME = "dagster_home"

#: The code location's name in the UI. ``workspace.yaml`` loads the module
#: ``kuration_definitions`` and Dagster names a module location after its module; the runs
#: ``kuration run`` records carry this name, which is how the UI finds their job (its Runs
#: tab, the overview timeline, "Re-execute").
CODE_LOCATION_NAME = "kuration_definitions"


@dataclass
class GraphRunOutcome:
    """What ``run_graph`` did: each job's run id and success, and the blocking checks that failed."""

    runs: dict[str, tuple[str, bool]] = field(default_factory=dict)
    failed_checks: list[str] = field(default_factory=list)
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and all(success for _, success in self.runs.values())


class GraphRunSetupError(Exception):
    """The graph cannot start: settings, plugins, the instance or the landing zone (exit 2)."""


def _instance_home(storage_root: str, environ: dict[str, str] | os._Environ[str]) -> str:
    if environ.get("DAGSTER_HOME"):
        return environ["DAGSTER_HOME"]
    if storage.is_remote(storage_root):
        raise GraphRunSetupError(f"the storage root {storage_root} is remote: set DAGSTER_HOME to a local folder for "
                                 "the Dagster instance (its run and event storage)")
    home = Path(storage_root) / DEFAULT_HOME
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return str(home)


def run_graph(landing: str, storage_root: str, *, config_file: str | None = None,
              out: Callable[[str], None] = print, after_budget: Callable[[], None] | None = None) -> GraphRunOutcome:
    """Materialize every job of the graph in :data:`JOB_ORDER` on ``landing`` into
    ``storage_root``; see the module docstring. ``after_budget`` runs once the budget plan
    succeeded (the demo prints a review of the selection there)."""
    landing = landing if storage.is_remote(landing) else str(Path(landing).resolve())
    storage_root = storage_root if storage.is_remote(storage_root) else str(Path(storage_root).resolve())
    environment = {"KURATION_LANDING_ZONE": landing, "KURATION_STORAGE_ROOT": storage_root,
                   "DAGSTER_HOME": _instance_home(storage_root, os.environ)}
    if config_file:
        environment["KURATION_CONFIG"] = config_file if storage.is_remote(config_file) else str(
            Path(config_file).resolve())
    # The code location reads its resources from these; they are put back afterwards, so a
    # caller in the same process (a test, a notebook) keeps its own.
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        return _run_jobs(landing, storage_root, out, after_budget)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_jobs(landing: str, storage_root: str, out: Callable[[str], None],
              after_budget: Callable[[], None] | None) -> GraphRunOutcome:
    from dagster import DagsterInstance

    from kuration.errors import KurationError
    from kuration.landing import open_landing_zone
    from kuration_assets.automation_badge import show_automation_as_it_runs
    from kuration_definitions import build_definitions
    from kuration_resources import CODE_LOCATION_ENVIRONMENT

    if not storage.exists(landing):
        raise GraphRunSetupError(f"the landing zone {landing} does not exist")
    try:
        # every run below opens it again and must find this version (its fingerprint is the runs' tag)
        zone = open_landing_zone(landing, plugin_environment=CODE_LOCATION_ENVIRONMENT)
        defs = build_definitions()
    except KurationError as exc:
        raise GraphRunSetupError(str(exc)) from None
    # disposed at the end: an instance left to the garbage collector closes its sqlite files
    # whenever that runs, under whatever the process is doing then
    with DagsterInstance.get() as instance, _code_location(instance) as location:
        show_automation_as_it_runs(instance)  # so the UI's job pages say what the automation sensor does
        return _run_on_instance(instance, _Jobs(location, defs), zone, storage_root, out, after_budget)


@dataclass
class _Jobs:
    """Where the runs come from: the code location (their snapshots and origin) and the same
    definitions built in this call's environment, which execute."""

    location: Any
    defs: Any


def _code_location(instance: Any) -> Any:
    """The workspace's code location, loaded in this process (``dagster dev`` starts a code
    server process for it, a few seconds to wait for each time). It loads :func:`kuration_definitions.build_definitions`
    rather than the module's ``defs``, which were built from the environment of whenever the
    module was first imported, not from the landing zone and storage root of this call
    (:func:`_run_jobs` built them once already, so this load does not fail on the settings)."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    import kuration_definitions

    origin = InProcessCodeLocationOrigin(LoadableTargetOrigin(
        executable_path=sys.executable, module_name=kuration_definitions.__name__,
        attribute=kuration_definitions.build_definitions.__name__,
        # so a run worker elsewhere on this machine (a re-execution) imports the same package
        working_directory=str(Path(kuration_definitions.__file__).resolve().parent.parent),
    ), location_name=CODE_LOCATION_NAME)
    return origin.create_location(instance)


def _create_run(instance: Any, location: Any, job: str, run_config: dict[str, Any], tags: dict[str, str]) -> Any:
    """A run of ``job`` as the UI's launchpad creates one: with its job and execution plan
    snapshots and the code location's origin. The origin is what lists the run under its job
    and on the overview timeline, and what "Re-execute" looks the job up by; a run of
    ``execute_in_process`` has none."""
    from dagster._core.definitions.selector import JobSubsetSelector

    (repository,) = location.get_repositories().values()  # a Definitions makes one, __repository__
    remote_job = location.get_job(JobSubsetSelector(location_name=location.name, repository_name=repository.name,
                                                    job_name=job, op_selection=None))
    plan = location.get_execution_plan(remote_job, run_config, step_keys_to_execute=None, known_state=None,
                                       instance=instance).execution_plan_snapshot
    return instance.create_run(
        job_name=job, run_id=None, run_config=run_config, resolved_op_selection=None,
        step_keys_to_execute=plan.step_keys_to_execute, op_selection=None, status=None, root_run_id=None,
        parent_run_id=None, tags={**remote_job.tags, **tags}, job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan, parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(), job_code_origin=remote_job.get_python_origin(),
        asset_selection=None, asset_check_selection=None, asset_graph=repository.asset_graph)


def _execute(instance: Any, jobs: _Jobs, job: str, run_config: dict[str, Any], tags: dict[str, str]) -> Any:
    """Create ``job``'s run and execute it here, to the end: the jobs' executor runs every step
    in this process. It executes the definition built for this call, not one rebuilt from the
    run's code origin as a run worker does: Dagster keeps the last rebuilt definition per
    origin, and the origin names the same function whatever the environment, so a second
    call in this process (another landing zone, a test) would get the first one's resources."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import execute_run

    run = _create_run(instance, jobs.location, job, run_config, tags)
    return execute_run(InMemoryJob(jobs.defs.resolve_job_def(job)), run, instance)


def _run_on_instance(instance: Any, jobs: _Jobs, zone: LandingZone, storage_root: str,
                     out: Callable[[str], None], after_budget: Callable[[], None] | None) -> GraphRunOutcome:
    from kuration_resources import LANDING_FINGERPRINT_TAG

    out(f"landing zone: {zone.url}\nstorage root: {storage_root}\nsettings: {zone.config.describe()}\n"
        f"settings fingerprint: {zone.fingerprint[:12]} (each run's tag {LANDING_FINGERPRINT_TAG})")
    out(f"instance: DAGSTER_HOME={os.environ['DAGSTER_HOME']} (open it with: DAGSTER_HOME={os.environ['DAGSTER_HOME']} "
        f"scripts/ui.sh --landing {zone.url} --storage {storage_root})")

    outcome = GraphRunOutcome()
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    for job in JOB_ORDER:
        if job == "build_rollouts" and not zone.rollouts.builds:
            out(f"\n{job}: not run: {_rollouts_skipped(zone)}")
            continue
        tags = {LANDING_FINGERPRINT_TAG: zone.fingerprint}
        if job == "score_recordings":
            partitions = _register_partitions(instance, zone, outcome, out)
            if partitions is None:
                break
            tags.update({"dagster/asset_partition_range_start": partitions[0],
                         "dagster/asset_partition_range_end": partitions[-1]})
        result = _execute(instance, jobs, job, quiet, tags)
        report_run(job, result, out)
        outcome.runs[job] = (result.run_id, result.success)
        failed = _failed_blocking_checks(result)
        outcome.failed_checks.extend(failed)
        if not result.success:
            outcome.failure = (f"{job} failed: blocking check {', '.join(failed)} failed" if failed
                               else f"{job} failed: {_step_failure(result)}")
            out(f"\nkuration run: {outcome.failure}; later jobs were not run")
            break
        if job == "fill_budget" and after_budget is not None:
            after_budget()
    return outcome


def _rollouts_skipped(zone: LandingZone) -> str:
    """Why ``build_rollouts`` does not run, for the summary: disabled, or not configured."""
    if zone.rollouts.status == "disabled":
        return "rollouts are disabled in the curation settings (rollouts.enabled false)"
    return f"rollout store not configured: {zone.rollouts.reason}"


def _register_partitions(instance: Any, zone: LandingZone, outcome: GraphRunOutcome,
                         out: Callable[[str], None]) -> list[str] | None:
    """Every recording as a scoring partition (keys of an earlier release, the path with its
    extension, give way to the recording names); the partitions, or None with
    ``outcome.failure`` set when there is nothing to score or two recordings share a name."""
    from kuration.landing.recordings import RecordingNameError, partition_update
    from kuration_assets.scoring_assets import SOURCE_PARTITIONS

    job = "score_recordings"
    recordings = list(zone.list_recordings())
    if not recordings:
        outcome.failure = (f"no recordings matching {zone.config.source_pattern!r} under {zone.recordings_url} "
                           "(curation.json `recordings`)")
        out(f"\n{job}: not run: {outcome.failure}")
        return None
    try:
        update = partition_update(instance.get_dynamic_partitions(SOURCE_PARTITIONS), recordings)
    except RecordingNameError as exc:
        outcome.failure = str(exc)
        out(f"\n{job}: not run: {outcome.failure}")
        return None
    for legacy in update.replace:
        instance.delete_dynamic_partition(SOURCE_PARTITIONS, legacy)
    if update.replace:
        out(f"\n{job}: {len(update.replace)} partition(s) keyed by path renamed to their recording names")
    instance.add_dynamic_partitions(SOURCE_PARTITIONS, list(update.add))
    return list(instance.get_dynamic_partitions(SOURCE_PARTITIONS))


def _failed_blocking_checks(result: Any) -> list[str]:
    return [f"{e.asset_key.to_user_string()}:{e.check_name}" for e in result.get_asset_check_evaluations()
            if not e.passed and e.severity.value == "ERROR"]


def _step_failure(result: Any) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None and event.step_failure_data.error:
            # Dagster wraps the asset's own error ("Error occurred while executing op ..."):
            # the innermost cause is the one that says what to fix
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            return f"step {event.step_key}: {error.message.strip()}"
    return "see the run's events in the UI"


def shown_value(key: str, value: Any) -> str:
    """A metadata value as the summary prints it: figures in the one number format every
    page uses (:mod:`kuration.numbers`), hours with their unit; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_hours(value) if key.endswith("_hours") else format_number(value)


def report_run(job: str, result: Any, out: Callable[[str], None] = print) -> None:
    """Print one run: each asset's notable metadata, the scoring partitions in total, and every check's verdict."""
    out(f"\n{job}: run {result.run_id} {'SUCCESS' if result.success else 'FAILURE'}")
    partitions = []
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        meta = {k: v.value for k, v in mat.metadata.items()}
        if mat.partition is not None:
            partitions.append(meta)
            continue
        out(f"  asset {mat.asset_key.to_user_string()}")
        for key in _SHOWN:
            if key in meta:
                value = meta[key]
                if isinstance(value, str) and "\n" in value:  # a Markdown table: one line a row, under its name
                    out(f"    {key}")
                    for line in value.splitlines():
                        out(f"      {line}")
                else:
                    out(f"    {key:<20} {shown_value(key, value)}")
    if partitions:
        skipped = [m for m in partitions if m.get("skipped_error")]
        cached = sum(1 for m in partitions if m["status"] == "cached")
        out(f"  asset scored_segments: {len(partitions)} partitions ({cached} from cache), "
            f"{format_number(sum(m['segments'] for m in partitions))} segments covering "
            f"{format_number(sum(m['hours'] for m in partitions))} track-hours (one track per entity), "
            f"{format_number(sum(m['non_finite'] for m in partitions))} non-finite, {len(skipped)} skipped")
        for m in skipped:
            out(f"    skipped: {m['skipped_error']}")
        out(f"    files under  {os.environ['KURATION_STORAGE_ROOT']}/scored_segments/")
    for evaluation in result.get_asset_check_evaluations():
        verdict = "PASSED" if evaluation.passed else f"FAILED ({evaluation.severity.value})"
        name = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
        out(f"  check {name:<34} {verdict}")
        if evaluation.description:
            out(f"        {evaluation.description}")
    if not result.success and not _failed_blocking_checks(result):
        out(f"  {_step_failure(result)}")


def add_run_arguments(parser: Any) -> None:
    """The ``kuration run`` options, on an argparse parser."""
    parser.add_argument("--landing", required=True,
                        help="the landing zone: universe.csv, schema.json, strategy.json, output_spec.json, "
                             "curation.json and the recordings (a folder or an fsspec URL)")
    parser.add_argument("--storage", required=True,
                        help="where every artifact is written (a folder or an fsspec URL); the Dagster instance "
                             f"lives in its {DEFAULT_HOME}/ unless DAGSTER_HOME is set")
    parser.add_argument("--config", default=None,
                        help="a curation settings file to use instead of the landing zone's curation.json")


def run_main(args: Any, out: Callable[[str], None] = print) -> int:
    """Exit status of ``kuration run``: 0 every job succeeded, 1 a job or blocking check failed,
    2 the graph could not start (settings, plugins, landing zone, instance)."""
    try:
        outcome = run_graph(args.landing, args.storage, config_file=args.config, out=out)
    except GraphRunSetupError as exc:
        print(f"kuration run: {exc}", file=sys.stderr)
        return 2
    if outcome.ok:
        out(f"\nkuration run: {len(outcome.runs)} runs succeeded")
    return 0 if outcome.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kuration_cli.graph_run`` (the same as ``kuration run``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="kuration run", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    return run_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
