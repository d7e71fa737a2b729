"""Turning core results into Dagster metadata (and nothing else)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dagster import MetadataValue

from kuration.splits.artifacts import SplitArtifacts
from kuration.splits.leakage import LeakageReport


def markdown_table(df: pd.DataFrame) -> MetadataValue:
    header = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return MetadataValue.md("\n".join([header, rule, *rows]))


def leakage_metadata(report: LeakageReport) -> dict[str, Any]:
    meta: dict[str, Any] = {"summary": MetadataValue.text(report.summary()), "results": MetadataValue.json(report.to_dict())}
    for r in report.results:
        meta[f"{r.kind}.status"] = r.status
        meta[f"{r.kind}.offending_count"] = r.count
        if r.shared_groups:
            meta[f"{r.kind}.shared_groups"] = MetadataValue.json(list(r.shared_groups))
    return meta


def split_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "request": artifacts.request.describe(),
        "report": MetadataValue.path(artifacts.report_url),
    }
    if artifacts.input_drift is not None:
        meta["input_drift"] = artifacts.input_drift.status
    if artifacts.resolution is None:
        meta["status"] = "refused: the rule's universe drifted (see the universe_drift check)"
        return meta
    resolution = artifacts.resolution
    counts, groups = resolution.counts(), resolution.group_counts()
    meta.update(
        status="resolved",
        splits_json=MetadataValue.path(artifacts.splits_url),
        assignments=MetadataValue.path(artifacts.assignments_url),
        universe_hash=resolution.universe.hash,
        stage_table=markdown_table(pd.DataFrame(
            {"stage": list(counts), "samples": list(counts.values()), "groups": [groups[s] for s in counts]}
        )),
        leakage=resolution.leakage.summary(),
    )
    for stage in counts:
        meta[f"{stage}_samples"] = counts[stage]
        meta[f"{stage}_groups"] = groups[stage]
    return meta
