"""``shards`` and ``dataset_manifest``: the committed training dataset, written in one step
(op ``shards_and_manifest``, so the destination lease and the commit stay in one process);
its blocking ``dataset_integrity`` check, a step of its own that re-verifies the committed
dataset and rewrites nothing (so it also runs alone, on a dataset committed earlier); and
the advisory ``dataset_quality`` check (a ``kur-check`` policy). The ``dataset_manifest``
materialization carries the inspect report as Markdown and the path of its self-contained
HTML version (``reports/dataset_report.html`` under the storage root, beside the dataset
rather than inside it: the dataset's files are pinned by its commit record)."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from typing import Any, Optional

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    Config,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset_check,
    multi_asset,
)
from pydantic import Field

from kuration import storage
from kuration.budget.plan_store import read_budget_plan, stored_scoring_job, stored_split_identity
from kuration.inspect import advisory_quality, inspect_dataset, write_report_html
from kuration.inspect.markdown import report_markdown
from kuration.numbers import format_bytes, rounded
from kuration.output.dataset_summary import DatasetSummary, summarize_dataset
from kuration.output.spec import OutputSpec
from kuration.output.write_dataset import WriteOptions, write_planned_dataset
from kuration.read import verify_dataset
from kuration_assets.automation import follows_upstream
from kuration_assets.budget_assets import budget_plan
from kuration_dagster_checks import asset_check_result, markdown_table
from kuration_resources import ASSET_GROUP, CurationResource, LandingZoneResource, StorageRootResource

DATASET_DIR = "dataset"
REPORT_FILE = ("reports", "dataset_report.html")
#: How to commit a dataset here, for a check that finds none.
WRITE_HINT = "materialize shards and dataset_manifest (the build_dataset job), then run the check again"

class DatasetConfig(Config):
    replace_other_runs: bool = Field(
        default=True,
        description="When the dataset folder holds another run's dataset (the plan, spec, sources or code changed), "
                    "replace it; false refuses and keeps it. The same run is always resumed (verified shards are "
                    "kept).",
    )
    reuse_shards: bool = Field(
        default=True,
        description="Keep every shard whose content key (source content, span, rows, output spec, code) matches a "
                    "verified shard of the dataset already in the folder, instead of writing it again; false writes "
                    "every shard anew.",
    )
    write_workers: Optional[int] = Field(
        default=None,
        description="Worker processes that write and hash the shards; the dataset is byte-identical whatever the "
                    "count. null: the curation settings' write_workers (curation.json, KURATION_WRITE_WORKERS, or the "
                    "curation resource), default 1.",
    )
    allow_empty: bool = Field(
        default=False,
        description="Commit an empty dataset when the budget plan admits nothing; false (the default) fails the step "
                    "instead, naming the splits and the sources that are in no split.",
    )


@multi_asset(
    specs=[
        # both specs carry the condition: one step writes both, so they are requested together
        AssetSpec("shards", deps=[budget_plan], group_name=ASSET_GROUP, kinds={"numpy"},
                  description="The training shards of the admitted spans, under `dataset/{split}/`",
                  automation_condition=follows_upstream()),
        AssetSpec("dataset_manifest", deps=["shards"], group_name=ASSET_GROUP, kinds={"json"},
                  description="dataset_manifest.json, config.json and the dataset.commit.json that publishes them",
                  automation_condition=follows_upstream()),
    ],
    can_subset=False,
)
def shards_and_manifest(
    context: AssetExecutionContext,
    config: DatasetConfig,
    storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
    curation: CurationResource,
):
    """Write the budget plan's admitted spans as a committed dataset under `dataset/`."""
    out = storage_root.path(DATASET_DIR)
    settings = curation.settings(landing_zone)
    spec = curation.output_spec(landing_zone, settings)
    workers = curation.config(landing_zone).write_workers if config.write_workers is None else config.write_workers
    result = write_planned_dataset(
        out, read_budget_plan(storage_root.url), adapter=curation.adapter(landing_zone, settings),
        schema=settings.schema, spec=spec, job=stored_scoring_job(storage_root.url),
        split=stored_split_identity(storage_root.url), options=WriteOptions(
            resume=True, on_other_run="replace" if config.replace_other_runs else "refuse",
            reuse_shards=config.reuse_shards, allow_empty=config.allow_empty, write_workers=workers,
            progress=lambda done, total, source: context.log.info(f"{done}/{total} sources written ({source})")),
    )
    if result.replaced:
        context.log.info(f"replaced the destination: {result.replaced}")
    summary = summarize_dataset(result, sample_hz=settings.schema.sample_hz)
    version = DataVersion(result.manifest_sha256)
    yield MaterializeResult(asset_key=AssetKey("shards"), metadata=_shards_metadata(out, spec, summary),
                            data_version=version)
    yield MaterializeResult(asset_key=AssetKey("dataset_manifest"), data_version=version,
                            metadata=_manifest_metadata(out, summary, storage_root.path(*REPORT_FILE)))


def _shards_metadata(out: str, spec: OutputSpec, summary: DatasetSummary) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        # the per-split table first: it is what the UI shows at the top
        "splits": markdown_table({"split": name, "shards": split.shards, "steps": split.steps,
                                  "size": format_bytes(split.bytes)} for name, split in summary.splits.items()),
        "path": MetadataValue.path(out), "container": spec.container,
        "written_shards": summary.written, "reused_shards": summary.reused,
    }
    if summary.reused_from_run is not None:
        metadata["reused_from_run"] = summary.reused_from_run
    for name, split in summary.splits.items():
        metadata[f"{name}_shards"] = split.shards
        metadata[f"{name}_size"] = format_bytes(split.bytes)
    return metadata


def _manifest_metadata(out: str, summary: DatasetSummary, report_url: str) -> dict[str, Any]:
    report = inspect_dataset(out, untrusted=False)  # manifest and config only: dataset_integrity verifies the shards
    preview = [{**row, "bytes": format_bytes(row["bytes"])} for row in summary.preview]
    metadata = {
        # the report's summary table first: it is what the UI shows at the top
        "inspect_report": MetadataValue.md(report_markdown(report)),
        "html_report": MetadataValue.path(write_report_html(report, report_url)),
        "path": MetadataValue.path(storage.join_url(out, "dataset_manifest.json")),
        "commit_state": summary.commit_state,
        "shards": summary.shards,
        "preview": markdown_table(preview, columns=["path", "split", "n_steps", "bytes", "sha256"], more=summary.more),
    }
    for name, split in summary.splits.items():
        metadata[f"{name}_emitted_hours"] = rounded(split.emitted_hours)
        if split.requested_hours is not None:
            metadata[f"{name}_requested_hours"] = rounded(split.requested_hours)
    return metadata


@asset_check(
    asset=AssetKey("dataset_manifest"), blocking=True,
    description="The committed dataset's commit chain holds and every shard matches its recorded size and SHA-256. "
                "Reads only: it runs after shards_and_manifest, or alone to re-verify the dataset already committed.",
)
def dataset_integrity(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(verify_dataset(storage_root.path(DATASET_DIR), write_hint=WRITE_HINT))


class QualityCheckConfig(Config):
    policy_json: Optional[str] = Field(
        default=None,
        description="A kur-check policy as a JSON object, e.g. {\"min_shards\": 100, \"verify\": true}; when set, "
                    "it is used instead of the landing zone's policy file",
    )
    policy_file: str = Field(
        default="quality.json",
        description="The kur-check policy file, relative to the landing zone, or a URL; when it is missing and "
                    "policy_json is unset, there is no policy and the check says so",
    )


@asset_check(
    asset=AssetKey("dataset_manifest"), blocking=False,
    description="The committed dataset meets the kur-check quality policy (quality.json in the landing zone, or "
                "policy_json in run config): sources, shards, modalities, budget utilization, skipped sources, and "
                "full verification when the policy asks. Advisory: a failed gate warns.",
)
def dataset_quality(config: QualityCheckConfig, storage_root: StorageRootResource,
                    landing_zone: LandingZoneResource) -> AssetCheckResult:
    return asset_check_result(advisory_quality(storage_root.path(DATASET_DIR), policy_json=config.policy_json,
                                               policy_url=landing_zone.resolve(config.policy_file)))


__all__ = ["DatasetConfig", "QualityCheckConfig", "dataset_integrity", "dataset_quality", "shards_and_manifest"]
