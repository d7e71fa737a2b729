"""The Ceph radosgw scripts/test.sh started (scripts/ceph_rgw.sh, ``KURATION_CEPH_ENDPOINT``):
fsspec and botocore pointed at it through the environment, as a deployment points them, and a
bucket of the package's own on it. The environment, fsspec's config and s3fs's instance cache
are restored when the package's tests are done; the bucket is left to the store, which
scripts/test.sh wipes with its folder."""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

ENDPOINT = os.environ.get("KURATION_CEPH_ENDPOINT")
ACCESS_KEY = "TESTKEY"  # the user scripts/ceph_rgw.sh creates
SECRET_KEY = "TESTSECRET"
REGION = "us-east-1"


@dataclass(frozen=True)
class CephBucket:
    """A bucket on the gateway, and a plain boto3 client on it (which reads "out of band")."""

    client: Any
    name: str

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key under ``prefix``, as the gateway lists them (all pages)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


@pytest.fixture(scope="package")
def ceph() -> Iterator[CephBucket]:
    if not ENDPOINT:
        pytest.skip("no Ceph radosgw: run through scripts/test.sh (it starts one), or export "
                    "KURATION_CEPH_ENDPOINT=$(scripts/ceph_rgw.sh start DIR)")
    import boto3
    import fsspec.config
    import s3fs

    saved = copy.deepcopy(fsspec.config.conf)
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("FSSPEC_S3", "AWS_")):  # nothing of the machine's own AWS setup
                env.delenv(name)
        env.setenv("FSSPEC_S3_ENDPOINT_URL", ENDPOINT)
        env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        # fsspec reads FSSPEC_* once, at import; re-read them now, then drop cached instances
        fsspec.config.conf.pop("s3", None)
        fsspec.config.set_conf_env(fsspec.config.conf)
        s3fs.S3FileSystem.clear_instance_cache()
        client = boto3.client("s3", endpoint_url=ENDPOINT, region_name=REGION,
                              aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        bucket = f"kuration-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        try:
            yield CephBucket(client, bucket)
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            fsspec.config.conf.clear()
            fsspec.config.conf.update(saved)
