"""The ``plugin_kit`` fixture: a folder for plugin modules on ``sys.path`` and on
``PYTHONPATH`` (worker processes find plugins through either), ``KURATION_PLUGINS`` unset,
and afterwards the kit's modules, features, media providers and the loaded-plugin list gone
again."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kuration.plugins import PLUGINS_ENV, forget_loaded_plugins
from kuration.scoring.features import registered_features, unregister_feature
from kuration.sources.media import media_provider_names, unregister_media_provider
from tests.plugins.plugin_factory import PluginKit


@pytest.fixture
def plugin_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    kit = PluginKit(folder, f"kplug_{uuid.uuid4().hex[:10]}")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    forget_loaded_plugins()
    yield kit
    forget_loaded_plugins()
    kit.forget_modules()
    for name in registered_features():
        if name.startswith(kit.prefix):
            unregister_feature(name)
    for name in media_provider_names():
        if name.startswith(kit.prefix):
            unregister_media_provider(name)
