"""Integration against a real object store: Ceph radosgw, started by scripts/test.sh
(scripts/ceph_rgw.sh). Write, verify, read, resume after corruption, and the lease's
exclusive create, through the same fsspec configuration a deployment uses. The dataset root
holds versions (docs/versions.md) and its shards in the root's shard pool: a corrupted pool
object is never overwritten (the resume refuses, naming it); once it is removed, the resume
commits and publishes a new version that writes it again, and the old version, which names
the same object, verifies again."""

import pytest

from kuration.errors import CommitError
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
    key = f"run1/{first.manifest['entries'][0]['stored_at']}"
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-1] ^= 0xFF
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    assert verify_dataset(url).bad_shards == (first.manifest["entries"][0]["path"],)
    with pytest.raises(CommitError, match="the shard pool already holds an object under this content key, with other"):
        corpus.write(url, resume=True)  # radosgw answers the if-none-match put with 412: never overwritten
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == bytes(body)
    client.delete_object(Bucket=bucket, Key=key)
    again = corpus.write(url, resume=True)
    assert again.written == 1 and again.reused == len(first.manifest["entries"]) - 1 and verify_dataset(url).ok
    assert load_committed(url).root == f"{url}/versions/v2"  # the kept shards named again, not copied
    assert verify_dataset(url, version="v1").ok  # v1 names the object written again
    client.put_object(Bucket=bucket, Key="run1/.kuration-writer.lock", Body=b'{"pid": 2}')
    with pytest.raises(LeaseError, match="another writer holds this destination"):
        corpus.write(url, resume=True)  # radosgw answers the if-none-match create with 412
