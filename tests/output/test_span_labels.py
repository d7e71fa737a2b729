"""Span labels describe every row written under them: a track whose length is not a
multiple of the segment stride ends with an end-aligned window, so the rows after the last
regular window are scored too, and no written row's speed is above its span's
``segment:speed.max`` (clip_aggregate ``max``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kuration.output import OutputSpec
from kuration.output.write_dataset import write_dataset
from kuration.read import load_committed, read_shard
from kuration.sources.schema import Schema
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.scoring.strategy import Strategy

SCHEMA = Schema.from_dict({"sample_hz": 10, "time": "tick", "fields": {"speed": {"dtype": "float32"}}})
SPEC = OutputSpec.from_dict({"shard_length": 16, "short_policy": "keep", "container": "npz", "modalities": {
    "speed": {"dtype": "float32", "shape": [], "source": "field:speed"},
    "speed_max": {"dtype": "float32", "shape": [], "source": "segment:speed.max"},
}})


def test_rows_after_the_last_regular_window_are_covered_by_their_span_label(tmp_path):
    rng = np.random.default_rng(3)
    steps = 237  # windows of 10 every 5: the regular windows end at 235
    root = tmp_path / "recordings"
    root.mkdir()
    for s in range(3):
        speed = rng.random(steps).astype(np.float32)
        speed[-2:] = 50.0 + s  # the fastest rows are the two no regular window reaches
        pq.write_table(pa.table({"tick": np.arange(steps), "speed": speed}), root / f"flight_{s}.parquet")
    result = write_dataset(
        tmp_path / "out", schema=SCHEMA, adapter=ParquetTickAdapter(root, SCHEMA),
        strategy=Strategy.from_dict({"method": "inclusion", "priority": {"speed.max": 1.0}}),
        segmenter=Segmenter(10, 5, unit="steps"), spec=SPEC, train_hours=1.0, test_hours=1.0, span_steps=40,
    )
    items = result.budget_plan.items
    assert set(items.column("status").cast(pa.string()).to_pylist()) == {"ok"}  # no unscored tail span
    dataset = load_committed(tmp_path / "out")
    checked = 0
    for entry in dataset.entries:
        shard = read_shard(dataset, entry)
        speed, label = shard.arrays["speed"][: shard.n_steps], shard.arrays["speed_max"][: shard.n_steps]
        assert (speed <= label).all(), f"{entry['path']}: a row is faster than its span's speed.max"
        checked += shard.n_steps
    assert checked == 3 * steps
    tails = items.filter(pc.equal(items.column("stop"), steps))
    assert tails.column("speed.max").to_pylist() == [50.0, 51.0, 52.0]
