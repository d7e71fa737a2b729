"""The shard source contract (:class:`kuration.testing.ShardSourceContract`) over a committed
dataset on S3 on loopback (the moto server)."""

from __future__ import annotations

import pytest

from kuration.read import load_committed
from kuration.testing import ShardSourceContract


class TestS3CommittedDataset(ShardSourceContract):
    @pytest.fixture(autouse=True)
    def _base(self, bucket):
        self.base = bucket

    def make_root(self, place):
        return f"{self.base}/{place}"

    def open_source(self, root, *, untrusted, decode_timeout):
        return load_committed(root, untrusted=untrusted, decode_timeout=decode_timeout)
