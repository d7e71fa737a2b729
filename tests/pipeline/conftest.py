"""Fixtures of the pipeline tests: six recordings of two drones over three sites, and the
same with one broken file added."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline.recordings import write_recording


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    for i in range(6):
        write_recording(root / f"site_{i % 3}" / f"rec_{i:02d}.parquet", seed=i, ticks=200 + 50 * i)
    return root


@pytest.fixture
def broken(recordings: Path) -> Path:
    pq.write_table(pa.table({"tick": [0, 1], "drone": ["a", "a"]}), recordings / "site_0" / "broken.parquet")
    return recordings
