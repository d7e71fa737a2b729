"""The shard source contract (:class:`kuration.testing.ShardSourceContract`) over a committed
dataset in a local folder (tests/remote runs it over S3)."""

from __future__ import annotations

from tests.kits.implementations import CommittedDatasets


class TestLocalCommittedDataset(CommittedDatasets):
    pass
