"""Integration against a real object store: Ceph radosgw, started by scripts/test.sh
(scripts/ceph_rgw.sh). Write, verify, read, resume after corruption, and the lease's
exclusive create, through the same fsspec configuration a deployment uses. The dataset root
holds versions (docs/versions.md): the resume after corruption commits and publishes a new
one, and the corrupted version stays as it was, readable by name."""

import pytest

from kuration.output.lease import LeaseError
from kuration.read import load_committed, read_shard, verify_dataset
from tests.output.corpus import Corpus


def test_a_dataset_round_trips_through_radosgw(ceph, tmp_path):
    client, bucket = ceph.client, ceph.name
    corpus = Corpus(tmp_path / "corpus")
    url = f"s3://{bucket}/run1"
    first = corpus.write(url)
    assert verify_dataset(url).ok
    dataset = load_committed(url)
    assert read_shard(dataset, dataset.entries[0]).arrays["frame"].dtype.name == "uint8"
    assert dataset.root == f"{url}/versions/v1"
    key = f"run1/versions/v1/{first.manifest['entries'][0]['path']}"
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-1] ^= 0xFF
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    assert verify_dataset(url).bad_shards == (first.manifest["entries"][0]["path"],)
    again = corpus.write(url, resume=True)
    assert again.written == 1 and again.reused == len(first.manifest["entries"]) - 1 and verify_dataset(url).ok
    assert load_committed(url).root == f"{url}/versions/v2"  # the kept shards copied server-side, v1 untouched
    assert verify_dataset(url, version="v1").bad_shards == (first.manifest["entries"][0]["path"],)
    client.put_object(Bucket=bucket, Key="run1/.kuration-writer.lock", Body=b'{"pid": 2}')
    with pytest.raises(LeaseError, match="another writer holds this destination"):
        corpus.write(url, resume=True)  # radosgw answers the if-none-match create with 412
