"""rollout_records_from_dataset on small committed datasets: lineage (shard SHA-256s, the
split binding), refusals (other splits, missing modalities, tampered shards, a split the
dataset was not written from), progress, and user recipes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kuration.errors import RolloutInputError
from kuration.read import DatasetIntegrityError
from kuration.rollouts import MotionDirectionRecipe, RolloutGeneration, RolloutRecipe, rollout_records_from_dataset
from kuration.rollouts.records import (
    RolloutChainBatch, RolloutWriteRecord,
)
from tests.rollouts.user_recipes import OneStepRecipe
from tests.rollouts.drone_datasets import (
    SHARD_LENGTH, Track, build_dataset, build_split_root, drone_spec, identity_of, straight_track,
)

RECIPE = MotionDirectionRecipe(stride=4, chain_length=3, horizon=2)
ASSIGNMENTS = {"stage": ["train", "test"], "source": ["rec_0", "rec_1"], "group": ["g0", "g1"]}


def manifest(out: Path) -> dict:
    return json.loads((out / "dataset_manifest.json").read_text())


@pytest.fixture
def dataset(tmp_path) -> Path:
    tracks = [straight_track(12), straight_track(5, step=(0, 1, 0)),
              Track(pos=np.zeros((9, 3), np.float32), present=np.zeros(9, bool)),  # absent throughout
              straight_track(SHARD_LENGTH, start=(0, 0, 5), step=(0, 0, 1), split="test", source="rec_1")]
    table, _ = build_split_root(tmp_path / "root", ASSIGNMENTS)
    return build_dataset(tmp_path / "ds", tracks, split_identity=identity_of(table))


def test_records_bind_to_the_shard_sha256s_the_manifest_records(dataset):
    generation = rollout_records_from_dataset(dataset, RECIPE)
    entries = {e["path"]: e for e in manifest(dataset)["entries"]}
    assert generation.records
    # the built-in recipe gives one batch per shard with chains; chain_records() is one record per chain
    assert all(isinstance(item, RolloutChainBatch) for item in generation.records)
    chains = generation.chain_records()
    assert (generation.num_chains, generation.num_steps) == (len(chains), sum(len(r.steps) for r in chains))
    for record in chains:
        entry = entries[record.source.shard_path]
        assert record.source.shard_sha256 == entry["sha256"] and record.source.split == "train"
        assert record.source.n_states == entry["n_steps"] and record.source.entity == entry["entity_id"]
        assert all(step.source_row + 1 < entry["n_steps"] for step in record.steps)  # pad rows are never states
    assert [r.source.shard_path for r in generation.records] == sorted({r.source.shard_path for r in chains})
    assert {r.source.shard_path for r in generation.records} == {
        e["path"] for e in entries.values() if e["split"] == "train" and e["n_steps"] != 9}  # the absent drone: none
    assert generation.lineage.shards == 3 and generation.lineage.split == "train"
    record = (dataset / "dataset.commit.json").read_text()
    assert json.loads(record)["manifest_sha256"] == generation.lineage.dataset_manifest_sha256


def test_writer_options_carry_the_lineage(dataset, tmp_path):
    _, digest = build_split_root(tmp_path / "root", ASSIGNMENTS)
    generation = rollout_records_from_dataset(dataset, RECIPE, splits_root=tmp_path / "root")
    options = generation.writer_options()
    assert options["split_manifest_hash"] == digest == generation.lineage.split_manifest_hash
    assert options["reason_codes"] == {"out_of_bounds": 0, "below_ground": 1, "battery_reserve": 2}
    assert options["source_dataset_version"] == generation.lineage.dataset_manifest_sha256
    assert options["field_retention_policy"] == "compact"
    context = options["manifest_context"]["generation"]
    assert context["recipe_id"] == "motion_direction_v1" and context["recipe_params"] == RECIPE.params()
    assert context["split_identity"] == generation.lineage.split_identity and not context["allow_non_train"]
    json.dumps(options["manifest_context"], allow_nan=False)  # the sidecar takes it as JSON
    other = rollout_records_from_dataset(dataset, MotionDirectionRecipe(stride=4, chain_length=3, horizon=3))
    assert other.lineage.recipe_params_sha256 != generation.lineage.recipe_params_sha256
    assert "split_manifest_hash" not in rollout_records_from_dataset(dataset, RECIPE).writer_options()


def test_a_split_other_than_train_is_refused_unless_allowed(dataset):
    with pytest.raises(RolloutInputError, match=r"split='test': .*training reads the train split only.*"
                                                r"allow_non_train=True"):
        rollout_records_from_dataset(dataset, RECIPE, split="test")
    allowed = rollout_records_from_dataset(dataset, RECIPE, split="test", allow_non_train=True)
    assert allowed.lineage.allow_non_train and allowed.lineage.split == "test" and allowed.lineage.shards == 1
    assert allowed.records and {r.source.split for r in allowed.records} == {"test"}
    assert allowed.writer_options()["manifest_context"]["generation"]["allow_non_train"] is True
    with pytest.raises(RolloutInputError, match=r"split: must be one of \['train', 'val', 'test'\], got 'predict'"):
        rollout_records_from_dataset(dataset, RECIPE, split="predict", allow_non_train=True)


def test_a_tampered_shard_is_refused(dataset):
    entry = manifest(dataset)["entries"][0]
    path = dataset / entry["path"]
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetIntegrityError, match=r"size or SHA-256 differs from the manifest"):
        rollout_records_from_dataset(dataset, RECIPE)


def test_a_dataset_written_from_another_split_is_refused(dataset, tmp_path):
    other = {**ASSIGNMENTS, "group": ["g0", "g9"]}
    build_split_root(tmp_path / "other", other)
    with pytest.raises(RolloutInputError, match=r"provenance.split is .*the dataset was written from another split\. "
                                                r"Re-materialize the dataset"):
        rollout_records_from_dataset(dataset, RECIPE, splits_root=tmp_path / "other")


def test_a_dataset_without_a_split_identity_cannot_be_bound_to_a_split(tmp_path):
    out = build_dataset(tmp_path / "plain", [straight_track(6)])
    build_split_root(tmp_path / "root", ASSIGNMENTS)
    with pytest.raises(RolloutInputError, match=r"records no split identity .*re-materialize the dataset"):
        rollout_records_from_dataset(out, RECIPE, splits_root=tmp_path / "root")
    recorded = rollout_records_from_dataset(out, RECIPE, split_manifest_hash="c" * 64)
    assert recorded.lineage.split_manifest_hash == "c" * 64 and recorded.lineage.split_identity is None


def test_split_hash_arguments_that_disagree_are_refused(dataset, tmp_path):
    build_split_root(tmp_path / "root", ASSIGNMENTS)
    with pytest.raises(RolloutInputError, match=r"is not the SHA-256 of the baked splits.json"):
        rollout_records_from_dataset(dataset, RECIPE, splits_root=tmp_path / "root", split_manifest_hash="c" * 64)
    with pytest.raises(RolloutInputError, match=r"split_manifest_hash: must be the 64 lowercase hex digits"):
        rollout_records_from_dataset(dataset, RECIPE, split_manifest_hash="C" * 64)
    with pytest.raises(RolloutInputError, match=r"splits_root .*missing: no split report .*materialize the "
                                                r"'resolved_splits' asset first"):
        rollout_records_from_dataset(dataset, RECIPE, splits_root=tmp_path / "missing")
    (tmp_path / "root" / "splits" / "splits.json").write_text("{}")  # changed after the report
    with pytest.raises(RolloutInputError, match=r"changed after the split report was written"):
        rollout_records_from_dataset(dataset, RECIPE, splits_root=tmp_path / "root")


def test_a_dataset_lacking_a_required_modality_is_refused_naming_it(tmp_path):
    out = build_dataset(tmp_path / "novel", [straight_track(6)], spec=drone_spec(modalities=("pos", "battery")))
    with pytest.raises(RolloutInputError, match=r"needs modality 'vel', which the dataset does not declare \(it "
                                                r"declares \['battery', 'pos'\]\); add it to the output spec"):
        rollout_records_from_dataset(out, RECIPE)
    fitted = MotionDirectionRecipe(state_modalities=("pos", "battery"), stride=2, chain_length=2, horizon=1)
    assert rollout_records_from_dataset(out, fitted).records


def test_a_dataset_without_a_presence_mask_reads_every_row_as_present(tmp_path):
    out = build_dataset(tmp_path / "nomask", [straight_track(6)], spec=drone_spec(presence=False))
    generation = rollout_records_from_dataset(out, MotionDirectionRecipe(stride=10, chain_length=10, horizon=0))
    [record] = generation.chain_records()
    assert [s.source_row for s in record.steps] == [0, 1, 2, 3, 4] and record.termination_reason == "track_end"


def test_full_retention_keeps_the_frame_of_each_state(dataset):
    generation = rollout_records_from_dataset(dataset, MotionDirectionRecipe(stride=4, chain_length=3,
                                                                             field_retention_policy="full"))
    assert generation.writer_options()["field_retention_policy"] == "full"
    first = generation.chain_records()[0].steps[1]
    assert first.selected_payload is not None and first.selected_payload.dtype == np.uint8
    assert (first.selected_payload == first.source_row).all()  # the builder's frame of row r holds r (shard 0)


def test_progress_is_reported_per_shard(dataset):
    calls: list[tuple[int, int]] = []
    rollout_records_from_dataset(dataset, RECIPE, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_only_committed_datasets_are_read(tmp_path):
    with pytest.raises(RolloutInputError, match=r"dataset: expected a committed dataset's directory or URL .*got "
                                                r"dict"):
        rollout_records_from_dataset({"entries": []}, RECIPE)  # type: ignore[arg-type]


# -- user recipes -----------------------------------------------------------------------------


def test_a_user_recipe_is_plugged_in(dataset):
    recipe = OneStepRecipe()
    assert isinstance(recipe, RolloutRecipe)
    generation = rollout_records_from_dataset(dataset, recipe)
    assert isinstance(generation, RolloutGeneration)
    # three train shards (this recipe ignores presence, so the absent drone too)
    assert len(generation.records) == 3 and generation.lineage.recipe_id == "one_step_v1"
    assert generation.writer_options()["reason_codes"] == {"never": 0}


@pytest.mark.parametrize("tamper, message", [
    ("codes", r"reason_codes 'never' and 'also' share bit 0"),
    ("params", r"params\(\) must be JSON-able"),
    ("type", r"records_for_shard must return a list of RolloutWriteRecord and/or RolloutChainBatch, got dict"),
    ("source", r"record 0 names source .*each record's source must be the shard's"),
    ("item", r"on train/\S+: item 0 is a str, not a RolloutWriteRecord or RolloutChainBatch"),
    ("batch_source", r"batch 1 names source .*shard_sha256='000.*each batch's source must be the shard's"),
    ("empty_batch", r"on train/\S+: batch 1 holds no chains; return no batch for a shard without chains"),
])
def test_a_user_recipe_breaking_its_contract_is_refused(dataset, tamper, message):
    with pytest.raises(RolloutInputError, match=message):
        rollout_records_from_dataset(dataset, OneStepRecipe(tamper=tamper))


def test_a_user_recipe_may_mix_records_and_batches(dataset: Path, tmp_path: Path) -> None:
    from kuration.rollouts import write_rollout_zarr_store

    plain = rollout_records_from_dataset(dataset, OneStepRecipe())
    mixed = rollout_records_from_dataset(dataset, OneStepRecipe(tamper="batch"))
    assert [type(item) for item in mixed.records] == [RolloutWriteRecord, RolloutChainBatch] * 3
    assert (mixed.num_chains, mixed.num_steps) == (6, 6) and (plain.num_chains, plain.num_steps) == (3, 3)
    # each shard's batch holds the same chain as its record: the per-chain view is each record twice
    chains = mixed.chain_records()
    assert [(r.source, r.steps[0].source_row, r.termination_reason) for r in chains] == [
        (r.source, r.steps[0].source_row, r.termination_reason) for r in plain.chain_records() for _ in range(2)]
    assert all(np.array_equal(a.steps[0].shell.positions, b.steps[0].shell.positions)
               for a, b in zip(chains[::2], chains[1::2], strict=True))
    result = write_rollout_zarr_store(tmp_path / "store", mixed.records, **mixed.writer_options())
    assert (result.num_rollouts, result.num_steps, result.num_candidates) == (6, 6, 12)


def test_an_object_that_is_not_a_recipe_is_refused(dataset):
    with pytest.raises(RolloutInputError, match=r"recipe: object lacks \['recipe_id', 'params', 'reason_codes'"):
        rollout_records_from_dataset(dataset, object())  # type: ignore[arg-type]


# -- end to end ---------------------------------------------------------------------------------


def test_a_generated_set_writes_a_store_that_keeps_its_lineage(dataset, tmp_path):
    import zarr

    from kuration.rollouts import write_rollout_zarr_store

    build_split_root(tmp_path / "root", ASSIGNMENTS)
    generation = rollout_records_from_dataset(
        dataset, MotionDirectionRecipe(stride=2, chain_length=4, horizon=3, field_retention_policy="full"),
        splits_root=tmp_path / "root")
    result = write_rollout_zarr_store(tmp_path / "store", generation.records, discount_gamma=0.9,
                                      **generation.writer_options())
    chains = generation.chain_records()
    steps = sum(len(r.steps) for r in chains)
    assert (result.num_rollouts, result.num_steps) == (len(chains), steps) == (generation.num_chains,
                                                                             generation.num_steps)
    group = zarr.open_group(str(tmp_path / "store"), mode="r")
    assert group.attrs["reason_codes"]["bits"] == generation.reason_codes
    digests = {bytes(row).hex() for row in np.asarray(group["sources/shard_sha256"][:])}
    assert digests == {r.source.shard_sha256 for r in generation.records}
    sidecar = json.loads(Path(result.manifest_path).read_text())
    assert sidecar["generation"] == generation.lineage.to_dict()
    assert sidecar["config"]["split_manifest_hash"] == generation.lineage.split_manifest_hash
    assert sidecar["config"]["source_dataset_version"] == generation.lineage.dataset_manifest_sha256
    payload = np.asarray(group["steps/selected_payload"][:])
    assert payload.dtype == np.uint8 and len(payload) == steps
