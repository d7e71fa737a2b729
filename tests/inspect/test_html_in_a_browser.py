"""The HTML reports as a person sees them: rendered by headless Chromium from the file alone,
with no request leaving the machine, every chart drawn with visible marks in proportion to
the data, and a screenshot kept as a test artifact (tests/browser.py)."""

from __future__ import annotations

from kuration.inspect import compare_datasets, inspect_dataset, render_diff_html, render_report_html
from kuration.numbers import format_hours, format_percent
from tests.browser import browser_page, screenshot

CHARTS = ("hours_per_split", "shard_lengths", "priorities")


def _drawn_bars(page, chart: str) -> list[dict]:
    """Each bar of ``chart`` as laid out: its on-screen height and its data value."""
    return page.eval_on_selector_all(
        f'svg.chart[data-chart="{chart}"] rect.bar',
        "bars => bars.map(b => ({height: b.getBoundingClientRect().height, value: Number(b.dataset.value)}))")


def test_the_dataset_report_draws_every_chart_offline(written, tmp_path):
    report = inspect_dataset(written, verify=True)
    page_file = tmp_path / "report.html"
    page_file.write_text(render_report_html(report))
    with browser_page() as page:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        shot = screenshot(page, "kur_inspect_report")
        bars = {chart: _drawn_bars(page, chart) for chart in CHARTS}
        visible = {chart: page.locator(f'svg.chart[data-chart="{chart}"]').is_visible() for chart in CHARTS}
        text = page.inner_text("body")
        assert page.external_requests == []
    assert all(visible.values()), visible
    for chart, drawn in bars.items():
        assert drawn, f"{chart}: no bar drawn"
        tallest = max(drawn, key=lambda b: b["value"])
        assert tallest["height"] > 20, (chart, tallest)
        for bar in drawn:  # heights on screen in proportion to the values
            assert abs(bar["height"] / tallest["height"] - bar["value"] / tallest["value"]) < 0.02, (chart, bar)
    # the shard-length histogram counts every shard; the budget block is a table on the page
    assert sum(b["value"] for b in bars["shard_lengths"]) == report.shards
    assert "requested" in text and "admitted" in text and "emitted" in text
    # figures read as a person reads them: hours, binary byte units, percentages
    assert "in hours" in text and format_hours(report.splits["train"]["hours"]) in text
    assert "KiB" in text and format_percent(report.budget["splits"]["train"]["utilization"]) in text
    assert shot.stat().st_size > 10_000


def test_the_diff_report_renders_offline(written, smaller, tmp_path):
    comparison = compare_datasets(written, smaller)
    page_file = tmp_path / "diff.html"
    page_file.write_text(render_diff_html(comparison))
    with browser_page() as page:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        screenshot(page, "kur_diff_report")
        text = page.inner_text("body")
        assert page.external_requests == []
    assert str(written) in text and str(smaller) in text
    assert comparison.to_dict()["shards"]["removed"] or comparison.to_dict()["shards"]["added"]
