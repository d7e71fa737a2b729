"""The fleet's plugin media provider runs the media provider kit, as the plugin's author
would run it: ``TestMillimetreDepth`` below is the whole test, a kit subclass that says how
to store arrays in the provider's form (``.npy`` files of uint16 millimetres) and how to
refer to a row. The provider decodes them to float32 metres, so the arrays the kit stores are
such metres (``stored``)."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from kuration.testing import WholeFileProviderContract
from tests.own_data.landing_factory import FleetLandingZone, forget_fleet_plugin, plugin_source

PREFIX = "kit_fleet"
PROVIDER = f"{PREFIX}_depth_mm"


@pytest.fixture(scope="module", autouse=True)
def fleet_plugin(tmp_path_factory):
    """The fleet's plugin module written and imported (which registers the provider); its
    registrations forgotten afterwards."""
    folder = tmp_path_factory.mktemp("plugins")
    zone = FleetLandingZone(folder, folder, f"{PREFIX}_plugin", f"{PREFIX}_reentries", PROVIDER)
    (folder / f"{zone.plugin_module}.py").write_text(plugin_source(zone.feature, zone.provider))
    sys.path.insert(0, str(folder))
    try:
        importlib.invalidate_caches()
        importlib.import_module(zone.plugin_module)
        yield zone
    finally:
        sys.path.remove(str(folder))
        forget_fleet_plugin(zone)


class TestMillimetreDepth(WholeFileProviderContract):
    provider_name = PROVIDER

    def stored(self, seed=0):
        rng = np.random.default_rng(seed)
        shapes = {"cam": (9, 4, 5), "cam_b": (6, 4, 5), "depth": (7, 2, 3), "flow": (5, 2), "label": (8,)}
        return {name: rng.integers(0, 65536, shape).astype(np.uint16).astype(np.float32) / np.float32(1000.0)
                for name, shape in shapes.items()}

    def write(self, folder, arrays):
        (folder / "media").mkdir(parents=True)
        for name, metres in arrays.items():
            np.save(folder / "media" / f"{name}.npy", np.rint(metres.astype(np.float64) * 1000).astype(np.uint16))
        return str(folder)

    def ref(self, name, row):
        return f"media/{name}.npy#{row}"

    def missing_root(self, folder):
        return str(folder / "gone")
