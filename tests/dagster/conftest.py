from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from kuration.demo.corpus import write_demo_landing_zone
from tests.dagster.small_landing import write_settings_files
from kuration.landing.recordings import recording_name
from kuration_assets import scored_segments, source_partitions
from kuration_resources import LandingZoneResource, StorageRootResource
from splits_assets import resolved_splits, universe


@pytest.fixture
def instance():
    """An in-memory instance: what in-process ``materialize`` runs and automation ticks need.
    ``instance_for_test``'s sqlite one opens a database engine for every event it stores,
    which made half of these tests' time; a test whose runs leave this process (a run
    worker, a code server, a step of the multiprocess executor) makes a persistent one."""
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def small_landing(tmp_path: Path) -> Path:
    """A hand-made landing zone: 3 groups (sites), 6 recordings, 4 clips each. The recordings
    are empty placeholders under ``recordings/`` (the split assets never read them), there so
    the universe's source ids name files, as the ``universe_sources`` check requires; the
    settings files are the demo's (every asset opens the whole landing zone)."""
    root = tmp_path / "landing"
    root.mkdir()
    write_settings_files(root)
    rows = ["source,index,group"]
    for site in ("site_a", "site_b", "site_c"):
        (root / "recordings" / site).mkdir(parents=True)
        for rec in (1, 2):
            rows.append(f"{site}/rec_{rec}.parquet,0-3,{site}")
            (root / "recordings" / site / f"rec_{rec}.parquet").write_bytes(b"")
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


@pytest.fixture
def scored_landing(tmp_path: Path) -> Path:
    """The demo landing zone the budget and dataset assets are tested on: 3 sites, 2 recordings each."""
    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=2, sites=3, minutes=(1, 2))
    return Path(zone.root)


@pytest.fixture
def scored(tmp_path: Path, scored_landing: Path, instance) -> dict:
    """Universe, a split by group and every source scored: what budget_plan needs upstream."""
    resources = {
        "storage_root": StorageRootResource(url=str(tmp_path / "storage")),
        "landing_zone": LandingZoneResource(url=str(scored_landing)),
    }
    split = {"ops": {"resolved_splits": {"config": {"strategy": "random", "seed": 2, "val_ratio": 0.34,
                                                    "test_ratio": 0.34}}}}
    assert materialize([universe, resolved_splits], resources=resources, instance=instance, run_config=split).success
    root = scored_landing / "recordings"
    names = sorted(recording_name(p.relative_to(root).as_posix()) for p in root.rglob("*.parquet"))
    instance.add_dynamic_partitions(source_partitions.name, names)
    assert materialize([scored_segments], resources=resources, instance=instance, tags={
        "dagster/asset_partition_range_start": names[0], "dagster/asset_partition_range_end": names[-1]}).success
    return resources
