"""Asset checks over the split artifacts; each wraps one core validator."""


from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, asset_check

from kuration.errors import KurationError
from kuration.splits.artifacts import check_split_leakage, check_universe_drift, read_universe_table, validate_universe_table
from kuration_resources import StorageRootResource
from splits_assets.assets import resolved_splits, universe
from splits_assets.metadata import leakage_metadata


@asset_check(asset=universe, blocking=True, description="universe.parquet matches its pandera schema and pinned hash")
def universe_schema(storage_root: StorageRootResource) -> AssetCheckResult:
    result = validate_universe_table(read_universe_table(storage_root.url))
    return AssetCheckResult(
        passed=result.ok,
        metadata={**result.figures, "errors": MetadataValue.json(list(result.errors))},
    )


@asset_check(
    asset=resolved_splits, blocking=True,
    description="train / val / test share no sample and no group; the split's declared constraints hold",
)
def split_leakage(storage_root: StorageRootResource) -> AssetCheckResult:
    try:
        report, counts = check_split_leakage(storage_root.url)
    except KurationError as exc:
        return AssetCheckResult(passed=False, metadata={"error": MetadataValue.text(str(exc))})
    metadata = {**leakage_metadata(report), **{f"{stage}_samples": n for stage, n in counts.items()}}
    if report.errors:
        return AssetCheckResult(passed=False, severity=AssetCheckSeverity.ERROR, metadata=metadata)
    if report.warnings:
        return AssetCheckResult(passed=False, severity=AssetCheckSeverity.WARN, metadata=metadata)
    return AssetCheckResult(passed=True, metadata=metadata)


@asset_check(
    asset=resolved_splits, blocking=True,
    description="the split was resolved against the current universe; a positional rule has not drifted",
)
def universe_drift(storage_root: StorageRootResource) -> AssetCheckResult:
    try:
        result = check_universe_drift(storage_root.url)
    except KurationError as exc:
        return AssetCheckResult(passed=False, metadata={"error": MetadataValue.text(str(exc))})
    return AssetCheckResult(
        passed=result.ok,
        metadata={
            "message": MetadataValue.text(result.message),
            "universe_hash": result.universe_hash,
            "baked_universe_hash": result.baked_hash or "",
            "input_drift": MetadataValue.json(result.input_drift or {}),
        },
    )
