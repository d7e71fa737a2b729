"""The shard source contract (:class:`kuration.testing.ShardSourceContract`) over a committed
dataset on S3 on loopback (the moto server)."""

from __future__ import annotations

import pytest

from tests.kits.implementations import CommittedDatasets


class TestS3CommittedDataset(CommittedDatasets):
    @pytest.fixture(autouse=True)
    def _base(self, bucket):
        self.base = bucket
