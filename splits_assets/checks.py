"""Asset checks over the split artifacts; each wraps one core validator."""


from dagster import AssetCheckResult, asset_check

from kuration.splits.artifacts import check_split_leakage, check_universe_drift, check_universe_table
from kuration.landing.universe_sources import check_stored_universe_sources
from kuration_dagster_checks import asset_check_result
from kuration_resources import LandingZoneResource, StorageRootResource
from splits_assets.assets import resolved_splits, universe


@asset_check(asset=universe, blocking=True, description="universe.parquet matches its pandera schema and pinned hash")
def universe_schema(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(check_universe_table(storage_root.url), plotted=("samples", "sources", "groups"))


@asset_check(
    asset=universe, blocking=True,
    description="every universe source id names a recording under the recordings root (ids are paths relative to "
                "it); recordings no universe row names warn",
)
def universe_sources(storage_root: StorageRootResource, landing_zone: LandingZoneResource) -> AssetCheckResult:
    zone = landing_zone.open()
    return asset_check_result(check_stored_universe_sources(storage_root.url, zone.recordings_url,
                                                            pattern=zone.config.source_pattern),
                              plotted=("recordings", "unmatched_sources", "unlisted_recordings"))


@asset_check(
    asset=resolved_splits, blocking=True,
    description="train / val / test share no sample and no group; the split's declared constraints hold",
)
def split_leakage(storage_root: StorageRootResource) -> AssetCheckResult:
    # the leakage count of each declared constraint, and the stages' sizes
    return asset_check_result(check_split_leakage(storage_root.url),
                              plotted=("*.offending_count", "train_samples", "val_samples", "test_samples"))


@asset_check(
    asset=resolved_splits, blocking=True,
    description="the split was resolved against the current universe; a positional rule has not drifted",
)
def universe_drift(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(check_universe_drift(storage_root.url))
