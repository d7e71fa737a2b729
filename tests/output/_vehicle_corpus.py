"""A small multi-vehicle simulator corpus, shaped unlike the demo: several vehicles per tick
with string ids, camera frames in one ``.npz`` archive per run (one array per vehicle,
addressed ``<run>.frames.npz#<vehicle>/<row>``; the runs of one town keep a single array
instead, addressed ``#<row>``), vehicles that drop out for a while, and a split baked into
``universe.csv`` (a ``split`` column, grouped by town) and resolved the way the
``resolved_splits`` asset does.

Every frame is filled with one byte computed from (run, vehicle, tick), so a test can say
which frame must be in which shard row without reading the archives.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration.output import OutputSpec
from kuration.output.write_dataset import write_dataset
from kuration.sources.schema import Schema
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.splits.artifacts import SplitRequest, materialize_splits, read_split_assignments
from kuration.splits.universe_csv import read_universe_csv
from kuration.scoring.strategy import Strategy

SAMPLE_HZ = 10
TICKS = 240
FRAME = (4, 6, 3)
VEHICLES = ("bus_1", "car_7", "truck_2")
#: town -> its split in universe.csv; "west" keeps one array per archive (``#<row>`` refs)
TOWNS = {"north": "train", "south": "train", "east": "test", "west": "train"}
SINGLE_ARRAY_TOWN = "west"
RUNS_PER_TOWN = 2

SCHEMA = {
    "sample_hz": SAMPLE_HZ, "time": "tick", "entity": "vehicle",
    "fields": {"speed": {"dtype": "float32"}, "pos": {"dtype": "float32", "shape": [2]}},
    "media": {"cam": {"dtype": "uint8", "shape": list(FRAME), "provider": "npy_index"}},
}
STRATEGY = {"method": "inclusion", "priority": {"speed.mean": 1.0}}
SPEC = {"shard_length": 20, "short_policy": "pad", "container": "npz", "modalities": {
    "speed": {"dtype": "float32", "shape": [], "source": "field:speed"},
    "cam": {"dtype": "uint8", "shape": list(FRAME), "source": "media:cam"},
}}


def frame_value(run: int, vehicle: int, tick: int) -> int:
    return (tick * 3 + vehicle * 71 + run * 37) % 251 + 1  # never 0, the absent rows' value


def _present(run: int, vehicle: int) -> np.ndarray:
    """The truck drops out for a few seconds in every run; the others are always there."""
    present = np.ones(TICKS, bool)
    if VEHICLES[vehicle] == "truck_2":
        present[60 + 10 * run: 110 + 10 * run] = False
    return present


class VehicleCorpus:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.recordings = self.root / "recordings"
        self.sources: list[str] = []
        rows = []
        for t, town in enumerate(TOWNS):
            for r in range(RUNS_PER_TOWN):
                run = t * RUNS_PER_TOWN + r
                source = f"{town}/run_{r}.parquet"
                self._write_run(run, town, r)
                self.sources.append(source)
                rows.append(f"{source},0-3,{TOWNS[town]},{town}")
        (self.root / "universe.csv").write_text("source,index,split,group\n" + "\n".join(rows) + "\n")
        self.schema = Schema.from_dict(SCHEMA)
        self.adapter = ParquetTickAdapter(self.recordings, self.schema)
        self.strategy = Strategy.from_dict(STRATEGY)
        self.segmenter = Segmenter(4, 4, unit="seconds")
        self.spec = OutputSpec.from_dict(SPEC)
        self.storage = self.root / "storage"
        materialize_splits(read_universe_csv(self.root / "universe.csv"), SplitRequest(from_split_column=True),
                           self.storage)
        self.assignments, self.splits_sha256 = read_split_assignments(self.storage)

    def _write_run(self, run: int, town: str, r: int) -> None:
        folder = self.recordings / town
        folder.mkdir(parents=True, exist_ok=True)
        ticks, vehicles, speeds, positions, refs = [], [], [], [], []
        frames: dict[str, list[np.ndarray]] = {v: [] for v in VEHICLES}
        stacked: list[np.ndarray] = []
        archive = f"{town}/run_{r}.frames.npz"
        for tick in range(TICKS):
            for v, name in enumerate(VEHICLES):
                if not _present(run, v)[tick]:
                    continue
                frame = np.full(FRAME, frame_value(run, v, tick), np.uint8)
                if town == SINGLE_ARRAY_TOWN:
                    refs.append(f"{archive}#{len(stacked)}")
                    stacked.append(frame)
                else:
                    refs.append(f"{archive}#{name}/{len(frames[name])}")
                    frames[name].append(frame)
                ticks.append(tick)
                vehicles.append(name)
                speeds.append(np.float32(5 + v + run + np.sin(tick / 17.0)))
                positions.append([tick * 0.1 + v, run * 1.0])
        if town == SINGLE_ARRAY_TOWN:
            np.savez(folder / f"run_{r}.frames.npz", np.stack(stacked))
        else:
            np.savez_compressed(folder / f"run_{r}.frames.npz", **{n: np.stack(f) for n, f in frames.items()})
        pq.write_table(pa.table({
            "tick": np.asarray(ticks, np.int64), "vehicle": vehicles, "speed": np.asarray(speeds, np.float32),
            "pos": pa.array(positions, pa.list_(pa.float32(), 2)), "cam": refs,
        }), folder / f"run_{r}.parquet")

    def write(self, out, **kwargs):
        options = {"train_hours": 60 / 3600, "test_hours": 20 / 3600, "span_seconds": 8.0,
                   "split_assignments": self.assignments, **kwargs}
        return write_dataset(out, schema=self.schema, adapter=kwargs.pop("adapter", self.adapter),
                             strategy=self.strategy, segmenter=self.segmenter, spec=self.spec,
                             **{k: v for k, v in options.items() if k != "adapter"})

    def expected_frame(self, source_id: str, vehicle: str, tick: int) -> int:
        return frame_value(self.sources.index(source_id), VEHICLES.index(vehicle), tick)
