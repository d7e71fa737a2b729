"""A real S3-protocol endpoint on loopback for the remote tests.

``moto[server]``'s ``ThreadedMotoServer`` serves S3 over HTTP on 127.0.0.1 (a free port
the kernel picks) for the whole ``tests/remote`` package. Kuration itself is given no
storage options: like a deployment, it reaches the endpoint through the environment
(``FSSPEC_S3_ENDPOINT_URL`` is fsspec's per-protocol config, ``AWS_*`` are botocore's
credentials). The environment, fsspec's config and s3fs's instance cache are restored
when the package's tests are done, and the server is stopped.

Every test gets its own bucket (``bucket`` fixture), so no test sees another's objects or
another's cached listings. ``s3_client`` is a plain boto3 client: it writes "out of band",
the way another process would, without touching the s3fs instance Kuration uses.
"""

from __future__ import annotations

import copy
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

boto3 = pytest.importorskip("boto3")  # all three come with the [dev] extra
pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

ACCESS_KEY = "kuration-test-key"
SECRET_KEY = "kuration-test-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    url: str

    def client(self):
        return boto3.client(
            "s3", endpoint_url=self.url, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        )


def _forget_s3fs_instances() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="package")
def s3_endpoint(tmp_path_factory) -> Iterator[S3Endpoint]:
    """Start the S3 server and point fsspec / botocore at it through the environment."""
    import fsspec.config

    werkzeug_log = logging.getLogger("werkzeug")
    old_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # port 0: a free one
    server.start()
    saved_conf = copy.deepcopy(fsspec.config.conf)
    try:
        host, port = server.get_host_and_port()
        endpoint = S3Endpoint(f"http://{host}:{port}")
        nowhere = tmp_path_factory.mktemp("aws-home") / "absent"
        with pytest.MonkeyPatch.context() as env:
            # nothing from the machine's own AWS / fsspec setup may leak in
            for name in list(os.environ):
                if name.startswith(("FSSPEC_S3", "AWS_")):
                    env.delenv(name)
            env.setenv("FSSPEC_S3_ENDPOINT_URL", endpoint.url)
            env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            env.setenv("AWS_DEFAULT_REGION", REGION)
            env.setenv("AWS_CONFIG_FILE", str(nowhere))
            env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
            env.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never probe an instance-metadata address
            # fsspec reads FSSPEC_* once, at import; re-read them now, then drop cached instances
            fsspec.config.conf.pop("s3", None)
            fsspec.config.set_conf_env(fsspec.config.conf)
            _forget_s3fs_instances()
            try:
                yield endpoint
            finally:
                _forget_s3fs_instances()
                fsspec.config.conf.clear()
                fsspec.config.conf.update(saved_conf)
    finally:
        server.stop()
        werkzeug_log.setLevel(old_level)


@pytest.fixture
def s3_client(s3_endpoint: S3Endpoint):
    return s3_endpoint.client()


@pytest.fixture
def bucket(s3_endpoint: S3Endpoint, s3_client) -> str:
    """A fresh, empty bucket for this test, as ``s3://<name>``."""
    name = f"kuration-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return f"s3://{name}"


@pytest.fixture
def s3fs_fs(s3_endpoint: S3Endpoint):
    """The s3fs filesystem Kuration itself gets for ``s3://`` URLs (same config, same instance)."""
    import fsspec

    return fsspec.filesystem("s3")
