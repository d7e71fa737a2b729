"""The whole graph, ``kuration run`` as a user runs it, with the storage root on the Ceph
radosgw scripts/test.sh started: every artifact from the universe to the rollout store is
an object in the bucket, every check of every asset passes, and what the graph committed
there verifies and holds its lineage when read back over S3."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from kuration.read import load_committed, verify_dataset
from kuration.rollouts import validate_rollout_zarr_store
from kuration.rollouts.build import check_rollout_lineage
from kuration_cli.graph_run import JOB_ORDER, run_main
from tests.dagster.small_landing import write_small_landing_zone

PREFIX = "graph"


@pytest.mark.slow
def test_the_whole_graph_runs_with_its_storage_root_in_a_ceph_bucket(ceph, tmp_path: Path, monkeypatch):
    from dagster import DagsterEventType, DagsterInstance

    from kuration_definitions import build_definitions

    landing = write_small_landing_zone(tmp_path / "landing")
    home = tmp_path / "dagster_home"  # a remote storage root needs a local instance
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    root = f"s3://{ceph.name}/{PREFIX}"
    lines: list[str] = []
    code = run_main(Namespace(landing=str(landing), storage=root, config=None), out=lines.append)
    out = "\n".join(lines)
    assert code == 0, out
    assert f"storage root: {root}" in out and f"kuration run: {len(JOB_ORDER)} runs succeeded" in out

    # every check the graph defines ran in one of the runs, and passed
    monkeypatch.setenv("KURATION_LANDING_ZONE", str(landing))
    defined = {(key.asset_key.to_user_string(), key.name)
               for key in build_definitions().resolve_asset_graph().asset_check_keys}
    with DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert sorted(run.job_name for run in runs) == sorted(JOB_ORDER) and all(run.is_success for run in runs)
        evaluations = [entry.dagster_event.event_specific_data for run in runs for entry in instance.all_logs(
            run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)]
    verdicts = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in evaluations}
    assert set(verdicts) == defined and all(verdicts.values()), verdicts

    # read back over S3, as a trainer elsewhere would
    dataset = f"{root}/dataset"
    assert verify_dataset(dataset).ok
    committed = load_committed(dataset)
    assert committed.entries
    store = f"{root}/rollouts/rollouts.zarr"
    validation = validate_rollout_zarr_store(store)
    assert validation.ok and validation.num_rollouts > 0, validation.errors
    lineage = check_rollout_lineage(store, dataset=dataset, splits_root=root)
    assert lineage.passed, lineage.errors

    # the artifacts are objects in the bucket, as the gateway itself lists them
    keys = ceph.keys(f"{PREFIX}/")
    folders = {key.split("/")[1] for key in keys}
    assert {"universe", "splits", "scored_segments", "budget", "dataset", "rollouts"} <= folders, sorted(folders)
    version = committed.root.removeprefix(f"s3://{ceph.name}/")  # the published version's folder
    assert version.startswith(f"{PREFIX}/dataset/versions/v")
    # each shard where its entry says: the version folder, or the root's shard pool (stored_at)
    assert {committed.shard_path(entry).removeprefix(f"s3://{ceph.name}/") for entry in committed.entries} <= set(keys)
    assert all(entry["stored_at"].startswith("shards/") for entry in committed.entries)
    assert f"{PREFIX}/rollouts/rollouts.zarr/zarr.json" in keys
    # and nothing of them beside the instance on local disk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dagster_home", "landing"]
