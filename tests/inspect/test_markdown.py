"""The report as Markdown (the dataset_manifest materialization's ``report``): summary table
first, figures as every page prints them, dataset strings unable to break a table row or open a tag."""

from __future__ import annotations

import dataclasses

from kuration.inspect import inspect_dataset
from kuration.inspect.figures import shards_from_sources
from kuration.inspect.markdown import LISTED, report_markdown
from kuration.numbers import format_hours


def test_the_summary_table_comes_first_with_rounded_hours_and_binary_bytes(written):
    report = inspect_dataset(written)
    text = report_markdown(report)
    lines = text.splitlines()
    assert lines[0].startswith(f"**{shards_from_sources(report)}**, ")
    assert shards_from_sources(report) == (f"{report.shards:,} shards from {report.sources:,} of the "
                                           f"{report.scored_sources:,} sources scored")
    assert lines[2] == "| split | shards | steps | hours | requested | bytes | padded shards | pad rows |"
    train = report.splits["train"]
    row = next(line for line in lines if line.startswith("| train |"))
    assert f"| {train['shards']:,} | {train['steps']:,} | {format_hours(train['hours'])} |" in row
    assert "KiB |" in row or "MiB |" in row
    assert "**Modalities**" in text and "**Budget** (hours)" in text
    utilization = report.budget["splits"]["train"]["utilization"]
    assert f"{utilization:.1%}" in text


def test_strings_from_the_dataset_are_escaped_and_long_lists_bounded(written):
    report = inspect_dataset(written)
    skipped = {f"evil|<script>alert({i})</script>": "boom\nsecond line" for i in range(LISTED + 3)}
    text = report_markdown(dataclasses.replace(report, skipped_sources=skipped, warnings=["a | b"]))
    assert "<script>" not in text and "&lt;script>" in text and "evil\\|" in text
    assert f"**Skipped sources** ({LISTED + 3:,})" in text and "- ... and 3 more" in text
    assert "boom second line" in text  # one line per item
    assert "- a \\| b" in text
