"""Turning core results into Dagster metadata (and nothing else)."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue

from kuration.splits.artifacts import SplitArtifacts
from kuration_dagster_checks import markdown_table


def split_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "request": artifacts.request.describe(),
        "report": MetadataValue.path(artifacts.report_url),
    }
    if artifacts.input_drift is not None:
        meta["input_drift"] = artifacts.input_drift.status
    # The split files are written exactly when the split resolved.
    if artifacts.resolution is None or artifacts.splits_url is None or artifacts.assignments_url is None:
        meta["status"] = "refused: the rule's universe drifted (see the universe_drift check)"
        return meta
    resolution = artifacts.resolution
    counts, groups = resolution.counts(), resolution.group_counts()
    meta.update(
        status="resolved",
        splits_json=MetadataValue.path(artifacts.splits_url),
        assignments=MetadataValue.path(artifacts.assignments_url),
        universe_hash=resolution.universe.hash,
        stage_table=markdown_table({"stage": s, "samples": counts[s], "groups": groups[s]} for s in counts),
        leakage=resolution.leakage.summary(),
    )
    for stage in counts:
        meta[f"{stage}_samples"] = counts[stage]
        meta[f"{stage}_groups"] = groups[stage]
    return meta
