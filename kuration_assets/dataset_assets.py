"""``shards`` and ``dataset_manifest``: the committed training dataset, written in one step
(so the destination lease and the commit stay in one process), and its blocking
``dataset_integrity`` check."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    Config,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from pydantic import Field

from kuration import storage
from kuration.budget.plan_store import read_budget_plan
from kuration.errors import CommitError
from kuration.output.write_dataset import DifferentRunError, write_planned_dataset
from kuration.read import verify_dataset
from kuration_assets.budget_assets import budget_plan
from kuration_dagster_checks import asset_check_result
from kuration_resources import CurationResource, LandingZoneResource, StorageRootResource

DATASET_DIR = "dataset"

dataset_integrity = AssetCheckSpec(
    "dataset_integrity", asset="dataset_manifest", blocking=True,
    description="the commit chain holds and every shard matches its recorded size and SHA-256",
)


class DatasetConfig(Config):
    replace_other_runs: bool = Field(
        default=True,
        description="When the dataset folder holds another run's dataset (the plan, spec, sources or code changed), "
                    "replace it; false refuses and keeps it. The same run is always resumed (verified shards are kept).",
    )


@multi_asset(
    specs=[
        AssetSpec("shards", deps=[budget_plan], group_name="dataset", kinds={"numpy"},
                  description="The training shards of the admitted spans, under dataset/<split>/"),
        AssetSpec("dataset_manifest", deps=["shards"], group_name="dataset", kinds={"json"},
                  description="dataset_manifest.json, config.json and the dataset.commit.json that publishes them"),
    ],
    check_specs=[dataset_integrity],
    can_subset=False,
)
def training_dataset(
    context: AssetExecutionContext,
    config: DatasetConfig,
    storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
    curation: CurationResource,
):
    """Write the budget plan's admitted spans as a committed dataset under ``dataset/``."""
    out = storage_root.path(DATASET_DIR)
    settings = curation.settings(landing_zone)
    spec = curation.output_spec(landing_zone, settings)
    plan = read_budget_plan(storage_root.url)
    adapter = curation.adapter(landing_zone, settings)

    def progress(done: int, total: int, source: str) -> None:
        context.log.info(f"{done}/{total} sources written ({source})")

    try:
        result = write_planned_dataset(out, plan, adapter=adapter, schema=settings.schema, spec=spec, resume=True,
                                       progress=progress)
    except (DifferentRunError, CommitError) as exc:  # another run's dataset, or a torn commit record
        if not config.replace_other_runs:
            raise
        context.log.info(f"replacing the destination: {exc}")
        result = write_planned_dataset(out, plan, adapter=adapter, schema=settings.schema, spec=spec, force=True,
                                       progress=progress)
    manifest = result.manifest
    verification = verify_dataset(out)
    version = DataVersion(result.record.manifest_sha256)
    shard_meta = {"path": MetadataValue.path(out), "container": spec.container,
                  "written_shards": result.written, "reused_shards": result.reused}
    for name, split in manifest["splits"].items():
        shard_meta[f"{name}_shards"] = split["shards"]
        shard_meta[f"{name}_bytes"] = split["bytes"]
    yield MaterializeResult(asset_key=AssetKey("shards"), metadata=shard_meta, data_version=version)

    budget = manifest["budget"]["splits"]
    manifest_meta = {
        "path": MetadataValue.path(storage.join_url(out, "dataset_manifest.json")),
        "commit_state": result.record.state,
        "shards": len(manifest["entries"]),
        "preview": MetadataValue.md(_preview(manifest["entries"])),
    }
    for name, split in manifest["splits"].items():
        hz = settings.schema.sample_hz
        manifest_meta[f"{name}_emitted_hours"] = split["steps"] / hz / 3600.0
        if manifest["budget"]["unit"] == "seconds":  # a count budget requests segments, not hours
            manifest_meta[f"{name}_requested_hours"] = budget[name]["requested"] / 3600.0
    yield MaterializeResult(asset_key=AssetKey("dataset_manifest"), metadata=manifest_meta, data_version=version)
    yield asset_check_result(verification, check_name=dataset_integrity.name, asset_key=dataset_integrity.asset_key)


def _preview(entries: list, rows: int = 10) -> str:
    lines = ["| path | split | n_steps | bytes | sha256 |", "|---|---|---|---|---|"]
    for e in entries[:rows]:
        lines.append(f"| {e['path']} | {e['split']} | {e['n_steps']} | {e['bytes']} | {e['sha256'][:12]} |")
    if len(entries) > rows:
        lines.append(f"| ... {len(entries) - rows} more | | | | |")
    return "\n".join(lines)


__all__ = ["DatasetConfig", "dataset_integrity", "training_dataset"]
