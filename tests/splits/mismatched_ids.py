"""Landing zones whose universe ids do not name their recordings, as users write them.

The mistake issue 14 reports: ``universe.csv`` ``source`` ids written relative to the
landing zone (``recordings/site/flight_001.parquet``) instead of the recordings root
(``site/flight_001.parquet``). Shared by the core check's tests and the Dagster tests."""

from __future__ import annotations

import csv
import io
from pathlib import Path


def prefix_universe_sources(landing: Path, prefix: str = "recordings/") -> list[str]:
    """Rewrite ``landing/universe.csv`` with ``prefix`` before every ``source`` id (the rest
    of each row unchanged); returns the new ids in file order."""
    path = landing / "universe.csv"
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    for row in rows:
        row["source"] = prefix + row["source"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue())
    return [row["source"] for row in rows]
