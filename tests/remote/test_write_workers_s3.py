"""``write_workers=2`` onto S3 on loopback: each worker rebuilds the s3fs filesystem from the
destination it is sent and reaches the endpoint through the environment the parent has
when the pool starts; the objects are the ones one process writes."""

from __future__ import annotations

import pytest

from kuration.read import verify_dataset
from tests.output.corpus import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("remote-workers-corpus"))


def _objects(s3_client, bucket: str, prefix: str) -> dict[str, bytes]:
    name = bucket[len("s3://"):]
    out = {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=name, Prefix=f"{prefix}/"):
        for item in page.get("Contents", []):
            key = item["Key"][len(prefix) + 1:]
            # config.json, the commit record and the publish record hold when, and digests over that
            if not key.endswith(("config.json", "dataset.commit.json")) and not key.startswith("published/"):
                out[key] = s3_client.get_object(Bucket=name, Key=item["Key"])["Body"].read()
    return out


def test_two_write_workers_put_the_objects_one_process_puts(corpus, bucket, s3_client):
    one = corpus.write(f"{bucket}/one")
    two = corpus.write(f"{bucket}/two", write_workers=2)
    assert two.manifest == one.manifest and two.written == one.written > 0
    assert verify_dataset(f"{bucket}/two").ok
    objects = _objects(s3_client, bucket, "two")
    assert objects == _objects(s3_client, bucket, "one") and "versions/v1/dataset_manifest.json" in objects
    assert not [k for k in objects if ".attempt-" in k or ".kuration_resume/" in k or "writer.lock" in k]
