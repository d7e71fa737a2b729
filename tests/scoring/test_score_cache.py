"""The score cache contract, run against the in-memory cache and the fsspec cache over a
local folder (tests/remote runs it over S3)."""

from __future__ import annotations

import pytest

from kuration.scoring.cache import MemoryScoreCache
from kuration.testing import FsspecScoreCacheContract, ScoreCacheContract


class TestMemoryScoreCache(ScoreCacheContract):
    def make_cache(self):
        return MemoryScoreCache()

    def assert_nothing_stored(self, cache):
        assert cache.entries == {}


class TestLocalFsspecScoreCache(FsspecScoreCacheContract):
    @pytest.fixture(autouse=True)
    def _base(self, tmp_path):
        self.base = str(tmp_path / "ckpt")

    def test_entries_are_read_memory_mapped(self, cache):
        assert cache.maps_locally
