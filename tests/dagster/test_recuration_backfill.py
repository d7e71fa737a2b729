"""Re-curating after a strategy change, as a team does it (docs/dagster.md, "Re-curating after a
strategy change"): the fleet curated once with ``kuration run``, then ``strategy.json``
changed (other weights, a stricter predicate) and one session re-recorded, then from the UI
"Materialize all partitions" of ``scored_segments`` with everything downstream as one
backfill, worked as the backfill daemon and the run queue work it on the same instance.

The new dataset's config.json records the new strategy's fingerprint, and its selection
follows the new priorities. Every partition whose recording did not change reuses its cached
features (``cached``, ``reused_features``); the re-recorded one is scored. A second backfill
after the plugin feature's code was edited computes that feature again, alone, in every
partition, and reuses the others."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from kuration.budget.plan_store import read_admitted
from kuration.landing.recordings import recording_name
from kuration.read import load_committed, verify_dataset
from kuration.scoring.strategy import Strategy
from tests.dagster.ui_runs import launch_backfill, run_backfill, ui_workspace
from tests.own_data.landing_factory import (
    SESSIONS,
    FleetLandingZone,
    add_session,
    edit_plugin_feature,
    fleet_on_an_instance,
    reweighted_strategy,
    strategy,
    write_strategy,
)

DOWNSTREAM = ["budget_plan", "shards", "dataset_manifest", "published_dataset", "rollout_store"]
#: The session recorded again (same length and universe rows, other content).
REWRITTEN = SESSIONS[2]
REWRITTEN_ID = f"{REWRITTEN[0]}/{REWRITTEN[1]}.parquet"


#: one shared curation on an instance (kuration run, then the backfills): about 20 to 60 s
pytestmark = pytest.mark.slow

@dataclass
class Curation:
    """What one curation left: the dataset's config, the admitted spans, the stored segments."""

    config: dict[str, Any]
    admitted: set[tuple]
    segments: dict[str, Any]


@dataclass
class Recurated:
    zone: FleetLandingZone
    storage: Path
    before: Curation
    after: Curation
    backfill: Any
    partitions: dict[str, dict[str, Any]]
    runs: list[Any]
    edited: Curation
    edited_backfill: Any
    edited_partitions: dict[str, dict[str, Any]]


def _curation(storage: Path) -> Curation:
    admitted = read_admitted(storage).select(["source_id", "entity_id", "start", "stop"]).to_pylist()
    segments = {path.relative_to(storage / "scored_segments").as_posix(): pq.read_table(path)
                for path in sorted((storage / "scored_segments").rglob("*.parquet"))}
    return Curation(load_committed(storage / "dataset").config,  # the current (published) version
                    {tuple(row.values()) for row in admitted}, segments)


def _partition_metadata(instance: Any, runs: list[Any]) -> dict[str, dict[str, Any]]:
    """Each scored_segments partition's metadata, from the materializations of ``runs``."""
    from dagster import AssetKey, DagsterEventType

    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for record in instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records:
            materialization = record.asset_materialization
            if materialization is not None and materialization.asset_key == AssetKey("scored_segments"):
                found[materialization.partition] = {k: v.value for k, v in materialization.metadata.items()}
    return found


@pytest.fixture(scope="module")
def recurated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recurated]:
    from dagster import DagsterInstance, RunsFilter

    with fleet_on_an_instance(tmp_path_factory.mktemp("recuration"), prefix=f"recur_{uuid.uuid4().hex[:8]}") as fleet:
        zone, storage = fleet.zone, fleet.storage
        code, out = fleet.run()
        assert code == 0, out
        before = _curation(storage)

        write_strategy(zone, reweighted_strategy(zone.feature_key))
        day, vehicle, scenario, seconds = REWRITTEN
        add_session(zone, day, vehicle, scenario, seconds=seconds, seed=909, interactions=3, in_universe=False)
        fleet.serve()
        with DagsterInstance.get() as instance, ui_workspace(instance) as workspace:
            backfill = run_backfill(workspace, launch_backfill(workspace, ["scored_segments", *DOWNSTREAM]))
            runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
            partitions = _partition_metadata(instance, runs)
            after = _curation(storage)

            edit_plugin_feature(zone, reentry_weight=3)  # run workers import the edited plugin
            edited_backfill = run_backfill(workspace, launch_backfill(workspace, ["scored_segments"]))
            edited_partitions = _partition_metadata(instance, instance.get_runs(RunsFilter(
                tags={"dagster/backfill": edited_backfill.backfill_id})))
            edited = _curation(storage)
        yield Recurated(zone, storage, before, after, backfill, partitions, list(runs), edited, edited_backfill,
                        edited_partitions)


def test_the_backfill_scores_every_partition_in_one_run_then_the_downstream_assets(recurated):
    """The first test of the module pays for ``recurated``: a whole ``kuration run`` on the
    fleet, then two backfills worked through the UI's code server and run workers (20 s to
    80 s); the other tests read what it left."""
    from dagster._core.execution.backfill import BulkActionStatus

    assert recurated.backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    names = sorted(recording_name(source) for source in recurated.zone.source_ids())
    assert sorted(recurated.partitions) == names
    scoring = [run for run in recurated.runs if run.tags.get("dagster/asset_partition_range_start")]
    (one,) = scoring  # BackfillPolicy.single_run: the range in one run, scored with the resource's workers
    assert (one.tags["dagster/asset_partition_range_start"], one.tags["dagster/asset_partition_range_end"]) == (
        names[0], names[-1])
    assert all(run.status.value == "SUCCESS" for run in recurated.runs)


def test_the_new_dataset_records_the_new_strategy_fingerprint(recurated):
    new = Strategy.from_dict(reweighted_strategy(recurated.zone.feature_key))
    old = Strategy.from_dict(strategy(recurated.zone.feature_key))
    assert recurated.before.config["job"]["strategy_fingerprint"] == old.fingerprint()
    assert recurated.after.config["job"]["strategy_fingerprint"] == new.fingerprint() != old.fingerprint()
    assert recurated.after.config["job"]["strategy"] == new.to_dict()
    assert recurated.after.config["job"]["scoring_run"] != recurated.before.config["job"]["scoring_run"]
    assert verify_dataset(recurated.storage / "dataset").ok


def test_the_selection_follows_the_new_priorities(recurated):
    new = reweighted_strategy(recurated.zone.feature_key)
    for name, table in recurated.after.segments.items():
        features = {key: table.column(key).to_numpy(zero_copy_only=False) for key in new["priority"]}
        expected = sum(weight * features[key] for key, weight in sorted(new["priority"].items()))
        np.testing.assert_array_equal(table.column("priority").to_numpy(zero_copy_only=False), expected, err_msg=name)
        visibility = table.column("visibility.mean").to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(table.column("passed").to_numpy(zero_copy_only=False), visibility > 0.5)
    assert recurated.after.admitted and recurated.after.admitted != recurated.before.admitted


def _same_values(table: Any, other: Any, key: str, name: str) -> None:
    """One feature column the same in both (NaN where the road user was out of view: equal too)."""
    np.testing.assert_array_equal(table.column(key).to_numpy(zero_copy_only=False),
                                  other.column(key).to_numpy(zero_copy_only=False), err_msg=f"{name} {key}")


def test_partitions_whose_recording_did_not_change_reuse_their_cached_features(recurated):
    keys = ", ".join(Strategy.from_dict(reweighted_strategy(recurated.zone.feature_key)).feature_keys())
    rewritten = recurated.partitions.pop(recording_name(REWRITTEN_ID))
    assert rewritten["status"] == "scored" and "reused_features" not in rewritten  # its recording changed
    assert {m["status"] for m in recurated.partitions.values()} == {"cached"}
    assert {m["reused_features"] for m in recurated.partitions.values()} == {keys}
    for name, table in recurated.after.segments.items():  # the features are the first curation's
        if name != f"{recording_name(REWRITTEN_ID)}.parquet":
            for key in keys.split(", "):
                _same_values(table, recurated.before.segments[name], key, name)


def test_a_plugin_feature_whose_code_changed_is_computed_again_alone(recurated):
    from dagster._core.execution.backfill import BulkActionStatus

    assert recurated.edited_backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    feature = recurated.zone.feature_key
    others = [key for key in Strategy.from_dict(reweighted_strategy(feature)).feature_keys() if key != feature]
    assert {m["status"] for m in recurated.edited_partitions.values()} == {"scored"}
    assert {m["reused_features"] for m in recurated.edited_partitions.values()} == {", ".join(others)}
    counted = False
    for name, table in recurated.edited.segments.items():
        previous = recurated.after.segments[name]
        np.testing.assert_array_equal(table.column(feature).to_numpy(), 3 * previous.column(feature).to_numpy())
        counted = counted or bool(previous.column(feature).to_numpy().any())
        for key in others:
            _same_values(table, previous, key, name)
    assert counted, "some segment counts a re-entry, so the edit shows"
