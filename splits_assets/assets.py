"""The ``universe`` and ``resolved_splits`` assets: read resources, call core, report."""

# No "from __future__ import annotations" here: Dagster reads the config and resource
# annotations at decoration time and needs real types, not strings.


from enum import Enum
from typing import Literal, Optional

from dagster import AssetExecutionContext, Config, DataVersion, MaterializeResult, asset
from pydantic import Field

from kuration.splits import read_landing_universe
from kuration.splits.artifacts import SplitRequest, load_universe, materialize_splits, write_universe
from kuration.landing.curation_config import SplitRule
from kuration_resources import ASSET_GROUP, CurationResource, LandingZoneResource, StorageRootResource
from splits_assets.metadata import split_metadata, universe_metadata


@asset(group_name=ASSET_GROUP, kinds={"parquet"})
def universe(storage_root: StorageRootResource, landing_zone: LandingZoneResource,
             curation: CurationResource) -> MaterializeResult:
    """Every addressable sample, read from the landing zone's universe.csv (or, without
    one, enumerated from the recordings root: one sample per recording), validated,
    canonically sorted and written as universe/universe.parquet. Source ids are paths
    relative to the recordings root, the ids the recordings adapter lists."""
    token = curation.universe_token(landing_zone)
    if landing_zone.universe_csv:
        samples = read_landing_universe(landing_zone.url, universe_csv=landing_zone.universe_csv,
                                        one_file_per_row=landing_zone.one_file_per_row)
    else:
        config = curation.config(landing_zone)
        samples = read_landing_universe(config.recordings_url(landing_zone.url), universe_csv=None,
                                        source_pattern=landing_zone.source_pattern or config.source_pattern)
    url = write_universe(samples, storage_root.url)
    return MaterializeResult(metadata=universe_metadata(samples, url, token), data_version=DataVersion(samples.hash))


class SplitStrategy(Enum):
    # An Enum, not a Literal: Dagster config accepts Optional[Enum] but not Optional[Literal].
    random = "random"
    stratified = "stratified"


class SplitGroupBy(Enum):
    group = "group"
    source = "source"


class SplitDefinition(Config):
    """Where the split comes from. Give a `splits_json` (rule or baked file), or a
    `strategy`, or `from_split_column`; with none of them, the landing zone's
    `curation.json` `split` rule is used (default: a stratified split with seed 0). The
    seed, ratios and grouping of a computed split also default to that rule. A computed
    split whose rule is unchanged extends the one already under the storage root (new
    samples placed, none moved); a baked file pinned to another universe that leaves samples
    in no stage is extended only with `extend_baked`."""

    splits_json: Optional[str] = Field(default=None, description="Path or URL of a rule or baked splits.json")
    strategy: Optional[SplitStrategy] = Field(default=None,
                                              description="Compute a split this way; null: curation.json")
    from_split_column: bool = Field(default=False, description="Import the universe.csv 'split' column")
    seed: Optional[int] = Field(default=None, description="Seed for a computed split; null: curation.json")
    val_ratio: Optional[float] = Field(default=None, description="null: curation.json")
    test_ratio: Optional[float] = Field(default=None, description="null: curation.json")
    group_by: Optional[SplitGroupBy] = Field(
        default=None, description="The unit kept whole in one stage: group | source; null: curation.json")
    ad_aware: bool = Field(default=False, description="Keep anomalous samples out of train")
    leakage: Literal["error", "warn", "off"] = Field(default="error", description="Leakage policy of a computed split")
    extend_baked: bool = Field(
        default=False,
        description="Extend a baked splits_json over samples of a changed universe it assigns to no stage, by the "
        "seeded unit hash (seed, ratios, group_by); without it such a file is refused and universe_drift fails",
    )

    def to_request(self, rule: SplitRule, landing: LandingZoneResource) -> SplitRequest:
        """The request: this config's choices, and ``rule`` (curation.json's split) for the rest."""
        strategy = self.strategy.value if self.strategy is not None else None
        splits_json = self.splits_json
        if strategy is None and not splits_json and not self.from_split_column:
            strategy = rule.strategy
            splits_json = landing.resolve(rule.splits_json) if rule.splits_json else None
        return SplitRequest(
            splits_json=splits_json, strategy=strategy, from_split_column=self.from_split_column,
            seed=rule.seed if self.seed is None else self.seed,
            val_ratio=rule.val_ratio if self.val_ratio is None else self.val_ratio,
            test_ratio=rule.test_ratio if self.test_ratio is None else self.test_ratio,
            group_by=rule.group_by if self.group_by is None else self.group_by.value,
            ad_aware=self.ad_aware, leakage=self.leakage, extend_baked=self.extend_baked,
        )


@asset(group_name=ASSET_GROUP, deps=[universe], kinds={"json", "parquet"})
def resolved_splits(
    context: AssetExecutionContext, config: SplitDefinition, storage_root: StorageRootResource,
    landing_zone: LandingZoneResource, curation: CurationResource,
) -> MaterializeResult:
    """The baked splits/splits.json and per-sample stage table. Leakage and drift are
    recorded here and gated by the blocking split_leakage and universe_drift checks.
    A computed split with an unchanged rule extends the one already on storage, so new
    samples never move existing ones (see kuration.splits.extend)."""
    artifacts = materialize_splits(
        load_universe(storage_root.url), config.to_request(curation.config(landing_zone).split, landing_zone),
        storage_root.url)
    if artifacts.refused:
        context.log.error(artifacts.refusal)
        return MaterializeResult(metadata=split_metadata(artifacts))
    if artifacts.extension is not None:
        context.log.info(artifacts.extension.summary())
    return MaterializeResult(metadata=split_metadata(artifacts), data_version=DataVersion(artifacts.splits_digest))
