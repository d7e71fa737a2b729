"""kuration.torch: ShardDataset items as tensors in manifest order, a real DataLoader with two
workers (each loads the dataset itself and refuses a changed one), and pad_collate for the
ragged shards of short_policy="keep"."""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from kuration.errors import InputError
from kuration.read import DatasetIntegrityError
from kuration.torch import META, ShardDataset, pad_collate
from tests.output.committed_datasets import build, manifest_of, rechain_shard, shard


@pytest.fixture(scope="module")
def ragged(tmp_path_factory) -> Path:
    """short_policy='keep': train shards of 8, 5, 8 and 2 rows, then a test shard of 3."""
    return build(tmp_path_factory.mktemp("ragged") / "out", "npz", rows=(8, 5, 8, 2))


def test_items_are_tensors_of_the_declared_dtypes_in_manifest_order(ragged):
    ds = ShardDataset(ragged, split="train")
    assert len(ds) == 4
    for seed, rows in enumerate((8, 5, 8, 2)):
        item = ds[seed]
        written = shard(rows, seed)
        assert sorted(item) == ["_present", "frame", "label", "pos"]
        assert item["frame"].dtype == torch.uint8 and item["frame"].shape == (rows, 2, 2)
        assert item["pos"].dtype == torch.float32 and item["label"].dtype == torch.int64
        assert item["_present"].dtype == torch.bool
        for name, array in written.arrays.items():
            assert np.array_equal(item[name].numpy(), array), name
        assert np.array_equal(item["_present"].numpy(), written.present)
    assert ds[-1]["pos"].shape == (2, 3)


def test_include_meta_and_transform(ragged):
    ds = ShardDataset(ragged, split="test", include_meta=True,
                      transform=lambda item: {**item, "speed": item["pos"].norm(dim=1)})
    item = ds[0]
    assert item[META]["split"] == "test" and item[META]["entity_id"] == "int:0" and item[META]["n_steps"] == 3
    assert item["speed"].shape == (3,)
    with pytest.raises(InputError, match=r"transform: must be callable"):
        ShardDataset(ragged, transform="normalize")


def test_bad_indices_and_modalities(ragged):
    ds = ShardDataset(ragged, split="train", modalities=["label"])
    assert sorted(ds[0]) == ["_present", "label"]
    with pytest.raises(IndexError, match=r"ShardDataset index 4 out of range for 4 shards"):
        ds[4]
    with pytest.raises(TypeError, match=r"ShardDataset index must be an integer, got str"):
        ds["0"]
    with pytest.raises(InputError, match=r"modalities: \['depth'\] not declared"):
        ShardDataset(ragged, modalities=["depth"])


def test_a_dataloader_with_two_workers_and_pad_collate_batches_ragged_shards(ragged):
    ds = ShardDataset(ragged, split="train", include_meta=True)
    loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=pad_collate)
    batches = list(loader)
    assert [b["pos"].shape for b in batches] == [(2, 8, 3), (2, 8, 3)]
    assert [b["frame"].dtype for b in batches] == [torch.uint8, torch.uint8]
    # _present marks real rows; the padding is False and zero
    assert batches[0]["_present"].sum(dim=1).tolist() == [sum(shard(8, 0).present), sum(shard(5, 1).present)]
    assert not batches[1]["_present"][1, 2:].any() and not batches[1]["pos"][1, 2:].any()
    assert [m["path"] for b in batches for m in b[META]] == [e["path"] for e in manifest_of(ragged)["entries"][:4]]
    assert np.array_equal(batches[1]["frame"][1, :2].numpy(), shard(2, 3).arrays["frame"])


def test_the_default_collate_batches_equal_length_shards_with_two_workers(tmp_path):
    out = build(tmp_path / "out", "json", rows=(8, 8, 8))
    loader = DataLoader(ShardDataset(out, split="train"), batch_size=3, num_workers=2)
    [batch] = list(loader)
    assert batch["pos"].shape == (3, 8, 3) and batch["_present"].dtype == torch.bool


def test_the_dataset_pickles_without_its_manifest_and_reloads_it_lazily(ragged):
    ds = ShardDataset(ragged, split="train")
    payload = pickle.dumps(ds)
    assert b"sha256" not in payload  # no entries travel to the workers
    copy = pickle.loads(payload)
    assert len(copy) == 4 and np.array_equal(copy[1]["label"].numpy(), shard(5, 1).arrays["label"])
    # spawned workers get the pickle: each loads the dataset on its first item
    loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=pad_collate, multiprocessing_context="spawn")
    assert [b["label"].shape for b in loader] == [(2, 8), (2, 8)]


def test_a_worker_refuses_a_dataset_changed_since_the_parent_counted_it(ragged, tmp_path):
    out = Path(shutil.copytree(ragged, tmp_path / "out"))
    ds = ShardDataset(out, split="train")
    payload = pickle.dumps(ds)
    rechain_shard(out, 1, (out / manifest_of(out)["entries"][0]["path"]).read_bytes())  # a consistent, other chain
    with pytest.raises(DatasetIntegrityError, match=r"the dataset changed since this ShardDataset was created"):
        pickle.loads(payload)[0]
    # forked workers drop the entries they inherit and load the dataset again, so they find the change too
    with pytest.raises(DatasetIntegrityError, match=r"the dataset changed since this ShardDataset was created"):
        list(DataLoader(ds, batch_size=1, num_workers=2, collate_fn=pad_collate))


def test_creating_a_dataset_keeps_no_file_open(ragged):
    # Earlier tests leave garbage holding pipes (DataLoader workers, Dagster runs); collected
    # in the middle of this test, it would close descriptors the snapshot counts.
    gc.collect()
    before = set(os.listdir("/proc/self/fd"))
    ds = ShardDataset(ragged)
    assert set(os.listdir("/proc/self/fd")) == before
    assert len(ds) == 5


def test_pad_collate_refuses_what_it_cannot_batch():
    with pytest.raises(InputError, match=r"pad_collate: an empty batch"):
        pad_collate([])
    with pytest.raises(InputError, match=r"pad_collate: item 1 holds \['b'\], item 0 holds \['a'\]"):
        pad_collate([{"a": torch.zeros(2)}, {"b": torch.zeros(2)}])
    out = pad_collate([{"a": torch.ones(2)}, {"a": torch.ones(3)}])
    assert out["a"].tolist() == [[1, 1, 0], [1, 1, 1]] and out["_lengths"].tolist() == [2, 3]


def test_importing_kuration_and_its_reader_does_not_import_torch():
    program = "import sys, kuration, kuration.read; kuration.iter_shards; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
