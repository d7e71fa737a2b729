"""Turning core results into Dagster metadata (and nothing else)."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue

from kuration.splits.artifacts import SplitArtifacts
from kuration_dagster_checks import markdown_table


def split_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    resolution = artifacts.resolution
    # The split files are written exactly when the split resolved.
    if resolution is None or artifacts.splits_url is None or artifacts.assignments_url is None:
        # why first: a refusal is what the UI must show at the top
        return {"status": f"refused (see the universe_drift check): {artifacts.refusal}",
                **_request_metadata(artifacts)}
    counts, groups = resolution.counts(), resolution.group_counts()
    meta: dict[str, Any] = {
        # the per-stage table first: it is what the UI shows at the top
        "stage_table": markdown_table({"stage": s, "samples": counts[s], "groups": groups[s]} for s in counts),
        **_request_metadata(artifacts),
    }
    extension = artifacts.extension
    if extension is not None:
        meta.update(kept_samples=extension.kept, newly_assigned_samples=extension.assigned,
                    extension=extension.summary(), extension_rule=extension.rule)
        if extension.removed is not None:
            meta["removed_samples"] = extension.removed
    meta.update(
        status="resolved",
        splits_json=MetadataValue.path(artifacts.splits_url),
        assignments=MetadataValue.path(artifacts.assignments_url),
        universe_hash=resolution.universe.hash,
        leakage=resolution.leakage.summary(),
    )
    for stage in counts:
        meta[f"{stage}_samples"] = counts[stage]
        meta[f"{stage}_groups"] = groups[stage]
    return meta


def _request_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    meta: dict[str, Any] = {"request": artifacts.request.describe(), "report": MetadataValue.path(artifacts.report_url)}
    if artifacts.input_drift is not None:
        meta["input_drift"] = artifacts.input_drift.status
    if artifacts.mode:
        meta["resolution_mode"] = artifacts.mode
    return meta
