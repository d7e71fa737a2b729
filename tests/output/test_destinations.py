"""LocalDestination: the destination contract over a local folder, plus what only a local
folder promises (durable metadata, links refused, the writer's leftover names)."""

from __future__ import annotations

import os
import pathlib

import pytest

from kuration import storage
from kuration.output.commit_protocol import CommitError, is_writer_leftover
from kuration.errors import InputError
from kuration.output.destinations import LocalDestination, open_destination
from kuration.testing import DestinationContract, Killed


class TestLocalDestination(DestinationContract):
    @pytest.fixture(autouse=True)
    def _base(self, tmp_path):
        self.base = tmp_path

    def make_destination(self, place):
        return LocalDestination(self.base / place)

    def dying_at_publish(self, monkeypatch):
        def replace(src, dst, *args, **kwargs):
            raise Killed(f"killed before moving {src} to {dst}")

        real_unlink = pathlib.Path.unlink

        def unlink(path, *args, **kwargs):  # a killed process cleans nothing up
            if not path.name.startswith(storage.TEMP_PREFIX):
                real_unlink(path, *args, **kwargs)

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(pathlib.Path, "unlink", unlink)

    def test_open_destination_gives_a_local_destination_for_paths_and_file_urls(self):
        assert isinstance(open_destination(self.base / "a"), LocalDestination)
        assert open_destination(f"file://{self.base}/a").root == self.base / "a"


@pytest.mark.parametrize("durable, expected", [(True, 2), (False, 0)])
def test_durable_metadata_is_fsynced_with_its_folder(tmp_path, monkeypatch, durable, expected):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    LocalDestination(tmp_path).write_metadata("train/m.json", b"{}", durable=durable)
    assert len(synced) == expected
    if durable:  # the file's bytes first (still under its temp name), then the folder that renames it
        assert os.path.basename(synced[0]).startswith(storage.TEMP_PREFIX + "m.json.")
        assert synced[1] == str(tmp_path / "train")


def test_a_root_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_bytes(b"x")
    with pytest.raises(InputError, match="out: exists and is not a directory"):
        LocalDestination(tmp_path / "out").top_level()


def test_a_split_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "train")
    with pytest.raises(CommitError, match=r"out/train: is a symlink"):
        LocalDestination(tmp_path / "out").check_folders({"train"})


def test_a_shard_of_the_wrong_size_is_not_hashed(tmp_path, monkeypatch):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "s.npz").write_bytes(b"12345")

    def no_hash(handle, **kwargs):
        raise AssertionError("a shard whose size already differs was hashed")

    monkeypatch.setattr(storage, "sha256_of_stream", no_hash)
    assert not LocalDestination(tmp_path).shard_matches("train/s.npz", {"bytes": 4, "sha256": "0" * 64})
    assert storage.sha256_inside(tmp_path, "train/s.npz", expected_size=4) == (5, None)


@pytest.mark.parametrize("name, leftover", [
    (storage.temp_name("dataset_manifest.json", "ab12cd34"), True),
    (storage.temp_name("src_0_shard0000.npz", "attempt-0123456789ab"), True),
    (".kuration-tmp.x", True),
    (".dataset_manifest.json.k2j4_9ab.tmp", True),  # a metadata temp file of an older writer
    (".config.json.abcdefgh.tmp", True),
    (".other.json.abcdefgh.tmp", False),  # not a file that writer ever wrote
    ("dataset_manifest.json", False),
    ("src_0_shard0000.npz", False),
    (".kuration-writer.lock", False),
    (".kuration_checkpoints", False),
    ("kuration-tmp.x", False),
])
def test_writer_leftovers_are_named_by_the_temp_prefix_only(name, leftover):
    assert is_writer_leftover(name) is leftover


@pytest.mark.parametrize("reported", [10, 5000])  # the file is 1000 bytes: it grew, or shrank, since the fstat
def test_read_buffer_reads_the_whole_file_whatever_size_fstat_reported(tmp_path, monkeypatch, reported):
    data = bytes(range(250)) * 4
    (tmp_path / "f.bin").write_bytes(data)
    real_fstat = os.fstat

    def fstat(fd):
        stat = real_fstat(fd)
        return os.stat_result((*stat[:6], reported, *stat[7:]))

    monkeypatch.setattr(os, "fstat", fstat)
    assert storage.read_buffer_inside(tmp_path, "f.bin") == data


def test_remove_tree_refuses_a_folder_reached_through_a_symlink_and_keeps_what_is_behind_it(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "v1").mkdir(parents=True)
    (elsewhere / "v1" / "keep.json").write_text("{}")
    root = tmp_path / "root"
    root.mkdir()
    (root / "versions").symlink_to(elsewhere)
    with pytest.raises(CommitError, match="versions"):
        LocalDestination(root).remove_tree("versions/v1")
    assert (elsewhere / "v1" / "keep.json").read_text() == "{}"
