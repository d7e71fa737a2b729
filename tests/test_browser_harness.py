"""The browser harness the report tests rely on: it renders a local file, draws SVG, and
records (and refuses) every request that would leave the machine."""

from __future__ import annotations

from tests.browser import browser_page, screenshot


def test_a_local_page_renders_and_a_network_request_is_refused_and_recorded(tmp_path):
    page_file = tmp_path / "page.html"
    page_file.write_text("<!doctype html><title>t</title><svg class='chart' width='50' height='40'>"
                         "<rect width='30' height='20' fill='steelblue'/></svg>"
                         "<img src='http://example.invalid/pixel.png'>")
    with browser_page() as page:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        box = page.locator("svg.chart rect").bounding_box()
        shot = screenshot(page, "browser_harness")
        assert page.external_requests == ["http://example.invalid/pixel.png"]
    assert box is not None and (round(box["width"]), round(box["height"])) == (30, 20)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
