"""The one Dagster code location: every asset package's ``Definitions``, merged.

``workspace.yaml`` points here. Resources come from ``KURATION_STORAGE_ROOT`` and
``KURATION_LANDING_ZONE`` (see :func:`kuration_resources.resources_from_env`). Five jobs
name the graph's stages: ``curate_splits`` (universe, resolved splits and their checks),
``score_recordings`` (the per-source scoring partitions), ``fill_budget`` (the budget
plan over every scored source, and its check), ``build_dataset`` (the committed shards
and manifest, and the integrity check) and ``build_rollouts`` (the Zarr rollout replay store
and its validation and lineage checks).

Loading the code location loads the plugins (:mod:`kuration.plugins`): the modules named in
the landing zone's ``curation.json`` ``plugins``, in ``KURATION_PLUGINS`` and by the
installed packages' ``kuration.plugins`` entry points, so what
they register (features, media providers, encoders) exists in this process, in every run it
executes (a run worker imports this module again) and in the scoring workers. A plugin that
fails to import fails the load with a :class:`kuration.plugins.PluginError` naming it.
"""

import warnings

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

import kuration_assets
import rollout_assets
import splits_assets
from kuration.errors import KurationError
from kuration_resources import CODE_LOCATION_ENVIRONMENT, LandingZoneResource, load_landing_plugins, resources_from_env

curate_splits = define_asset_job(
    "curate_splits", selection=AssetSelection.groups("splits"),
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
    "build_dataset", selection=AssetSelection.assets(kuration_assets.training_dataset),
    description="Write the admitted spans as a committed training dataset, verified shard by shard.",
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
        # Runs read the settings again (CurationResource.config) and load the plugins then,
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
                                               build_rollouts], executor=in_process_executor),
    )


defs = build_definitions()

__all__ = ["CODE_LOCATION_ENVIRONMENT", "build_dataset", "build_definitions", "build_rollouts", "curate_splits",
           "defs", "fill_budget", "score_recordings"]
