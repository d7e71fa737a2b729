"""Plugins reach the scoring workers: a feature plugin that finds a provider plugin's media
provider by name scores the same with forkserver workers and on Ray as in one process."""

from __future__ import annotations

import pytest

from kuration.landing.plugins import PLUGINS_ENV, PluginError, load_plugins
from kuration.scoring import SourceScoringError, score_sources
from kuration.scoring.strategy import Strategy
from kuration.sources import ParquetTickAdapter
from tests.pipeline.recordings import SCHEMA, SEGMENTER, assert_same_scoring, write_recording
from tests.plugins.plugin_factory import PROVIDER_WEIGHT


@pytest.fixture
def recordings(tmp_path):
    root = tmp_path / "recordings"
    for i in range(4):
        write_recording(root / f"site_{i % 2}" / f"rec_{i:02d}.parquet", seed=i, ticks=150 + 50 * i)
    return root


def _plugins_loaded(kit, monkeypatch) -> Strategy:
    """Both plugins declared in KURATION_PLUGINS and loaded; the strategy reading the feature."""
    monkeypatch.setenv(PLUGINS_ENV, f"{kit.write_media_plugin()},{kit.write_feature_plugin()}")
    load_plugins(entry_points=False)
    return Strategy.from_dict({"method": "inclusion", "priority": {f"fn.{kit.feature}": 1.0}})


def _score(recordings, strategy, **options):
    return score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=strategy,
                         on_error="raise", **options)


def test_forkserver_workers_import_every_loaded_plugin(plugin_kit, monkeypatch, recordings):
    strategy = _plugins_loaded(plugin_kit, monkeypatch)
    serial = _score(recordings, strategy)
    parallel = _score(recordings, strategy, workers=2)
    assert parallel.segments.equals(serial.segments)
    # 10 s windows at 10 Hz, both drones present throughout: 100 present steps, times the provider's weight
    assert set(serial.segments.column(f"fn.{plugin_kit.feature}").to_pylist()) == {100 * PROVIDER_WEIGHT}


def test_without_loading_the_provider_plugin_the_worker_names_the_missing_provider(plugin_kit, recordings):
    # The feature's module alone reaches the workers (as before plugins): its provider does not.
    import importlib

    importlib.import_module(plugin_kit.write_feature_plugin())
    plugin_kit.write_media_plugin()
    strategy = Strategy.from_dict({"method": "inclusion", "priority": {f"fn.{plugin_kit.feature}": 1.0}})
    with pytest.raises(SourceScoringError, match=rf"no media provider named '{plugin_kit.provider}'"):
        _score(recordings, strategy, workers=2)


def test_a_plugin_that_fails_in_a_worker_fails_the_run_naming_it(plugin_kit, monkeypatch, recordings):
    strategy = _plugins_loaded(plugin_kit, monkeypatch)
    picky = plugin_kit.write_failing_in_workers()
    with pytest.raises(PluginError, match=rf"plugin module '{picky}' \(declared in the scoring run's parent process, "
                                          r"whose plugins and user code every worker imports\) raised at import: "
                                          r"RuntimeError: licence server unreachable from this worker"):
        _score(recordings, strategy, workers=2)


def test_the_ray_executor_imports_every_loaded_plugin(plugin_kit, monkeypatch, recordings, tmp_path):
    ray = pytest.importorskip("ray")  # installed by the [dev] extra; skipped only without it
    strategy = _plugins_loaded(plugin_kit, monkeypatch)
    serial = _score(recordings, strategy)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    # a plugin only this process can import: its folder is on sys.path, not on PYTHONPATH
    private = tmp_path / "private"
    private.mkdir()
    (private / f"{plugin_kit.prefix}_private.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(private))
    try:
        # Ray's workers inherit PYTHONPATH (the fixture put the plugin folder on it) from ray.init.
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        on_ray = _score(recordings, strategy, workers=2, executor="ray")
        load_plugins([f"{plugin_kit.prefix}_private"], environ={}, entry_points=False)
        with pytest.raises(PluginError, match=rf"plugin module '{plugin_kit.prefix}_private' .* cannot be imported: "
                                              r"No module named .*Install the package that provides it in the "
                                              r"scoring workers' environment"):
            _score(recordings, strategy, workers=2, executor="ray")
    finally:
        ray.shutdown()
    assert on_ray.executor == "ray"
    assert_same_scoring(on_ray, serial)


def test_workers_import_the_module_of_a_media_provider_the_schema_names(plugin_kit, tmp_path):
    # Not declared as plugins, only imported here: the feature's module reaches the workers as
    # a feature's, the provider's module because the schema's media column names the provider.
    import importlib
    import json

    from kuration.demo.corpus import write_demo_landing_zone
    from kuration.sources.schema import Schema

    importlib.import_module(plugin_kit.write_media_plugin())
    importlib.import_module(plugin_kit.write_feature_plugin())
    zone = write_demo_landing_zone(tmp_path / "landing", seed=2, recordings_per_site=2, sites=1, minutes=(1, 1))
    declared = json.loads((tmp_path / "landing" / "schema.json").read_text())
    declared["media"]["frame"]["provider"] = plugin_kit.provider
    adapter = ParquetTickAdapter(f"{zone.root}/recordings", Schema.from_dict(declared))
    strategy = Strategy.from_dict({"method": "inclusion", "priority": {f"fn.{plugin_kit.feature}": 1.0}})
    serial = score_sources(adapter, segmenter=SEGMENTER, strategy=strategy, on_error="raise")
    parallel = score_sources(adapter, segmenter=SEGMENTER, strategy=strategy, on_error="raise", workers=2)
    assert parallel.segments.equals(serial.segments) and serial.segments.num_rows > 0
