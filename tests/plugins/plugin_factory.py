"""Plugin modules written into a temporary folder for the plugin tests: a feature plugin
and a media-provider plugin (the feature finds the provider by name, so a worker that
imported only the feature's module would fail), and fake installed distributions whose
``entry_points.txt`` declares plugins."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kuration.landing.plugins import PLUGINS_ENV, forget_loaded_plugins, load_plugins
from kuration.scoring.features import registered_features, unregister_feature
from kuration.sources.media import media_provider_names, unregister_media_provider

#: What the plugin provider's factory carries: the feature multiplies the present steps by it.
PROVIDER_WEIGHT = 3.0


@dataclass(frozen=True)
class PluginKit:
    """A folder on ``sys.path`` (and ``PYTHONPATH``) to write plugin modules into; every
    module, feature and provider name starts with ``prefix``, unique per test."""

    folder: Path
    prefix: str

    def write(self, name: str, source: str) -> str:
        """Write module ``<prefix>_<name>`` with ``source``; returns its module name."""
        module = f"{self.prefix}_{name}"
        (self.folder / f"{module}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        return module

    @property
    def provider(self) -> str:
        return f"{self.prefix}_frames"

    @property
    def feature(self) -> str:
        return f"{self.prefix}_weighted_present"

    def write_media_plugin(self) -> str:
        """A plugin registering media provider ``<prefix>_frames``: ``npy_index`` decoding,
        plus a ``weight`` the feature plugin reads."""
        return self.write("media", f"""
            from kuration.sources.media import NpyIndexProvider, register_media_provider

            class WeightedFrames(NpyIndexProvider):
                weight = {PROVIDER_WEIGHT!r}

            register_media_provider({self.provider!r}, WeightedFrames)
        """)

    def write_feature_plugin(self) -> str:
        """A plugin registering feature ``fn.<prefix>_weighted_present``: the segment's present
        steps times the weight of the provider it looks up by name (it does not import the
        provider's module: only a process that loaded both plugins can compute it)."""
        return self.write("features", f"""
            from kuration.scoring.features import register_feature
            from kuration.sources.media import get_media_provider

            @register_feature({self.feature!r})
            def weighted_present(track, segment) -> float:
                weight = get_media_provider({self.provider!r}).weight
                return weight * float(track.present[segment.start:segment.stop].sum())
        """)

    def write_failing_in_workers(self) -> str:
        """A plugin that imports in this process and raises at import in every worker
        process (a licence server only this machine's parent reaches), loaded; its name."""
        module = self.write("picky", """
            import multiprocessing
            if multiprocessing.parent_process() is not None:  # imports here, fails in every worker
                raise RuntimeError("licence server unreachable from this worker")
        """)
        load_plugins([module], environ={}, entry_points=False)
        return module

    def write_distribution(self, dist: str, entry_points: dict[str, str]) -> None:
        """A fake installed distribution ``dist`` whose ``kuration.landing.plugins`` entry points are
        ``entry_points`` (name -> value), found by importlib.metadata through ``sys.path``."""
        info = self.folder / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = ["[kuration.plugins]", *(f"{name} = {value}" for name, value in entry_points.items())]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        importlib.invalidate_caches()

    def forget_modules(self) -> None:
        """Drop every module of this kit from ``sys.modules``."""
        for name in [m for m in sys.modules if m.startswith(self.prefix)]:
            del sys.modules[name]


def plugin_kit_session(folder: Path, monkeypatch: pytest.MonkeyPatch, *, prefix: str = "kplug") -> Iterator[PluginKit]:
    """A :class:`PluginKit` in ``folder`` (created), on ``sys.path`` and on ``PYTHONPATH``
    (worker processes find plugins through either), with ``KURATION_PLUGINS`` unset; after
    it, the kit's modules, features, media providers and the loaded-plugin list are gone
    again. The body of a ``plugin_kit`` fixture."""
    folder.mkdir()
    kit = PluginKit(folder, f"{prefix}_{uuid.uuid4().hex[:10]}")
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
