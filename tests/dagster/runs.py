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


def dataset_assets_and_checks() -> list:
    """What ``build_dataset`` runs: the write (a new version, staged), the audit's three
    blocking checks on that version, and ``published_dataset``, which makes it current."""
    from kuration_assets import dataset_integrity, dataset_quality, published_dataset, shards_and_manifest
    from kuration_assets import shards_present

    return [shards_and_manifest, shards_present, dataset_integrity, dataset_quality, published_dataset]


def publish_dataset_for_tests(resources, instance) -> None:
    """Write, audit and publish the dataset from the stored budget plan, as ``build_dataset``
    does; asserts it succeeds, so readers of ``dataset/`` see the new version."""
    from dagster import materialize

    result = materialize(dataset_assets_and_checks(), resources=resources, instance=instance, raise_on_error=False)
    assert result.success, failure_text(result)


def staged_dataset(storage: Path | str) -> str:
    """``{storage}/dataset@vN``: the newest committed version of the dataset (the one
    ``shards_and_manifest`` staged, published or not, the one the audit checks), as a
    reference every reader takes."""
    from kuration.output.versions import DatasetRoot

    root = DatasetRoot(Path(storage) / "dataset")
    version = root.newest_committed()
    assert version is not None, f"{root.url}: holds no committed version"
    return f"{root.url}@{version}"


def staged_dir(storage: Path | str) -> Path:
    """The folder of :func:`staged_dataset` (a seed-layout dataset)."""
    from kuration.output.versions import resolve_dataset

    return Path(resolve_dataset(staged_dataset(storage)))


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
