"""The HTML reports, parsed structurally: one self-contained file (nothing fetched), each chart
present under its stable hook with one mark per datum, heights proportional to the data, "no
data" instead of an empty chart, and every dataset string escaped."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest

from kuration.inspect import check_quality, compare_datasets, inspect_dataset, render_diff_html, render_report_html
from kuration.inspect.html import MAX_BARS, _binned
from tests.inspect.datasets import HOSTILE, hostile_config, publish

CHARTS = ("hours_per_split", "shard_lengths", "priorities")
#: Tags that load or run something; a self-contained report has none of them.
FETCHING = {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source", "image", "use"}


class Page(HTMLParser):
    """Every element with its attributes and the chart it sits in; the text of each chart."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, Any], str | None]] = []
        self.chart_text: dict[str, str] = {}
        self.text: list[str] = []
        self._chart: str | None = None
        self._depth = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "svg" and attributes.get("class") == "chart":
            self._chart = attributes["data-chart"]
            self.chart_text[self._chart] = ""
        self.elements.append((tag, attributes, self._chart))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._chart is not None:
            self.chart_text[self._chart] += data

    def bars(self, chart: str) -> list[dict[str, Any]]:
        return [a for tag, a, c in self.elements if c == chart and tag == "rect" and a.get("class") == "bar"]


def assert_self_contained(page: Page) -> None:
    assert not [tag for tag, _, _ in page.elements if tag in FETCHING]
    for tag, attributes, _ in page.elements:
        for name, value in attributes.items():
            assert not name.startswith("on"), (tag, name)  # no event handlers
            assert name not in ("src", "href", "xlink:href", "srcset", "action"), (tag, name)
            assert "url(" not in (value or "") and "://" not in (value or ""), (tag, name, value)


@pytest.fixture(scope="module")
def report(written):
    return inspect_dataset(written, verify=True)


@pytest.fixture(scope="module")
def page(report):
    return Page(render_report_html(report))


def test_the_report_is_one_self_contained_document(page):
    assert_self_contained(page)
    assert [a["data-chart"] for tag, a, _ in page.elements if tag == "svg"] == list(CHARTS)


def test_hours_bars_are_requested_and_emitted_per_split_proportional_to_hours(page, report):
    bars = page.bars("hours_per_split")
    expected = [(series, value) for split in report.splits.values()
                for series, value in (("requested", split["requested_hours"]), ("emitted", split["hours"]))]
    assert [(b["data-series"], float(b["data-value"])) for b in bars] == expected
    tallest = max(float(b["height"]) for b in bars)
    top = max(v for _, v in expected)
    for bar in bars:
        assert float(bar["height"]) == pytest.approx(tallest * float(bar["data-value"]) / top, abs=0.01)


def test_one_shard_length_bar_per_length_with_its_count(page, report):
    bars = page.bars("shard_lengths")
    assert [float(b["data-value"]) for b in bars] == [float(n) for n in report.shard_lengths.values()]
    assert len(bars) == len(report.shard_lengths)


def test_priority_bars_are_the_nonzero_histogram_bins_of_both_series(page, report):
    p = report.priorities
    bars = page.bars("priorities")
    expected = [(series, float(p[series][i])) for i in range(len(p["edges"]) - 1)
                for series in ("admitted", "rejected") if p[series][i]]
    assert [(b["data-series"], float(b["data-value"])) for b in bars] == expected
    assert sum(v for s, v in expected if s == "admitted") == sum(p["admitted"])


def test_every_mark_has_a_tooltip(report):
    text = render_report_html(report)
    assert text.count("<rect class=\"bar\"") == text.count("</title></rect>")


def test_an_empty_dataset_draws_no_data_not_empty_charts(tmp_path):
    page = Page(render_report_html(inspect_dataset(publish(tmp_path / "empty"))))
    assert_self_contained(page)
    for chart in CHARTS:
        assert page.bars(chart) == []
        assert page.chart_text[chart].startswith("no data")
    assert [a.get("class") for tag, a, c in page.elements if tag == "text" and c] == ["no-data"] * 3


def test_dataset_strings_are_escaped(tmp_path):
    out = publish(tmp_path / "hostile", config=hostile_config())
    text = render_report_html(inspect_dataset(out))
    page = Page(text)
    assert_self_contained(page)  # in particular: no <script> element
    assert HOSTILE in "".join(page.text)  # shown as text
    assert "<b>" not in text and "&lt;script&gt;" in text


def test_many_lengths_are_binned():
    counts = {n: 1 for n in range(1, 500)}
    bins = _binned(counts)
    assert len(bins) <= MAX_BARS and sum(n for _, n in bins) == len(counts)


def test_the_diff_report_shows_the_structured_comparison(written, smaller, tmp_path):
    comparison = compare_datasets(written, smaller)
    page = Page(render_diff_html(comparison))
    assert_self_contained(page)
    text = "".join(page.text)
    assert "different" in text and "/budget/train_hours" in text
    assert json.dumps(40 / 3600) in text and json.dumps(20 / 3600) in text  # exact values, not rounded
    rows = [a for tag, a, _ in page.elements if tag == "tr"]
    changes = (len(comparison.shards["added"]) + len(comparison.shards["removed"])
               + sum(len(d) for d in comparison.sections.values()))
    header_rows = 1 + 1 + 1 + sum(1 for d in comparison.sections.values() if d) + sum(
        1 for k in ("added", "removed") if comparison.shards[k])
    assert len(rows) == changes + header_rows + 3  # + the shard summary row and the three split rows
    hostile = publish(tmp_path / "hostile", config=hostile_config())
    diff = render_diff_html(compare_datasets(publish(tmp_path / "plain"), hostile))
    assert_self_contained(Page(diff)) is None and "&lt;script&gt;" in diff and "<b>" not in diff


def test_kur_check_html_leads_with_the_gates(written):
    result = check_quality(written, {"min_shards": 10**6, "min_sources": 1})
    assert result.report is not None
    page = Page(render_report_html(result.report, gates=result.gates))
    assert_self_contained(page)
    text = "".join(page.text)
    assert "1 of 2 gates failed" in text and text.index("Quality gates") < text.index("Splits")
