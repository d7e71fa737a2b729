"""The ``plugin_kit`` fixture: a folder for plugin modules on ``sys.path`` and on
``PYTHONPATH`` (worker processes find plugins through either), ``KURATION_PLUGINS`` unset,
and afterwards the kit's modules, features, media providers and the loaded-plugin list gone
again (see :func:`tests.plugins.plugin_factory.plugin_kit_session`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.plugin_factory import plugin_kit_session


@pytest.fixture
def plugin_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield from plugin_kit_session(tmp_path / "plugins", monkeypatch)
