"""A landing zone that grows by one recording, for the shard-reuse tests: four one-minute
demo recordings (two sites, two each), of which ``airfield_south/flight_002`` arrives late: the
first plan is made over the pool scored before it landed (:attr:`GrowingCorpus.before`), the
next over every recording.
Sources keep their split whatever arrives (a fixed assignment by site, as a stable split
extension gives), and the budget is larger than the pool, so every span is admitted and
a new recording only adds spans."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kuration.budget import BudgetOptions, plan_budget
from kuration.demo.corpus import write_demo_landing_zone
from kuration.output import OutputSpec
from kuration.output.write_dataset import write_planned_dataset
from kuration.scoring import score_sources
from kuration.landing.settings import load_curation_settings
from kuration.sources import ParquetTickAdapter
from tests.output.corpus import SPEC, planned_write_kwargs

LATE = "airfield_south/flight_002"
STAGE_OF_SITE = {"airfield_north": "train", "airfield_south": "test"}


class GrowingCorpus:
    def __init__(self, root: Path):
        zone = write_demo_landing_zone(root / "landing", seed=5, recordings_per_site=2, sites=2, minutes=(1, 1))
        self.landing = Path(zone.root)
        self.recordings = self.landing / "recordings"
        self.settings = load_curation_settings(self.landing / "schema.json", self.landing / "strategy.json",
                                               window=10, stride=5)
        self.schema = self.settings.schema
        self.adapter = ParquetTickAdapter(self.recordings, self.schema)
        self.spec = OutputSpec.from_dict(SPEC)
        every = score_sources(self.adapter, segmenter=self.settings.segmenter, strategy=self.settings.strategy)
        segments = every.segments
        late = f"{LATE}.parquet"
        self.before = segments.filter(pa.compute.not_equal(segments.column("source_id"), late))
        self.after = segments
        self.late_source = late
        sources = sorted(set(segments.column("source_id").to_pylist()))
        site = [s.split("/")[0] for s in sources]
        self.assignments = pa.table({"stage": [STAGE_OF_SITE[x] for x in site], "source": sources, "group": site})

    def plan(self, segments=None, **budget):
        """The plan over ``segments`` (default: every recording, the late one included)."""
        budget = {"train_hours": 1.0, "test_hours": 1.0, "span_seconds": 10.0, **budget}
        options = BudgetOptions(**budget, chunking=self.spec.chunking)
        return plan_budget(self.after if segments is None else segments, options, strategy=self.settings.strategy,
                           split_assignments=self.assignments)

    def revise_late_source(self) -> ParquetTickAdapter:
        """Rewrite the late recording with every battery value scaled by 0.999, so its content
        hash (its identity) changes; the adapter that reads the corpus as it now is."""
        path = self.recordings / self.late_source
        table = pq.read_table(path)
        battery = table.column("battery")
        pq.write_table(table.set_column(table.schema.get_field_index("battery"), "battery",
                                        pc.multiply(battery, pa.scalar(0.999, battery.type))), path)
        return ParquetTickAdapter(self.recordings, self.schema)

    def write(self, out, plan=None, spec=None, adapter=None, **kwargs):
        return write_planned_dataset(out, plan or self.plan(), adapter=adapter or self.adapter, schema=self.schema,
                                     spec=spec or self.spec, **planned_write_kwargs(**kwargs))
