"""Re-curation after a strategy change: a source whose every feature is cached under its
definition is not read again, its priorities come from the cached values and equal a fresh
score; a feature whose definition changed, a new feature, or a torn entry is computed again,
alone, and the result is the same as scoring from scratch."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401  pa.compute
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.scoring import MemoryScoreCache, feature_fingerprints, register_feature, score_sources
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring.features import unregister_feature
from kuration.scoring.strategy import Strategy
from kuration.sources import ParquetTickAdapter
from tests.pipeline.recordings import SCHEMA, SEGMENTER, STRATEGY, write_recording

#: The weights, method, predicates and selection change; the features read stay the same.
REWEIGHED = Strategy.from_dict({
    "method": "filter", "priority": {"battery.min": 2.0, "tag.near_miss": -1.0}, "tags": ["near_miss"],
    "predicates": [{"feature": "battery.min", "op": ">", "value": 0.5}], "selection": {"max_group_overshoot": 1.5},
})


class CountingAdapter(ParquetTickAdapter):
    """Counts the recordings read: a reused source must not be read at all."""

    def __init__(self, root, schema):
        super().__init__(root, schema)
        self.read: list[str] = []

    def read_ticks(self, source_id):
        self.read.append(source_id)
        return super().read_ticks(source_id)


def _score(adapter, strategy, cache):
    return score_sources(adapter, segmenter=SEGMENTER, strategy=strategy, cache=cache)


def test_a_strategy_change_reuses_the_cached_features_without_reading_a_recording(recordings, tmp_path):
    cache = FsspecScoreCache(tmp_path / "cache")
    first = _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    adapter = CountingAdapter(recordings, SCHEMA)
    result = _score(adapter, REWEIGHED, cache)
    assert adapter.read == []
    assert [o.status for o in result.outcomes] == ["cached"] * 6
    assert {o.reused_features for o in result.outcomes} == {tuple(REWEIGHED.feature_keys())}
    fresh = _score(ParquetTickAdapter(recordings, SCHEMA), REWEIGHED, None)
    assert result.segments.equals(fresh.segments)  # the same rows, features, priorities, verdicts and schema
    assert result.segments.column("priority") != first.segments.column("priority")
    assert result.run_fingerprint != first.run_fingerprint
    # that strategy's whole tables were cached on the way: the next run maps them as they are
    again = _score(CountingAdapter(recordings, SCHEMA), REWEIGHED, cache)
    assert again.count("cached") == 6 and {o.reused_features for o in again.outcomes} == {()}


def test_a_changed_or_new_recording_is_read_and_scored_the_rest_reuse(recordings):
    cache = MemoryScoreCache()
    _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    write_recording(recordings / "site_1" / "rec_01.parquet", seed=99, ticks=250)
    adapter = CountingAdapter(recordings, SCHEMA)
    result = _score(adapter, REWEIGHED, cache)
    assert adapter.read == ["site_1/rec_01.parquet"]
    status = {o.source_id: o.status for o in result.outcomes}
    assert status.pop("site_1/rec_01.parquet") == "scored" and set(status.values()) == {"cached"}
    assert result.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), REWEIGHED, None).segments)


def test_a_feature_not_cached_is_computed_alone_and_the_cached_ones_reused(recordings):
    cache = MemoryScoreCache()
    _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    wider = Strategy.from_dict({"method": "inclusion", "priority": {"battery.min": 1.0, "pos.std": 1.0}})
    adapter = CountingAdapter(recordings, SCHEMA)
    result = _score(adapter, wider, cache)
    assert sorted(adapter.read) == sorted(o.source_id for o in result.outcomes)  # pos.std needs the recordings
    assert result.count("scored") == 6 and {o.reused_features for o in result.outcomes} == {("battery.min",)}
    assert result.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), wider, None).segments)
    # then both features are cached: a subset of them reuses without the other
    subset = Strategy.from_dict({"method": "avoidance", "priority": {"pos.std": 3.0}})
    adapter = CountingAdapter(recordings, SCHEMA)
    assert _score(adapter, subset, cache).count("cached") == 6 and adapter.read == []


def test_cached_segment_rows_that_disagree_with_the_recording_are_never_joined(recordings):
    cache = MemoryScoreCache()
    _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    adapter = ParquetTickAdapter(recordings, SCHEMA)
    wider = Strategy.from_dict({"method": "inclusion", "priority": {"battery.min": 1.0, "pos.std": 1.0}})
    parts = feature_fingerprints(adapter, SEGMENTER, wider)
    source = "site_0/rec_00.parquet"
    key = (parts.segments, source, adapter.identity(source))
    rows = cache.entries[key]
    shifted = pa.compute.add(rows.column("start"), 1)
    cache.entries[key] = rows.set_column(rows.schema.get_field_index("start"), "start", shifted)
    result = _score(adapter, wider, cache)
    outcome = {o.source_id: o for o in result.outcomes}[source]
    assert outcome.status == "scored" and outcome.reused_features == ()  # every feature computed again
    assert result.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), wider, None).segments)


@pytest.fixture
def feature_named_lift():
    yield "lift"
    unregister_feature("lift")


def test_a_feature_whose_code_changed_is_computed_again(recordings, feature_named_lift):
    def lift(track, segment) -> float:
        return float(track.present[segment.start:segment.stop].sum())

    register_feature(feature_named_lift, lift)
    strategy = Strategy.from_dict({"method": "inclusion", "priority": {"fn.lift": 1.0, "battery.min": 1.0}})
    cache = MemoryScoreCache()
    before = _score(ParquetTickAdapter(recordings, SCHEMA), strategy, cache)
    reweighed = Strategy.from_dict({"method": "inclusion", "priority": {"fn.lift": 2.0, "battery.min": 1.0}})
    assert _score(ParquetTickAdapter(recordings, SCHEMA), reweighed, cache).count("cached") == 6

    def lift_doubled(track, segment) -> float:  # the plugin's feature, edited
        return 2.0 * float(track.present[segment.start:segment.stop].sum())

    adapter = ParquetTickAdapter(recordings, SCHEMA)
    old_parts = feature_fingerprints(adapter, SEGMENTER, reweighed)
    register_feature(feature_named_lift, lift_doubled, replace=True)
    new_parts = feature_fingerprints(adapter, SEGMENTER, reweighed)
    assert new_parts.features["fn.lift"] != old_parts.features["fn.lift"]
    assert new_parts.features["battery.min"] == old_parts.features["battery.min"]
    after = _score(CountingAdapter(recordings, SCHEMA), reweighed, cache)
    assert after.count("scored") == 6 and {o.reused_features for o in after.outcomes} == {("battery.min",)}
    doubled = [2 * v for v in before.segments.column("fn.lift").to_pylist()]
    assert after.segments.column("fn.lift").to_pylist() == doubled
    assert after.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), reweighed, None).segments)


def test_a_torn_or_foreign_feature_entry_is_a_miss_never_a_value(recordings, tmp_path):
    cache = FsspecScoreCache(tmp_path / "cache")
    _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    parts = feature_fingerprints(ParquetTickAdapter(recordings, SCHEMA), SEGMENTER, REWEIGHED)
    torn = next((tmp_path / "cache" / parts.features["battery.min"][:16]).glob("*.arrow"))
    torn.write_bytes(torn.read_bytes()[:64])
    # another source's column of another length, under this source's key
    feature_dir = tmp_path / "cache" / parts.features["tag.near_miss"][:16]
    entries = sorted(feature_dir.glob("*.arrow"), key=lambda p: p.stat().st_size)
    entries[0].write_bytes(entries[-1].read_bytes())
    result = _score(ParquetTickAdapter(recordings, SCHEMA), REWEIGHED, cache)
    assert result.count("scored") == 2 and result.count("cached") == 4
    assert {o.reused_features for o in result.outcomes if o.status == "scored"} == {("tag.near_miss",),
                                                                                     ("battery.min",)}
    assert result.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), REWEIGHED, None).segments)


_weights = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=32)


@pytest.fixture(scope="module")
def one_recording(tmp_path_factory):
    root = tmp_path_factory.mktemp("reuse") / "recordings"
    write_recording(root / "site_0" / "rec.parquet", seed=3, ticks=260)
    cache = MemoryScoreCache()
    _score(ParquetTickAdapter(root, SCHEMA), STRATEGY, cache)
    return root, cache


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["inclusion", "avoidance", "filter"]), battery=_weights, near_miss=_weights,
       threshold=st.floats(0, 1, width=32))
def test_priorities_from_cached_features_equal_a_fresh_score(one_recording, method, battery, near_miss, threshold):
    root, cache = one_recording
    strategy = Strategy.from_dict({
        "method": method, "priority": {"battery.min": battery, "tag.near_miss": near_miss}, "tags": ["near_miss"],
        "predicates": [{"feature": "battery.min", "op": ">=", "value": threshold}]})
    reused = _score(ParquetTickAdapter(root, SCHEMA), strategy, cache)
    assert reused.count("cached") == 1
    fresh = _score(ParquetTickAdapter(root, SCHEMA), strategy, None)
    assert reused.segments.equals(fresh.segments)


def test_reused_sources_are_checkpointed_under_a_memory_budget_and_across_workers(recordings, tmp_path):
    cache = FsspecScoreCache(tmp_path / "cache")
    _score(ParquetTickAdapter(recordings, SCHEMA), STRATEGY, cache)
    write_recording(recordings / "site_2" / "rec_05.parquet", seed=42, ticks=230)  # one recording changed
    wider = Strategy.from_dict({"method": "avoidance", "priority": {"battery.min": 1.0, "wind.max": 2.0}})
    result = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=wider, cache=cache,
                           workers=2, memory_budget=1)
    reused = {o.source_id: o.reused_features for o in result.outcomes}
    assert reused.pop("site_2/rec_05.parquet") == () and set(reused.values()) == {("battery.min",)}
    assert result.memory["resident_bytes"] == 0 and result.memory["checkpointed_sources"] == 6
    assert result.segments.equals(_score(ParquetTickAdapter(recordings, SCHEMA), wider, None).segments)


def test_editing_a_helper_in_the_features_plugin_changes_only_that_features_fingerprint(tmp_path, monkeypatch):
    import importlib
    import sys
    import textwrap

    plugin = tmp_path / "reuse_plugin_helper.py"
    source = textwrap.dedent('''\
        from kuration.scoring.features import register_feature


        def weight():
            return 1.0


        @register_feature("helped")
        def helped(track, segment) -> float:
            return weight() * float(segment.stop - segment.start)
        ''')
    plugin.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("reuse_plugin_helper")
    try:
        strategy = Strategy.from_dict({"method": "inclusion", "priority": {"fn.helped": 1.0, "battery.min": 1.0}})
        adapter = ParquetTickAdapter(tmp_path, SCHEMA)
        before = feature_fingerprints(adapter, SEGMENTER, strategy)
        plugin.write_text(source.replace("return 1.0", "return 2.0"))  # the function itself is unchanged
        after = feature_fingerprints(adapter, SEGMENTER, strategy)
        assert after.features["fn.helped"] != before.features["fn.helped"]
        assert after.features["battery.min"] == before.features["battery.min"] and after.segments == before.segments
    finally:
        unregister_feature("helped")
        sys.modules.pop("reuse_plugin_helper", None)
