"""Fixtures for the deployment tests: a fresh database on the PostgreSQL server that
scripts/test.sh started (scripts/postgres.sh), and an S3 endpoint for the compute logs
(``moto[server]`` on 127.0.0.1, a free port), set in the environment the way
deploy/dagster.yaml reads them."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.instance import deploy_home, fresh_database, postgres_server_url

REGION = "us-east-1"


@dataclass(frozen=True)
class Deployment:
    """What deploy/dagster.yaml was pointed at: the database, the compute-log bucket, the home."""

    postgres_url: str
    bucket: str
    s3: object  # a boto3 S3 client on the endpoint
    home: Path


@pytest.fixture(scope="package")
def s3_endpoint() -> Iterator[str]:
    """One S3 server for the package's modules; each test makes a bucket of its own on it."""
    moto_server = pytest.importorskip("moto.server")
    werkzeug_log = logging.getLogger("werkzeug")
    old_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug_log.setLevel(old_level)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_database(postgres_server_url()) as url:
        yield url


@pytest.fixture
def deployment(postgres_url: str, s3_endpoint: str, tmp_path: Path, monkeypatch) -> Deployment:
    """The environment deploy/dagster.yaml reads, pointing at this test's database and bucket;
    ``DAGSTER_HOME`` holds the file as it is."""
    import boto3

    for name in list(os.environ):
        if name.startswith(("FSSPEC_S3", "AWS_")):  # nothing of the machine's own AWS setup
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "kuration-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kuration-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = f"kuration-logs-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION)
    client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("KURATION_POSTGRES_URL", postgres_url)
    monkeypatch.setenv("KURATION_COMPUTE_LOG_BUCKET", bucket)
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3_endpoint)
    home = deploy_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return Deployment(postgres_url=postgres_url, bucket=bucket, s3=client, home=home)
