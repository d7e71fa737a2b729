"""Integration against a real object store: Ceph radosgw, started by scripts/test.sh
(scripts/ceph_rgw.sh). Write, verify, read, resume after corruption, and the lease's
exclusive create, through the same fsspec configuration a deployment uses."""

import copy
import os
import uuid

import pytest

from kuration.output.lease import LeaseError
from kuration.read import load_committed, read_shard, verify_dataset
from tests.output.corpus import Corpus

ENDPOINT = os.environ.get("KURATION_CEPH_ENDPOINT")
pytestmark = pytest.mark.skipif(not ENDPOINT, reason="no Ceph radosgw: run through scripts/test.sh (it starts one)")


@pytest.fixture(scope="module")
def ceph(tmp_path_factory):
    import boto3
    import fsspec.config
    import s3fs

    saved = copy.deepcopy(fsspec.config.conf)
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("FSSPEC_S3", "AWS_")):
                env.delenv(name)
        env.setenv("FSSPEC_S3_ENDPOINT_URL", ENDPOINT)
        env.setenv("AWS_ACCESS_KEY_ID", "TESTKEY")
        env.setenv("AWS_SECRET_ACCESS_KEY", "TESTSECRET")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        fsspec.config.conf.pop("s3", None)
        fsspec.config.set_conf_env(fsspec.config.conf)
        s3fs.S3FileSystem.clear_instance_cache()
        client = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                              aws_access_key_id="TESTKEY", aws_secret_access_key="TESTSECRET")
        bucket = f"kuration-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        try:
            yield client, bucket
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            fsspec.config.conf.clear()
            fsspec.config.conf.update(saved)


def test_a_dataset_round_trips_through_radosgw(ceph, tmp_path):
    client, bucket = ceph
    corpus = Corpus(tmp_path / "corpus")
    url = f"s3://{bucket}/run1"
    first = corpus.write(url)
    assert verify_dataset(url).ok
    dataset = load_committed(url)
    assert read_shard(dataset, dataset.entries[0]).arrays["frame"].dtype.name == "uint8"
    key = f"run1/{first.manifest['entries'][0]['path']}"
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-1] ^= 0xFF
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    assert verify_dataset(url).bad_shards == (first.manifest["entries"][0]["path"],)
    again = corpus.write(url, resume=True)
    assert again.written == 1 and again.reused == len(first.manifest["entries"]) - 1 and verify_dataset(url).ok
    client.put_object(Bucket=bucket, Key="run1/.kuration-writer.lock", Body=b'{"pid": 2}')
    with pytest.raises(LeaseError, match="another writer holds this destination"):
        corpus.write(url, resume=True)  # radosgw answers the if-none-match create with 412
