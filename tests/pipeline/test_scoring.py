"""``score_sources``: the parallel feature pass, its cache, errors and determinism."""

import io
import logging
import random
import time

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.sources.schema import Schema
from kuration.scoring.cache import FsspecScoreCache, MemoryScoreCache
from kuration.scoring import EmptySegmentPoolError, SourceScoringError, run_fingerprint, score_sources
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.scoring.strategy import Strategy
from tests.pipeline.recordings import SCHEMA, SEGMENTER, STRATEGY, assert_same_scoring, write_recording


def _score(root, **kw):
    return score_sources(ParquetTickAdapter(root, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY, **kw)


def test_scores_every_source_in_canonical_order(recordings):
    result = _score(recordings)
    assert [o.status for o in result.outcomes] == ["scored"] * 6
    table = result.segments
    keys = list(zip(table.column("source_id").to_pylist(), table.column("entity_id").to_pylist(),
                    table.column("segment_index").to_pylist(), strict=True))
    assert keys == sorted(keys)
    # 10 s windows every 5 s over 200 + 50 i ticks at 10 Hz, for 2 drones
    expected = sum(2 * ((200 + 50 * i - 100) // 50 + 1) for i in range(6))
    assert table.num_rows == expected
    assert result.for_source("site_0/rec_00.parquet").num_rows == 2 * 3


class ShuffledAdapter(ParquetTickAdapter):
    """Finishes sources in a random order (sleeps), to prove order does not matter."""

    def read_ticks(self, source_id):
        time.sleep(random.Random(source_id).random() * 0.05)
        return super().read_ticks(source_id)


def test_worker_count_and_completion_order_do_not_change_the_result(recordings):
    serial = _score(recordings).segments
    adapter = ShuffledAdapter(recordings, SCHEMA)
    parallel = score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, workers=2).segments
    assert parallel.equals(serial)


def test_the_ray_backend_gives_the_result_of_one_worker_bit_for_bit(recordings, monkeypatch):
    ray = pytest.importorskip("ray")  # installed by the [dev] extra; skipped only without it
    one_worker = _score(recordings, workers=1)
    # what the comparison covers: segment bounds, a feature, a tag's count and the tags, the priority
    assert {"start", "stop", "start_tick", "stop_tick", "battery.min", "tag.near_miss", "tags", "priority",
            "passed"} <= set(one_worker.segments.column_names)
    assert any(one_worker.segments.column("tags").to_pylist())
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a local cluster for this test alone
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        on_ray = _score(recordings, executor="ray", workers=2)
    finally:
        ray.shutdown()
    assert on_ray.executor == "ray" and on_ray.workers == 2 and one_worker.executor == "local"
    assert_same_scoring(on_ray, one_worker)


def test_a_failing_source_is_skipped_logged_and_recorded(broken, caplog):
    with caplog.at_level(logging.WARNING, logger="kuration.scoring"):
        result = _score(broken)
    (skipped,) = result.skipped
    assert skipped.source_id == "site_0/broken.parquet"
    assert "missing column 'pos'" in skipped.error
    assert "skipping source site_0/broken.parquet" in caplog.text
    assert result.count("scored") == 6
    assert "site_0/broken.parquet" not in set(result.segments.column("source_id").to_pylist())


def test_on_error_raise_stops_at_the_failing_source(broken):
    with pytest.raises(SourceScoringError, match=r"site_0/broken\.parquet: TickDataError: .*missing column 'pos'"):
        _score(broken, on_error="raise")


def test_an_empty_pool_raises_with_a_hint(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptySegmentPoolError, match="no sources to score: the adapter listed none"):
        _score(tmp_path / "empty")
    pq.write_table(pa.table({"tick": [0]}), tmp_path / "bad.parquet")
    with pytest.raises(EmptySegmentPoolError, match=r"1 source\(s\) failed, e\.g\. bad\.parquet: TickDataError"):
        _score(tmp_path)


def test_a_rerun_scores_only_new_or_changed_sources(recordings):
    cache = MemoryScoreCache()
    first = _score(recordings, cache=cache)
    assert first.count("scored") == 6
    again = _score(recordings, cache=cache)
    assert again.count("cached") == 6 and again.segments.equals(first.segments)
    write_recording(recordings / "site_1" / "rec_01.parquet", seed=99, ticks=250)  # rewritten
    write_recording(recordings / "site_9" / "rec_new.parquet", seed=7)  # new
    third = _score(recordings, cache=cache)
    status = {o.source_id: o.status for o in third.outcomes}
    assert status.pop("site_1/rec_01.parquet") == "scored" and status.pop("site_9/rec_new.parquet") == "scored"
    assert set(status.values()) == {"cached"}


def test_changing_what_scoring_depends_on_misses_the_cache(recordings):
    cache = MemoryScoreCache()
    _score(recordings, cache=cache)
    # a feature no earlier run computed (the weights alone: test_scoring_reuse.py)
    other = Strategy.from_dict({"method": "avoidance", "priority": {"battery.min": 1.0, "wind.std": 0.5}})
    result = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=other, cache=cache)
    assert result.count("scored") == 6
    result = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=Segmenter(8, 4), strategy=STRATEGY,
                           cache=cache)
    assert result.count("scored") == 6
    wider = Schema.from_dict({**SCHEMA.to_dict(), "sample_hz": 10.0, "globals": {}, "fields": {
        **{k: v.to_dict() for k, v in SCHEMA.fields.items()}, "wind": {"dtype": "float32", "shape": []}}})
    assert run_fingerprint(ParquetTickAdapter(recordings, wider), SEGMENTER, STRATEGY) != \
        run_fingerprint(ParquetTickAdapter(recordings, SCHEMA), SEGMENTER, STRATEGY)


def test_the_file_cache_survives_the_process_and_refuses_foreign_entries(recordings, tmp_path):
    cache_root = tmp_path / "cache"
    _score(recordings, cache=FsspecScoreCache(cache_root))
    assert _score(recordings, cache=FsspecScoreCache(cache_root)).count("cached") == 6
    entries = list(cache_root.rglob("*.arrow"))
    # per source: its scored table, its segment rows and each feature's values
    assert len(entries) == 6 * (2 + len(STRATEGY.feature_keys()))
    for entry in entries:
        entry.write_bytes(b"torn write")
    result = _score(recordings, cache=FsspecScoreCache(cache_root))
    assert result.count("scored") == 6  # corrupt entries are misses, then rewritten
    assert _score(recordings, cache=FsspecScoreCache(cache_root)).count("cached") == 6


def test_weak_identities_are_scored_every_time():
    buffer = io.BytesIO()
    pq.write_table(pa.table({
        "tick": [0, 1], "drone": ["a", "a"], "pos": pa.array([[0, 0, 0]] * 2, pa.list_(pa.float32(), 3)),
        "battery": [1.0, 0.9], "wind": [0.0, 0.0], "events": [[], []],
    }), buffer)
    fsspec.filesystem("memory").pipe("/weak-src/r.parquet", buffer.getvalue())
    adapter = ParquetTickAdapter("memory://weak-src", SCHEMA)
    assert not adapter.identity("r.parquet").strong  # no content hash, no ETag: logical only
    cache = MemoryScoreCache()
    for _ in range(2):
        result = score_sources(adapter, segmenter=Segmenter(1, 1, unit="steps"), strategy=STRATEGY, cache=cache)
        assert result.count("scored") == 1
    assert cache.entries == {}


def test_user_features_are_rebuilt_in_worker_processes(recordings):
    import tests.scoring._user_features  # noqa: F401  registers "present_steps_x2" here

    strategy = Strategy.from_dict({"method": "inclusion", "priority": {"fn.present_steps_x2": 1.0}})
    serial = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=strategy)
    parallel = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=strategy, workers=2)
    assert parallel.segments.equals(serial.segments)
    assert set(serial.segments.column("fn.present_steps_x2").to_pylist()) == {200.0}


def test_progress_is_reported_per_source(recordings):
    seen = []
    _score(recordings, progress=lambda outcome, done, total: seen.append((done, total, outcome.status)))
    assert seen == [(i, 6, "scored") for i in range(1, 7)]


@pytest.mark.parametrize("bad,message", [
    ({"executor": "dask"}, "executor must be one of"), ({"on_error": "ignore"}, "on_error must be one of"),
    ({"workers": 0}, "workers must be a positive int"),
])
def test_bad_options_are_refused(recordings, bad, message):
    with pytest.raises(ValueError, match=message):
        _score(recordings, **bad)
