"""Turning core results into Dagster metadata (and nothing else).

Each asset leads with one table a person reads; the figures that move from one
materialization to the next (samples per stage) are numbers as well, which the UI plots; the
tokens the sensor compares go last, into the provenance entry."""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue

from kuration.splits.artifacts import SplitArtifacts, preview_frame
from kuration.splits.stages import EXCLUSIVE_STAGES, stage_purpose
from kuration.splits.universe import Universe
from kuration_dagster_checks import markdown_table
from kuration_dagster_checks.provenance import provenance_entry

#: The provenance key of the universe materialization's ``kuration.landing.recordings.universe_token``:
#: ``new_recordings_sensor`` without a cursor does not re-read a universe whose token still matches.
#: Taken before the read: a csv rewritten meanwhile leaves an older token, so the sensor reads it again.
UNIVERSE_TOKEN = "universe_token"


def universe_metadata(samples: Universe, url: str, token: str | None) -> dict[str, Any]:
    return {
        "path": MetadataValue.path(url),
        "samples": len(samples),
        "sources": len(samples.source_names),
        "groups": len(samples.group_names),
        "universe_hash": samples.hash,
        "preview": markdown_table(preview_frame(samples).to_dict("records")),
        **provenance_entry({UNIVERSE_TOKEN: token or ""}),
    }


def split_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    resolution = artifacts.resolution
    # The split files are written exactly when the split resolved.
    if resolution is None or artifacts.splits_url is None or artifacts.assignments_url is None:
        # why first: a refusal is what the UI must show at the top
        return {"status": f"refused (see the universe_drift check): {artifacts.refusal}",
                **_request_metadata(artifacts)}
    counts, groups = resolution.counts(), resolution.group_counts()
    everything = resolution.predicts_everything
    meta: dict[str, Any] = {
        # the per-stage table first: it is what the UI shows at the top
        "stage_table": markdown_table({"stage": s, "samples": counts[s], "groups": groups[s],
                                       "what it is": stage_purpose(s, predict_is_everything=everything)}
                                      for s in counts),
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
    # numbers as well as the table, so the UI plots them across materializations
    for stage in EXCLUSIVE_STAGES:
        meta[f"{stage}_samples"] = counts[stage]
    return meta


def _request_metadata(artifacts: SplitArtifacts) -> dict[str, Any]:
    meta: dict[str, Any] = {"request": artifacts.request.describe(), "report": MetadataValue.path(artifacts.report_url)}
    if artifacts.input_drift is not None:
        meta["input_drift"] = artifacts.input_drift.status
    if artifacts.mode:
        meta["resolution_mode"] = artifacts.mode
    return meta
