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


@contextmanager
def local_page(browser: Any, *, width: int = 1200, height: int = 900, allow: tuple[str, ...] = ()) -> Iterator[Any]:
    """A page with nothing stored (its own browser context) that refuses every request
    leaving the machine, so a test also proves a page needs no network. ``allow`` names URL
    prefixes that may load, a local server's (``http://127.0.0.1:3115/``); refused requests
    are recorded in ``page.external_requests``."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.external_requests = []  # type: ignore[attr-defined]

        def refuse(route: Any) -> None:
            url = route.request.url
            if url.startswith(("file:", "data:", "about:", *allow)):
                route.continue_()
            else:
                page.external_requests.append(url)  # type: ignore[attr-defined]
                route.abort()

        page.route("**/*", refuse)
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
