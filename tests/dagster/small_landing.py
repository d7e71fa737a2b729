"""The small demo landing zone the whole-graph tests run ``kuration run`` on: 6 recordings of
1 to 2 minutes at 3 sites, with a budget of a few minutes per split and a random split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kuration.demo.corpus import DEMO_OUTPUT_SPEC, DEMO_SCHEMA, DEMO_STRATEGY, write_demo_landing_zone


def small_settings(split_seed: int = 2) -> dict[str, Any]:
    """``curation.json`` for the small zone: budgets it can fill, and a three-way random split."""
    return {"budget": {"train_hours": 0.02, "val_hours": 0.01, "test_hours": 0.01, "span_seconds": 30},
            "split": {"strategy": "random", "seed": split_seed, "val_ratio": 0.34, "test_ratio": 0.34}}


def write_small_landing_zone(folder: Path, *, seed: int = 5, split_seed: int = 2) -> Path:
    """The zone under ``folder`` with :func:`small_settings` as its ``curation.json``; its root."""
    zone = write_demo_landing_zone(folder, seed=seed, recordings_per_site=2, sites=3, minutes=(1, 2))
    root = Path(zone.root)
    (root / "curation.json").write_text(json.dumps(small_settings(split_seed)))
    return root


def write_settings_files(root: Path) -> None:
    """The demo's ``schema.json``, ``strategy.json`` and ``output_spec.json`` under ``root``:
    what a hand-made landing zone needs besides its universe for the landing zone to open."""
    for name, doc in (("schema.json", DEMO_SCHEMA), ("strategy.json", DEMO_STRATEGY),
                      ("output_spec.json", DEMO_OUTPUT_SPEC)):
        (root / name).write_text(json.dumps(doc))
