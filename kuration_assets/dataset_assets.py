"""Write, audit, publish. ``shards`` and ``dataset_manifest``: a new version of the training
dataset, committed in one step (op ``shards_and_manifest``, so the lease and the commit stay
in one process) and left *staged*: readers of ``dataset/`` still see the current version
(:mod:`kuration.output.versions`). Its audit, each check on the staged version (the newest
committed one) and recording it as ``version``: the blocking ``shards_present`` check on
``shards`` (every listed shard there at its size, from one listing); the blocking
``dataset_integrity`` check, a step of its own that re-verifies and rewrites nothing (so it
also runs alone); and ``dataset_quality`` (a ``kur-check`` policy, shown as one table of its
gates), blocking too, but failing at ERROR only when the policy says ``"blocking": true``
(otherwise a failed gate warns, which does not stop the publish). ``published_dataset``
makes the audited version current, in one atomic step, only when every blocking check
passed on that version (:func:`kuration_dagster_checks.audit.audit_failures`); the rollout
store is built from the published version, and the versions ``keep_versions`` (in
``curation.json``) no longer keeps are removed under the same lease. The ``dataset_manifest``
materialization carries the inspect report as Markdown and the path of its self-contained
HTML version (``reports/dataset_report.html`` under the storage root, beside the dataset
rather than inside it: the dataset's files are pinned by its commit record)."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from typing import Any, Optional

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
    asset_check,
    multi_asset,
)
from pydantic import Field

from kuration import storage
from kuration.budget.plan_store import read_budget_plan, stored_scoring_job, stored_split_identity
from kuration.inspect import QualityResult, inspect_dataset, write_report_html
from kuration.inspect.markdown import report_markdown
from kuration.numbers import format_bytes, rounded
from kuration.output.dataset_summary import DatasetSummary, summarize_dataset
from kuration.output.publish import DatasetWriteResult
from kuration.output.spec import OutputSpec
from kuration.output.version_gc import publish_and_collect
from kuration.output.versions import DatasetRoot
from kuration.output.write_dataset import WriteOptions, write_planned_dataset
from kuration.read import check_shard_presence, verify_dataset
from kuration_assets.automation import follows_upstream
from kuration_assets.budget_assets import budget_plan
from kuration_dagster_checks import asset_check_result, markdown_list, markdown_table, plotted_numbers
from kuration_dagster_checks.audit import VERSION_KEY, audit_failures
from kuration_resources import ASSET_GROUP, LandingZoneResource, StorageRootResource, set_fields

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
                    "landing zone resource), default 1.",
    )
    allow_empty: bool = Field(
        default=False,
        description="Commit an empty dataset when the budget plan admits nothing; false (the default) fails the step "
                    "instead, naming the splits and the sources that are in no split.",
    )

    def curation_overrides(self) -> dict[str, Any]:
        """``write_workers`` when set: it wins over the landing zone's, by its precedence rule."""
        return set_fields(self, ("write_workers",))


@multi_asset(
    specs=[
        # both specs carry the condition: one step writes both, so they are requested together
        AssetSpec("shards", deps=[budget_plan], group_name=ASSET_GROUP, kinds={"numpy"},
                  description="The training shards of the admitted spans, under dataset/{split}/",
                  automation_condition=follows_upstream()),
        AssetSpec("dataset_manifest", deps=["shards"], group_name=ASSET_GROUP, kinds={"json"},
                  description="dataset_manifest.json, config.json and the dataset.commit.json that commits a new "
                              "version, staged until published_dataset publishes it",
                  automation_condition=follows_upstream()),
    ],
    can_subset=False,
)
def shards_and_manifest(
    context: AssetExecutionContext,
    config: DatasetConfig,
    storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
):
    """Write the budget plan's admitted spans as a new committed version under dataset/, staged."""
    zone = landing_zone.open(config)
    out = storage_root.path(DATASET_DIR)
    result = write_planned_dataset(
        out, read_budget_plan(storage_root.url), adapter=zone.adapter, schema=zone.schema, spec=zone.spec,
        job=stored_scoring_job(storage_root.url), split=stored_split_identity(storage_root.url), options=WriteOptions(
            resume=True, on_other_run="replace" if config.replace_other_runs else "refuse",
            reuse_shards=config.reuse_shards, allow_empty=config.allow_empty, write_workers=zone.config.write_workers,
            publish=False,
            progress=lambda done, total, source: context.log.info(f"{done}/{total} sources written ({source})")),
    )
    if result.replaced:
        context.log.info(f"a new version beside the previous one: {result.replaced}")
    context.log.info(f"{result.version} committed, staged for its audit ({result.version_url})")
    summary = summarize_dataset(result, sample_hz=zone.schema.sample_hz)
    version = DataVersion(result.manifest_sha256)
    staged = {VERSION_KEY: result.version}
    yield MaterializeResult(asset_key=AssetKey("shards"), data_version=version,
                            metadata={**_shards_metadata(result.version_url, zone.spec, summary), **staged})
    yield MaterializeResult(asset_key=AssetKey("dataset_manifest"), data_version=version, metadata={
        **_manifest_metadata(result, summary, storage_root.path(*REPORT_FILE)), **staged})


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
    # the shard counts as numbers too, which the UI plots across materializations (the sizes are read in the table)
    for name, split in summary.splits.items():
        metadata[f"{name}_shards"] = split.shards
    return metadata


def _manifest_metadata(result: DatasetWriteResult, summary: DatasetSummary, report_url: str) -> dict[str, Any]:
    out = result.version_url
    # through the root (ROOT@vN): a pooled version's shards lie in the root's pool. Manifest
    # and config only: dataset_integrity verifies the shards
    report = inspect_dataset(result.reference, untrusted=False)
    preview = [{**row, "bytes": format_bytes(row["bytes"])} for row in summary.preview]
    metadata = {
        # the report's summary table first (the UI opens the report in a dialog), then the
        # per-split table the page shows as it is
        "inspect_report": MetadataValue.md(report_markdown(report)),
        "splits": markdown_table({"split": name, "shards": split.shards, "emitted (h)": split.emitted_hours,
                                  "requested (h)": split.requested_hours} for name, split in summary.splits.items()),
        "html_report": MetadataValue.path(write_report_html(report, report_url)),
        "path": MetadataValue.path(storage.join_url(out, "dataset_manifest.json")),
        "commit_state": summary.commit_state,
        "shards": summary.shards,
        "preview": markdown_table(preview, columns=["path", "split", "n_steps", "bytes", "sha256"], more=summary.more),
    }
    # the hours emitted as numbers too, which the UI plots across materializations
    for name, split in summary.splits.items():
        metadata[f"{name}_emitted_hours"] = rounded(split.emitted_hours)
    return metadata


@asset_check(
    asset=AssetKey("shards"), blocking=True,
    description="Every shard the committed manifest lists is in the dataset folder at its recorded size: one listing "
                "of the folder, no shard read, so it is cheap (dataset_integrity reads and hashes them). A missing "
                "shard, one of another size, or a link fails it. Reads only: it runs after shards_and_manifest, or "
                "alone on the dataset already committed.",
)
def shards_present(storage_root: StorageRootResource) -> AssetCheckResult:
    ref, version = _staged(storage_root)
    return _of_version(asset_check_result(check_shard_presence(ref, write_hint=WRITE_HINT),
                                          plotted=("shards", "missing_shards", "wrong_size_shards")), version)


@asset_check(
    asset=AssetKey("dataset_manifest"), blocking=True,
    description="The committed dataset's commit chain holds and every shard matches its recorded size and SHA-256. "
                "Reads only: it runs after shards_and_manifest, or alone to re-verify the dataset already committed.",
)
def dataset_integrity(storage_root: StorageRootResource) -> AssetCheckResult:
    ref, version = _staged(storage_root)
    return _of_version(asset_check_result(verify_dataset(ref, write_hint=WRITE_HINT), plotted=("shards", "bad_shards")),
                       version)


def _staged(storage_root: StorageRootResource) -> tuple[str, str | None]:
    """What the audit checks: the newest committed version (the one shards_and_manifest
    staged, or the current one when none is newer) as ``ROOT@vN``, and its name; the root
    itself when it holds no version (the check then says nothing is committed)."""
    root = storage_root.path(DATASET_DIR)
    version = DatasetRoot(root).newest_committed()
    return (root, None) if version is None else (f"{root}@{version}", version)


def _of_version(check: AssetCheckResult, version: str | None) -> AssetCheckResult:
    """``check`` with the version it evaluated, which the publish step compares."""
    return check._replace(metadata={VERSION_KEY: MetadataValue.text(version or "none"), **check.metadata})


class QualityCheckConfig(Config):
    policy_json: Optional[str] = Field(
        default=None,
        description="A kur-check policy as a JSON object, e.g. {\"min_shards\": 100, \"verify\": true}; when set, "
                    "it is used instead of the landing zone's policy file",
    )
    policy_file: Optional[str] = Field(
        default=None,
        description="Another kur-check policy file, relative to the landing zone, or a URL; null: the landing zone's "
                    "(its resource's quality_file, quality.json by default). When the file is missing and "
                    "policy_json is unset, there is no policy and the check says so",
    )


@asset_check(
    asset=AssetKey("dataset_manifest"), blocking=True,
    description="The staged version meets the kur-check quality policy (quality.json in the landing zone, or "
                "policy_json in run config): sources, shards, modalities, budget utilization, skipped sources, and "
                "full verification when the policy asks. A failed gate warns (the version is still published) "
                "unless the policy says \"blocking\": true, when it fails and the version is not published.",
)
def dataset_quality(config: QualityCheckConfig, storage_root: StorageRootResource,
                    landing_zone: LandingZoneResource) -> AssetCheckResult:
    ref, version = _staged(storage_root)
    result = landing_zone.open().quality_check(ref, policy_json=config.policy_json, policy_file=config.policy_file)
    return _of_version(_with_gates(asset_check_result(result), result), version)


def _with_gates(check: AssetCheckResult, result: QualityResult) -> AssetCheckResult:
    """The gates as one table (each gate's measured value against its threshold) in place of
    the pass/fail figures, and what they measured as numbers, which the check's page plots."""
    if not result.gates:  # no policy, or one that could not be read: the verdict says why
        return check
    rows = [{"gate": g["gate"], "result": "passed" if g["passed"] else "FAILED",
             "measured": _gate_figure(g["gate"], g["value"]), "threshold": _gate_figure(g["gate"], g["threshold"]),
             "detail": g["detail"]} for g in result.gates]
    rest = {key: value for key, value in check.metadata.items() if key != "figures"}
    return check._replace(metadata={"gates": markdown_table(rows), **rest, **plotted_numbers(result.measured())})


def _gate_figure(gate: str, value: Any) -> Any:
    if value is None:
        return "not recorded"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    if gate == "min_budget_utilization":
        return f"{value:.1%}"  # a fraction of the budget requested
    return value


#: The checks a version must pass before it is published (every blocking check of the dataset).
AUDIT_CHECKS = (AssetCheckKey(AssetKey("shards"), "shards_present"),
                AssetCheckKey(AssetKey("dataset_manifest"), "dataset_integrity"),
                AssetCheckKey(AssetKey("dataset_manifest"), "dataset_quality"))


# on shards too, though written in one step with dataset_manifest: its automation then waits for
# shards_present as well, which the audit requires (AUDIT_CHECKS)
@asset(deps=["shards", "dataset_manifest"], group_name=ASSET_GROUP, kinds={"json"},
       automation_condition=follows_upstream(),
       description="The dataset version readers see: the staged version made current (one publish record, created "
                   "atomically), only once every blocking check passed on it")
def published_dataset(context: AssetExecutionContext, storage_root: StorageRootResource,
                      landing_zone: LandingZoneResource) -> MaterializeResult:
    """Publish the staged version if its audit passed, then keep ``keep_versions`` versions
    (under the same lease); fail, publishing nothing, if not."""
    root = DatasetRoot(storage_root.path(DATASET_DIR))
    version = root.newest_committed()
    if version is None:
        raise Failure(f"{root.url}: holds no committed version to publish; {WRITE_HINT}")
    failures = audit_failures(context.instance, AUDIT_CHECKS, version)
    if failures:
        raise Failure(f"{version} not published (readers keep the current version): " + "; ".join(failures),
                      metadata={VERSION_KEY: version, "audit": markdown_list(failures)})
    keep = landing_zone.open().config.keep_versions
    current, collected = publish_and_collect(root, version, keep)
    context.log.info(f"{version} is current (publish record {current.sequence}); keep_versions={keep} removed "
                     f"{', '.join(collected.removed) or 'nothing'}")
    return MaterializeResult(data_version=DataVersion(current.commit_sha256), metadata={
        VERSION_KEY: version, "path": MetadataValue.path(root.version_url(version)),
        "publish_record": current.sequence, "published": current.published,
        "versions_removed": ", ".join(collected.removed) or "none", "keep_versions": keep})


__all__ = ["AUDIT_CHECKS", "DatasetConfig", "QualityCheckConfig", "dataset_integrity", "dataset_quality",
           "published_dataset", "shards_and_manifest", "shards_present"]
