"""iter_shards on an object store: datasets of all four containers uploaded to S3 on
loopback (moto server) read back in place, every shard verified before it is decoded."""

from __future__ import annotations

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
