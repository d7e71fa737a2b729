"""``rollout_store``: the committed dataset's train split as a Zarr rollout replay store
(``rollouts/rollouts.zarr`` under the storage root), with its blocking ``rollout_validation``
check (every contract of the store on disk; a step of its own that only reads, so it also runs
alone on a store built earlier) and its blocking ``rollout_lineage`` check (the store still
matches the current resolved split and dataset manifest).

The materialization leads with what a person asks: how many rollouts, steps and candidate
actions from how many source shards, whether the store validated, and what it was built from;
the counts are also numeric entries, so the UI plots them across materializations."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetSelection,
    AssetExecutionContext,
    Config,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
    asset_check,
)
from pydantic import Field

from kuration.landing.curation_config import RolloutSettings
from kuration.errors import RolloutInputError
from kuration.rollouts import MotionDirectionRecipe
from kuration.rollouts.build import (
    RolloutStoreBuild,
    build_rollout_store,
    check_rollout_lineage,
    q_h_preview,
    rollout_validation_check,
    store_summary,
)
from kuration_assets.automation import follows_upstream
from kuration_assets.dataset_assets import DATASET_DIR
from kuration_dagster_checks import asset_check_result, markdown_table
from kuration_resources import ASSET_GROUP, LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits

STORE_DIR = ("rollouts", "rollouts.zarr")
#: How to build the store here, for a check that finds none.
BUILD_HINT = "materialize rollout_store (the build_rollouts job), then run the check again"
#: The first states of the training view the materialization shows, and what its columns mean.
PREVIEW_STATES = 5
PREVIEW_CAPTION = (
    "The first states of the training view (`q_h/`): the step and its source shard, the candidate action the "
    "recording took (`selected`, its index in the step's shell), its reward and the discounted return from there, "
    "whether the chain ends there, how many of the candidate actions are valid and how many carry a label to train "
    "on, and the best one-step label among them.")


class RolloutStoreConfig(Config):
    discount_gamma: float = Field(default=0.99, description="Discount of non-terminal selected TD transitions")
    stride: int = Field(default=8, description="A chain starts every this many recorded states")
    chain_length: int = Field(default=16, description="Most steps in one chain")
    horizon: int = Field(default=10, description="The target is the recorded position this many steps after a chain")
    field_retention_policy: str = Field(
        default="compact", description="compact: no heavy payloads; full: keep each selected transition's frame")
    allow_non_train: bool = Field(default=False, description="Build from a split other than train (recorded)")
    split: str = Field(default="train", description="The dataset split the store is built from")

    def recipe(self, settings: RolloutSettings) -> MotionDirectionRecipe:
        """The recipe: this config's chain shape, and the modalities curation.json's ``rollouts`` names."""
        return MotionDirectionRecipe(
            stride=self.stride, chain_length=self.chain_length, horizon=self.horizon,
            field_retention_policy=self.field_retention_policy, position=settings.position,
            battery=settings.battery, state_modalities=settings.state_modalities,
            payload_modality=settings.payload_modality, site_half_extent_m=settings.site_half_extent_m,
            ground_level_m=settings.ground_level_m)


@asset(deps=["published_dataset", resolved_splits], group_name=ASSET_GROUP, kinds={"zarr"},
       # a new split alone does not trigger it: the dataset built from that split follows, and
       # the store must be built from that dataset (once), not from the one before it
       automation_condition=follows_upstream(not_triggered_by=AssetSelection.assets(resolved_splits)))
def rollout_store(context: AssetExecutionContext, config: RolloutStoreConfig, storage_root: StorageRootResource,
                  landing_zone: LandingZoneResource) -> Iterator[MaterializeResult]:
    """One rollout chain per recorded stretch of the train split: every state with its full shell
    of candidate motions, one-step labels, the recorded action selected; written atomically.
    Which modalities are position, battery and state comes from the rollouts section of curation.json;
    without it, a dataset that lacks the default modalities gets no store ("not configured")."""
    plan = landing_zone.open().rollouts
    if plan.status == "disabled":
        raise RolloutInputError("rollout_store: rollouts are disabled in the curation settings (curation.json "
                                "rollouts.enabled is false, or KURATION_ROLLOUTS_ENABLED); enable them to build it")
    skipped = plan.skipped("the store")
    if skipped is not None:
        yield MaterializeResult(metadata={"status": plan.status, "reason": MetadataValue.text(plan.reason)})
        return
    build = build_rollout_store(
        storage_root.path(DATASET_DIR), storage_root.path(*STORE_DIR), splits_root=storage_root.url,
        recipe=config.recipe(plan.settings), discount_gamma=config.discount_gamma, split=config.split,
        allow_non_train=config.allow_non_train,
        invocation={"dagster_run_id": context.run.run_id, "asset": "rollout_store"},
        progress=lambda done, total: _log_every_twentieth(context, done, total),
    )
    yield MaterializeResult(metadata=_store_metadata(build), data_version=DataVersion(build.write.manifest_sha256))


def _log_every_twentieth(context: AssetExecutionContext, done: int, total: int) -> None:
    """A progress line per twentieth of the shards and one at the end: each line is an event in
    the run's log (a database write), and the demo's store turns some 2,400 shards into rollouts."""
    if done == total or done % max(1, total // 20) == 0:
        context.log.info(f"{done}/{total} shards turned into rollouts")


def _store_metadata(build: RolloutStoreBuild) -> dict[str, Any]:
    """The summary table first (what the UI shows at the top), then the counts as numbers
    (plotted across materializations), the store's folder, and an explained preview of its
    training view. The per-array chunk layout stays in the write result and the store's own
    ``zarr.json`` files; the whole digests in its ``rollout_manifest.json``."""
    write = build.write
    preview = markdown_table(q_h_preview(write.store_dir, rows=PREVIEW_STATES))
    return {
        "summary": markdown_table(store_summary(build), columns=["what", "value"]),
        "rollouts": write.num_rollouts, "steps": write.num_steps, "candidates": write.num_candidates,
        "sources": write.num_sources,
        "path": MetadataValue.path(write.store_dir),
        "first_states": MetadataValue.md(f"{PREVIEW_CAPTION}\n\n{preview.value}"),
    }


@asset_check(
    asset=rollout_store, blocking=True,
    description="The rollout store on disk is whole and consistent: every array, chunk, link, mask, label and "
                "source hash, and its training view (q_h/) equals a rebuild from its tables. Reads only: it runs "
                "after rollout_store, or alone to re-check the store already built.",
)
def rollout_validation(storage_root: StorageRootResource, landing_zone: LandingZoneResource) -> AssetCheckResult:
    skipped = landing_zone.open().rollouts.skipped("the store")
    return asset_check_result(skipped or rollout_validation_check(storage_root.path(*STORE_DIR), build_hint=BUILD_HINT),
                              plotted=("rollouts", "steps", "candidates", "violations"))


@asset_check(
    asset=rollout_store, blocking=True,
    description="The store was built from the current resolved split (its split_manifest_hash is the baked "
                "splits.json digest) and the current dataset (its source shards and SHA-256s are in the committed "
                "manifest)",
)
def rollout_lineage(storage_root: StorageRootResource, landing_zone: LandingZoneResource) -> AssetCheckResult:
    skipped = landing_zone.open().rollouts.skipped("its lineage")
    return asset_check_result(skipped or check_rollout_lineage(storage_root.path(*STORE_DIR),
                                                               dataset=storage_root.path(DATASET_DIR),
                                                               splits_root=storage_root.url), plotted=("sources",))


__all__ = ["RolloutStoreConfig", "rollout_lineage", "rollout_store", "rollout_validation"]
