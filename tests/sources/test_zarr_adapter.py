"""ZarrReplayAdapter: the adapter contract over diffusion_policy replay buffers (zarr
format 2, as diffusion_policy writes them, and format 3), plus its own rules."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zarr
from zarr.storage import ZipStore

from kuration.sources.media import MediaError
from kuration.sources.schema import Schema, SchemaError
from kuration.sources import ZARR_ROWS_PROVIDER, SourceError, TickDataError, ZarrReplayAdapter
from kuration.sources.tracks import tracks_from_ticks

from kuration.testing import AdapterContract, MediaProviderContract
from kuration.testing.adapter import make_episode

STORE = "replay.zarr"
COLUMNS = {"pos": "state"}  # speed and frame: default rule, data/<name>


def write_replay(target, episodes, *, zarr_format: int = 3, ends=None) -> zarr.Group:
    """A replay buffer: data/{state, speed, frame} concatenated, meta/episode_ends cumulative."""
    group = zarr.open_group(target, mode="w", zarr_format=zarr_format)
    data, meta = group.create_group("data"), group.create_group("meta")
    for key, name in (("state", "pos"), ("speed", "speed"), ("frame", "frame")):
        values = np.concatenate([e[name] for e in episodes])
        data.create_array(key, shape=values.shape, dtype=values.dtype, chunks=(2, *values.shape[1:]))[...] = values
    lengths = [len(e["pos"]) for e in episodes]
    ends = np.cumsum(lengths) if ends is None else np.asarray(ends)
    meta.create_array("episode_ends", shape=ends.shape, dtype="int64")[...] = ends
    return group


class TestZarrV3Contract(AdapterContract):
    media_provider = ZARR_ROWS_PROVIDER
    zarr_format = 3

    def write(self, root, episodes):
        write_replay(str(root / STORE), episodes, zarr_format=self.zarr_format)

    def make_adapter(self, root, schema):
        return ZarrReplayAdapter(root / STORE, schema, columns=COLUMNS)

    def expected_ids(self, count):
        return [f"episode_{i:04d}" for i in range(count)]


class TestZarrV2Contract(TestZarrV3Contract):
    zarr_format = 2


SCHEMA = Schema.from_dict({
    "sample_hz": 10,
    "time": "t",
    "fields": {"state": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
})


@pytest.fixture
def pusht(tmp_path) -> Path:
    path = tmp_path / STORE
    write_replay(str(path), [make_episode(s, n) for s, n in enumerate((4, 6, 2))])
    return path


def test_episode_slices_and_synthesized_ticks(pusht):
    adapter = ZarrReplayAdapter(pusht, SCHEMA)
    ticks = adapter.read_ticks("episode_0001")
    np.testing.assert_array_equal(ticks.tick, np.arange(6))
    np.testing.assert_array_equal(ticks.columns["state"], make_episode(1, 6)["pos"])
    (track,) = tracks_from_ticks(SCHEMA, ticks)
    assert len(track) == 6 and track.present.all()


def test_ids_widen_past_9999_episodes_and_stay_in_order(tmp_path):
    assert ZarrReplayAdapter._ids(3) == ["episode_0000", "episode_0001", "episode_0002"]
    ids = ZarrReplayAdapter._ids(10001)
    assert ids[0] == "episode_00000" and ids[-1] == "episode_10000" and ids == sorted(ids)


def test_unpadded_alias_is_not_a_source(pusht):
    with pytest.raises(TickDataError, match=r"episode_1: no such source .*3 episodes"):
        ZarrReplayAdapter(pusht, SCHEMA).read_ticks("episode_1")


def test_empty_episode_reads_as_zero_rows(tmp_path):
    path = tmp_path / STORE
    write_replay(str(path), [make_episode(0, 3), make_episode(1, 2)], ends=[3, 3, 5])
    adapter = ZarrReplayAdapter(path, SCHEMA)
    assert adapter.list_sources() == ["episode_0000", "episode_0001", "episode_0002"]
    assert len(adapter.read_ticks("episode_0001")) == 0
    assert adapter.identity("episode_0001").strong


def test_decreasing_episode_ends_names_the_row(tmp_path):
    path = tmp_path / STORE
    write_replay(str(path), [make_episode(0, 3), make_episode(1, 2)], ends=[3, 2])
    with pytest.raises(SourceError, match=re.escape("meta/episode_ends, row 1: end 2 is before the previous end 3")):
        ZarrReplayAdapter(path, SCHEMA).list_sources()


def test_episode_ends_beyond_the_data_names_column_and_row(tmp_path):
    path = tmp_path / STORE
    write_replay(str(path), [make_episode(0, 3), make_episode(1, 2)], ends=[3, 7])
    adapter = ZarrReplayAdapter(path, SCHEMA)
    assert len(adapter.read_ticks("episode_0000")) == 3
    with pytest.raises(TickDataError, match=re.escape("episode_0001: column 'state', row 5: data/state has 5 rows")):
        adapter.read_ticks("episode_0001")


def test_missing_array_names_source_column_and_key(pusht):
    schema = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"action": {"dtype": "float32", "shape": [2]}}})
    with pytest.raises(TickDataError,
                       match=r"episode_0000: missing column 'action': no array data/action .*data/ has \['frame', "
                             r"'speed', 'state'\]"):
        ZarrReplayAdapter(pusht, schema).read_ticks("episode_0000")


def test_not_a_replay_buffer(tmp_path):
    with pytest.raises(SourceError, match=r"nowhere\.zarr: no zarr group here"):
        ZarrReplayAdapter(tmp_path / "nowhere.zarr", SCHEMA).list_sources()
    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w").create_group("data")
    with pytest.raises(SourceError, match=r"no meta/episode_ends array"):
        ZarrReplayAdapter(tmp_path / "plain.zarr", SCHEMA).list_sources()


def test_schema_with_an_entity_is_rejected(pusht):
    multi = Schema.from_dict({"sample_hz": 10, "time": "t", "entity": "robot",
                              "fields": {"speed": {"dtype": "float64"}}})
    with pytest.raises(SchemaError, match=r"schema\.entity: ZarrReplayAdapter reads single-entity episodes"):
        ZarrReplayAdapter(pusht, multi)


def test_zip_store_as_diffusion_policy_saves_it(tmp_path, pusht):
    path = tmp_path / "replay.zarr.zip"
    store = ZipStore(path, mode="w")
    write_replay(store, [make_episode(s, n) for s, n in enumerate((4, 6, 2))], zarr_format=2)
    store.close()
    zipped, plain = ZarrReplayAdapter(path, SCHEMA), ZarrReplayAdapter(pusht, SCHEMA)
    assert zipped.list_sources() == plain.list_sources()
    np.testing.assert_array_equal(zipped.read_ticks("episode_0002").columns["state"], make_episode(2, 2)["pos"])
    assert zipped.identity("episode_0002") == plain.identity("episode_0002")  # content, not container


def test_reads_a_memory_url_with_strong_identity(pusht):
    url = f"memory://kuration-test-{uuid.uuid4().hex}/{STORE}"
    write_replay(url, [make_episode(s, n) for s, n in enumerate((4, 6, 2))], zarr_format=2)
    try:
        _check_memory_store(url, pusht)
    finally:
        fsspec.filesystem("memory").rm(url.rsplit("/", 1)[0], recursive=True)


def _check_memory_store(url: str, pusht: Path) -> None:
    schema = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"state": {"dtype": "float32", "shape": [3]}},
                               "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": ZARR_ROWS_PROVIDER}}})
    remote, local = ZarrReplayAdapter(url, schema), ZarrReplayAdapter(pusht, schema)
    assert remote.list_sources() == ["episode_0000", "episode_0001", "episode_0002"]
    ticks = remote.read_ticks("episode_0001")
    assert ticks.media["frame"][0] == "data/frame#4"  # rows of the whole array
    frames = remote.decode_media("frame", list(ticks.media["frame"]), source_id="episode_0001")
    np.testing.assert_array_equal(frames, make_episode(1, 6)["frame"])
    assert remote.identity("episode_0001") == local.identity("episode_0001")
    assert remote.identity("episode_0001").strong


def test_media_errors_name_source_and_column(pusht):
    schema = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"speed": {"dtype": "float64"}},
                               "media": {"frame": {"dtype": "uint8", "shape": [4], "provider": ZARR_ROWS_PROVIDER}}})
    adapter = ZarrReplayAdapter(pusht, schema)
    with pytest.raises(MediaError,
                       match=re.escape("episode_0000: media 'frame': ")
                       + r".*holds items of shape \[2, 2\], declared \[4\]"):
        adapter.decode_media("frame", ["data/frame#0"], source_id="episode_0000")
    with pytest.raises(MediaError, match=r"episode_0000: media 'frame': no array data/nope"):
        adapter.decode_media("frame", ["data/nope#0"], source_id="episode_0000")


def test_sparse_media_batch_reads_only_named_rows(pusht):
    schema = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"speed": {"dtype": "float64"}},
                               "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": ZARR_ROWS_PROVIDER}}})
    everything = np.concatenate([make_episode(s, n)["frame"] for s, n in enumerate((4, 6, 2))])
    got = ZarrReplayAdapter(pusht, schema).decode_media("frame", ["data/frame#11", "data/frame#0", "data/frame#11"],
                                                        source_id="x")
    np.testing.assert_array_equal(got, everything[[11, 0, 11]])


class TestZarrV3RowsProvider(MediaProviderContract):
    provider_name = ZARR_ROWS_PROVIDER
    zarr_format = 3

    def write(self, folder, arrays):
        group = zarr.open_group(str(folder / STORE), mode="w", zarr_format=self.zarr_format)
        for name, array in arrays.items():
            group.create_array(f"media/{name}", shape=array.shape, dtype=array.dtype,
                               chunks=(2, *array.shape[1:]))[...] = array
        return str(folder / STORE)

    def ref(self, name, row):
        return f"media/{name}#{row}"

    def missing_root(self, folder):
        return str(folder / "gone.zarr")


class TestZarrV2RowsProvider(TestZarrV3RowsProvider):
    zarr_format = 2
