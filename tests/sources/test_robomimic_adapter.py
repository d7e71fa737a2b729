"""RobomimicHDF5Adapter: the adapter contract over a robomimic-layout file, plus its own rules."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import fsspec
import h5py
import numpy as np
import pytest

from kuration.sources.media import MediaError
from kuration.sources.schema import Schema, SchemaError
from kuration.sources import HDF5_ROWS_PROVIDER, RobomimicHDF5Adapter, SourceError, TickDataError
from kuration.sources.tracks import tracks_from_ticks

from kuration.testing import AdapterContract, MediaProviderContract
from kuration.testing.adapter import make_episode

FILE = "demos.hdf5"
COLUMNS = {"pos": "obs/robot0_eef_pos", "speed": "rewards"}  # frame: default rule, obs/frame


def write_robomimic(target, episodes, *, num_samples=True, names=None) -> None:
    """A robomimic file: data/demo_N/{actions, rewards, dones, obs/robot0_eef_pos, obs/frame}."""
    with h5py.File(target, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = sum(len(e["pos"]) for e in episodes)
        data.attrs["env_args"] = '{"env_name": "Lift"}'
        for i, episode in enumerate(episodes):
            n = len(episode["pos"])
            demo = data.create_group(names[i] if names else f"demo_{i}")
            if num_samples:
                demo.attrs["num_samples"] = n
            demo.create_dataset("actions", data=np.zeros((n, 7)))
            demo.create_dataset("rewards", data=episode["speed"])
            demo.create_dataset("dones", data=np.eye(1, n, n - 1, dtype=np.int64)[0])
            # robomimic stores float64
            demo.create_dataset("obs/robot0_eef_pos", data=episode["pos"].astype(np.float64))
            demo.create_dataset("obs/frame", data=episode["frame"], chunks=(1, 2, 2))


class TestRobomimicContract(AdapterContract):
    media_provider = HDF5_ROWS_PROVIDER

    def write(self, root, episodes):
        write_robomimic(root / FILE, episodes)

    def make_adapter(self, root, schema):
        return RobomimicHDF5Adapter(root / FILE, schema, columns=COLUMNS)

    def expected_ids(self, count):
        return [f"demo_{i}" for i in range(count)]


SCHEMA = Schema.from_dict({
    "sample_hz": 20,
    "time": "t",
    "fields": {"actions": {"dtype": "float32", "shape": [7]}, "robot0_eef_pos": {"dtype": "float32", "shape": [3]},
               "dones": {"dtype": "int64"}},
})


@pytest.fixture
def lift(tmp_path) -> Path:
    path = tmp_path / FILE
    write_robomimic(path, [make_episode(s, n) for s, n in enumerate((4, 6, 2))])
    return path


def test_default_rule_reads_demo_datasets_then_obs(lift):
    ticks = RobomimicHDF5Adapter(lift, SCHEMA).read_ticks("demo_1")
    assert ticks.columns["actions"].shape == (6, 7)
    np.testing.assert_array_equal(ticks.columns["robot0_eef_pos"], make_episode(1, 6)["pos"])
    np.testing.assert_array_equal(ticks.columns["dones"], [0, 0, 0, 0, 0, 1])


def test_demos_sort_numerically_and_other_groups_are_ignored(tmp_path):
    path = tmp_path / FILE
    names = [f"demo_{i}" for i in (10, 2, 0, 1)]
    write_robomimic(path, [make_episode(i, 2) for i in range(4)], names=names)
    with h5py.File(path, "a") as f:
        f.create_group("data/extras")
        f.create_dataset("data/demo_notes", data=[1, 2])
    assert RobomimicHDF5Adapter(path, SCHEMA).list_sources() == ["demo_0", "demo_1", "demo_2", "demo_10"]


def test_filter_key_restricts_sources(lift):
    with h5py.File(lift, "a") as f:
        f.create_dataset("mask/valid", data=np.array([b"demo_2", b"demo_0"]))
    adapter = RobomimicHDF5Adapter(lift, SCHEMA, filter_key="valid")
    assert adapter.list_sources() == ["demo_0", "demo_2"]
    with pytest.raises(TickDataError, match=r"demo_1: no such source in mask/valid"):
        adapter.read_ticks("demo_1")
    with pytest.raises(SourceError, match=r"no filter key mask/train; the file has \['valid'\]"):
        RobomimicHDF5Adapter(lift, SCHEMA, filter_key="train").list_sources()


def test_missing_dataset_names_demo_column_and_paths_tried(lift):
    schema = Schema.from_dict({"sample_hz": 20, "time": "t",
                               "fields": {"joint_pos": {"dtype": "float32", "shape": [7]}}})
    with pytest.raises(TickDataError,
                       match=r"demo_0: missing column 'joint_pos': no dataset joint_pos or obs/joint_pos in "
                             r"/data/demo_0"):
        RobomimicHDF5Adapter(lift, schema).read_ticks("demo_0")
    with pytest.raises(TickDataError,
                       match=re.escape("no dataset obs/robot0_joint_pos in /data/demo_0 (mapped by columns=")):
        RobomimicHDF5Adapter(lift, schema, columns={"joint_pos": "obs/robot0_joint_pos"}).read_ticks("demo_0")


def test_dataset_shorter_than_num_samples_names_column_and_row(lift):
    with h5py.File(lift, "a") as f:
        del f["data/demo_1/dones"]
        f.create_dataset("data/demo_1/dones", data=np.zeros(5, np.int64))
    with pytest.raises(TickDataError,
                       match=re.escape("demo_1: column 'dones', row 5: column has 5 rows, the time column has 6")):
        RobomimicHDF5Adapter(lift, SCHEMA).read_ticks("demo_1")


def test_without_num_samples_the_first_field_sets_the_length(tmp_path):
    path = tmp_path / FILE
    write_robomimic(path, [make_episode(0, 4)], num_samples=False)
    assert len(RobomimicHDF5Adapter(path, SCHEMA).read_ticks("demo_0")) == 4


def test_wrong_shape_in_file_names_the_column(lift):
    schema = Schema.from_dict({"sample_hz": 20, "time": "t", "fields": {"actions": {"dtype": "float32", "shape": [6]}}})
    with pytest.raises(TickDataError, match=re.escape("demo_0: column 'actions', row 0: expected shape [6], got [7]")):
        RobomimicHDF5Adapter(lift, schema).read_ticks("demo_0")


def test_time_in_seconds_is_synthesized_or_read_when_mapped(lift):
    schema = Schema.from_dict({"sample_hz": 20, "time": "ts", "time_unit": "seconds",
                               "fields": {"dones": {"dtype": "int64"}}})
    np.testing.assert_array_equal(RobomimicHDF5Adapter(lift, schema).read_ticks("demo_1").tick, np.arange(6))
    with h5py.File(lift, "a") as f:
        f.create_dataset("data/demo_1/timestamps", data=np.arange(6) / 20 + 1.0)
    ticks = RobomimicHDF5Adapter(lift, schema, columns={"ts": "timestamps"}).read_ticks("demo_1")
    np.testing.assert_array_equal(ticks.tick, np.arange(20, 26))


def test_schema_with_an_entity_or_unknown_mapping_is_rejected(lift):
    multi = Schema.from_dict({"sample_hz": 20, "time": "t", "entity": "arm", "fields": {"dones": {"dtype": "int64"}}})
    with pytest.raises(SchemaError, match=r"schema\.entity: RobomimicHDF5Adapter reads single-entity episodes"):
        RobomimicHDF5Adapter(lift, multi)
    with pytest.raises(SchemaError, match=r"columns\.gripper: not a column of the schema"):
        RobomimicHDF5Adapter(lift, SCHEMA, columns={"gripper": "obs/robot0_gripper_qpos"})


def test_image_media_needs_the_hdf5_rows_provider(lift):
    schema = Schema.from_dict({"sample_hz": 20, "time": "t", "fields": {"dones": {"dtype": "int64"}},
                               "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": "npy_index"}}})
    with pytest.raises(TickDataError,
                       match=r"demo_0: column 'frame', row 0: data/demo_0/obs/frame holds uint8 arrays.*'hdf5_rows'"):
        RobomimicHDF5Adapter(lift, schema).read_ticks("demo_0")


def test_string_references_go_to_the_named_provider_relative_to_the_files_folder(lift):
    frames = np.arange(24, dtype=np.uint8).reshape(6, 2, 2)
    np.save(lift.parent / "cam.npy", frames)
    with h5py.File(lift, "a") as f:
        f.create_dataset("data/demo_1/obs/cam_ref", data=np.array([f"cam.npy#{5 - k}".encode() for k in range(6)]))
    schema = Schema.from_dict({"sample_hz": 20, "time": "t", "fields": {"dones": {"dtype": "int64"}},
                               "media": {"cam_ref": {"dtype": "uint8", "shape": [2, 2], "provider": "npy_index"}}})
    adapter = RobomimicHDF5Adapter(lift, schema)
    refs = list(adapter.read_ticks("demo_1").media["cam_ref"])
    assert refs[0] == "cam.npy#5"
    np.testing.assert_array_equal(adapter.decode_media("cam_ref", refs, source_id="demo_1"), frames[::-1])


def test_media_provider_errors_name_source_and_column(lift, tmp_path):
    schema = Schema.from_dict({"sample_hz": 20, "time": "t", "fields": {"dones": {"dtype": "int64"}},
                               "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": HDF5_ROWS_PROVIDER}}})
    adapter = RobomimicHDF5Adapter(lift, schema)
    with pytest.raises(MediaError, match=r"demo_0: media 'frame', reference 0: row 99 out of range"):
        adapter.decode_media("frame", ["data/demo_0/obs/frame#99"], source_id="demo_0")
    with pytest.raises(MediaError, match=r"demo_0: media 'frame': no dataset data/demo_0/obs/nope"):
        adapter.decode_media("frame", ["data/demo_0/obs/nope#0"], source_id="demo_0")
    with pytest.raises(MediaError,
                       match=r"demo_0: media 'frame', reference 0: 'frame-3' is not '<dataset path>#<row>'"):
        adapter.decode_media("frame", ["frame-3"], source_id="demo_0")
    moved = RobomimicHDF5Adapter(tmp_path / "gone.hdf5", schema)
    with pytest.raises(MediaError, match=r"demo_0: media 'frame': .*gone\.hdf5: no such HDF5 file"):
        moved.decode_media("frame", ["data/demo_0/obs/frame#0"], source_id="demo_0")


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(SourceError, match=r"missing\.hdf5: no such HDF5 file"):
        RobomimicHDF5Adapter(tmp_path / "missing.hdf5", SCHEMA).list_sources()
    (tmp_path / "junk.hdf5").write_bytes(b"not hdf5")
    with pytest.raises(SourceError, match=r"junk\.hdf5: not a readable HDF5 file"):
        RobomimicHDF5Adapter(tmp_path / "junk.hdf5", SCHEMA).list_sources()
    with h5py.File(tmp_path / "flat.hdf5", "w") as f:
        f.create_dataset("actions", data=np.zeros((3, 7)))
    with pytest.raises(SourceError, match=r"flat\.hdf5: no 'data' group"):
        RobomimicHDF5Adapter(tmp_path / "flat.hdf5", SCHEMA).list_sources()


def test_reads_through_fsspec_url_with_the_same_identity(lift):
    fs = fsspec.filesystem("memory")
    url = f"memory://kuration-test-{uuid.uuid4().hex}/{FILE}"
    fs.pipe_file(url, lift.read_bytes())
    try:
        schema = Schema.from_dict({"sample_hz": 20, "time": "t",
                                   "fields": {"robot0_eef_pos": {"dtype": "float32", "shape": [3]}},
                                   "media": {"frame": {"dtype": "uint8", "shape": [2, 2],
                                                       "provider": HDF5_ROWS_PROVIDER}}})
        remote, local = RobomimicHDF5Adapter(url, schema), RobomimicHDF5Adapter(lift, schema)
        assert remote.list_sources() == ["demo_0", "demo_1", "demo_2"]
        ticks = remote.read_ticks("demo_2")
        (track,) = tracks_from_ticks(schema, ticks)
        np.testing.assert_array_equal(track.values["robot0_eef_pos"], make_episode(2, 2)["pos"])
        frames = remote.decode_media("frame", list(ticks.media["frame"]), source_id="demo_2")
        np.testing.assert_array_equal(frames, make_episode(2, 2)["frame"])
        assert remote.identity("demo_2") == local.identity("demo_2")
        assert remote.identity("demo_2").strong
    finally:
        fs.rm(url.rsplit("/", 1)[0], recursive=True)



class TestHDF5RowsProvider(MediaProviderContract):
    provider_name = HDF5_ROWS_PROVIDER

    def write(self, folder, arrays):
        folder.mkdir(parents=True)
        with h5py.File(folder / "store.h5", "w") as f:
            for name, array in arrays.items():
                f.create_dataset(f"media/{name}", data=array, chunks=(2, *array.shape[1:]))
        return str(folder / "store.h5")

    def ref(self, name, row):
        return f"media/{name}#{row}"

    def missing_root(self, folder):
        return str(folder / "gone.h5")
