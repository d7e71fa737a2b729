"""``budget_plan``: the hours-as-budget fill over every scored source; and its ``budget`` check."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from enum import Enum
from typing import Any, Literal, Optional

from dagster import (
    AllPartitionMapping,
    AssetCheckResult,
    AssetDep,
    AssetExecutionContext,
    Config,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
    asset_check,
)
from pydantic import Field

from kuration.budget import BudgetOptions, ShardChunking
from kuration.landing.curation_config import BudgetSettings
from kuration.errors import BudgetError
from kuration.numbers import rounded
from kuration.budget.plan_store import StoredBudgetPlan, check_budget_plan, plan_stored_budget
from kuration.budget.summary import PlanSummary, summarize_plan
from kuration.landing.recordings import source_ids_for_names
from kuration.scoring import run_fingerprint
from kuration_assets.automation import follows_upstream
from kuration_assets.scoring_assets import SOURCE_PARTITIONS, scored_segments
from kuration_dagster_checks import asset_check_result, figures_table, markdown_table
from kuration_resources import ASSET_GROUP, LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits


class ClipAggregate(Enum):
    # An Enum, not a Literal: Dagster config accepts Optional[Enum] but not Optional[Literal].
    max = "max"
    mean = "mean"
    min = "min"


class BudgetPlanConfig(Config):
    """The budget request. Unset amounts (null) come from the landing zone's `curation.json`
    `budget` (default 4 h train, 1 h val, 0.5 h test of 60 s spans, about a third of the
    bundled demo corpus), so sensor-launched and manual runs ask for the same; set ones win,
    by the landing zone's one precedence rule. Shard length and short policy come from the
    output spec (the landing zone resource's `output_spec_file`), so the plan prices exactly
    what the writer will emit."""

    budget_unit: Literal["hours", "segments"] = Field(
        default="hours",
        description="hours: fill each split to that many hours of spans; segments: admit that many segments")
    train: Optional[float] = Field(
        default=None, description="Train budget, in budget_unit; null: curation.json budget.train_hours (hours only)")
    val: Optional[float] = Field(
        default=None, description="Validation budget, in budget_unit (0: none); null: curation.json "
                                  "budget.val_hours, or 0 segments")
    test: Optional[float] = Field(
        default=None, description="Test budget, in budget_unit (0: none); null: curation.json budget.test_hours, "
                                  "or 0 segments")
    span_seconds: Optional[float] = Field(
        default=None, description="Cut tracks into spans of this many seconds, budgeted independently (hours only); "
                                  "null with span_steps null: curation.json budget.span_seconds")
    span_steps: Optional[int] = Field(default=None,
                                      description="Or cut spans of this many steps (leave span_seconds null)")
    clip_aggregate: Optional[ClipAggregate] = Field(
        default=None,
        description="How a span aggregates its segments: max | mean | min; default from the strategy's method")
    seed: int = Field(default=0, description="Orders equal priorities")
    underfill_warn_fraction: float = Field(
        default=0.1, description="The budget check warns when a split is underfilled by more than this fraction")
    memory_budget: Optional[str] = Field(
        default=None, description="Hold the scored pool within this much memory, e.g. '2GiB': sources with a strong "
        "identity are read as memory-mapped checkpoints from the score cache, the rest count against the budget and "
        "the plan fails past it (local storage root only). The fill's own working arrays come on top")

    def curation_overrides(self) -> dict[str, Any]:
        """The set amounts and span length, as curation.json's ``budget`` (an hours budget only:
        curation.json budgets no segment counts). A span length set here replaces the file's,
        so ``span_steps`` alone clears its ``span_seconds``."""
        if self.budget_unit != "hours":
            return {}
        amounts = {"train_hours": self.train, "val_hours": self.val, "test_hours": self.test}
        budget: dict[str, Any] = {key: value for key, value in amounts.items() if value is not None}
        if self.span_seconds is not None or self.span_steps is not None:
            budget["span_seconds"] = self.span_seconds
        return {"budget": budget} if budget else {}

    def options(self, chunking: ShardChunking, settings: BudgetSettings) -> BudgetOptions:
        """The request: ``settings`` (curation.json's budget, with :meth:`curation_overrides`
        applied by the landing zone), and ``chunking`` (the output spec's shard length and
        short policy), which prices the dropped tail and rejects spans shorter than a dropped
        shard. A segments budget is this config's alone."""
        clip = None if self.clip_aggregate is None else self.clip_aggregate.value
        if self.budget_unit == "hours":
            return settings.options(chunking, span_steps=self.span_steps, clip_aggregate=clip, seed=self.seed)
        if self.train is None:
            raise BudgetError("budget_unit segments: set train (and val, test) to a number of segments; "
                              "curation.json budgets hours only")
        counts = {"train": self.train, "val": self.val or 0, "test": self.test or 0}
        # a fractional count is BudgetOptions' error to report
        budget: dict[str, Any] = {f"{k}_count": int(v) if float(v).is_integer() else v for k, v in counts.items()}
        return BudgetOptions(**budget, seed=self.seed, clip_aggregate=clip, chunking=chunking)


@asset(
    deps=[AssetDep(scored_segments, partition_mapping=AllPartitionMapping()), resolved_splits],
    group_name=ASSET_GROUP,
    kinds={"parquet"},
    # every partition of the pool: waits while a new one is unscored or a scoring run is queued
    # or running, and until segment_pool (its own step) has passed
    automation_condition=follows_upstream(),
)
def budget_plan(
    context: AssetExecutionContext,
    config: BudgetPlanConfig,
    storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
) -> MaterializeResult:
    """Which spans of which tracks each split admits, best first within its own budget, as
    budget/admitted.parquet, with every item's decision in budget/plan_items.parquet
    and the accounting in budget/budget.json."""
    zone = landing_zone.open(config)
    options = config.options(zone.spec.chunking, zone.config.budget)  # a bad request fails before any read
    sources = source_ids_for_names(context.instance.get_dynamic_partitions(SOURCE_PARTITIONS),
                                   zone.list_recordings(), where=zone.recordings_url)
    stored = plan_stored_budget(
        storage_root.url, sources, options,
        strategy=zone.strategy, memory_budget=config.memory_budget,
        expected_run=run_fingerprint(zone.adapter, zone.segmenter, zone.strategy),
        underfill_warn_fraction=config.underfill_warn_fraction,
    )
    summary = summarize_plan(stored.plan.accounting)
    context.log.info(summary.line())
    return MaterializeResult(metadata=_plan_metadata(stored, summary, len(sources)),
                             data_version=DataVersion(stored.admitted_sha256))


def _plan_metadata(stored: StoredBudgetPlan, summary: PlanSummary, sources: int) -> dict[str, Any]:
    # the per-split table first: it is what the UI shows at the top
    metadata: dict[str, Any] = {
        "budget": markdown_table(summary.rows()),
        "excluded": figures_table(summary.excluded, columns=("reason left out", "items")),
    }
    coverage = [{"split": split, "tag": tag, "admitted items": entry["admitted_items"],
                 "reserve": entry.get("reserve", "none")}  # none: tag_coverage is off
                for split, tags in summary.tag_coverage.items() for tag, entry in tags.items()]
    if coverage:
        metadata["tag_coverage"] = markdown_table(coverage)
    if stored.pool_memory is not None:
        metadata["pool_memory"] = figures_table(stored.pool_memory)
    metadata.update({
        "path": MetadataValue.path(stored.urls["admitted"]),
        "budget_json": MetadataValue.path(stored.urls["budget"]),
        "unit": summary.unit,
        "sources": sources,
        "skipped_sources": len(stored.skipped),
        "not_in_split": summary.not_in_split_sources,
    })
    # What each split admitted moves from one plan to the next: a number as well as a cell of the
    # table, so the UI plots it across materializations. The rest of the table (requested,
    # candidate, emitted, utilization, underfill) is read there, once.
    for name, amounts in summary.splits.items():
        metadata[f"{name}_admitted_{summary.unit}"] = rounded(amounts.admitted)
    return metadata


@asset_check(
    asset=budget_plan, blocking=True,
    description="no split over budget by more than one span; no source or group in two splits; nothing -inf or "
                "non-finite admitted; group caps hold; every split with a request admits something; every scored "
                "source is in a split. A budget larger than the split's pool, and underfill past the configured "
                "fraction, warn.",
)
def budget(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(check_budget_plan(storage_root.url), plotted=("*_admitted_hours", "*_admitted_segments"))


__all__ = ["BudgetPlanConfig", "budget", "budget_plan"]
