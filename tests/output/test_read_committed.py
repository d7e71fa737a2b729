"""The dataset readers (load_committed, verify_dataset, read_shard) against careless and
hostile datasets: a manifest of the wrong shape, paths that leave the dataset through a link
or a '..', special files, shards malformed inside behind a consistent checksum chain, and a
shard crafted to hang its decoder. Every refusal is a CommitError (DatasetIntegrityError for
a shard) naming the file; nothing else escapes and nothing hangs."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.canonical.hashing import canonical_json, sha256_hex
from kuration.output.commit_protocol import COMMIT_FILE, MANIFEST_FILE, CommitError
from kuration.read import DatasetIntegrityError, load_committed, read_shard, verify_dataset
from kuration.testing.strategies import damaged
from tests.hostile import json_texts, mutated
from tests.output.committed_datasets import build, manifest_of, rechain_shard, recommit

READERS_SETTINGS = settings(max_examples=100, deadline=timedelta(seconds=30),
                            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                   HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return {c: build(tmp_path_factory.mktemp(c) / "out", c) for c in ("npz", "json", "hdf5", "parquet")}


@pytest.fixture
def dataset(pristine, tmp_path):
    """A fresh copy of the npz dataset to damage."""
    return Path(shutil.copytree(pristine["npz"], tmp_path / "out", symlinks=True))


def copy_of(pristine, container: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine[container], tmp_path / container, symlinks=True))


def test_a_built_dataset_reads_back_in_every_container(pristine):
    for container, out in pristine.items():
        dataset = load_committed(out)
        assert verify_dataset(out).ok, container
        shards = [read_shard(dataset, e) for e in dataset.entries]
        assert [s.n_steps for s in shards] == [8, 5, 3], container
        assert shards[0].arrays["frame"].dtype.name == "uint8"


# -- the manifest's structure ------------------------------------------------------------------

ENTRY_CASES = [
    # (a change to entries[0] or the manifest, what the error says)
    (lambda m: m["entries"].__setitem__(0, 7), r"entries\[0\]: must be an object, found int"),
    (lambda m: m["entries"].__setitem__(0, ["train/x.npz"]), r"entries\[0\]: must be an object, found list"),
    *[(lambda m, k=k: m["entries"][0].pop(k), rf"entries\[0\]: lacks \['{k}'\]")
      for k in ("path", "bytes", "sha256", "split", "n_steps")],
    (lambda m: m["entries"][0].update(path=3), r"entries\[0\]\.path: a path must be a string, got int"),
    (lambda m: m["entries"][0].update(bytes="4096"),
     r"entries\[0\]\.bytes: must be a whole number of bytes, got '4096'"),
    (lambda m: m["entries"][0].update(bytes=True), r"entries\[0\]\.bytes: must be a whole number of bytes, got True"),
    (lambda m: m["entries"][0].update(bytes=-1), r"entries\[0\]\.bytes: must be a whole number of bytes, got -1"),
    (lambda m: m["entries"][0].update(bytes=1.5), r"entries\[0\]\.bytes: must be a whole number of bytes, got 1\.5"),
    (lambda m: m["entries"][0].update(sha256="XYZ"),
     r"entries\[0\]\.sha256: must be 64 lowercase hex digits, got 'XYZ'"),
    (lambda m: m["entries"][0].update(sha256=None), r"entries\[0\]\.sha256: must be 64 lowercase hex digits, got None"),
    (lambda m: m["entries"][0].update(split="holdout"),
     r"entries\[0\]\.split: must be one of \['train', 'val', 'test'\]"),
    (lambda m: m["entries"][0].update(split={"a": 1}), r"entries\[0\]\.split: must be one of"),
    (lambda m: m["entries"][0].update(n_steps="8"), r"entries\[0\]\.n_steps: must be a whole number from 0 to"),
    (lambda m: m["entries"][0].update(n_steps=9),
     r"entries\[0\]\.n_steps: must be a whole number from 0 to the shard's "
                                                   r"rows \(8\), got 9"),
    (lambda m: m["entries"][0].update(rows=99),
     r"entries\[0\]\.rows: must be a whole number from 0 to the shard length 8"),
    (lambda m: m["entries"][0].update(container="tar"), r"entries\[0\]\.container: must be one of"),
    (lambda m: m["entries"][1].update(path=m["entries"][0]["path"]), r"entries\[1\]\.path .* is also entries\[0\]'s"),
    (lambda m: m.pop("output"), r"has no output spec \('output'\)"),
    (lambda m: m["output"].update(shard_length=0), r"output\.shard_length: required"),
    (lambda m: m.update(entries={"0": {}}), r"has no entries list"),
]


@pytest.mark.parametrize(("change", "message"), ENTRY_CASES, ids=[m[:48] for _, m in ENTRY_CASES])
def test_a_manifest_of_the_wrong_shape_is_refused_naming_the_entry_and_key(dataset, change, message):
    manifest = manifest_of(dataset)
    change(manifest)
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=rf"{MANIFEST_FILE}: .*{message}"):
        load_committed(dataset)
    result = verify_dataset(dataset)
    assert not result.ok and MANIFEST_FILE in result.errors[0]


@pytest.mark.parametrize(("text", "message"), [
    (lambda good: good[:-2] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested deeper than 64 levels"),
    (lambda good: good.replace(b'"format": 1', b'"format": 1e999'), r"number 1e999 is beyond the float range"),
    (lambda good: good.replace(b'"format": 1', b'"format": 1, "format": 2'), "duplicate key 'format'"),
    (lambda good: b"[]", "must be a JSON object, found list"),
])
def test_a_manifest_that_is_not_strict_json_is_refused(dataset, text, message):
    recommit(dataset, text((dataset / MANIFEST_FILE).read_bytes()))
    with pytest.raises(CommitError, match=rf"{MANIFEST_FILE}: .*{message}"):
        load_committed(dataset)


def test_read_shard_checks_the_entry_it_is_given(dataset):
    loaded = load_committed(dataset)
    with pytest.raises(CommitError, match=r"entry: lacks \['bytes', 'sha256', 'split', 'n_steps'\]"):
        read_shard(loaded, {"path": "train/x.npz"})
    with pytest.raises(CommitError, match=r"entry\.path: path '\.\./\.\./etc/passwd' must be relative"):
        read_shard(loaded, {**loaded.entries[0], "path": "../../etc/passwd"})


# -- paths: every component, inside the dataset, regular files only -----------------------------

@pytest.mark.parametrize("path", ["../outside.npz", "/etc/passwd", "train/../../outside.npz", "train//x.npz",
                                  "train/./x.npz", "train\\x.npz", "train/x\x00.npz", "", "x.npz", "test/x.npz"])
def test_a_path_that_leaves_its_split_folder_is_refused(dataset, path):
    manifest = manifest_of(dataset)
    manifest["entries"][0]["path"] = path
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=r"entries\[0\]\.path: .*(must be relative|is not inside its split's folder)"):
        load_committed(dataset)


def test_a_split_folder_replaced_by_a_link_to_outside_is_refused_by_every_reader(dataset, tmp_path):
    loaded = load_committed(dataset)  # before the swap: read_shard must still catch it
    outside = tmp_path / "elsewhere"
    shutil.move(dataset / "train", outside)  # the same files, byte for byte, but outside the dataset
    os.symlink(outside, dataset / "train")
    message = r"out/train: is a symlink; every folder and file of a dataset must be a real one inside it"
    with pytest.raises(CommitError, match=message):
        load_committed(dataset)
    result = verify_dataset(dataset)
    assert not result.ok and re.search(message, result.errors[0])
    with pytest.raises(DatasetIntegrityError, match=message):
        read_shard(loaded, loaded.entries[0])
    assert read_shard(loaded, loaded.entries[2]).n_steps == 3  # the real test folder still reads


def test_a_linked_shard_and_a_linked_folder_deeper_down_are_refused(dataset, tmp_path):
    first = dataset / manifest_of(dataset)["entries"][0]["path"]
    shutil.move(first, tmp_path / "shard.npz")
    os.symlink(tmp_path / "shard.npz", first)
    loaded = load_committed(dataset)
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.npz: is a symlink"):
        read_shard(loaded, loaded.entries[0])
    # a nested layout, train/deep/<shard>, whose deep becomes a link after the dataset was loaded
    manifest = manifest_of(dataset)
    (dataset / "train" / "deep").mkdir()
    shutil.move(dataset / manifest["entries"][1]["path"], dataset / "train" / "deep" / "s.npz")
    manifest["entries"][1]["path"] = "train/deep/s.npz"
    recommit(dataset, manifest)
    loaded = load_committed(dataset)
    assert read_shard(loaded, loaded.entries[1]).n_steps == 5
    shutil.move(dataset / "train" / "deep", tmp_path / "deep")
    os.symlink(tmp_path / "deep", dataset / "train" / "deep")
    with pytest.raises(DatasetIntegrityError, match=r"train/deep: is a symlink"):
        read_shard(loaded, loaded.entries[1])
    with pytest.raises(CommitError, match=r"train/deep: is a symlink"):
        load_committed(dataset)


@pytest.mark.parametrize("special", ["fifo", "folder"])
def test_a_special_file_in_place_of_a_shard_is_refused_without_blocking(dataset, special):
    entry = manifest_of(dataset)["entries"][0]
    (dataset / entry["path"]).unlink()
    if special == "fifo":
        os.mkfifo(dataset / entry["path"])  # opening it for reading would wait for a writer forever
    else:
        (dataset / entry["path"]).mkdir()
    loaded = load_committed(dataset)
    kind = "a fifo" if special == "fifo" else "a folder"
    started = time.monotonic()
    with pytest.raises(DatasetIntegrityError, match=rf"src_0_shard0000\.npz: is {kind}, expected a regular file"):
        read_shard(loaded, loaded.entries[0])
    assert not verify_dataset(dataset).ok
    # a fifo opened for reading would block forever; this catches that, not speed
    assert time.monotonic() - started < 30


def test_an_unreadable_split_folder_is_refused_naming_it(dataset, monkeypatch):
    real_stat = os.stat

    def denied(path, *args, **kwargs):  # what a folder without read permission gives a non-root reader
        if path == "train" and kwargs.get("dir_fd") is not None:
            raise PermissionError(13, "Permission denied")
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", denied)
    with pytest.raises(CommitError, match=r"out/train: cannot be examined \(Permission denied\)"):
        load_committed(dataset)


def test_metadata_that_is_a_fifo_is_refused(dataset):
    (dataset / COMMIT_FILE).unlink()
    os.mkfifo(dataset / COMMIT_FILE)
    with pytest.raises(CommitError, match=rf"{COMMIT_FILE}: is a fifo, expected a regular file"):
        load_committed(dataset)


# -- shards malformed inside, behind a consistent checksum chain --------------------------------

def test_an_npz_shard_with_an_unsupported_compression_method_names_the_shard(dataset):
    entry = manifest_of(dataset)["entries"][0]
    data = bytearray((dataset / entry["path"]).read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.find(signature)
        while at >= 0:
            struct.pack_into("<H", data, at + offset, 9)  # deflate64: zipfile cannot decompress it
            at = data.find(signature, at + 1)
    rechain_shard(dataset, 0, bytes(data))
    loaded = load_committed(dataset)
    assert verify_dataset(dataset).ok  # the chain holds: only decoding can tell
    with pytest.raises(DatasetIntegrityError, match=r"train/src_0_shard0000\.npz: npz shard: member '\w+\.npy' is "
                                                    r"compressed or encrypted \(zip method 9.*do not train on it"):
        read_shard(loaded, loaded.entries[0])


@pytest.mark.parametrize("number, message", [
    ("1" + "0" * 400, r"value 10{76}\.\.\. at row 0, element \[0\] is not exactly representable as float32"),
    ("1" + "0" * 5000, r"Exceeds the limit \(4300 digits\)"),
    ("1e999", r"number 1e999 is beyond the float range"),
])
def test_a_json_shard_with_huge_numbers_names_the_shard(pristine, tmp_path, number, message):
    out = copy_of(pristine, "json", tmp_path)
    entry = manifest_of(out)["entries"][0]
    text = (out / entry["path"]).read_bytes()
    first = json.loads(text)["modalities"]["pos"][0][0]
    rechain_shard(out, 0, text.replace(repr(first).encode(), number.encode(), 1))
    loaded = load_committed(out)
    with pytest.raises(DatasetIntegrityError, match=rf"src_0_shard0000\.json: json shard: .*{message}"):
        read_shard(loaded, loaded.entries[0])


def test_an_hdf5_shard_with_a_corrupt_object_header_names_the_shard(pristine, tmp_path):
    out = copy_of(pristine, "hdf5", tmp_path)
    entry = manifest_of(out)["entries"][0]
    data = (out / entry["path"]).read_bytes()
    dims = struct.pack("<QQ", 8, 3)  # pos's dataspace message: dims, then max dims
    assert data.count(dims) == 2
    rechain_shard(out, 0, data.replace(dims, struct.pack("<QQ", 2**40, 3)))
    loaded = load_committed(out)
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.h5: hdf5 shard: damaged HDF5 structure"):
        read_shard(loaded, loaded.entries[0])


def test_a_shard_whose_real_steps_disagree_with_the_manifest_is_refused(dataset):
    manifest = manifest_of(dataset)
    manifest["entries"][0]["n_steps"] = 5  # the shard says 8
    recommit(dataset, manifest)
    loaded = load_committed(dataset)
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.npz: holds 8 real steps in 8 rows, but the "
                                                    r"manifest records 5 in 8"):
        read_shard(loaded, loaded.entries[0])


# -- a crafted shard must not hang a reader ----------------------------------------------------

def hanging_hdf5(out: Path) -> Path:
    """Entry 0 of ``out`` with the one flipped byte that keeps libhdf5 busy for good (the size of
    the global-heap object holding the format attribute), its size and SHA-256 rewritten into a
    consistent chain."""
    entry = manifest_of(out)["entries"][0]
    data = bytearray((out / entry["path"]).read_bytes())
    size = data.find(b"GCOL") + 24
    assert struct.unpack_from("<Q", data, size)[0] == len("kuration-shard-hdf5/1")
    data[size] ^= 0x40
    rechain_shard(out, 0, bytes(data))
    return out


def test_an_untrusted_hdf5_shard_crafted_to_hang_returns_an_error_in_bounded_time(pristine, tmp_path):
    out = hanging_hdf5(copy_of(pristine, "hdf5", tmp_path))
    assert verify_dataset(out).ok  # the chain is consistent: integrity, not authentication
    loaded = load_committed(out, untrusted=True, decode_timeout=2)
    read_shard(loaded, loaded.entries[1])  # the worker is running
    started = time.monotonic()
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.h5: hdf5 shard: decoding did not finish within "
                                                    r"2 s, so the isolated decoder was stopped"):
        read_shard(loaded, loaded.entries[0])
    # the message above says the 2 s limit fired; this bound only catches a hang (the shard hangs
    # libhdf5 indefinitely), loosely enough that a loaded machine starting a worker does not flake it
    assert time.monotonic() - started < 30
    assert read_shard(loaded, loaded.entries[1]).n_steps == 5  # a new worker takes over


def test_untrusted_reads_decode_every_container_as_the_trusted_ones_do(pristine):
    for container, out in pristine.items():
        trusted, untrusted = load_committed(out), load_committed(out, untrusted=True)
        for entry in trusted.entries:
            a, b = read_shard(trusted, entry), read_shard(untrusted, entry)
            assert (a.n_steps, a.rows) == (b.n_steps, b.rows), container
            assert all(a.arrays[n].tobytes() == b.arrays[n].tobytes() and a.arrays[n].dtype == b.arrays[n].dtype
                       for n in a.arrays), container
            assert a.present.tobytes() == b.present.tobytes()


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5"])
def test_a_decode_timeout_must_be_a_positive_number(dataset, timeout):
    with pytest.raises(ValueError, match="decode_timeout must be a positive number of seconds"):
        load_committed(dataset, untrusted=True, decode_timeout=timeout)


# -- fuzz: only CommitError escapes ------------------------------------------------------------

def read_everything(out: Path) -> None:
    """Every reader over ``out``; each raises only CommitError (DatasetIntegrityError for a shard)."""
    verification = verify_dataset(out)
    assert all(isinstance(e, str) and e for e in verification.errors)
    try:
        loaded = load_committed(out, untrusted=True, decode_timeout=3)
    except CommitError as exc:
        assert str(exc)
        return
    for entry in loaded.entries:
        try:
            read_shard(loaded, entry)
        except DatasetIntegrityError as exc:
            assert "the decoder failed" not in str(exc), str(exc)


@pytest.fixture(scope="module")
def fuzz_root(pristine, tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def fresh(pristine, fuzz_root: Path, container: str) -> Path:
    out = fuzz_root / container
    shutil.rmtree(out, ignore_errors=True)
    return Path(shutil.copytree(pristine[container], out))


@READERS_SETTINGS
@given(data=st.data())
def test_fuzzed_manifests_raise_only_commit_errors(pristine, fuzz_root, data):
    out = fresh(pristine, fuzz_root, "npz")
    base = manifest_of(out)
    if data.draw(st.booleans()):
        recommit(out, json.dumps(data.draw(mutated(base, python=False)), allow_nan=True).encode())
    else:
        recommit(out, data.draw(json_texts(base)))
    read_everything(out)


@READERS_SETTINGS
@given(data=st.data())
def test_fuzzed_commit_records_raise_only_commit_errors(pristine, fuzz_root, data):
    out = fresh(pristine, fuzz_root, "npz")
    record = json.loads((out / COMMIT_FILE).read_bytes())
    if data.draw(st.booleans()):
        (out / COMMIT_FILE).write_bytes(data.draw(json_texts(record)))
    else:  # a changed body with its checksum recomputed: only the fields' own checks stand
        body = data.draw(mutated({k: v for k, v in record.items() if k != "checksum"}, python=False))
        try:
            sealed = {**body, "checksum": sha256_hex(canonical_json(body))} if isinstance(body, dict) else body
        except ValueError:  # NaN or Infinity: canonical JSON has no spelling for it
            sealed = body
        (out / COMMIT_FILE).write_bytes(json.dumps(sealed, allow_nan=True).encode())
    read_everything(out)


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
@READERS_SETTINGS
@given(data=st.data())
def test_fuzzed_shards_behind_a_consistent_chain_raise_only_dataset_integrity_errors(pristine, fuzz_root, container,
                                                                                     data):
    out = fresh(pristine, fuzz_root, container)
    index = data.draw(st.integers(0, 2))
    entry = manifest_of(out)["entries"][index]
    rechain_shard(out, index, data.draw(damaged((out / entry["path"]).read_bytes())))
    read_everything(out)
