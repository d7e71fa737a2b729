"""iter_shards, shard_entries and read_shard_arrays: round trips through all four containers
(declared dtype and rank back, pad rows trimmed), the options (split, modalities, trim,
with_meta, container, registry, verify), moved and copied datasets, legacy absolute-path
manifest dicts rebased onto root=, and every fail-closed rule with the bad artifact built."""

from __future__ import annotations

import math
import os
import shutil
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuration
from kuration.errors import CommitError, InputError
from kuration.canonical.hashing import readable_json
from kuration.output.commit_protocol import COMMIT_FILE, MANIFEST_FILE, publish_committed, publish_writing
from kuration.output.containers import NpzContainer, get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import LocalDestination
from kuration.output.spec import OutputSpec
from kuration.read import DatasetIntegrityError, iter_shards, load_committed, read_shard_arrays, shard_entries
from kuration.read.loaders import READ_AHEAD
from kuration.sources.entities import entity_key, parse_entity_key
from tests.output.committed_datasets import SHARD_LENGTH, build, manifest_of, recommit, shard, spec_for

CONTAINERS = ("npz", "json", "hdf5", "parquet")
ROUND_TRIPS = settings(max_examples=12, deadline=timedelta(seconds=60),
                       suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return {c: build(tmp_path_factory.mktemp(c) / "out", c) for c in CONTAINERS}


@pytest.fixture
def dataset(pristine, tmp_path):
    """A fresh copy of the npz dataset (train rows 8 and 5, test rows 3) to change."""
    return Path(shutil.copytree(pristine["npz"], tmp_path / "out", symlinks=True))


def expected(seed: int, rows: int) -> dict[str, np.ndarray]:
    """What ``build`` wrote into entry ``seed`` (``shard(rows, seed)``), as iter_shards yields it."""
    written = shard(rows, seed)
    return {**written.arrays, "_present": written.present}


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype, name
        assert got[name].shape == array.shape, name
        assert got[name].tobytes() == array.tobytes(), name


# -- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("container", CONTAINERS)
def test_every_container_gives_back_the_declared_dtypes_and_ranks(pristine, container):
    shards = list(iter_shards(pristine[container]))
    assert len(shards) == 3
    for seed, (got, rows) in enumerate(zip(shards, (8, 5, 3), strict=True)):
        assert_same(got, expected(seed, rows))
    # a uint8 frame comes back uint8 and 2-D per row from json and parquet too
    assert shards[0]["frame"].dtype == np.uint8 and shards[0]["frame"].shape == (8, 2, 2)
    assert shards[0]["_present"].dtype == np.bool_


@given(container=st.sampled_from(CONTAINERS), rows=st.lists(st.integers(0, SHARD_LENGTH), min_size=0, max_size=4))
@ROUND_TRIPS
def test_round_trip_of_any_shard_lengths(tmp_path_factory, container, rows):
    out = build(tmp_path_factory.mktemp("rt") / "out", container, rows=tuple(rows))
    got = list(iter_shards(out, with_meta=True))
    assert [meta["n_steps"] for _, meta in got] == [*rows, 3]
    for seed, (arrays, meta) in enumerate(got):
        assert_same(arrays, expected(seed, meta["n_steps"]))


def padded_dataset(out: Path, container: str = "npz") -> Path:
    """One train shard written with short_policy='pad': 8 rows, 5 real steps, 3 pad rows."""
    spec = OutputSpec.from_dict({**spec_for(container).to_dict(), "short_policy": "pad"})
    real = shard(5, seed=7)
    pad = 3
    arrays = {n: np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)]) for n, a in real.arrays.items()}
    destination, box = LocalDestination(out), get_container(container)
    path = f"train/pad_shard0000{box.extension}"
    written = destination.stage_shard(path, box, ShardArrays(arrays, np.r_[real.present, np.zeros(pad, bool)],
                                                             5)).seal()
    entry = {"path": path, "split": "train", "source_id": "pad", "entity_id": "str:'car_3'", "span_index": 0,
             "shard_index": 0, "n_steps": 5, "rows": 8, "padded": True, "container": container,
             "bytes": written.bytes, "sha256": written.sha256}
    publish_committed(destination, run_fingerprint="e" * 64, marker=b"{}",
                      manifest=readable_json({"format": 1, "output": spec.to_dict(), "entries": [entry]}),
                      config=readable_json({"job": {}}))
    return out


@pytest.mark.parametrize("container", CONTAINERS)
def test_pad_rows_are_trimmed_unless_trim_is_false(tmp_path, container):
    out = padded_dataset(tmp_path / "out", container)
    [trimmed] = iter_shards(out)
    assert_same(trimmed, expected(7, 5))
    [(full, meta)] = iter_shards(out, trim=False, with_meta=True)
    assert {len(a) for a in full.values()} == {8} and meta["padded"] and meta["rows"] == 8
    assert not full["_present"][5:].any() and not full["pos"][5:].any()
    assert full["pos"][:5].tobytes() == trimmed["pos"].tobytes()


def test_arrays_are_writable_so_torch_can_take_them_without_a_copy(pristine):
    for container in CONTAINERS:
        arrays = next(iter_shards(pristine[container]))
        assert all(a.flags.writeable for a in arrays.values()), container


# -- options ----------------------------------------------------------------------------------

def test_split_keeps_one_split_in_manifest_order(dataset):
    assert [len(a["pos"]) for a in iter_shards(dataset, split="train")] == [8, 5]
    assert [len(a["pos"]) for a in iter_shards(dataset, split="test")] == [3]
    assert list(iter_shards(dataset, split="val")) == []
    with pytest.raises(InputError, match=r"split: must be one of \['train', 'val', 'test'\] \(or None for all\), "
                                         r"got 'holdout'"):
        iter_shards(dataset, split="holdout")


def test_modalities_selects_a_subset_and_keeps_the_mask(dataset):
    arrays = next(iter_shards(dataset, modalities=["pos"]))
    assert sorted(arrays) == ["_present", "pos"]
    with pytest.raises(InputError, match=r"modalities: \['depth'\] not declared; the dataset declares \['frame', "
                                         r"'label', 'pos'\]"):
        iter_shards(dataset, modalities=["pos", "depth"])
    with pytest.raises(InputError, match=r"modalities: a list of names, got the string 'pos'; pass \['pos'\]"):
        iter_shards(dataset, modalities="pos")


def test_with_meta_gives_the_entry_as_a_plain_dict(dataset):
    metas = [meta for _, meta in iter_shards(dataset, with_meta=True)]
    assert [type(m) for m in metas] == [dict] * 3
    first = metas[0]
    assert {k: first[k] for k in ("path", "split", "source_id", "entity_id", "n_steps", "padded", "container")} == {
        "path": "train/src_0_shard0000.npz", "split": "train", "source_id": "src0", "entity_id": "int:0",
        "n_steps": 8, "padded": False, "container": "npz"}
    assert first["location"] == str(dataset / "train" / "src_0_shard0000.npz") and first["dataset"] == str(dataset)
    assert parse_entity_key(first["entity_id"]) == 0


def test_entity_ids_must_be_canonical_type_tagged_keys(dataset):
    manifest = manifest_of(dataset)
    manifest["entries"][1]["entity_id"] = "1"  # an untagged id would alias int 1 and str '1'
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=r"entries\[1\]\.entity_id: entity key '1', character 0: expected "
                                          r"'<type>:<value>'"):
        iter_shards(dataset)
    manifest["entries"][1]["entity_id"] = None
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=r"entries\[1\]\.entity_id: entity key None: must be a str"):
        iter_shards(dataset)
    manifest["entries"][1]["entity_id"] = entity_key((1, "a"))
    recommit(dataset, manifest)
    assert [m["entity_id"] for _, m in iter_shards(dataset, with_meta=True)][1] == "tuple:(int:1,str:'a')"


def test_the_manifest_path_loads_like_its_directory(dataset):
    by_path = list(iter_shards(dataset / MANIFEST_FILE))
    for a, b in zip(by_path, iter_shards(dataset), strict=True):
        assert_same(a, b)
    assert len(list(iter_shards(str(dataset) + "/"))) == 3


def test_shard_entries_and_read_shard_arrays_are_the_building_blocks(dataset):
    entries = shard_entries(dataset, split="train")
    assert [e["path"] for e in entries] == [e["path"] for e in manifest_of(dataset)["entries"][:2]]
    assert entries[0].container.name == "npz" and dict(entries[0])["n_steps"] == 8
    assert_same(read_shard_arrays(entries[1]), expected(1, 5))
    assert_same(read_shard_arrays(entries[1], "npz", modalities=["label"]),
                {"label": expected(1, 5)["label"], "_present": expected(1, 5)["_present"]})
    assert_same(read_shard_arrays(entries[1], NpzContainer(), verify=False), expected(1, 5))
    with pytest.raises(InputError, match=r"entry: expected an entry from shard_entries\(\) .*got dict"):
        read_shard_arrays(dict(entries[0]))
    with pytest.raises(DatasetIntegrityError, match=r"src_1_shard0000\.npz: the manifest records container 'npz', "
                                                    r"but the reader was given JsonContainer\(\)"):
        read_shard_arrays(entries[1], "json")
    with pytest.raises(InputError, match=r"container: must be one of \['npz', 'json', 'hdf5', 'parquet'\]"):
        read_shard_arrays(entries[1], "tar")


def test_from_kuration_import_iter_shards_is_lazy_and_the_same_function():
    from kuration.read.loaders import iter_shards as defined

    assert kuration.iter_shards is defined and kuration.shard_entries is shard_entries
    assert kuration.read_shard_arrays is read_shard_arrays
    assert {"iter_shards", "shard_entries", "read_shard_arrays"} <= set(kuration.__all__)


# -- verification and the helper thread ---------------------------------------------------------

def flip_byte_in_frame(out: Path, index: int) -> None:
    """Change one byte of entry ``index``'s frame data, keeping the size (the checksums now differ)."""
    entry = manifest_of(out)["entries"][index]
    path = out / entry["path"]
    data = bytearray(path.read_bytes())
    at = data.index(shard(entry["n_steps"], index).arrays["frame"].tobytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_changed_shard_is_refused_before_it_is_yielded(dataset):
    flip_byte_in_frame(dataset, 1)
    shards = iter_shards(dataset)
    assert len(next(shards)["pos"]) == 8  # entry 0 is fine, and yielded
    with pytest.raises(DatasetIntegrityError, match=r"train/src_1_shard0000\.npz: size or SHA-256 differs from the "
                                                    r"manifest; the shard was changed or is corrupt"):
        next(shards)


def test_verify_false_skips_the_sha256_but_the_npz_crc_still_catches_damage(dataset):
    flip_byte_in_frame(dataset, 1)
    with pytest.raises(DatasetIntegrityError, match=r"src_1_shard0000\.npz: npz shard: member 'frame\.npy' .*CRC-32 "
                                                    r"does not match"):
        list(iter_shards(dataset, verify=False))


def test_an_abandoned_iteration_leaves_no_helper_thread_behind(pristine):
    def helpers() -> int:
        return sum(t.name.startswith("kuration-shard-fetch") for t in threading.enumerate())

    before = helpers()
    shards = iter_shards(pristine["json"])
    next(shards)
    shards.close()
    assert helpers() == before
    assert READ_AHEAD >= 1


# -- moved and copied datasets --------------------------------------------------------------------

@pytest.mark.parametrize("container", CONTAINERS)
def test_a_moved_dataset_reads_from_where_it_is_now(pristine, tmp_path, container):
    dataset = Path(shutil.copytree(pristine[container], tmp_path / "out"))
    want = list(iter_shards(dataset))
    moved = Path(shutil.move(dataset, tmp_path / "elsewhere" / "renamed"))
    assert not dataset.exists()
    for a, b in zip(iter_shards(moved), want, strict=True):
        assert_same(a, b)


def test_a_copy_reads_its_own_shards_while_the_original_exists(dataset, tmp_path):
    copy = Path(shutil.copytree(dataset, tmp_path / "copy"))
    flip_byte_in_frame(dataset, 0)  # the original is now damaged: a copy that read it would fail
    assert len(list(iter_shards(copy))) == 3
    shutil.rmtree(dataset)  # and gone
    assert len(list(iter_shards(copy))) == 3
    flip_byte_in_frame(copy, 2)
    with pytest.raises(DatasetIntegrityError, match=r"copy/test/src_2_shard0000\.npz: size or SHA-256 differs"):
        list(iter_shards(copy))


# -- fail closed: every rule, each with its bad artifact built ------------------------------------

def test_a_dataset_whose_commit_is_not_committed_is_refused(dataset):
    publish_writing(LocalDestination(dataset), run_fingerprint="f" * 64, marker=b"{}")
    with pytest.raises(CommitError, match=rf"{COMMIT_FILE} says state='writing': a writer is running or was "
                                          "interrupted"):
        iter_shards(dataset)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda text: text.replace(b'"format": 1', b'"format": 1, "format": 1', 1), r"duplicate key 'format'"),
    (lambda text: text.replace(b'"format": 1', b'"format": NaN', 1), r"NaN"),
    (lambda text: text.replace(b'"format": 1', b'"format": Infinity', 1), r"Infinity"),
])
def test_a_manifest_that_is_not_strict_json_is_refused(dataset, edit, message):
    recommit(dataset, edit((dataset / MANIFEST_FILE).read_bytes()))
    with pytest.raises(CommitError, match=rf"{MANIFEST_FILE}: .*{message}"):
        iter_shards(dataset)


@pytest.mark.parametrize(("change", "message"), [
    (lambda out: out["modalities"]["pos"].update(dtype="float128"), r"output\.modalities\.pos\.dtype: must be one of"),
    (lambda out: out["modalities"]["pos"].update(shape=[0]), r"output\.modalities\.pos\.shape: must be a list of "
                                                              r"positive integers"),
    (lambda out: out.update(colour="red"), r"output: unknown key"),
])
def test_a_malformed_embedded_output_spec_is_refused(dataset, change, message):
    manifest = manifest_of(dataset)
    change(manifest["output"])
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=rf"{MANIFEST_FILE}: {message}"):
        iter_shards(dataset)


def test_symlinked_metadata_is_refused(dataset, tmp_path):
    shutil.move(dataset / MANIFEST_FILE, tmp_path / "manifest.json")
    os.symlink(tmp_path / "manifest.json", dataset / MANIFEST_FILE)
    with pytest.raises(CommitError, match=rf"{MANIFEST_FILE}: is a symlink"):
        iter_shards(dataset)


def test_a_symlinked_split_folder_is_refused(dataset, tmp_path):
    shutil.move(dataset / "train", tmp_path / "train")  # the very same shards, outside the dataset
    os.symlink(tmp_path / "train", dataset / "train")
    with pytest.raises(CommitError, match=r"out/train: is a symlink; every folder and file of a dataset must be a real "
                                          r"one inside it"):
        iter_shards(dataset)


def test_a_symlinked_shard_is_refused_when_it_is_reached(dataset, tmp_path):
    first = dataset / manifest_of(dataset)["entries"][0]["path"]
    shutil.move(first, tmp_path / "shard.npz")
    os.symlink(tmp_path / "shard.npz", first)
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.npz: is a symlink"):
        list(iter_shards(dataset))


def test_a_fifo_in_place_of_a_shard_is_refused_without_blocking(dataset):
    entry = manifest_of(dataset)["entries"][1]
    (dataset / entry["path"]).unlink()
    os.mkfifo(dataset / entry["path"])  # a plain open() for reading would wait for a writer forever
    with pytest.raises(DatasetIntegrityError, match=r"src_1_shard0000\.npz: is a fifo, expected a regular file"):
        list(iter_shards(dataset))


@pytest.mark.parametrize("path", ["../outside.npz", "train/../../outside.npz", "/etc/passwd", "test/x.npz"])
def test_a_path_that_escapes_the_dataset_is_refused(dataset, path):
    manifest = manifest_of(dataset)
    manifest["entries"][0]["path"] = path
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=r"entries\[0\]\.path: .*(must be relative|is not inside its split's folder)"):
        iter_shards(dataset)


# -- legacy absolute-path manifest dicts -----------------------------------------------------------

def legacy(manifest: dict, old_root: str, *, drop_container: bool = False) -> dict:
    """``manifest`` as an older writer recorded it: absolute paths under ``old_root``."""
    entries = []
    for entry in manifest["entries"]:
        entry = {**entry, "path": f"{old_root}/{entry['path']}"}
        if drop_container:
            entry.pop("container")
        entries.append(entry)
    return {**manifest, "entries": entries}


def test_a_legacy_manifest_dict_is_rebased_entry_by_entry_onto_root(dataset, tmp_path):
    old = legacy(manifest_of(dataset), "/data/runs/2023/out")
    got = list(iter_shards(old, root=dataset, with_meta=True))
    assert [m["path"] for _, m in got] == [e["path"] for e in manifest_of(dataset)["entries"]]
    for seed, (arrays, meta) in enumerate(got):
        assert_same(arrays, expected(seed, meta["n_steps"]))
    # rebased even though the recorded location exists, and holds different (damaged) shards
    original = Path(shutil.copytree(dataset, tmp_path / "original"))
    flip_byte_in_frame(original, 0)
    assert len(list(iter_shards(legacy(manifest_of(dataset), str(original)), root=dataset))) == 3
    with pytest.raises(DatasetIntegrityError, match=r"size or SHA-256 differs"):
        list(iter_shards(legacy(manifest_of(dataset), str(dataset)), root=original))


def test_a_legacy_dict_needs_root_and_absolute_paths(dataset):
    with pytest.raises(InputError, match=r"root: required with a legacy manifest dict; pass the directory"):
        iter_shards(legacy(manifest_of(dataset), "/old"))
    with pytest.raises(CommitError, match=r"entries\[0\]\.path is 'train/src_0_shard0000\.npz', not an absolute path. "
                                          r"A manifest with relative paths is a current, portable one: load it by "
                                          r"path"):
        iter_shards(manifest_of(dataset), root=dataset)
    with pytest.raises(InputError, match=r"root: only for a legacy manifest dict"):
        iter_shards(dataset, root=dataset)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m["entries"][0].update(path="/old/elsewhere/src_0_shard0000.npz"),
     r"entries\[0\]\.path '/old/elsewhere/src_0_shard0000\.npz' does not end in '<split>/<file>' with its split"),
    (lambda m: m["entries"][1].update(n_steps=math.nan), r"not plain JSON data .*Out of range float values"),
    (lambda m: m["entries"][1].update(sha256="0" * 63), r"entries\[1\]\.sha256: must be 64 lowercase hex digits"),
    (lambda m: m.pop("output"), r"has no output spec"),
    (lambda m: m["output"]["modalities"]["pos"].update(dtype="complex64"), r"output\.modalities\.pos\.dtype"),
    (lambda m: m["entries"][0].update(container="tar"), r"entries\[0\]\.container: must be one of"),
    (lambda m: m["entries"].__setitem__(2, ["test/x.npz"]), r"entries\[2\]: must be an object, found list"),
    (lambda m: m.update(entries={"0": {}}), r"has no entries list"),
])
def test_a_legacy_dict_is_checked_like_a_committed_manifest(dataset, change, message):
    old = legacy(manifest_of(dataset), "/old/out")
    change(old)
    with pytest.raises(CommitError, match=rf"manifest dict.*{message}"):
        iter_shards(old, root=dataset)


def test_container_fills_in_legacy_entries_that_record_none(pristine, tmp_path):
    out = Path(shutil.copytree(pristine["json"], tmp_path / "out"))
    old = legacy(manifest_of(out), "/old/out", drop_container=True)
    old["output"]["container"] = "npz"  # what the spec says is not what these shards are
    with pytest.raises(DatasetIntegrityError, match=r"npz shard: not a readable zip archive"):
        list(iter_shards(old, root=out))
    got = [meta["container"] for _, meta in iter_shards(old, root=out, container="json", with_meta=True)]
    assert got == ["json"] * 3
    with pytest.raises(CommitError, match=r"entries\[0\]\.container records 'json', but container='npz' was passed; "
                                          r"container= only fills in entries that record none"):
        iter_shards(out, container="npz")
    with pytest.raises(InputError, match=r"container: must be one of \['npz', 'json', 'hdf5', 'parquet'\] \(or None\), "
                                         r"got 'zip'"):
        iter_shards(out, container="zip")


# -- registry: container implementations by name ----------------------------------------------------

class CountingNpz(NpzContainer):
    """The npz container under another name, counting the shards it decodes."""

    def __init__(self, name: str = "npz") -> None:
        self.name = name
        self.decoded = 0

    def read(self, data, modalities, *, presence, max_rows=None, verified=False):
        self.decoded += 1
        return super().read(data, modalities, presence=presence, max_rows=max_rows, verified=verified)


def test_a_registry_container_decodes_the_entries_of_its_name(dataset):
    counting = CountingNpz()
    assert len(list(iter_shards(dataset, registry={"npz": counting}))) == 3
    assert counting.decoded == 3


def test_a_registry_may_add_a_container_name_entries_record(dataset):
    manifest = manifest_of(dataset)
    for entry in manifest["entries"]:
        entry["container"] = "npz-counted"
    recommit(dataset, manifest)
    with pytest.raises(CommitError, match=r"entries\[0\]\.container: must be one of \['npz', 'json', 'hdf5', "
                                          r"'parquet'\], got 'npz-counted'"):
        iter_shards(dataset)
    counting = CountingNpz("npz-counted")
    got = [meta["container"] for _, meta in iter_shards(dataset, registry={"npz-counted": counting}, with_meta=True)]
    assert got == ["npz-counted"] * 3 and counting.decoded == 3
    # an untrusted load cannot isolate a decoder it does not know; npz is safe in-process, so it reads
    untrusted = load_committed(dataset, untrusted=True, extra_containers=["npz-counted"])
    assert len(list(iter_shards(untrusted, registry={"npz-counted": counting}))) == 3
    unsafe = CountingNpz("npz-counted")
    unsafe.safe_for_untrusted = False
    with pytest.raises(DatasetIntegrityError, match=r"src_0_shard0000\.npz: the dataset was loaded untrusted, and .* "
                                                    r"is neither safe for untrusted bytes nor a built-in container"):
        list(iter_shards(untrusted, registry={"npz-counted": unsafe}))


@pytest.mark.parametrize(("registry", "message"), [
    ({"npz": object()}, r"registry\['npz'\]: must be a shard container"),
    ({"npz": CountingNpz("other")}, r"registry\['npz'\]: the container's name is 'other'; register it under the name"),
    (["npz"], r"registry: must be a mapping of container name -> container"),
])
def test_a_bad_registry_is_refused(dataset, registry, message):
    with pytest.raises(InputError, match=message):
        iter_shards(dataset, registry=registry)


def test_a_registry_class_is_instantiated(dataset):
    assert len(list(iter_shards(dataset, registry={"npz": CountingNpz}))) == 3


def test_an_untrusted_dataset_decodes_hdf5_in_the_isolated_worker(pristine):
    loaded = load_committed(pristine["hdf5"], untrusted=True)
    for seed, arrays in enumerate(iter_shards(loaded)):
        assert_same(arrays, expected(seed, (8, 5, 3)[seed]))


def test_the_dataset_argument_must_be_a_path_a_loaded_dataset_or_a_dict():
    with pytest.raises(InputError, match=r"dataset: expected a dataset directory or URL, the path of its "
                                         r"dataset_manifest\.json, a CommittedDataset or a legacy manifest dict; got "
                                         r"int"):
        iter_shards(42)
