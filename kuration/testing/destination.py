"""``DestinationContract``: what every :class:`~kuration.output.destinations.Destination` promises.

Like zarr's ``testing/store.py::StoreTests``: a test module subclasses it once per
destination (a local folder, an object store) and supplies only how to build one and how
to make its publish step die as a SIGKILL would. Every test goes through the protocol
alone, so what passes here is what the writer and the readers may rely on anywhere:

* metadata: ``read`` gives back exactly the bytes written, or None; a rewrite replaces the
  whole file; a write that fails or dies before its move into place leaves the old bytes
  readable, and nothing besides files :func:`is_writer_leftover` names;
* shards: a staged shard reads back whole or not at all; ``seal`` reports the published
  file's exact size and SHA-256; ``discard`` leaves no temp file; ``shard_matches``
  checks both size and digest, and is False for a missing shard;
* listing and removal: ``files_under`` (recursive, sorted, hidden files included),
  ``top_level`` (the lease file never shown), ``remove`` (missing is fine; folders it
  empties go), ``remove_tree`` (a folder and everything under it, nothing beside it: a
  sibling whose name it prefixes stays; a missing folder is fine);
* the lease is exclusive across destination objects, and released on any exit;
* versions (:mod:`kuration.output.versions`): ``children`` lists a folder's entries
  (empty for a missing folder); ``create_new`` writes a file only if its name is free and
  says whether it did (the publish log's one atomic step: two creators of one name, one
  wins); ``share_file`` gives a file a second name with the same bytes, and removing
  either name, or the tree that holds it, leaves the other whole;
* the shard pool (:mod:`kuration.output.shard_pool`): ``put_pooled`` puts a shard under a
  free name; the same bytes again leave the object as it is, other bytes fail with
  :class:`CommitError` and never overwrite it;
* every relative path that could leave the root is refused with :class:`CommitError`.

A subclass supplies:

* ``make_destination(place)``: a destination rooted at a fresh location, where ``place``
  is a fresh name (two calls with one ``place`` give two objects over the same root);
* ``dying_at_publish(monkeypatch)``: from now on, the step that moves a complete temp
  file or attempt object into place raises :class:`Killed`, and the clean-up that would
  follow does nothing, as if the writer were SIGKILLed between the two.
"""

from __future__ import annotations

import abc
import hashlib
import io
import threading

import numpy as np
import pytest

from kuration.output.commit_protocol import CommitError, is_writer_leftover
from kuration.output.containers import ShardArrays, get_container
from kuration.output.destinations import Destination
from kuration.output.lease import LEASE_FILE, LeaseError
from kuration.output.spec import Modality
from kuration.storage import TEMP_PREFIX

#: Paths that would leave the dataset's root, or are not plain relative paths.
ESCAPING = ["../outside.json", "train/../../outside.json", "/etc/passwd", "a//b.json", "./a.json", "a/./b.json",
            "a\\b.json", "", "a/\0.json", "train/"]


MODALITIES = {"frame": Modality("frame", "uint8", (4, 5, 3), "field", "frame"),
              "pos": Modality("pos", "float32", (3,), "field", "pos")}


class Killed(BaseException):
    """What ``dying_at_publish`` raises: a BaseException, so no ``except Exception`` in the
    code under test mistakes it for an error to handle."""


class HalfWritingContainer:
    """A container whose write fails after its first bytes."""

    name, extension = "npz", ".npz"

    def write(self, stream, arrays: ShardArrays) -> None:
        stream.write(b"half a shard")
        raise RuntimeError("disk gone")


def shard(rows: int = 6, seed: int = 0) -> ShardArrays:
    rng = np.random.default_rng(seed)
    return ShardArrays({"frame": rng.integers(0, 256, (rows, 4, 5, 3), dtype=np.uint8),
                        "pos": rng.normal(size=(rows, 3)).astype(np.float32)}, np.ones(rows, bool), rows)


def container_bytes(container, arrays: ShardArrays) -> bytes:
    stream = io.BytesIO()
    container.write(stream, arrays)
    return stream.getvalue()


def entry_of(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def leftovers(names: list[str]) -> list[str]:
    return [n for n in names if not is_writer_leftover(n.rsplit("/", 1)[-1])]


class DestinationContract(abc.ABC):
    @abc.abstractmethod
    def make_destination(self, place: str) -> Destination:
        ...

    @abc.abstractmethod
    def dying_at_publish(self, monkeypatch) -> None:
        ...

    @pytest.fixture
    def dest(self) -> Destination:
        return self.make_destination("ds")

    # ---- metadata ---------------------------------------------------------------------

    def test_a_missing_file_reads_as_none_and_an_empty_destination_lists_nothing(self, dest):
        assert dest.read("dataset.commit.json") is None
        assert dest.read("train/a.npz") is None
        assert dest.top_level() == []
        assert dest.files_under("train") == []

    @pytest.mark.parametrize("durable", [True, False])
    def test_metadata_reads_back_byte_for_byte(self, dest, durable):
        payloads = {"config.json": b'{"a": 1}\n', "empty.json": b"", "binary.bin": bytes(range(256)) * 3,
                    ".kuration_resume/run/train/x.json": b"{}"}
        for name, data in payloads.items():
            dest.write_metadata(name, data, durable=durable)
        for name, data in payloads.items():
            assert dest.read(name) == data
        assert dest.top_level() == [".kuration_resume", "binary.bin", "config.json", "empty.json"]
        assert dest.files_under(".kuration_resume") == [".kuration_resume/run/train/x.json"]

    def test_read_buffer_gives_the_same_bytes_in_a_new_writable_buffer(self, dest):
        data = bytes(range(256)) * 4099  # past one read() of a local file's buffer
        dest.write_metadata("train/s.bin", data)
        first, second = dest.read_buffer("train/s.bin"), dest.read_buffer("train/s.bin")
        assert type(first) is bytearray and first == data and first is not second
        first[0] ^= 0xFF  # the caller's to change: the file and the next read are untouched
        assert dest.read_buffer("train/s.bin") == data == dest.read("train/s.bin")
        assert dest.read_buffer("train/missing.bin") is None
        dest.write_metadata("train/empty.bin", b"")
        assert dest.read_buffer("train/empty.bin") == bytearray()

    def test_a_change_stamp_is_steady_until_the_file_is_rewritten(self, dest):
        """``verify="once"`` trusts a shard again only while its stamp is the same: a stamp,
        when the destination gives one, must change with every rewrite (even to the same
        size); None (no cheap signal) makes every read verified."""
        dest.write_metadata("train/s.bin", b"a" * 100)
        first = dest.change_stamp("train/s.bin")
        if first is None:
            assert dest.change_stamp("train/missing.bin") is None
            return
        assert dest.change_stamp("train/s.bin") == first
        dest.read_buffer("train/s.bin")
        assert dest.change_stamp("train/s.bin") == first  # reading changes nothing
        dest.write_metadata("train/s.bin", b"b" * 100)
        assert dest.change_stamp("train/s.bin") != first
        assert dest.change_stamp("train/missing.bin") is None

    def test_a_rewrite_replaces_the_whole_file(self, dest):
        dest.write_metadata("config.json", b"x" * 1000)
        dest.write_metadata("config.json", b"short")
        assert dest.read("config.json") == b"short"
        assert dest.top_level() == ["config.json"]  # and no temp file is left beside it

    def test_a_successful_write_leaves_only_its_file(self, dest):
        dest.write_metadata("train/m.json", b"1")
        dest.write_metadata("train/m.json", b"2", durable=False)
        assert dest.files_under("train") == ["train/m.json"]
        assert dest.top_level() == ["train"]

    def test_a_metadata_write_that_dies_before_its_move_leaves_the_old_bytes_and_only_writer_leftovers(self, dest,
                                                                                                  monkeypatch):
        dest.write_metadata("dataset.commit.json", b"old")
        with monkeypatch.context() as patch:
            self.dying_at_publish(patch)
            try:
                dest.write_metadata("dataset.commit.json", b"new")
            except Killed:
                pass  # a store whose put is one request has nothing to die between
        assert dest.read("dataset.commit.json") in (b"old", b"new")
        names = dest.top_level()
        assert "dataset.commit.json" in names and leftovers(names) == ["dataset.commit.json"]
        assert all(n.startswith(TEMP_PREFIX) for n in names if n != "dataset.commit.json")

    # ---- shards -----------------------------------------------------------------------

    @pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
    def test_a_sealed_shard_is_the_containers_bytes_with_their_size_and_sha256(self, dest, container):
        box = get_container(container)
        relative = f"train/s_shard0000{box.extension}"
        written = dest.stage_shard(relative, box, shard()).seal()
        data = dest.read(relative)
        assert data == container_bytes(box, shard())
        assert (written.bytes, written.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert dest.shard_matches(relative, {"bytes": written.bytes, "sha256": written.sha256})
        assert dest.files_under("train") == [relative]
        back = box.read(data, MODALITIES, presence=True)
        for name in MODALITIES:
            np.testing.assert_array_equal(back.arrays[name], shard().arrays[name])

    def test_a_staged_shard_reads_whole_or_not_at_all_until_sealed(self, dest):
        box = get_container("npz")
        staged = dest.stage_shard("train/s.npz", box, shard())
        assert dest.read("train/s.npz") in (None, container_bytes(box, shard()))
        assert leftovers(dest.files_under("train")) in ([], ["train/s.npz"])
        assert all(n.rsplit("/", 1)[-1].startswith(TEMP_PREFIX) for n in dest.files_under("train")
                   if n != "train/s.npz")
        staged.seal()
        assert dest.read("train/s.npz") == container_bytes(box, shard())
        assert dest.files_under("train") == ["train/s.npz"]

    def test_sealing_on_another_thread_publishes_the_shard(self, dest):
        box = get_container("npz")
        staged = dest.stage_shard("train/s.npz", box, shard())
        done = []
        worker = threading.Thread(target=lambda: done.append(staged.seal()))
        worker.start()
        worker.join()
        assert dest.shard_matches("train/s.npz", {"bytes": done[0].bytes, "sha256": done[0].sha256})

    def test_a_discarded_shard_leaves_no_temp_file(self, dest):
        staged = dest.stage_shard("train/s.npz", get_container("npz"), shard())
        staged.discard()
        # an object store may already have moved the shard into place: the sweep removes
        # what no manifest lists; a temp file must not outlive the discard either way
        assert leftovers(dest.files_under("train")) == dest.files_under("train")
        assert dest.read("train/s.npz") in (None, container_bytes(get_container("npz"), shard()))

    def test_a_container_that_fails_mid_write_publishes_nothing(self, dest):
        with pytest.raises(RuntimeError, match="disk gone"):
            dest.stage_shard("train/s.npz", HalfWritingContainer(), shard()).seal()
        assert dest.read("train/s.npz") is None
        assert dest.files_under("train") == []

    def test_a_shard_that_dies_before_its_move_leaves_only_writer_leftovers(self, dest, monkeypatch):
        box = get_container("npz")
        dest.stage_shard("train/keep.npz", box, shard(seed=1)).seal()
        with monkeypatch.context() as patch:
            self.dying_at_publish(patch)
            with pytest.raises(Killed):
                dest.stage_shard("train/s.npz", box, shard()).seal()
        assert dest.read("train/s.npz") is None
        names = dest.files_under("train")
        assert leftovers(names) == ["train/keep.npz"]
        debris = [n for n in names if n != "train/keep.npz"]
        assert debris and all(n.startswith(f"train/{TEMP_PREFIX}s.npz.") for n in debris), names
        for name in debris:  # what the writer's sweep does with them
            dest.remove(name)
        assert dest.files_under("train") == ["train/keep.npz"]

    def test_shard_matches_checks_size_and_digest_and_a_missing_shard_never_matches(self, dest):
        box = get_container("npz")
        written = dest.stage_shard("train/s.npz", box, shard()).seal()
        entry = {"bytes": written.bytes, "sha256": written.sha256}
        assert dest.shard_matches("train/s.npz", entry)
        assert not dest.shard_matches("train/s.npz", {**entry, "bytes": written.bytes + 1})
        assert not dest.shard_matches("train/s.npz", {**entry, "sha256": "0" * 64})
        assert not dest.shard_matches("train/s.npz", {})
        assert not dest.shard_matches("train/other.npz", entry)
        data = bytearray(dest.read("train/s.npz"))
        data[len(data) // 2] ^= 0x01  # same size, one bit flipped
        dest.write_metadata("train/s.npz", bytes(data))
        assert not dest.shard_matches("train/s.npz", entry)
        assert dest.shard_matches("train/s.npz", entry_of(bytes(data)))
        dest.write_metadata("train/s.npz", bytes(data[:-1]))  # torn
        assert not dest.shard_matches("train/s.npz", entry)

    # ---- listing and removal ----------------------------------------------------------

    def test_files_under_is_recursive_sorted_and_includes_hidden_files(self, dest):
        for name in ["train/b.npz", "train/a.npz", "train/sub/c.npz", f"train/{TEMP_PREFIX}d.npz.x.tmp",
                     "train_more/e.npz", "test/f.npz", "g.json"]:
            dest.write_metadata(name, name.encode())
        assert dest.files_under("train") == sorted(["train/a.npz", "train/b.npz", "train/sub/c.npz",
                                                    f"train/{TEMP_PREFIX}d.npz.x.tmp"])
        assert dest.files_under("train/sub") == ["train/sub/c.npz"]
        assert dest.files_under("val") == []
        assert dest.top_level() == ["g.json", "test", "train", "train_more"]

    def test_remove_takes_the_file_and_the_folders_it_empties(self, dest):
        dest.write_metadata("train/x/a.npz", b"a")
        dest.write_metadata("train/b.npz", b"b")
        dest.write_metadata("top.json", b"t")
        dest.remove("train/x/a.npz")
        assert dest.read("train/x/a.npz") is None
        assert dest.files_under("train") == ["train/b.npz"]
        assert dest.read("train/b.npz") == b"b"
        dest.remove("train/b.npz")
        assert dest.top_level() == ["top.json"]
        dest.remove("train/b.npz")  # already gone: not an error
        dest.remove("never/was.json")
        dest.remove("top.json")
        assert dest.top_level() == []
        dest.write_metadata("train/again.npz", b"1")  # the root is still usable
        assert dest.files_under("train") == ["train/again.npz"]

    def test_remove_tree_takes_a_folder_and_everything_under_it_and_nothing_beside_it(self, dest):
        names = ["versions/v1/dataset.commit.json", "versions/v1/train/x.npz", "versions/v1/.kuration_resume/r.json",
                 "versions/v10/a.json", "versions/v2/b.json", "top.json"]
        for name in names:
            dest.write_metadata(name, name.encode())
        dest.remove_tree("versions/v1")
        assert dest.files_under("versions/v1") == [] and dest.children("versions") == ["v10", "v2"]
        for name in names[3:]:
            assert dest.read(name) == name.encode()
        dest.remove_tree("versions/v1")  # already gone: not an error
        dest.remove_tree("never/was")
        dest.remove_tree("versions")
        assert dest.top_level() == ["top.json"]

    def test_check_folders_accepts_real_folders_present_or_not(self, dest):
        dest.write_metadata("train/a.npz", b"a")
        dest.check_folders({"train", "val", "test"})
        dest.check_folders(set())

    def test_where_names_the_file_under_the_destinations_url(self, dest):
        where = dest.where("train/a.npz")
        assert where.startswith(dest.url.rstrip("/")) and where.endswith("train/a.npz")

    # ---- the lease --------------------------------------------------------------------

    def test_the_lease_is_exclusive_and_released_on_exit(self, dest):
        other = self.make_destination("ds")  # another object over the same root: another writer
        with dest.lease():
            assert LEASE_FILE not in dest.top_level()
            dest.write_metadata("config.json", b"{}")
            assert dest.top_level() == ["config.json"]
            with pytest.raises(LeaseError, match="another writer holds this destination"):
                with other.lease():
                    pytest.fail("two writers held one destination")
        with other.lease():
            pass
        assert dest.top_level() == ["config.json"]

    def test_the_lease_is_released_when_the_block_raises(self, dest):
        with pytest.raises(RuntimeError, match="writer failed"):
            with dest.lease():
                raise RuntimeError("writer failed")
        with self.make_destination("ds").lease():
            pass

    def test_leases_on_different_roots_are_independent(self, dest):
        with dest.lease(), self.make_destination("elsewhere").lease():
            pass

    # ---- versions ---------------------------------------------------------------------

    def test_children_lists_a_folders_entries_and_nothing_for_a_missing_one(self, dest):
        assert dest.children("versions") == []
        dest.write_metadata("versions/v1/a.json", b"1")
        dest.write_metadata("versions/v2/b.json", b"2")
        assert dest.children("versions") == ["v1", "v2"]

    def test_create_new_writes_once_and_never_replaces(self, dest):
        assert dest.create_new("published/00000001.json", b"first") is True
        assert dest.create_new("published/00000001.json", b"second") is False
        assert dest.read("published/00000001.json") == b"first"
        assert dest.files_under("published") == ["published/00000001.json"]  # no temp file left

    def test_one_of_two_concurrent_creators_of_a_name_wins(self, dest):
        results: list[bool] = []
        barrier = threading.Barrier(2)

        def create(data: bytes) -> None:
            barrier.wait()
            results.append(self.make_destination("ds").create_new("published/00000001.json", data))

        threads = [threading.Thread(target=create, args=(data,)) for data in (b"a", b"b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [False, True]
        assert dest.read("published/00000001.json") in (b"a", b"b")

    def test_a_shared_file_has_the_same_bytes_and_outlives_its_source_and_its_tree(self, dest):
        dest.write_metadata("versions/v1/train/x.npz", b"shard bytes")
        dest.share_file("versions/v1/train/x.npz", "versions/v2/train/x.npz")
        assert dest.read("versions/v2/train/x.npz") == b"shard bytes"
        dest.remove("versions/v1/train/x.npz")
        assert dest.read("versions/v2/train/x.npz") == b"shard bytes"
        dest.share_file("versions/v2/train/x.npz", "versions/v3/train/x.npz")
        dest.remove_tree("versions/v2")
        assert dest.read("versions/v3/train/x.npz") == b"shard bytes"
        assert dest.shard_matches("versions/v3/train/x.npz", entry_of(b"shard bytes"))

    def test_a_pool_object_takes_a_free_name_and_is_never_overwritten(self, dest):
        box, relative = get_container("npz"), "shards/0123abcd.npz"
        written = dest.put_pooled(relative, box, shard()).seal()
        assert dest.read(relative) == container_bytes(box, shard())
        assert dest.shard_matches(relative, {"bytes": written.bytes, "sha256": written.sha256})
        again = dest.put_pooled(relative, box, shard()).seal()  # the same bytes: the object stays
        assert (again.bytes, again.sha256) == (written.bytes, written.sha256)
        other = shard(seed=1)
        with pytest.raises(CommitError, match="the shard pool already holds an object under this content key, "
                                              "with other bytes"):
            dest.put_pooled(relative, box, other).seal()
        assert dest.read(relative) == container_bytes(box, shard())
        assert leftovers(dest.files_under("shards")) == [relative]

    # ---- paths ------------------------------------------------------------------------

    @pytest.mark.parametrize("relative", ESCAPING)
    def test_a_path_that_could_leave_the_root_is_refused(self, dest, relative):
        box = get_container("npz")
        calls = {
            "where": lambda: dest.where(relative),
            "read": lambda: dest.read(relative),
            "write_metadata": lambda: dest.write_metadata(relative, b"x"),
            "stage_shard": lambda: dest.stage_shard(relative, box, shard()),
            "put_pooled": lambda: dest.put_pooled(relative, box, shard()).seal(),
            "shard_matches": lambda: dest.shard_matches(relative, entry_of(b"x")),
            "files_under": lambda: dest.files_under(relative),
            "remove": lambda: dest.remove(relative),
            "remove_tree": lambda: dest.remove_tree(relative),
            "check_folders": lambda: dest.check_folders({relative}),
            "children": lambda: dest.children(relative),
            "create_new": lambda: dest.create_new(relative, b"x"),
            "share_file": lambda: dest.share_file(relative, "a.json"),
        }
        for name, call in calls.items():
            with pytest.raises(CommitError, match="must be relative"):
                call()
                pytest.fail(f"{name} accepted {relative!r}")
        assert dest.top_level() == []

    def test_a_non_string_path_is_refused(self, dest):
        with pytest.raises(CommitError, match="a path must be a string, got int"):
            dest.read(7)


__all__ = ["ESCAPING", "DestinationContract", "HalfWritingContainer", "Killed", "shard"]
