"""What the UI shows after a whole graph run (``kuration run`` on a small demo landing
zone), read back from the instance: every check states its verdict, floats are rounded to
what matters, byte counts are sizes, structured figures are Markdown tables (no JSON), no
empty errors or warnings, and the assets that have a summary table show it first."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from kuration_cli.graph_run import run_graph
from tests.dagster.runs import markdown_rows
from tests.dagster.small_landing import write_small_landing_zone

#: The assets whose first metadata entry is their summary table.
SUMMARY_FIRST = ("resolved_splits", "budget_plan", "shards", "dataset_manifest", "rollout_store")


def significant_digits(value: float) -> int:
    """How many significant digits Python's shortest repr of ``value`` needs (4.01 -> 3)."""
    mantissa = repr(abs(value)).split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


@pytest.fixture
def graph_events(tmp_path: Path, monkeypatch):
    """Every materialization and check evaluation of one whole graph run."""
    from dagster import DagsterEventType, DagsterInstance

    landing = write_small_landing_zone(tmp_path / "landing", seed=7, split_seed=1)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    outcome = run_graph(str(landing), str(tmp_path / "storage"), out=lambda line: None)
    assert outcome.ok, outcome.failure
    with DagsterInstance.get() as instance:
        events = [event.dagster_event for run_id, _ in outcome.runs.values()
                  for event in instance.all_logs(run_id, of_type={DagsterEventType.ASSET_MATERIALIZATION,
                                                                  DagsterEventType.ASSET_CHECK_EVALUATION})]
    materializations = [e.step_materialization_data.materialization for e in events
                        if e.event_type == DagsterEventType.ASSET_MATERIALIZATION]
    evaluations = [e.event_specific_data for e in events if e.event_type == DagsterEventType.ASSET_CHECK_EVALUATION]
    return materializations, evaluations


def metadata_problems(where: str, metadata: dict) -> list[str]:
    from dagster import FloatMetadataValue, IntMetadataValue, JsonMetadataValue, MarkdownMetadataValue

    problems = []
    for key, entry in metadata.items():
        if isinstance(entry, FloatMetadataValue) and entry.value is not None and math.isfinite(entry.value) \
                and significant_digits(entry.value) > 4:
            problems.append(f"{where} {key}: {entry.value!r} has more than 4 significant digits")
        if isinstance(entry, JsonMetadataValue):
            problems.append(f"{where} {key}: JSON ({str(entry.value)[:60]}), not a table")
        if isinstance(entry, IntMetadataValue) and "bytes" in key:
            problems.append(f"{where} {key}: a raw byte count {entry.value}, not a size")
        if key in ("errors", "warnings") and not (isinstance(entry, MarkdownMetadataValue) and entry.value.strip()):
            problems.append(f"{where} {key}: an empty or non-Markdown list")
        if isinstance(entry, MarkdownMetadataValue):
            for line in entry.value.splitlines():  # a table row that names a byte figure shows a size
                cells = [c.strip() for c in line.strip("|").split("|")]
                if len(cells) == 2 and (cells[0] == "bytes" or cells[0].endswith("_bytes")) \
                        and not cells[1].endswith("B"):
                    problems.append(f"{where} {key}: {cells[0]} is {cells[1]}, not a size")
    return problems


@pytest.mark.slow
def test_what_the_ui_shows_after_a_whole_graph_run(graph_events):
    """Its ``graph_events`` fixture is a whole ``kuration run``: 5 s to 30 s."""
    materializations, evaluations = graph_events
    problems = []
    for mat in materializations:
        where = mat.asset_key.to_user_string() + (f"[{mat.partition}]" if mat.partition else "")
        problems += metadata_problems(where, dict(mat.metadata))
    for evaluation in evaluations:
        where = f"check {evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
        if not (evaluation.description or "").strip():
            problems.append(f"{where}: no verdict")
        problems += metadata_problems(where, dict(evaluation.metadata))
    assert problems == []

    latest = {m.asset_key.to_user_string(): m.metadata for m in materializations if m.partition is None}
    assert set(SUMMARY_FIRST) <= set(latest)
    for asset in SUMMARY_FIRST:
        first = next(iter(latest[asset].values()))
        assert type(first).__name__ == "MarkdownMetadataValue" and "\n|---|" in first.value, asset
    budget = latest["budget_plan"]
    for table in ("excluded", "tag_coverage"):
        assert type(budget[table]).__name__ == "MarkdownMetadataValue" and budget[table].value.startswith("| ")
    requested = float(next(row for row in markdown_rows(budget["budget"]) if row["split"] == "train")["requested (h)"])
    assert budget["train_admitted_hours"].value >= requested == 0.02
    train_shards = next(row for row in markdown_rows(latest["shards"]["splits"]) if row["split"] == "train")
    assert train_shards["size"].endswith(("B", "KiB", "MiB"))
    rollouts = latest["rollout_store"]  # what a person asks first: counts, validation, lineage; no raw digests
    assert "| rollouts | " in rollouts["summary"].value and "| lineage | split " in rollouts["summary"].value
    assert all(type(rollouts[name]).__name__ == "IntMetadataValue" for name in ("rollouts", "steps", "candidates"))
    assert not any(re.search(r"[0-9a-f]{64}", str(entry.value)) for entry in rollouts.values())
    names = {e.check_name for e in evaluations}
    assert {"universe_schema", "universe_sources", "split_leakage", "universe_drift", "segment_pool", "budget",
            "shards_present", "dataset_integrity", "dataset_quality", "rollout_validation", "rollout_lineage"} <= names
    (integrity,) = [e for e in evaluations if e.check_name == "dataset_integrity"]
    assert re.search(r"\n\| bytes \| [\d,.]+ (KiB|MiB) \|\n", integrity.metadata["figures"].value)


@pytest.mark.parametrize(("value", "digits"), [(4.01, 3), (0.0167, 3), (100.3, 4), (4.0, 1), (1234.0, 4),
                                               (4.0119444444444445, 17), (-0.512, 3), (1e-05, 1)])
def test_significant_digits(value, digits):
    assert significant_digits(value) == digits


def test_the_metadata_rules_catch_what_the_ui_showed_before():
    from dagster import MetadataValue

    before = {"train_admitted": MetadataValue.float(4.0119444444444445), "excluded": MetadataValue.json({"a": 1}),
              "train_bytes": MetadataValue.int(100400600), "errors": MetadataValue.json([]),
              "figures": MetadataValue.md("| figure | value |\n|---|---|\n| bytes | 138,394,520 |")}
    assert metadata_problems("x", before) == [
        "x train_admitted: 4.0119444444444445 has more than 4 significant digits",
        "x excluded: JSON ({'a': 1}), not a table", "x train_bytes: a raw byte count 100400600, not a size",
        "x errors: JSON ([]), not a table", "x errors: an empty or non-Markdown list",
        "x figures: bytes is 138,394,520, not a size"]
    after = {"train_admitted_hours": MetadataValue.float(4.01), "excluded": MetadataValue.md("| a | 1 |"),
             "train_size": "95.7 MiB",
             "figures": MetadataValue.md("| figure | value |\n|---|---|\n| bytes | 132.0 MiB |")}
    assert metadata_problems("x", after) == []
