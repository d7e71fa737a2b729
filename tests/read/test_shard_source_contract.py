"""The shard source contract (:class:`kuration.testing.ShardSourceContract`) over a committed
dataset in a local folder (tests/remote runs it over S3)."""

from __future__ import annotations

import pytest

from kuration.read import load_committed
from kuration.testing import ShardSourceContract


class TestLocalCommittedDataset(ShardSourceContract):
    @pytest.fixture(autouse=True)
    def _base(self, tmp_path):
        self.base = tmp_path

    def make_root(self, place):
        return str(self.base / place)

    def open_source(self, root, *, untrusted, decode_timeout):
        return load_committed(root, untrusted=untrusted, decode_timeout=decode_timeout)
