"""The one Dagster code location: every asset package's ``Definitions``, merged.

``workspace.yaml`` points here. Resources come from ``KURATION_STORAGE_ROOT`` and
``KURATION_LANDING_ZONE`` (see :func:`kuration_resources.resources_from_env`). Five jobs
name the graph's stages: ``curate_splits`` (universe, resolved splits and their checks),
``score_recordings`` (the per-source scoring partitions), ``fill_budget`` (the budget
plan over every scored source, and its check), ``build_dataset`` (the committed shards
and manifest, and the integrity check) and ``build_rollouts`` (the Zarr rollout replay store
and its validation and lineage checks).

Automation (see :mod:`kuration_assets.automation`): ``new_recordings_sensor`` (off until
switched on) asks for the split and the scoring partitions when the landing zone changes;
``default_automation_condition_sensor``, on from the start, runs ``budget_plan``, the dataset
and the rollout store after them, in runs that carry the lease tag the deployment's run queue
limits; the ``nightly_recuration`` schedule
(off until switched on) runs the ``recurate`` job, the unpartitioned chain from the current
scored pool.

Loading the code location loads the plugins (:mod:`kuration.landing.plugins`): the modules named in
the landing zone's ``curation.json`` ``plugins``, in ``KURATION_PLUGINS`` and by the
installed packages' ``kuration.landing.plugins`` entry points, so what
they register (features, media providers, encoders) exists in this process, in every run it
executes (a run worker imports this module again) and in the scoring workers. A plugin that
fails to import fails the load with a :class:`kuration.landing.plugins.PluginError` naming it.
"""

import warnings

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    ScheduleDefinition,
    define_asset_job,
    in_process_executor,
)

import kuration_assets
import rollout_assets
import splits_assets
from kuration.errors import KurationError
from kuration_assets.automation import sensor_interval_seconds
from kuration_assets.automation_badge import AUTOMATION_SENSOR_NAME, AUTOMATION_SENSOR_RUNS_BY_DEFAULT
from kuration_resources import CODE_LOCATION_ENVIRONMENT, LandingZoneResource, load_landing_plugins, resources_from_env

curate_splits = define_asset_job(
    "curate_splits", selection=AssetSelection.assets(splits_assets.universe, splits_assets.resolved_splits),
    description="Read the universe and resolve the split, with the leakage and drift checks.",
)
score_recordings = define_asset_job(
    "score_recordings",
    selection=AssetSelection.assets(kuration_assets.scored_segments),
    description="Score recordings (one partition per source); a range runs as one multi-source run.",
)

#: The tag deploy/dagster.yaml's run queue limits to one run at a time: a second dataset build
#: waits in the queue instead of failing on the writer's lease of the storage root.
DATASET_LEASE_TAG = ("kuration/lease", "dataset")

build_dataset = define_asset_job(
    "build_dataset", selection=AssetSelection.assets(kuration_assets.shards_and_manifest,
                                                     kuration_assets.published_dataset),
    description="Write the admitted spans as a new dataset version, audit it (verified shard by shard, the quality "
                "policy) and publish it only if every blocking check passed.",
    tags=dict([DATASET_LEASE_TAG]),
)

build_rollouts = define_asset_job(
    "build_rollouts", selection=AssetSelection.assets(rollout_assets.rollout_store),
    description="Build the Zarr rollout replay store from the committed dataset's train split, validated and checked "
                "against the current split and dataset manifest.",
)

fill_budget = define_asset_job(
    "fill_budget", selection=AssetSelection.assets(kuration_assets.budget_plan),
    description="Fill each split's budget from the scored segments and the resolved split, with the budget check.",
)

#: The unpartitioned chain from the current scored pool: what a re-curation re-materializes.
#: Rescoring is not in it: the sensor rescores new and rewritten recordings, and a backfill
#: over every scored_segments partition rescores after a strategy change.
RECURATION_ASSETS = AssetSelection.assets(splits_assets.universe, splits_assets.resolved_splits,
                                          kuration_assets.budget_plan, kuration_assets.shards_and_manifest,
                                          kuration_assets.published_dataset, rollout_assets.rollout_store)

recurate = define_asset_job(
    "recurate", selection=RECURATION_ASSETS,
    description="Re-curate from the current scored pool: the universe and the split (extended, no source moved), "
                "the budget plan, the dataset and the rollout store, each behind its blocking checks, in one run. "
                "Nothing is rescored; unchanged shards are reused.",
    tags=dict([DATASET_LEASE_TAG]),
)

#: 03:00 UTC: after a working day's recordings have landed and been scored.
RECURATION_CRON = "0 3 * * *"

nightly_recuration = ScheduleDefinition(
    name="nightly_recuration", job=recurate, cron_schedule=RECURATION_CRON, execution_timezone="UTC",
    # Off until switched on: it rewrites the committed dataset and the rollout store every night,
    # which an instance opened to look at the demo, or pointed at someone's storage root, must
    # not start doing by itself.
    default_status=DefaultScheduleStatus.STOPPED,
    description="Every night at 03:00 UTC, runs the recurate job: the unpartitioned chain re-materialized from the "
                "current scored pool, so a changed curation.json budget, output spec or split rule, or a run that "
                "failed during the day, is taken up by the next morning. Off until switched on (Automation in the UI, "
                "or: dagster schedule start nightly_recuration).",
)

def automation_sensor(interval_seconds: int) -> AutomationConditionSensorDefinition:
    """The sensor that evaluates every asset's automation condition, declared here so it runs by
    default (the one Dagster adds by itself starts stopped). One sensor for the whole graph, so
    one tick can plan the whole chain a change affects (budget plan, dataset, rollout store) as
    one run, in which each blocking check stops what follows it. Every run it launches carries
    :data:`DATASET_LEASE_TAG`: such a run writes the shared plan and dataset, so a deployment's
    run queue lets one run at a time do that. Its runs use the code location's executor (in
    process), like every other run."""
    # Dagster labels use_user_code_server beta at construction; we rely on it on purpose
    # (follows_upstream holds a condition of Kuration's own, a check that only warned counting as
    # passed, which only the code server can evaluate, not the daemon), so the notice is silenced
    # here and only here.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Parameter `use_user_code_server`")
        return AutomationConditionSensorDefinition(
            AUTOMATION_SENSOR_NAME, target=AssetSelection.all(), run_tags=dict([DATASET_LEASE_TAG]),
            default_status=(DefaultSensorStatus.RUNNING if AUTOMATION_SENSOR_RUNS_BY_DEFAULT
                            else DefaultSensorStatus.STOPPED),
            minimum_interval_seconds=interval_seconds,
            use_user_code_server=True,
            description=f"Every {interval_seconds} s (KURATION_SENSOR_INTERVAL_SECONDS), evaluates the automation "
                        "condition of budget_plan, shards, dataset_manifest and rollout_store (follows_upstream: "
                        "eager, once every upstream blocking check passed or only warned) and runs what it asks for, "
                        "the chain in one run tagged kuration/lease=dataset. On from the start: it acts only after "
                        "an upstream was materialized (by new_recordings_sensor's runs, a manual run or a backfill).")


def build_definitions() -> Definitions:
    """The code location's definitions; loads the plugins first (raises ``PluginError``, or
    ``CurationConfigError`` when the landing zone's ``curation.json`` cannot say which)."""
    resources = resources_from_env()
    landing = resources["landing_zone"]
    assert isinstance(landing, LandingZoneResource)
    try:
        load_landing_plugins(landing.url)
    except KurationError:
        raise  # an invalid curation.json or a failing plugin: loud, at load
    except Exception as exc:  # the landing zone unreachable from here (no credentials yet, a network error)
        # Runs open the landing zone (LandingZoneResource.open) and load the plugins then,
        # with the run's storage credentials; the UI must not go down for it.
        warnings.warn(f"kuration: could not read the curation settings of {landing.url} while loading the code "
                      f"location ({type(exc).__name__}: {exc}); curation.json plugins load when a run reads them",
                      stacklevel=2)

    return Definitions.merge(
        splits_assets.defs,
        kuration_assets.defs,
        rollout_assets.defs,
        # Every job, and the asset job behind the UI's "Materialize" and the sensor's runs, runs
        # its steps in the run's own process. Each step is light (it reads its inputs' files and
        # writes its own, with one lease and commit), so a process per step (the multiprocess
        # default) costs more than the step: a Python start and a fresh import of this code
        # location per step, 18 s for the budget plan and its check (under 1 s of work). The
        # heavy work, scoring, runs its own pool of forkserver worker processes from inside its
        # step (curation.json `workers`), whatever the executor. Run retries, "Terminate"
        # and re-execution act on the run's process, so they behave as before; ``kuration run``
        # executes its runs in its own process with this executor too.
        Definitions(resources=resources, jobs=[curate_splits, score_recordings, fill_budget, build_dataset,
                                               build_rollouts, recurate], executor=in_process_executor,
                    sensors=[automation_sensor(sensor_interval_seconds())], schedules=[nightly_recuration]),
    )


defs = build_definitions()

__all__ = ["CODE_LOCATION_ENVIRONMENT", "DATASET_LEASE_TAG", "RECURATION_ASSETS", "RECURATION_CRON",
           "automation_sensor", "build_dataset", "build_definitions", "build_rollouts", "curate_splits", "defs",
           "fill_budget", "nightly_recuration", "recurate", "score_recordings"]
