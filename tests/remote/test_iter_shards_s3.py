"""iter_shards on an object store: datasets of all four containers uploaded to S3 on
loopback (moto server) read back in place, every shard verified before it is decoded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kuration.output.commit_protocol import MANIFEST_FILE
from kuration.read import DatasetIntegrityError, iter_shards, shard_entries
from kuration.read.committed import CommitError
from tests.output.committed_datasets import build, shard


def upload(s3_client, bucket: str, local: Path, prefix: str) -> str:
    """Every file of the local dataset ``local`` under ``<bucket>/<prefix>``; the dataset's URL."""
    name = bucket[len("s3://"):]
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        s3_client.put_object(Bucket=name, Key=f"{prefix}/{path.relative_to(local).as_posix()}", Body=path.read_bytes())
    return f"{bucket}/{prefix}"


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
def test_a_dataset_on_s3_reads_back_in_place(bucket, s3_client, tmp_path, container):
    url = upload(s3_client, bucket, build(tmp_path / "out", container), "run1")
    got = list(iter_shards(url, with_meta=True))
    assert [meta["n_steps"] for _, meta in got] == [8, 5, 3]
    assert [meta["location"] for _, meta in got] == [f"{url}/{meta['path']}" for _, meta in got]
    for seed, (arrays, meta) in enumerate(got):
        written = shard(meta["n_steps"], seed)
        for name, array in written.arrays.items():
            assert arrays[name].dtype == array.dtype and arrays[name].tobytes() == array.tobytes()
        assert arrays["_present"].tobytes() == written.present.tobytes()
    assert len(list(iter_shards(f"{url}/{MANIFEST_FILE}", split="test"))) == 1


def test_a_shard_changed_on_s3_is_refused_and_a_copied_prefix_still_reads(bucket, s3_client, tmp_path):
    local = build(tmp_path / "out", "npz")
    url = upload(s3_client, bucket, local, "run1")
    copy = upload(s3_client, bucket, local, "copies/run1-copy")  # the same dataset under another prefix
    entry = shard_entries(url)[1]
    # a plain seed-layout dataset (no versions): its shards sit under the root itself
    s3_client.put_object(Bucket=bucket[len("s3://"):], Key=f"run1/{entry['path']}", Body=b"\0" * entry["bytes"])
    shards = iter_shards(url)
    next(shards)
    with pytest.raises(DatasetIntegrityError, match=r"run1/train/src_1_shard0000\.npz: size or SHA-256 differs"):
        next(shards)
    assert len(list(iter_shards(copy))) == 3  # the copy reads its own objects, not the original's


def test_an_uncommitted_dataset_on_s3_is_refused(bucket, s3_client, tmp_path):
    local = build(tmp_path / "out", "npz")
    (local / "dataset.commit.json").unlink()
    url = upload(s3_client, bucket, local, "run1")
    with pytest.raises(CommitError, match=r"run1: no dataset\.commit\.json, so this is not a committed dataset"):
        iter_shards(url)


def test_a_legacy_manifest_dict_rebases_onto_an_s3_root(bucket, s3_client, tmp_path):
    local = build(tmp_path / "out", "json")
    url = upload(s3_client, bucket, local, "moved/run1")
    manifest = json.loads((local / MANIFEST_FILE).read_bytes())
    for entry in manifest["entries"]:
        entry["path"] = f"s3://old-bucket/run1/{entry['path']}"  # where an older writer put it
    got = [meta["location"] for _, meta in iter_shards(manifest, root=url, with_meta=True)]
    assert got == [f"{url}/{e['path'].split('/run1/', 1)[1]}" for e in manifest["entries"]]


def test_a_shard_dataset_on_s3_loads_in_two_dataloader_workers(bucket, s3_client, tmp_path):
    torch_data = pytest.importorskip("torch.utils.data")
    from kuration.torch import ShardDataset, pad_collate

    url = upload(s3_client, bucket, build(tmp_path / "out", "npz", rows=(8, 5, 8)), "run1")
    dataset = ShardDataset(url, split="train")
    dataset[0]  # the parent has used its s3fs instance before the workers fork
    batches = list(torch_data.DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=pad_collate, timeout=60))
    assert [b["pos"].shape[:2] for b in batches] == [(2, 8), (1, 8)]
