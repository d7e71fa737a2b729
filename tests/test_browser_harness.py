"""The browser harness the report and UI tests rely on: it renders a local file, draws SVG,
loads a local server it is allowed to, and records (and refuses) every other request."""

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


def test_an_allowed_local_server_loads_and_any_other_origin_is_still_refused(tmp_path):
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    (tmp_path / "index.html").write_text("<!doctype html><title>served</title><p id='p'>from the local server</p>"
                                         "<img src='http://127.0.0.1:9/other-port.png'>")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with browser_page(allow=(f"{url}/",)) as page:
            page.goto(f"{url}/index.html")
            page.wait_for_load_state("load")
            text = page.locator("#p").inner_text()
            refused = list(page.external_requests)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert text == "from the local server"
    # the same host on another port is another origin: refused, as off-machine requests are
    assert refused == ["http://127.0.0.1:9/other-port.png"]
