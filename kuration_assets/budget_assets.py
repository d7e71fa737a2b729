"""``budget_plan``: the hours-as-budget fill over every scored source; and its ``budget`` check."""

# No "from __future__ import annotations": Dagster reads config annotations at decoration time.

from enum import Enum
from typing import Literal, Optional

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

from kuration.budget import BudgetOptions, ShardChunking, plan_budget
from kuration.budget.plan_store import check_budget_plan, load_scored_pool, read_budget_record, write_budget_plan
from kuration.numbers import parse_bytes
from kuration.scoring import run_fingerprint
from kuration.splits.artifacts import read_split_assignments
from kuration_assets.scoring_assets import scored_segments, source_partitions
from kuration_dagster_checks import asset_check_result
from kuration_resources import CurationResource, LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits


class ClipAggregate(Enum):
    # An Enum, not a Literal: Dagster config accepts Optional[Enum] but not Optional[Literal].
    max = "max"
    mean = "mean"
    min = "min"


class BudgetPlanConfig(Config):
    """The budget request. The defaults fill about a third of the bundled demo corpus. Shard
    length and short policy come from the output spec (the curation resource's
    ``output_spec_file``), so the plan prices exactly what the writer will emit."""

    budget_unit: Literal["hours", "segments"] = Field(
        default="hours", description="hours: fill each split to that many hours of spans; segments: admit that many segments")
    train: float = Field(default=4.0, description="Train budget, in budget_unit")
    val: float = Field(default=1.0, description="Validation budget, in budget_unit (0: none)")
    test: float = Field(default=0.5, description="Test budget, in budget_unit (0: none)")
    span_seconds: Optional[float] = Field(
        default=60.0, description="Cut tracks into spans of this many seconds, budgeted independently (hours only)")
    span_steps: Optional[int] = Field(default=None, description="Or cut spans of this many steps (set span_seconds to null)")
    clip_aggregate: Optional[ClipAggregate] = Field(
        default=None, description="How a span aggregates its segments: max | mean | min; default from the strategy's method")
    seed: int = Field(default=0, description="Orders equal priorities")
    underfill_warn_fraction: float = Field(
        default=0.1, description="The budget check warns when a split is underfilled by more than this fraction")
    memory_budget: Optional[str] = Field(
        default=None, description="Hold the scored pool within this much memory, e.g. '2GiB': sources with a strong "
        "identity are read as memory-mapped checkpoints from the score cache, the rest count against the budget and "
        "the plan fails past it (local storage root only). The fill's own working arrays come on top")

    def options(self, chunking: ShardChunking) -> BudgetOptions:
        """The request; ``chunking`` (the output spec's shard length and short policy)
        prices the dropped tail and rejects spans shorter than a dropped shard."""
        amounts = {"train": self.train, "val": self.val, "test": self.test}
        if self.budget_unit == "hours":
            budget = {f"{k}_hours": v for k, v in amounts.items()}
            spans = {"span_seconds": self.span_seconds, "span_steps": self.span_steps}
        else:
            budget = {f"{k}_count": int(v) if float(v).is_integer() else v for k, v in amounts.items()}
            spans = {}
        return BudgetOptions(
            **budget, **spans, seed=self.seed,
            clip_aggregate=None if self.clip_aggregate is None else self.clip_aggregate.value,
            chunking=chunking,
        )


def _hours(value: float, unit: str) -> float:
    return value / 3600.0 if unit == "seconds" else value


@asset(
    deps=[AssetDep(scored_segments, partition_mapping=AllPartitionMapping()), resolved_splits],
    group_name="budget",
    kinds={"parquet"},
)
def budget_plan(
    context: AssetExecutionContext,
    config: BudgetPlanConfig,
    storage_root: StorageRootResource,
    landing_zone: LandingZoneResource,
    curation: CurationResource,
) -> MaterializeResult:
    """Which spans of which tracks each split admits, best first within its own budget, as
    ``budget/admitted.parquet``, with every item's decision in ``budget/plan_items.parquet``
    and the accounting in ``budget/budget.json``."""
    settings = curation.settings(landing_zone)
    spec = curation.output_spec(landing_zone, settings)
    options = config.options(spec.chunking)  # invalid requests fail here, before the pool is read
    memory_budget = None if config.memory_budget is None else parse_bytes(config.memory_budget, name="memory_budget")
    expected_run = run_fingerprint(curation.adapter(landing_zone, settings), settings.segmenter, settings.strategy)
    sources = context.instance.get_dynamic_partitions(source_partitions.name)
    pool = load_scored_pool(storage_root.url, sources, expected_run=expected_run, memory_budget=memory_budget)
    assignments, splits_digest = read_split_assignments(storage_root.url)
    plan = plan_budget(pool.segments, options, strategy=settings.strategy, split_assignments=assignments)
    urls = write_budget_plan(plan, storage_root.url, inputs={
        "scoring_run": pool.run_fingerprint, "sources": len(sources), "skipped_sources": pool.skipped,
        "splits_sha256": splits_digest, "check": {"underfill_warn_fraction": config.underfill_warn_fraction},
    })
    record_digest = read_budget_record(storage_root.url)["files"]["admitted.parquet"]["sha256"]
    acc = plan.accounting
    unit = acc["unit"]
    metadata = {
        "path": MetadataValue.path(urls["admitted"]),
        "budget_json": MetadataValue.path(urls["budget"]),
        "unit": "hours" if unit == "seconds" else unit,
        "sources": len(sources),
        "skipped_sources": len(pool.skipped),
        "not_in_split": acc["not_in_split"]["sources"],
    }
    for name, block in acc["splits"].items():
        metadata[f"{name}_requested"] = _hours(block["requested"], unit)
        metadata[f"{name}_admitted"] = _hours(block["admitted"], unit)
        metadata[f"{name}_emitted"] = _hours(block["emitted"], unit)
        metadata[f"{name}_utilization"] = block["utilization"] if block["utilization"] is not None else 0.0
    excluded: dict[str, int] = {}
    for block in acc["splits"].values():
        for reason, figures in block["excluded"].items():
            excluded[reason] = excluded.get(reason, 0) + figures["items"]
    excluded["not_in_split"] = acc["not_in_split"]["items"]
    metadata["excluded"] = MetadataValue.json(excluded)
    if pool.memory is not None:
        metadata["pool_memory"] = MetadataValue.json(pool.memory)
    metadata["tag_coverage"] = MetadataValue.json({name: block["tag_coverage"] for name, block in acc["splits"].items()})
    metadata["budget"] = MetadataValue.md(_budget_table(acc))
    context.log.info(", ".join(f"{n}: {metadata[f'{n}_admitted']:.3g}/{metadata[f'{n}_requested']:.3g}"
                               for n in acc["splits"]))
    return MaterializeResult(metadata=metadata, data_version=DataVersion(record_digest))


def _budget_table(acc: dict) -> str:
    unit = "h" if acc["unit"] == "seconds" else "segments"
    rows = [f"| split | requested ({unit}) | candidate | admitted | emitted | utilization | underfill |", "|---|---|---|---|---|---|---|"]
    for name, b in acc["splits"].items():
        util = "" if b["utilization"] is None else f"{b['utilization']:.1%}"
        rows.append(f"| {name} | {_hours(b['requested'], acc['unit']):.3g} | {_hours(b['candidate'], acc['unit']):.3g} | "
                    f"{_hours(b['admitted'], acc['unit']):.3g} | {_hours(b['emitted'], acc['unit']):.3g} | {util} | "
                    f"{_hours(b['underfill'], acc['unit']):.3g} |")
    return "\n".join(rows)


@asset_check(
    asset=budget_plan, blocking=True,
    description="no split over budget by more than one span; no source or group in two splits; nothing -inf or "
                "non-finite admitted; group caps hold. Underfill past the configured fraction warns.",
)
def budget(storage_root: StorageRootResource) -> AssetCheckResult:
    return asset_check_result(check_budget_plan(storage_root.url))


__all__ = ["BudgetPlanConfig", "budget", "budget_plan"]
