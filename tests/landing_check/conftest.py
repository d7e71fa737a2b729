"""Fixtures: ``template`` (the small demo landing zone, written once per session), ``zone``
(a fresh copy of it per test) and ``plugin_kit`` (a folder on ``sys.path`` for plugin
modules, forgotten again afterwards)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kuration.plugins import PLUGINS_ENV, forget_loaded_plugins
from kuration.sources.media import media_provider_names, unregister_media_provider
from tests.landing_check.landing_factory import copy_zone, write_template
from tests.plugins.plugin_factory import PluginKit


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_template(tmp_path_factory.mktemp("landing_template") / "landing")


@pytest.fixture
def zone(template: Path, tmp_path: Path) -> Path:
    return copy_zone(template, tmp_path / "landing")


@pytest.fixture
def plugin_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    kit = PluginKit(folder, f"kcheck_{uuid.uuid4().hex[:10]}")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    forget_loaded_plugins()
    yield kit
    forget_loaded_plugins()
    kit.forget_modules()
    for name in media_provider_names():
        if name.startswith(kit.prefix):
            unregister_media_provider(name)
