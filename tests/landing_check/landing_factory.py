"""Landing zones for the landing-check tests: a small demo corpus written once per session
and copied per test, and the ways a user's landing zone goes wrong, one function each."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kuration.demo.corpus import write_demo_landing_zone

#: The two recordings of the small demo zone, as the recordings root lists them.
RECORDINGS = ("airfield_north/flight_001.parquet", "airfield_south/flight_001.parquet")


def write_template(root: Path) -> Path:
    """The small demo landing zone (2 sites, one 1-2 minute recording each) under ``root``."""
    zone = write_demo_landing_zone(root, seed=11, sites=2, recordings_per_site=1, minutes=(1, 2))
    return Path(zone.root)


def copy_zone(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    return dest


def write_curation(zone: Path, settings: dict) -> Path:
    path = zone / "curation.json"
    path.write_text(json.dumps(settings))
    return path


def rewrite_recording(zone: Path, source_id: str, *, drop: str | None = None,
                      ref_prefix: str | None = None, recordings: str = "recordings") -> None:
    """Rewrite one recording: without column ``drop``, or with ``ref_prefix`` put before every
    ``frame`` media reference."""
    path = zone / recordings / source_id
    table = pq.read_table(path)
    if drop is not None:
        table = table.drop_columns([drop])
    if ref_prefix is not None:
        index = table.column_names.index("frame")
        table = table.set_column(index, "frame", pc.binary_join_element_wise(
            pa.scalar(ref_prefix), table.column("frame"), ""))
    pq.write_table(table, path)


def rewrite_universe(zone: Path, *, source_prefix: str = "", index: str | None = None) -> None:
    """Rewrite ``universe.csv``: every ``source`` with ``source_prefix`` before it, and the
    first row's ``index`` set to ``index``."""
    rows = list(csv.DictReader(io.StringIO((zone / "universe.csv").read_text())))
    for row in rows:
        row["source"] = source_prefix + row["source"]
    if index is not None:
        rows[0]["index"] = index
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (zone / "universe.csv").write_text(out.getvalue())
