"""Headless Chromium for tests that look at what a person sees (the HTML reports).

Debian's ``/usr/bin/chromium`` (installed by ``scripts/chromium.sh``, which
``scripts/test.sh`` runs) driven by playwright, with the flags DESIGN.md measured: without
the background-networking ones Chromium keeps calling Google's hosts on a closed network.
No ``playwright install``: nothing is downloaded.

Screenshots are test artifacts: each one is written under ``$KURATION_TEST_ARTIFACTS``
(default ``test-artifacts/`` in the repository, ignored by git) so a reviewer can look at
what the test saw. ``KURATION_SKIP_BROWSER=1`` skips these tests; without it, a missing
browser fails them, so CI cannot pass without having looked.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
REPO = Path(__file__).resolve().parent.parent


def artifacts_dir() -> Path:
    where = Path(os.environ.get("KURATION_TEST_ARTIFACTS") or REPO / "test-artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def require_browser() -> None:
    if os.environ.get("KURATION_SKIP_BROWSER") == "1":
        pytest.skip("KURATION_SKIP_BROWSER=1")
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/chromium.sh (scripts/test.sh does), or set "
                    "KURATION_SKIP_BROWSER=1 to skip the browser tests")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium for as long as the block runs: open pages in it with :func:`local_page`."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


#: The proxy every refused request is sent to: the discard port on loopback, where nothing
#: listens, so the request fails at once and nothing leaves the machine.
NOWHERE = "http://127.0.0.1:9"


@contextmanager
def local_page(browser: Any, *, width: int = 1200, height: int = 900, allow: tuple[str, ...] = ()) -> Iterator[Any]:
    """A page with nothing stored (its own browser context) that refuses every request
    leaving the machine, so a test also proves a page needs no network. ``allow`` names URL
    prefixes that may load, a local server's (``http://127.0.0.1:3115/``); refused requests
    are recorded in ``page.external_requests``.

    The refusal is the context's proxy, :data:`NOWHERE`, which every request but those to an
    allowed origin goes through (loopback included), not request routing: routing turns
    Chromium's cache off, and the Dagster UI then fetched its scripts again on every page, a
    third of each page's load."""
    allowed = ",".join(urlsplit(prefix).netloc for prefix in allow if urlsplit(prefix).netloc)
    context = browser.new_context(viewport={"width": width, "height": height},
                                  proxy={"server": NOWHERE, "bypass": allowed} if allowed else {"server": NOWHERE})
    try:
        page = context.new_page()
        page.external_requests = []  # type: ignore[attr-defined]

        def record(request: Any) -> None:
            # a blob: URL names an object in the page's memory (a web worker's script, say)
            if not request.url.startswith(("file:", "data:", "about:", "blob:", *allow)):
                page.external_requests.append(request.url)  # type: ignore[attr-defined]

        page.on("request", record)
        yield page
    finally:
        context.close()


@contextmanager
def browser_page(*, width: int = 1200, height: int = 900, allow: tuple[str, ...] = ()) -> Iterator[Any]:
    """A :func:`local_page` in a fresh headless Chromium."""
    with chromium() as browser, local_page(browser, width=width, height=height, allow=allow) as page:
        yield page


def screenshot(page: Any, name: str) -> Path:
    """The whole page as a PNG test artifact; returns its path."""
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
