"""The small landing zone ``tests/landing``'s fixtures write (3 sites, one 1-2 minute
recording each) and its settings (its ``curation.json``), for the tests that compare
against them and the docs test that runs the examples on it."""

from __future__ import annotations

import json
from pathlib import Path

from kuration.demo.corpus import write_demo_landing_zone

#: The curation.json of the ``zone`` fixture: budgets the small corpus fills, and a three-way random split.
SETTINGS = {"segment_window": 10, "segment_stride": 5,
            "budget": {"train_hours": 0.02, "val_hours": 0.005, "test_hours": 0.005, "span_seconds": 30},
            "split": {"strategy": "random", "seed": 2, "val_ratio": 0.34, "test_ratio": 0.34}}


def write_small_zone(folder: Path) -> Path:
    """The small landing zone, with :data:`SETTINGS` as its ``curation.json``, written at ``folder``."""
    zone = write_demo_landing_zone(folder, seed=11, sites=3, recordings_per_site=1, minutes=(1, 2))
    root = Path(zone.root)
    (root / "curation.json").write_text(json.dumps(SETTINGS))
    return root
