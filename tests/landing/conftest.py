"""Fixtures: ``template`` (a small demo landing zone: 3 sites, one 1-2 minute recording each,
with :data:`SETTINGS` as its ``curation.json``; written once per session) and ``zone`` (a
fresh copy of it per test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kuration.demo.corpus import write_demo_landing_zone
from tests.landing.small_zone import SETTINGS
from tests.landing_check.landing_factory import copy_zone


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    zone = write_demo_landing_zone(tmp_path_factory.mktemp("landing_template") / "landing", seed=11, sites=3,
                                   recordings_per_site=1, minutes=(1, 2))
    root = Path(zone.root)
    (root / "curation.json").write_text(json.dumps(SETTINGS))
    return root


@pytest.fixture
def zone(template: Path, tmp_path: Path) -> Path:
    return copy_zone(template, tmp_path / "landing")
