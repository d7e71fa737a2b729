"""``ShardSourceContract``: what every :class:`~kuration.read.committed.ShardSource` promises.

A shard source is what :func:`~kuration.read.read_shard`, :func:`~kuration.read.fetch_shard`
and :func:`~kuration.read.decode_shard` read from: a destination holding the shards its
manifest entries name, the output spec they were written with, and whether its bytes are
trusted. A test module subclasses the kit once per source (``class TestMine(ShardSourceContract)``);
the kit writes a small committed dataset (npz, json, hdf5 and parquet shards, padded and
not, train and test) under a root the subclass gives, opens it through the subclass and
reads it only through those functions:

* the source's ``spec`` is the one the dataset was written with; ``untrusted`` and
  ``decode_timeout`` are what the source was opened with; its destination names every
  entry's shard under the root and lists it;
* every shard reads back bit for bit, trusted or untrusted (hdf5 and parquet then decode in
  the isolated worker), through ``read_shard`` and through ``read_shard_arrays`` (pad rows
  trimmed);
* ``fetch_shard`` reads a shard's exact bytes into the buffer ``allocate`` gives;
* a shard changed after the commit (one bit flipped, the size kept), cut short, or gone is
  a :class:`~kuration.read.DatasetIntegrityError` naming the shard's location, and the
  other shards still read: the source reads its destination, never a copy it kept.

A subclass supplies:

* ``make_root(place)``: where a fresh dataset goes, a local folder or a URL (``place`` is a
  fresh name);
* ``open_source(root, *, untrusted, decode_timeout)``: the source over the dataset there.

It may override ``entries(source)``, the manifest entries in manifest order (default: the
source's ``entries``).

What it does not check: how a source finds its dataset (a path, a catalog, a pointer to a
published version), or the commit chain above the manifest, which
:func:`~kuration.read.load_committed` checks before a source exists.
"""

from __future__ import annotations

import abc
import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import open_destination
from kuration.output.spec import OutputSpec
from kuration.read.committed import DatasetIntegrityError, ShardSource, fetch_shard, read_shard
from kuration.read.loaders import ShardEntry, read_shard_arrays
from kuration.testing.committed import KitDataset, KitShard, write_committed_dataset

SHARD_LENGTH = 8
#: (split, container, real steps) of each shard: every container, padded and full shards.
LAYOUT = (("train", "npz", 8), ("train", "json", 5), ("train", "hdf5", 6), ("test", "parquet", 3))


def kit_spec() -> OutputSpec:
    return OutputSpec.from_dict({
        "shard_length": SHARD_LENGTH, "short_policy": "pad", "container": "npz", "presence_mask": True,
        "modalities": {"pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                       "label": {"dtype": "int64", "shape": [], "source": "segment:speed.max"},
                       "frame": {"dtype": "uint8", "shape": [2, 2], "source": "media:frame"}}})


def kit_shard(steps: int, seed: int) -> ShardArrays:
    """``SHARD_LENGTH`` rows, the first ``steps`` real; pad rows are zero and absent."""
    rng = np.random.default_rng(seed)
    pos = rng.standard_normal((SHARD_LENGTH, 3)).astype(np.float32)
    pos.reshape(-1)[:2] = [-0.0, np.nan]  # bits a careless copy changes
    label = rng.integers(-(2**40), 2**40, SHARD_LENGTH)
    frame = rng.integers(0, 256, (SHARD_LENGTH, 2, 2), dtype=np.uint8)
    real = np.arange(SHARD_LENGTH) < steps
    present = real & (np.arange(SHARD_LENGTH) % 3 != 1)
    arrays = {"pos": np.where(real[:, None], pos, 0), "label": np.where(real, label, 0),
              "frame": np.where(real[:, None, None], frame, 0).astype(np.uint8)}
    return ShardArrays(arrays, present, steps)


def bits(array: np.ndarray) -> tuple:
    return array.dtype.str, array.shape, array.tobytes()


class ShardSourceContract(abc.ABC):
    @abc.abstractmethod
    def make_root(self, place: str) -> str:
        ...

    @abc.abstractmethod
    def open_source(self, root: str, *, untrusted: bool, decode_timeout: float | None) -> ShardSource:
        ...

    def entries(self, source: ShardSource) -> list[Mapping[str, Any]]:
        return list(source.entries)  # type: ignore[attr-defined]

    # ---- fixtures -------------------------------------------------------------------

    @pytest.fixture
    def written(self) -> tuple[str, KitDataset]:
        root = self.make_root("dataset")
        shards = [KitShard(split, kit_shard(steps, seed), source_id=f"rec_{seed}", container=container)
                  for seed, (split, container, steps) in enumerate(LAYOUT)]
        return root, write_committed_dataset(open_destination(root), kit_spec(), shards)

    @pytest.fixture
    def source(self, written) -> ShardSource:
        return self.open_source(written[0], untrusted=False, decode_timeout=None)

    def assert_shard(self, got: ShardArrays, want: ShardArrays) -> None:
        assert sorted(got.arrays) == sorted(want.arrays)
        for name, array in want.arrays.items():
            assert bits(got.arrays[name]) == bits(array), name
        assert got.present is not None and want.present is not None
        assert bits(got.present) == bits(want.present)
        assert (got.n_steps, got.rows) == (want.n_steps, want.rows)

    def damage(self, source: ShardSource, entry: Mapping[str, Any], data: bytes | None) -> None:
        """Replace an entry's shard with ``data`` behind the manifest's back (None: remove it)."""
        if data is None:
            source.destination.remove(entry["path"])
        else:
            source.destination.write_metadata(entry["path"], data)

    # ---- what the source says ---------------------------------------------------------

    def test_the_spec_is_the_one_the_dataset_was_written_with(self, source, written):
        assert source.spec == written[1].spec
        assert source.spec.to_dict() == kit_spec().to_dict()

    @pytest.mark.parametrize("untrusted, timeout", [(False, None), (True, None), (True, 7.5), (False, 2.0)])
    def test_untrusted_and_the_decode_timeout_are_what_was_asked(self, written, untrusted, timeout):
        source = self.open_source(written[0], untrusted=untrusted, decode_timeout=timeout)
        assert source.untrusted is untrusted
        assert source.decode_timeout == timeout

    def test_the_entries_are_the_manifests_in_order(self, source, written):
        got = self.entries(source)
        assert [dict(e) for e in got] == [dict(e) for e in written[1].entries]

    def test_the_destination_names_and_lists_every_shard(self, source, written):
        root = written[0].rstrip("/")
        for entry in self.entries(source):
            where = source.destination.where(entry["path"])
            assert where.endswith(entry["path"]) and root.split("://")[-1] in where, (where, root)
            assert entry["path"] in source.destination.files_under(entry["split"])

    # ---- reading ------------------------------------------------------------------------

    @pytest.mark.parametrize("untrusted", [False, True], ids=["trusted", "untrusted"])
    def test_every_shard_reads_back_bit_for_bit(self, written, untrusted):
        source = self.open_source(written[0], untrusted=untrusted, decode_timeout=None)
        for entry, shard in zip(self.entries(source), written[1].shards, strict=True):
            self.assert_shard(read_shard(source, entry), shard.arrays)
            self.assert_shard(read_shard(source, entry, verify=False), shard.arrays)

    def test_read_shard_arrays_trims_the_pad_rows(self, source, written):
        for entry, shard in zip(self.entries(source), written[1].shards, strict=True):
            steps = shard.arrays.n_steps
            got = read_shard_arrays(ShardEntry(source, entry, get_container(entry["container"])))
            assert sorted(got) == sorted([*shard.arrays.arrays, "_present"])
            for name, array in shard.arrays.arrays.items():
                assert bits(got[name]) == bits(array[:steps]), name
            assert shard.arrays.present is not None
            assert bits(got["_present"]) == bits(shard.arrays.present[:steps])

    def test_fetch_shard_reads_the_exact_bytes_into_the_callers_buffer(self, source):
        given: list[bytearray] = []

        def allocate(size: int) -> bytearray:
            given.append(bytearray(size))
            return given[-1]

        for entry in self.entries(source):
            data = fetch_shard(source, entry, allocate=allocate)
            assert data is given[-1]
            assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]

    # ---- damage -------------------------------------------------------------------------

    @pytest.mark.parametrize("damage", ["flipped", "cut", "gone"])
    def test_a_damaged_shard_is_refused_naming_its_location(self, source, damage):
        entry = self.entries(source)[1]
        data = bytearray(fetch_shard(source, entry))
        if damage == "flipped":
            data[len(data) // 2] ^= 0x01
        self.damage(source, entry, None if damage == "gone" else bytes(data[:-1] if damage == "cut" else data))
        what = "missing" if damage == "gone" else "size or SHA-256 differs from the manifest"
        where = re.escape(source.destination.where(entry["path"]))
        with pytest.raises(DatasetIntegrityError, match=rf"{where}: {what}"):
            read_shard(source, entry)
        with pytest.raises(DatasetIntegrityError, match=rf"{where}: {what}"):
            fetch_shard(source, entry)
        others = [e for e in self.entries(source) if e["path"] != entry["path"]]
        assert all(read_shard(source, e).n_steps == e["n_steps"] for e in others)  # the rest still read


__all__ = ["LAYOUT", "SHARD_LENGTH", "ShardSourceContract", "kit_shard", "kit_spec"]
