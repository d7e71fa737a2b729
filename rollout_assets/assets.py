"""``rollout_store``: the committed dataset's train split as a Zarr rollout replay store
(``rollouts/rollouts.zarr`` under the storage root), with its blocking ``rollout_validation``
check and its ``rollout_lineage`` check (the store still matches the current resolved split
and dataset manifest)."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from collections.abc import Iterator
from typing import Any, Union

from dagster import (
    AssetCheckResult,
    AssetSelection,
    AssetCheckSpec,
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
    validation_check_result,
)
from kuration_assets.automation import follows_upstream
from kuration_assets.dataset_assets import DATASET_DIR
from kuration_dagster_checks import asset_check_result, markdown_table
from kuration_resources import ASSET_GROUP, CurationResource, LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits

STORE_DIR = ("rollouts", "rollouts.zarr")

rollout_validation = AssetCheckSpec(
    "rollout_validation", asset="rollout_store", blocking=True,
    description="schema, chunks, linkage, masks, labels, provenance and the q_h/ view of the store all hold",
)


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


@asset(deps=["dataset_manifest", resolved_splits], group_name=ASSET_GROUP, kinds={"zarr"},
       check_specs=[rollout_validation],
       # a new split alone does not trigger it: the dataset built from that split follows, and
       # the store must be built from that dataset (once), not from the one before it
       automation_condition=follows_upstream(not_triggered_by=AssetSelection.assets(resolved_splits)))
def rollout_store(context: AssetExecutionContext, config: RolloutStoreConfig, storage_root: StorageRootResource,
                  landing_zone: LandingZoneResource,
                  curation: CurationResource) -> Iterator[Union[MaterializeResult, AssetCheckResult]]:
    """One rollout chain per recorded stretch of the train split: every state with its full shell
    of candidate motions, one-step labels, the recorded action selected; written atomically.
    Which modalities are position, battery and state comes from the rollouts section of curation.json."""
    settings = curation.config(landing_zone).rollouts
    if not settings.enabled:
        raise RolloutInputError("rollout_store: rollouts are disabled in the curation settings (curation.json "
                                "rollouts.enabled is false, or KURATION_ROLLOUTS_ENABLED); enable them to build it")
    store = storage_root.path(*STORE_DIR)
    build = build_rollout_store(
        storage_root.path(DATASET_DIR), store, splits_root=storage_root.url, recipe=config.recipe(settings),
        discount_gamma=config.discount_gamma, split=config.split, allow_non_train=config.allow_non_train,
        invocation={"dagster_run_id": context.run.run_id, "asset": "rollout_store"},
        progress=lambda done, total: context.log.info(f"{done}/{total} shards turned into rollouts"),
    )
    yield MaterializeResult(metadata=_store_metadata(build), data_version=DataVersion(build.write.manifest_sha256))
    # the validation the runner ran on these very bytes before promoting them
    yield asset_check_result(validation_check_result(build.validation), check_name=rollout_validation.name,
                             plotted=("rollouts", "steps", "candidates", "violations"))


def _store_metadata(build: RolloutStoreBuild) -> dict[str, Any]:
    write = build.write
    return {
        "q_h_preview": markdown_table(q_h_preview(write.store_dir)),
        "path": MetadataValue.path(write.store_dir),
        "manifest": MetadataValue.path(write.manifest_path),
        "manifest_sha256": write.manifest_sha256,
        "rollouts": write.num_rollouts, "steps": write.num_steps, "candidates": write.num_candidates,
        "sources": write.num_sources,
        "chunking": markdown_table(
            ({"array": path, "chunks": _shape(c["chunks"]), "shards": _shape(c["shards"])}
             for path, c in write.chunking.items()), columns=["array", "chunks", "shards"]),
        "split_manifest_hash": build.lineage.split_manifest_hash or "",
        "dataset_manifest_sha256": build.lineage.dataset_manifest_sha256,
        "recipe": build.lineage.recipe_id,
    }


def _shape(shape: Any) -> str:
    return "" if shape is None else " x ".join(f"{n:,}" for n in shape)


@asset_check(
    asset=rollout_store, blocking=True,
    description="The store was built from the current resolved split (its split_manifest_hash is the baked "
                "splits.json digest) and the current dataset (its source shards and SHA-256s are in the committed "
                "manifest)",
)
def rollout_lineage(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(check_rollout_lineage(storage_root.path(*STORE_DIR),
                                                    dataset=storage_root.path(DATASET_DIR),
                                                    splits_root=storage_root.url), plotted=("sources",))


__all__ = ["RolloutStoreConfig", "rollout_lineage", "rollout_store", "rollout_validation"]
