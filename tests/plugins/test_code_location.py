"""The Dagster code location loads the plugins, fails to load naming a plugin that does not
import, and its sensor-launched and manual runs score with a plugin's feature and media
provider (one process with one worker, and two forkserver workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kuration.demo.corpus import write_demo_landing_zone
from kuration.landing.plugins import PLUGINS_ENV, PluginError, loaded_plugin_modules
from kuration.sources.media import get_media_provider
from kuration_definitions import build_definitions
from tests.plugins.plugin_factory import PROVIDER_WEIGHT

REPO = Path(__file__).resolve().parents[2]


def test_building_the_code_location_loads_the_plugins_of_the_environment(plugin_kit, monkeypatch):
    media, features = plugin_kit.write_media_plugin(), plugin_kit.write_feature_plugin()
    monkeypatch.setenv(PLUGINS_ENV, f"{media}, {features}")
    build_definitions()
    assert loaded_plugin_modules() == (media, features)
    assert get_media_provider(plugin_kit.provider).weight == PROVIDER_WEIGHT


def test_a_plugin_that_does_not_import_fails_the_load_naming_it(plugin_kit, monkeypatch):
    missing = f"{plugin_kit.prefix}_not_installed"
    monkeypatch.setenv(PLUGINS_ENV, missing)
    with pytest.raises(PluginError, match=rf"plugin module '{missing}' \(declared in {PLUGINS_ENV}\) cannot be "
                                          r"imported.*Install the package that provides it in the Dagster code "
                                          r"location's environment"):
        build_definitions()


def _environment(plugin_kit, landing: Path, storage: Path, plugins: str) -> dict[str, str]:
    return {**os.environ, PLUGINS_ENV: plugins, "KURATION_LANDING_ZONE": str(landing),
            "KURATION_STORAGE_ROOT": str(storage),
            "PYTHONPATH": os.pathsep.join([str(plugin_kit.folder), str(REPO)])}


def test_dagster_reports_the_plugin_error_when_it_loads_the_code_location(plugin_kit, tmp_path):
    # What `dagster dev` / a run worker does: import the module workspace.yaml names.
    broken = plugin_kit.write("broken", "raise RuntimeError('calibration table missing')\n")
    done = subprocess.run(
        [sys.executable, "-c", "import kuration_definitions"], capture_output=True, text=True, timeout=120,
        env=_environment(plugin_kit, tmp_path / "landing", tmp_path / "storage", f"{broken}"), cwd=tmp_path,
    )
    assert done.returncode != 0
    assert (f"kuration.landing.plugins.PluginError: plugin module '{broken}' (declared in {PLUGINS_ENV}) "
            "raised at import: RuntimeError: calibration table missing") in done.stderr.splitlines()[-1]


def _landing_using_the_plugins(plugin_kit, root: Path) -> Path:
    """A small demo landing zone whose schema decodes frames with the plugin's provider and
    whose strategy ranks by the plugin's feature."""
    zone = Path(write_demo_landing_zone(root, seed=4, recordings_per_site=1, sites=3, minutes=(1, 1)).root)
    schema = json.loads((zone / "schema.json").read_text())
    schema["media"]["frame"]["provider"] = plugin_kit.provider
    (zone / "schema.json").write_text(json.dumps(schema))
    strategy = json.loads((zone / "strategy.json").read_text())
    strategy["priority"] = {f"fn.{plugin_kit.feature}": 1.0}
    (zone / "strategy.json").write_text(json.dumps(strategy))
    # three sites, one per stage (the sensor resolves the split too, with these settings)
    (zone / "curation.json").write_text(json.dumps({"split": {"strategy": "random", "seed": 1, "val_ratio": 0.34,
                                                              "test_ratio": 0.34}}))
    return zone


def _feature_values(storage: Path, column: str) -> dict[str, list[float]]:
    """Recording name -> the feature's values, from ``scored_segments/<name>.parquet``."""
    folder = storage / "scored_segments"
    return {path.relative_to(folder).as_posix().removesuffix(".parquet"): pq.read_table(path).column(column).to_pylist()
            for path in sorted(folder.rglob("*.parquet"))}


def test_sensor_launched_and_manual_runs_score_with_the_plugins(plugin_kit, tmp_path):
    media, features = plugin_kit.write_media_plugin(), plugin_kit.write_feature_plugin()
    landing = _landing_using_the_plugins(plugin_kit, tmp_path / "landing")
    sensor_storage, manual_storage = tmp_path / "storage", tmp_path / "manual_storage"
    done = subprocess.run(
        [sys.executable, "-m", "tests.plugins.code_location_runs", str(manual_storage)], capture_output=True,
        text=True, timeout=300, env=_environment(plugin_kit, landing, sensor_storage, f"{media},{features}"),
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert [p["module"] for p in report["plugins"]] == [media, features]
    assert {p["declared_in"] for p in report["plugins"]} == {PLUGINS_ENV}
    sources = report["manual_run"]["sources"]
    assert len(sources) == 3 and report["manual_run"]["success"]
    # the new recordings in one scoring run (beside the universe's), every partition in it
    assert [r["partitions"] for r in report["sensor_runs"] if r["partitions"]] == [sources]
    assert all(r["success"] for r in report["sensor_runs"]), report["sensor_runs"]
    column = f"fn.{plugin_kit.feature}"
    by_sensor, by_manual_run = _feature_values(sensor_storage, column), _feature_values(manual_storage, column)
    assert sorted(by_sensor) == sources and by_manual_run == by_sensor
    values = [v for per_source in by_sensor.values() for v in per_source]
    # the feature is the provider's weight times the present steps of a 10 s window (100 ticks at 10 Hz)
    assert values and all(v % PROVIDER_WEIGHT == 0 and 0 <= v <= 100 * PROVIDER_WEIGHT for v in values)
    assert max(values) == 100 * PROVIDER_WEIGHT
