"""Setting up and reading the outcome of in-process Dagster runs in the asset tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

def landing_resources(landing: Path, storage: Path, **landing_options) -> dict:
    """The graph's resources on ``landing`` and ``storage``, with the curation settings the landing zone gives."""
    from kuration_resources import LandingZoneResource, StorageRootResource

    return {"storage_root": StorageRootResource(url=str(storage)),
            "landing_zone": LandingZoneResource(url=str(landing), **landing_options)}


#: One second in hours: budgets in the tests are requested in seconds.
H = 1 / 3600


def failure_text(result) -> str:
    """The step failure's message with its cause chain (where the core error's text is)."""
    error = result.get_step_failure_events()[0].event_specific_data.error
    parts = []
    while error is not None:
        parts.append(error.message)
        error = error.cause
    return "\n".join(parts)


def plan_budget_for_tests(resources, instance, **config) -> None:
    """Materialize ``budget_plan`` (60 / 30 / 30 s by default, 10 s spans); asserts it succeeds."""
    from dagster import materialize

    from kuration_assets import budget_plan

    config = {"train": 60 * H, "val": 30 * H, "test": 30 * H, "span_seconds": 10.0, **config}
    assert materialize([budget_plan], resources=resources, instance=instance,
                       run_config={"ops": {"budget_plan": {"config": config}}}).success


def materialization_metadata(result) -> dict[str, dict]:
    """Asset key -> its materialization's metadata values, for every asset the run materialized."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out


def markdown_rows(value) -> list[dict[str, str]]:
    """The rows of a Markdown metadata table (the first table in ``value``), each as
    ``{column: cell text}``: the figures as the UI shows them."""
    if not isinstance(value, str):
        value = value.value  # a MetadataValue
    lines = [line.strip() for line in value.splitlines() if line.startswith("|")]
    # a cell's own '|' is escaped as '\|'
    cells = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line[1:-1])] for line in lines]
    assert len(cells) >= 2 and all(set(c) <= set("-:") for c in cells[1]), value
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


def markdown_items(value) -> list[str]:
    """The items of a check's ``errors`` / ``warnings`` Markdown list, as the text the core wrote."""
    if not isinstance(value, str):
        value = value.value  # a MetadataValue
    items = value.splitlines()
    assert all(item.startswith("- ") for item in items), value
    return [item[2:].replace("&lt;", "<").replace("\\*", "*").replace("\\\\", "\\") for item in items]


def write_rule(path: Path, rule: dict) -> str:
    """Write a split rule (a splits.json selector set) as JSON; returns its path, for the asset config."""
    path.write_text(json.dumps(rule))
    return str(path)
