"""The ``universe`` and ``resolved_splits`` assets: read resources, call core, report."""

# No "from __future__ import annotations" here: Dagster reads the config and resource
# annotations at decoration time and needs real types, not strings.


import os
from enum import Enum
from typing import Any, Literal, Optional

from dagster import AssetExecutionContext, Config, DataVersion, MaterializeResult, asset
from pydantic import Field

from kuration.landing.zone import LandingZone
from kuration.splits.artifacts import SplitRequest, load_universe, materialize_splits, write_universe
from kuration_resources import ASSET_GROUP, LandingZoneResource, StorageRootResource, set_fields
from splits_assets.metadata import split_metadata, universe_metadata


@asset(group_name=ASSET_GROUP, kinds={"parquet"})
def universe(storage_root: StorageRootResource, landing_zone: LandingZoneResource) -> MaterializeResult:
    """Every addressable sample, read from the landing zone's universe.csv (or, without
    one, enumerated from the recordings root: one sample per recording), validated,
    canonically sorted and written as universe/universe.parquet. Source ids are paths
    relative to the recordings root, the ids the recordings adapter lists."""
    zone = landing_zone.open()
    token = zone.universe_token()
    samples = zone.universe()
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

    def curation_overrides(self) -> dict[str, Any]:
        """The set choices as curation.json's ``split``: a strategy or a rule file replaces the
        file's (the other is cleared), the seed, ratios and grouping replace its own. More than
        one source of the split (``splits_json``, ``strategy``, ``from_split_column``) is
        refused, naming them."""
        strategy = self.strategy.value if self.strategy is not None else None
        if sum(map(bool, (strategy, self.splits_json, self.from_split_column))) > 1:
            SplitRequest(splits_json=self.splits_json, strategy=strategy, from_split_column=self.from_split_column)
        split = set_fields(self, ("seed", "val_ratio", "test_ratio"))
        if self.group_by is not None:
            split["group_by"] = self.group_by.value
        if strategy is not None:
            split.update(strategy=strategy, splits_json=None)
        elif self.splits_json:  # curation.json's rule: a splits_json without a strategy clears it
            # a path given in run config is relative to where the run runs, not to the landing zone
            split["splits_json"] = self.splits_json if "://" in self.splits_json else os.path.abspath(self.splits_json)
        return {"split": split} if split else {}

    def request(self, zone: LandingZone) -> SplitRequest:
        """The request: the landing zone's split rule (with :meth:`curation_overrides`
        applied), or the universe's split column, with this config's run options."""
        return zone.split_request(from_split_column=self.from_split_column, ad_aware=self.ad_aware,
                                  leakage=self.leakage, extend_baked=self.extend_baked)


@asset(group_name=ASSET_GROUP, deps=[universe], kinds={"json", "parquet"})
def resolved_splits(
    context: AssetExecutionContext, config: SplitDefinition, storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
) -> MaterializeResult:
    """The baked splits/splits.json and per-sample stage table. Leakage and drift are
    recorded here and gated by the blocking split_leakage and universe_drift checks.
    A computed split with an unchanged rule extends the one already on storage, so new
    samples never move existing ones (see kuration.splits.extend)."""
    artifacts = materialize_splits(load_universe(storage_root.url), config.request(landing_zone.open(config)),
                                   storage_root.url)
    if artifacts.refused:
        context.log.error(artifacts.refusal)
        return MaterializeResult(metadata=split_metadata(artifacts))
    if artifacts.extension is not None:
        context.log.info(artifacts.extension.summary())
    return MaterializeResult(metadata=split_metadata(artifacts), data_version=DataVersion(artifacts.splits_digest))
