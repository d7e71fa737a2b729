"""The score cache contract, run against the fsspec cache on S3 on loopback (the moto server)."""

from __future__ import annotations

import pytest

from kuration.testing import FsspecScoreCacheContract


class TestS3ScoreCache(FsspecScoreCacheContract):
    @pytest.fixture(autouse=True)
    def _base(self, bucket):
        self.base = f"{bucket}/ckpt"

    def test_remote_entries_are_not_memory_mapped(self, cache):
        assert not cache.maps_locally
