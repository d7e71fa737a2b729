"""FsspecDestination: the destination contract over S3 on loopback (the moto server)."""

from __future__ import annotations

import fsspec
import pytest

from kuration.output.destinations import FsspecDestination, open_destination
from kuration.testing import DestinationContract, Killed


class TestS3Destination(DestinationContract):
    @pytest.fixture(autouse=True)
    def _base(self, bucket):
        self.base = bucket

    def make_destination(self, place):
        return FsspecDestination(f"{self.base}/{place}")

    def dying_at_publish(self, monkeypatch):
        fs = fsspec.filesystem("s3")  # the instance every s3:// destination here shares

        def cp_file(src, dst, *args, **kwargs):  # the move's copy to the final name
            raise Killed(f"killed before moving {src} to {dst}")

        monkeypatch.setattr(fs, "cp_file", cp_file)
        monkeypatch.setattr(fs, "rm_file", lambda *args, **kwargs: None)  # a killed process cleans nothing up

    def test_open_destination_gives_an_fsspec_destination_for_s3_urls(self):
        assert isinstance(open_destination(f"{self.base}/a"), FsspecDestination)
