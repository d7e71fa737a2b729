"""``AdapterContract``: what every :class:`~kuration.sources.SourceAdapter` promises.

A test module subclasses it once per adapter (``class TestMine(AdapterContract): ...``) and
supplies only how to write a known dataset in that adapter's native format; the built-in
adapters' tests in ``tests/sources`` run it the same way.

The dataset is single-entity (every adapter can hold that): each episode has a vector
field ``pos`` (float32 [3]), a scalar ``speed`` (float64) and a lazy media column
``frame`` (uint8 [2, 2]) decoded by the adapter's provider.

A subclass supplies:

* ``media_provider``: the provider name the schema declares for ``frame``;
* ``write(root, episodes)``: (re)write the whole store under the directory ``root`` so it
  holds exactly ``episodes``, in order (called again to change or append a source);
* ``make_adapter(root, schema)``: the adapter over that store;
* ``expected_ids(count)``: the source ids, in the adapter's order, of ``count`` episodes.

The read tests go by the ``schema`` fixture: an adapter that serves the frame as a field (a
re-ingested dataset) overrides it, and the media tests.
"""

from __future__ import annotations

import abc
import re
from pathlib import Path

import numpy as np
import pytest

from kuration.sources.schema import Schema
from kuration.sources import SourceAdapter, SourceIdentity, TickDataError
from kuration.sources.tracks import tracks_from_ticks

LENGTHS = (5, 3)


def make_episode(seed: int, length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "pos": rng.normal(size=(length, 3)).astype(np.float32),
        "speed": rng.uniform(0, 10, size=length),
        "frame": rng.integers(0, 256, size=(length, 2, 2), dtype=np.uint8),
    }


class AdapterContract(abc.ABC):
    media_provider: str = "npy_index"

    @abc.abstractmethod
    def write(self, root: Path, episodes: list[dict[str, np.ndarray]]) -> None:
        ...

    @abc.abstractmethod
    def make_adapter(self, root: Path, schema: Schema) -> SourceAdapter:
        ...

    @abc.abstractmethod
    def expected_ids(self, count: int) -> list[str]:
        ...

    # ---- fixtures -------------------------------------------------------------------

    @pytest.fixture
    def schema(self) -> Schema:
        return Schema.from_dict({
            "sample_hz": 10,
            "time": "t",
            "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
            "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": self.media_provider}},
        })

    @pytest.fixture
    def episodes(self) -> list[dict[str, np.ndarray]]:
        return [make_episode(seed, n) for seed, n in enumerate(LENGTHS)]

    @pytest.fixture
    def root(self, tmp_path: Path, episodes) -> Path:
        root = tmp_path / "store"
        root.mkdir()
        self.write(root, episodes)
        return root

    @pytest.fixture
    def adapter(self, root: Path, schema: Schema) -> SourceAdapter:
        return self.make_adapter(root, schema)

    # ---- listing --------------------------------------------------------------------

    def test_is_a_source_adapter_with_its_schema(self, adapter, schema):
        assert isinstance(adapter, SourceAdapter)
        assert adapter.schema == schema

    def test_list_sources_is_the_expected_order_and_stable(self, adapter):
        ids = adapter.list_sources()
        assert ids == self.expected_ids(len(LENGTHS))
        assert adapter.list_sources() == ids
        assert len(set(ids)) == len(ids)

    # ---- reading --------------------------------------------------------------------

    def test_read_ticks_has_declared_columns_dtypes_and_shapes(self, adapter, schema, episodes):
        for source_id, episode in zip(adapter.list_sources(), episodes, strict=True):
            ticks = adapter.read_ticks(source_id)
            n = len(episode["pos"])
            assert ticks.source_id == source_id
            assert len(ticks) == n
            assert ticks.entity is None
            np.testing.assert_array_equal(ticks.tick, np.arange(n))
            assert ticks.tick.dtype == np.int64
            assert set(ticks.columns) == set(schema.all_fields())
            for name, spec in schema.all_fields().items():
                column = ticks.columns[name]
                assert column.dtype == spec.numpy_dtype, name
                assert column.shape == (n, *spec.shape), name
                np.testing.assert_array_equal(column, episode[name])
            assert set(ticks.media) == set(schema.media)
            for name in schema.media:
                assert len(ticks.media[name]) == n
                assert all(isinstance(ref, str) for ref in ticks.media[name])

    def test_reading_twice_gives_the_same_ticks(self, adapter):
        source_id = adapter.list_sources()[0]
        a, b = adapter.read_ticks(source_id), adapter.read_ticks(source_id)
        np.testing.assert_array_equal(a.tick, b.tick)
        for name in a.columns:
            np.testing.assert_array_equal(a.columns[name], b.columns[name])
        assert set(a.media) == set(b.media)
        for name in a.media:
            assert list(a.media[name]) == list(b.media[name])

    def test_tracks_from_ticks_gives_one_full_track_per_source(self, adapter, schema, episodes):
        for source_id, episode in zip(adapter.list_sources(), episodes, strict=True):
            tracks = tracks_from_ticks(schema, adapter.read_ticks(source_id), source_id)
            assert len(tracks) == 1
            (track,) = tracks
            n = len(episode["pos"])
            assert (track.source_id, track.entity_id, len(track)) == (source_id, None, n)
            assert track.present.all()
            assert track.duration_seconds == pytest.approx(n / schema.sample_hz)
            np.testing.assert_array_equal(track.values["pos"], episode["pos"])
            np.testing.assert_array_equal(track.values["speed"], episode["speed"])

    # ---- media ----------------------------------------------------------------------

    def test_decode_media_returns_the_frames_in_bounded_batches(self, adapter, episodes):
        for source_id, episode in zip(adapter.list_sources(), episodes, strict=True):
            refs = list(adapter.read_ticks(source_id).media["frame"])
            whole = adapter.decode_media("frame", refs, source_id=source_id)
            assert whole.dtype == np.uint8 and whole.shape == episode["frame"].shape
            np.testing.assert_array_equal(whole, episode["frame"])
            batches = [adapter.decode_media("frame", refs[i: i + 2], source_id=source_id)
                       for i in range(0, len(refs), 2)]
            assert all(len(b) <= 2 for b in batches)
            np.testing.assert_array_equal(np.concatenate(batches), episode["frame"])

    def test_decode_media_absent_slot_is_zero_and_order_is_kept(self, adapter, episodes):
        source_id = adapter.list_sources()[0]
        refs = list(adapter.read_ticks(source_id).media["frame"])
        got = adapter.decode_media("frame", [refs[3], None, refs[0]], source_id=source_id)
        np.testing.assert_array_equal(got[0], episodes[0]["frame"][3])
        np.testing.assert_array_equal(got[1], np.zeros((2, 2), np.uint8))
        np.testing.assert_array_equal(got[2], episodes[0]["frame"][0])

    # ---- identity -------------------------------------------------------------------

    def test_identity_is_strong_and_stable(self, adapter):
        for source_id in adapter.list_sources():
            first = adapter.identity(source_id)
            assert isinstance(first, SourceIdentity)
            assert first.strong, first
            assert adapter.identity(source_id) == first
        ids = adapter.list_sources()
        assert adapter.identity(ids[0]) != adapter.identity(ids[1])

    def test_identity_changes_with_that_source_only(self, adapter, root, episodes):
        ids = adapter.list_sources()
        before = [adapter.identity(s) for s in ids]
        changed = [dict(e) for e in episodes]
        changed[1]["speed"] = changed[1]["speed"].copy()
        changed[1]["speed"][-1] += 1.0  # one value of the second source
        self.write(root, changed)
        after = [adapter.identity(s) for s in ids]
        assert after[0] == before[0]
        assert after[1] != before[1]

    def test_identity_changes_when_only_media_changes(self, adapter, root, episodes):
        ids = adapter.list_sources()
        before = adapter.identity(ids[0])
        changed = [dict(e) for e in episodes]
        changed[0]["frame"] = changed[0]["frame"].copy()
        changed[0]["frame"][0, 0, 0] ^= 0xFF
        self.write(root, changed)
        assert adapter.identity(ids[0]) != before

    def test_identity_is_kept_when_another_source_is_appended(self, adapter, root, episodes):
        ids = adapter.list_sources()
        before = [adapter.identity(s) for s in ids]
        self.write(root, [*episodes, make_episode(99, 4)])
        assert adapter.list_sources() == self.expected_ids(len(LENGTHS) + 1)
        assert [adapter.identity(s) for s in ids] == before

    # ---- errors ---------------------------------------------------------------------

    def test_missing_source_raises_naming_it(self, adapter):
        with pytest.raises(TickDataError, match=re.escape("no_such_source_42")):
            adapter.read_ticks("no_such_source_42")
        with pytest.raises(TickDataError, match=re.escape("no_such_source_42")):
            adapter.identity("no_such_source_42")


__all__ = ["LENGTHS", "AdapterContract", "make_episode"]
