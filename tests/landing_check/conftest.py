"""Fixtures: ``template`` (the small demo landing zone, written once per session), ``zone``
(a fresh copy of it per test) and ``plugin_kit`` (a folder on ``sys.path`` for plugin
modules, forgotten again afterwards)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.landing_check.landing_factory import copy_zone, write_template
from tests.plugins.plugin_factory import plugin_kit_session


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_template(tmp_path_factory.mktemp("landing_template") / "landing")


@pytest.fixture
def zone(template: Path, tmp_path: Path) -> Path:
    return copy_zone(template, tmp_path / "landing")


@pytest.fixture
def plugin_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield from plugin_kit_session(tmp_path / "plugins", monkeypatch, prefix="kcheck")
