"""Local shard files: staged in a temp file, hashed in place (a memory map of that file),
then replaced into place; and the streaming SHA-256 both halves of a check share."""

import hashlib
import io
import os

import numpy as np
import pytest

from kuration import storage
from kuration.output.containers import ShardArrays, get_container
from kuration.output import shard_files
from kuration.output.shard_files import sha256_of_own_file, stage_shard_local, write_shard_local
from kuration.testing.destination import HalfWritingContainer


def _shard(rows=5):
    frame = np.arange(rows * 4 * 5 * 3, dtype=np.uint8).reshape(rows, 4, 5, 3)
    return ShardArrays({"frame": frame, "label": np.arange(rows, dtype=np.int64)}, np.ones(rows, bool), rows)


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
@pytest.mark.parametrize("fsync", [False, True])
def test_the_entry_is_the_size_and_sha256_of_the_file_bytes(tmp_path, container, fsync):
    box = get_container(container)
    path = tmp_path / "train" / f"s{box.extension}"
    written = write_shard_local(path, box, _shard(), fsync=fsync)
    data = path.read_bytes()
    assert written.path == path and written.bytes == len(data) and written.sha256 == hashlib.sha256(data).hexdigest()
    stream = io.BytesIO()
    box.write(stream, _shard())
    assert data == stream.getvalue()  # the file holds what the container writes to any stream
    assert os.listdir(path.parent) == [path.name]


def test_a_staged_shard_is_invisible_until_sealed(tmp_path):
    path = tmp_path / "s.npz"
    staged = stage_shard_local(path, get_container("npz"), _shard())
    assert not path.exists() and staged.temp.parent == tmp_path and staged.temp.name.startswith(".kuration-tmp.s.npz.")
    staged.seal()
    assert path.exists() and not staged.temp.exists()


def test_a_failed_seal_leaves_no_temp_file(tmp_path):
    path = tmp_path / "s.npz"
    path.mkdir()  # os.replace cannot put a file over a directory
    (path / "keep").write_text("x")
    staged = stage_shard_local(path, get_container("npz"), _shard())
    with pytest.raises(OSError):
        staged.seal()
    assert sorted(os.listdir(tmp_path)) == ["s.npz"] and path.is_dir()


def test_a_failed_container_write_leaves_no_temp_file(tmp_path):
    with pytest.raises(RuntimeError, match="disk gone"):
        stage_shard_local(tmp_path / "s.npz", HalfWritingContainer(), _shard())
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 64 * 3 + 5])
def test_sha256_of_stream_reads_into_a_reused_buffer_or_by_read(size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    expected = (size, hashlib.sha256(data).hexdigest())

    class ReadOnly:  # an object-store file may have read but no readinto
        def __init__(self):
            self.inner = io.BytesIO(data)

        def read(self, n):
            return self.inner.read(n)

    assert storage.sha256_of_stream(io.BytesIO(data), chunk=64) == expected
    assert storage.sha256_of_stream(io.BytesIO(data), chunk=64) == expected  # the reused buffer holds no stale bytes
    assert storage.sha256_of_stream(io.BytesIO(data)) == expected
    assert storage.sha256_of_stream(ReadOnly(), chunk=64) == expected


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, (1 << 20) + 3])
def test_the_seal_digest_is_the_sha256_of_the_bytes_on_disk(tmp_path, size):
    """Mapped or read, the digest is of the file as it is on disk: a file whose bytes
    differ from what went into it (changed after the write) gets the file's digest."""
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as f:
        assert sha256_of_own_file(f) == (size, hashlib.sha256(data).hexdigest())


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    data = b"x" * 5000
    (tmp_path / "f").write_bytes(data)

    def no_map(*args, **kwargs):
        raise OSError(19, "No such device")  # what a filesystem without mmap answers

    monkeypatch.setattr(shard_files.mmap, "mmap", no_map)
    with open(tmp_path / "f", "rb", buffering=0) as f:
        assert sha256_of_own_file(f) == (5000, hashlib.sha256(data).hexdigest())


def test_a_sealed_shard_records_what_the_temp_file_holds_when_sealed(tmp_path):
    """The seal hashes the staged file, not the arrays: bytes changed between the write and
    the seal are what the entry records, so a reader's check and the file always agree."""
    staged = stage_shard_local(tmp_path / "s.npz", get_container("npz"), _shard())
    with open(staged.temp, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\x00")
    on_disk = staged.temp.read_bytes()
    written = staged.seal()
    assert written.bytes == len(on_disk) and written.sha256 == hashlib.sha256(on_disk).hexdigest()
    assert (tmp_path / "s.npz").read_bytes() == on_disk
