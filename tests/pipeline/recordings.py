"""Drone recordings for the scoring tests, and the schema, strategy and segmenter that score
them: two drones per file, a position, a battery running down, the wind, and rare
``near_miss`` events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.sources.schema import Schema

SCHEMA = Schema.from_dict({
    "sample_hz": 10, "time": "tick", "entity": "drone",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "battery": {"dtype": "float32"}},
    "globals": {"wind": {"dtype": "float32"}}, "tags": "events",
})
STRATEGY = Strategy.from_dict({
    "method": "inclusion", "priority": {"battery.min": -1.0, "tag.near_miss": 5.0}, "tags": ["near_miss"],
})
SEGMENTER = Segmenter(10, 5, unit="seconds")


def write_recording(path: Path, *, seed: int, ticks: int = 300, drones=("a", "b")) -> None:
    rng = np.random.default_rng(seed)
    n = ticks * len(drones)
    table = pa.table({
        "tick": np.repeat(np.arange(ticks), len(drones)),
        "drone": np.tile(np.asarray(drones), ticks),
        "pos": pa.array(rng.normal(size=(n, 3)).astype("float32").tolist(), pa.list_(pa.float32(), 3)),
        "battery": np.linspace(1.0, 0.1, n).astype("float32"),
        "wind": np.repeat(rng.normal(size=ticks), len(drones)).astype("float32"),
        "events": [["near_miss"] if rng.random() < 0.02 else [] for _ in range(n)],
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def assert_same_scoring(got, expected) -> None:
    """``got`` (a :class:`~kuration.scoring.ScoringResult`) scored exactly what ``expected``
    did: the same sources in the same order with the same outcomes, and the same segment
    table bit for bit: schema (names, types, metadata), every row in order, float columns
    compared by their bits (a -0.0 or another NaN differs), nulls in the same places."""
    import numpy as np

    assert got.run_fingerprint == expected.run_fingerprint
    assert [(o.source_id, o.status, o.segments, o.error) for o in got.outcomes] == [
        (o.source_id, o.status, o.segments, o.error) for o in expected.outcomes]
    table, reference = got.segments, expected.segments
    assert table.schema.equals(reference.schema, check_metadata=True), (table.schema, reference.schema)
    assert table.num_rows == reference.num_rows
    for field in reference.schema:
        column, wanted = table.column(field.name).combine_chunks(), reference.column(field.name).combine_chunks()
        assert column.is_null().to_pylist() == wanted.is_null().to_pylist(), field.name
        if pa.types.is_floating(field.type):
            bits = np.dtype(f"u{field.type.bit_width // 8}")
            assert np.array_equal(column.to_numpy(zero_copy_only=False).view(bits),
                                  wanted.to_numpy(zero_copy_only=False).view(bits)), field.name
        else:
            assert column.to_pylist() == wanted.to_pylist(), field.name
