"""Fixtures: ``template`` (a small demo landing zone: 3 sites, one 1-2 minute recording each,
with :data:`SETTINGS` as its ``curation.json``; written once per session) and ``zone`` (a
fresh copy of it per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.landing.small_zone import write_small_zone
from tests.landing_check.landing_factory import copy_zone


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_zone(tmp_path_factory.mktemp("landing_template") / "landing")


@pytest.fixture
def zone(template: Path, tmp_path: Path) -> Path:
    return copy_zone(template, tmp_path / "landing")
