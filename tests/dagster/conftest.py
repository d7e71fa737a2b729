import json
from pathlib import Path

import pytest
from dagster import instance_for_test

from kuration.demo_corpus import write_demo_landing_zone
from kuration_resources import LandingZoneResource, StorageRootResource


@pytest.fixture
def instance():
    with instance_for_test() as inst:
        yield inst


@pytest.fixture
def small_landing(tmp_path: Path) -> Path:
    """A hand-made landing zone: 3 groups (sites), 6 recordings, 4 clips each."""
    root = tmp_path / "landing"
    root.mkdir()
    rows = ["source,index,group"]
    for site in ("site_a", "site_b", "site_c"):
        for rec in (1, 2):
            rows.append(f"{site}/rec_{rec}.parquet,0-3,{site}")
    (root / "universe.csv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def resources(tmp_path: Path, small_landing: Path) -> dict:
    return {
        "storage_root": StorageRootResource(url=str(tmp_path / "storage")),
        "landing_zone": LandingZoneResource(url=str(small_landing)),
    }


@pytest.fixture
def demo_landing(tmp_path: Path) -> Path:
    zone = write_demo_landing_zone(tmp_path / "demo_landing", seed=3, recordings_per_site=2)
    return Path(zone.root)


def write_rule(path: Path, rule: dict) -> str:
    path.write_text(json.dumps(rule))
    return str(path)
