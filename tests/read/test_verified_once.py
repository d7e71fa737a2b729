"""``verify="once"`` (issue 26): a shard is hashed on its first read in a process and trusted
after that only while its file is unchanged; any change is hashed again, and a changed
shard is still refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import kuration.read.committed as committed
from kuration.errors import InputError
from kuration.read import DatasetIntegrityError, iter_shards, read_shard_arrays, shard_entries, verified_once
from tests.output.committed_datasets import build


@pytest.fixture(autouse=True)
def fresh_memory():
    verified_once.forget_all()
    yield
    verified_once.forget_all()


@pytest.fixture
def hashes(monkeypatch) -> list[int]:
    """One element per shard the reader hashes (each call of ``hashlib.sha256`` in the reader)."""
    calls: list[int] = []

    class CountingHashlib:
        @staticmethod
        def sha256(data=b""):
            calls.append(len(data))
            return hashlib.sha256(data)

    monkeypatch.setattr(committed, "hashlib", CountingHashlib)
    return calls


@pytest.fixture
def dataset(tmp_path) -> Path:
    return build(tmp_path / "d", "npz", rows=(8, 5, 7))


def epoch(dataset, verify) -> list[dict[str, np.ndarray]]:
    return list(iter_shards(dataset, verify=verify))


def shard_files(dataset: Path) -> list[Path]:
    return [dataset / entry.record["path"] for entry in shard_entries(dataset)]


def assert_equal_epochs(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_once_hashes_each_shard_on_the_first_epoch_only(dataset, hashes):
    shards = len(shard_files(dataset))
    first = epoch(dataset, "once")
    assert len(hashes) == shards
    second = epoch(dataset, "once")
    assert len(hashes) == shards  # nothing hashed again
    assert_equal_epochs(first, second)


def test_true_hashes_every_read_and_false_none(dataset, hashes):
    shards = len(shard_files(dataset))
    epoch(dataset, True)
    epoch(dataset, True)
    assert len(hashes) == 2 * shards
    epoch(dataset, False)
    assert len(hashes) == 2 * shards


def test_a_verify_true_read_does_not_vouch_for_once(dataset, hashes):
    """Only a "once" read records what it hashed: a True read is not remembered."""
    epoch(dataset, True)
    epoch(dataset, "once")
    assert len(hashes) == 2 * len(shard_files(dataset))


def test_a_touched_shard_is_hashed_again(dataset, hashes):
    epoch(dataset, "once")
    before = len(hashes)
    target = shard_files(dataset)[1]
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 1_000_000_000))
    epoch(dataset, "once")
    assert len(hashes) == before + 1


def test_a_shard_changed_after_its_first_read_is_refused(dataset):
    epoch(dataset, "once")
    target = shard_files(dataset)[0]
    data = bytearray(target.read_bytes())
    data[-5] ^= 0xFF  # same size
    target.write_bytes(bytes(data))
    with pytest.raises(DatasetIntegrityError, match="SHA-256"):
        epoch(dataset, "once")


def test_a_change_hidden_behind_the_old_mtime_is_still_refused(dataset):
    """Setting the mtime back (``touch -d``) cannot set back the ctime, which is in the stamp."""
    epoch(dataset, "once")
    target = shard_files(dataset)[0]
    stat = target.stat()
    data = bytearray(target.read_bytes())
    data[-5] ^= 0xFF
    target.write_bytes(bytes(data))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert target.stat().st_mtime_ns == stat.st_mtime_ns and target.stat().st_size == stat.st_size
    with pytest.raises(DatasetIntegrityError, match="SHA-256"):
        epoch(dataset, "once")


def test_a_replaced_shard_is_hashed_again(dataset, hashes):
    epoch(dataset, "once")
    before = len(hashes)
    target = shard_files(dataset)[2]
    copy = target.with_name("copy.tmp")
    copy.write_bytes(target.read_bytes())
    os.replace(copy, target)  # same bytes, another file
    epoch(dataset, "once")
    assert len(hashes) == before + 1


def test_forget_all_makes_the_next_read_hash_again(dataset, hashes):
    epoch(dataset, "once")
    verified_once.forget_all()
    epoch(dataset, "once")
    assert len(hashes) == 2 * len(shard_files(dataset))


def test_read_shard_arrays_takes_once_too(dataset, hashes):
    entries = shard_entries(dataset)
    for _ in range(3):
        for entry in entries:
            read_shard_arrays(entry, verify="once")
    assert len(hashes) == len(entries)


def test_a_url_dataset_is_hashed_on_every_read(dataset, hashes):
    """An fsspec destination gives no change stamp: "once" verifies every read there."""
    url = f"local://{dataset}"
    epoch(url, "once")
    epoch(url, "once")
    assert len(hashes) == 2 * len(shard_files(dataset))


@pytest.mark.parametrize("bad", ["twice", "True", 1, 0, None, 2.0])
def test_any_other_verify_is_refused_naming_the_choices(dataset, bad):
    with pytest.raises(InputError, match="'once'"):
        iter_shards(dataset, verify=bad)
    with pytest.raises(InputError, match="'once'"):
        read_shard_arrays(shard_entries(dataset)[0], verify=bad)


def test_shard_dataset_verifies_once_by_default(dataset, hashes):
    pytest.importorskip("torch")
    from kuration.torch import ShardDataset

    ds = ShardDataset(dataset)
    assert ds.verify == "once"
    for _ in range(3):
        for i in range(len(ds)):
            ds[i]
    assert len(hashes) == len(ds)
    with pytest.raises(InputError, match="'once'"):
        ShardDataset(dataset, verify="sometimes")


def test_a_shard_swapped_for_a_symlink_after_its_first_read_is_refused(dataset, tmp_path):
    """The stamp is taken through the same no-symlink open as the read: a link put where a
    verified shard was is refused, never trusted or followed."""
    epoch(dataset, "once")
    target = shard_files(dataset)[0]
    elsewhere = tmp_path / "elsewhere.npz"
    elsewhere.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(elsewhere)
    with pytest.raises(DatasetIntegrityError, match="link"):
        epoch(dataset, "once")


def test_a_shard_removed_after_its_first_read_is_refused(dataset):
    epoch(dataset, "once")
    shard_files(dataset)[1].unlink()
    with pytest.raises(DatasetIntegrityError, match="missing"):
        epoch(dataset, "once")


def test_a_destination_without_change_stamp_is_verified_on_every_read(dataset, hashes, monkeypatch):
    """A Destination written before the method existed keeps working: "once" hashes every read there."""
    from kuration.output.destinations import LocalDestination

    monkeypatch.delattr(LocalDestination, "change_stamp")
    epoch(dataset, "once")
    epoch(dataset, "once")
    assert len(hashes) == 2 * len(shard_files(dataset))
