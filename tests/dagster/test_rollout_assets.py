"""``rollout_store`` with its blocking ``rollout_validation`` and ``rollout_lineage`` checks, on
a dataset the dataset asset wrote from a real (small) demo corpus."""

from pathlib import Path

import numpy as np
import pytest
from dagster import AssetSelection, materialize

from kuration.read import load_committed
from kuration.rollouts import RolloutZarrStoreReader, validate_rollout_zarr_store
from kuration.splits.artifacts import read_split_assignments
from kuration_assets import shards_and_manifest
from rollout_assets import rollout_lineage, rollout_store
from splits_assets import resolved_splits
from tests.dagster.runs import failure_text, materialization_metadata, plan_budget_for_tests


def _rollouts(resources, instance, **config):
    return materialize([rollout_store, rollout_lineage], resources=resources, instance=instance,
                       raise_on_error=False,
                       run_config={"ops": {"rollout_store": {"config": config}}} if config else None)


@pytest.fixture
def curated(scored, instance):
    """The scored demo corpus with a budget plan and its committed dataset."""
    plan_budget_for_tests(scored, instance)
    assert materialize([shards_and_manifest], resources=scored, instance=instance).success
    return scored


def _checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_the_store_is_built_validated_and_bound_to_the_split_and_dataset(curated, instance, tmp_path):
    result = _rollouts(curated, instance, discount_gamma=0.9, stride=4, chain_length=8)
    assert result.success, failure_text(result)
    meta = materialization_metadata(result)["rollout_store"]
    store = tmp_path / "storage" / "rollouts" / "rollouts.zarr"
    assert meta["path"] == str(store) and meta["rollouts"] > 0 and meta["candidates"] == 11 * meta["steps"]
    assert "| step | source | selected |" in meta["q_h_preview"]
    checks = _checks(result)
    assert set(checks) == {"rollout_validation", "rollout_lineage"}
    assert all(c.passed for c in checks.values()), {n: c.description for n, c in checks.items()}
    reader = RolloutZarrStoreReader(store)
    _, splits_digest = read_split_assignments(tmp_path / "storage")
    config = reader.attrs["config"]
    assert config["split_manifest_hash"] == splits_digest == meta["split_manifest_hash"]
    assert config["discount_gamma"] == pytest.approx(0.9)
    dataset = load_committed(tmp_path / "storage" / "dataset")
    train = {e["path"]: e["sha256"] for e in dataset.entries if e["split"] == "train"}
    paths = reader.vocabulary("sources", "shard_paths")
    digests = reader.array("sources/shard_sha256")
    for code, digest in zip(reader.array("sources/shard_path_code"), digests, strict=True):
        assert train[paths[code]] == bytes(digest).hex()  # every source is a train shard, hash for hash
    view = reader.q_h_view()
    assert view["candidate_ids"].shape == (meta["steps"], 11)
    assert not np.isfinite(view["one_step_labels"][~view["valid_action_mask"]]).any()


def test_a_re_resolved_split_fails_the_lineage_check_of_the_old_store(curated, instance, tmp_path):
    assert _rollouts(curated, instance).success
    _, old_digest = read_split_assignments(tmp_path / "storage")
    resplit = {"ops": {"resolved_splits": {"config": {"strategy": "random", "seed": 11, "val_ratio": 0.34,
                                                      "test_ratio": 0.34}}}}
    assert materialize([resolved_splits], resources=curated, instance=instance, run_config=resplit).success
    assert read_split_assignments(tmp_path / "storage")[1] != old_digest
    lineage = _checks(materialize([rollout_store, rollout_lineage], resources=curated, instance=instance,
                                  selection=AssetSelection.checks(rollout_lineage),
                                  raise_on_error=False))["rollout_lineage"]
    assert not lineage.passed and "the split was re-resolved after the store was built" in lineage.description
    # and the store is not rebuilt over a dataset written from the old split
    rebuilt = _rollouts(curated, instance)
    assert not rebuilt.success and "the dataset was written from another split" in failure_text(rebuilt)


def test_a_damaged_store_fails_validation_and_a_failed_rebuild_keeps_the_old_store(curated, instance, tmp_path):
    assert _rollouts(curated, instance).success
    store = tmp_path / "storage" / "rollouts" / "rollouts.zarr"
    sidecar = store / "rollout_manifest.json"
    before = sidecar.read_bytes()
    refused = _rollouts(curated, instance, split="val")  # offline RL trains on train only
    assert not refused.success and "allow_non_train" in failure_text(refused)
    assert sidecar.read_bytes() == before and validate_rollout_zarr_store(store).ok
    sidecar.write_bytes(before.replace(b'"', b"'", 1))
    assert not validate_rollout_zarr_store(store).ok


def test_without_a_dataset_the_store_step_fails_with_the_fix(scored, instance):
    result = _rollouts(scored, instance)
    assert not result.success
    assert "not a committed dataset" in failure_text(result)


def test_a_rewritten_dataset_or_a_missing_store_fails_the_lineage_check(curated, instance, tmp_path):
    from kuration.rollouts.build import check_rollout_lineage

    storage = tmp_path / "storage"
    store = storage / "rollouts" / "rollouts.zarr"
    missing = check_rollout_lineage(store, dataset=storage / "dataset", splits_root=storage)
    assert not missing.ok and missing.verdict.startswith(f"cannot check the rollout store {store}")
    assert _rollouts(curated, instance).success
    plan_budget_for_tests(curated, instance, train=30 / 3600)  # another plan: the dataset is re-written
    assert materialize([shards_and_manifest], resources=curated, instance=instance).success
    stale = check_rollout_lineage(store, dataset=storage / "dataset", splits_root=storage)
    assert not stale.ok
    assert any("the dataset was re-written after the store was built" in e for e in stale.errors)
    assert any("source shard(s)" in e for e in stale.errors)  # its shards changed with it
    again = _rollouts(curated, instance)  # re-materializing rebuilds a store that matches
    assert again.success and all(check.passed for check in _checks(again).values())


def test_the_recipe_reads_its_modalities_from_the_curation_settings(curated, instance, tmp_path):
    import json
    from pathlib import Path

    from kuration.landing.curation_config import RolloutSettings
    from rollout_assets import RolloutStoreConfig

    recipe = RolloutStoreConfig().recipe(RolloutSettings(position="xyz", battery=None, state_modalities=("xyz",),
                                                         payload_modality=None, site_half_extent_m=50.0))
    assert (recipe.position, recipe.battery, recipe.state_modalities, recipe.payload_modality) == (
        "xyz", None, ("xyz",), None)
    assert recipe.site_half_extent_m == 50.0
    settings = Path(curated["landing_zone"].url) / "curation.json"
    # a dataset without the demo's names: the recipe is told where the position is, and says what is missing
    settings.write_text(json.dumps({"rollouts": {"position": "xyz"}}))
    missing = _rollouts(curated, instance)
    assert not missing.success and "xyz" in failure_text(missing)
    settings.write_text(json.dumps({"rollouts": {"enabled": False}}))
    disabled = _rollouts(curated, instance)
    assert not disabled.success
    assert "rollouts are disabled in the curation settings (curation.json rollouts.enabled is false" in failure_text(
        disabled)
    assert not (tmp_path / "storage" / "rollouts").exists()


def test_a_spec_without_the_default_modalities_and_no_rollouts_is_not_configured(resources, instance, small_landing):
    import json

    spec = json.loads((small_landing / "output_spec.json").read_text())
    renamed = {"pos": "xyz", "vel": "velocity", "battery": "charge"}
    spec["modalities"] = {renamed.get(k, k): v for k, v in spec["modalities"].items()}
    (small_landing / "output_spec.json").write_text(json.dumps(spec))
    result = _rollouts(resources, instance)
    assert result.success, failure_text(result)  # no dataset was ever written: nothing was read for it
    meta = materialization_metadata(result)["rollout_store"]
    assert meta["status"] == "not configured"
    assert "has no 'rollouts'" in meta["reason"] and "lacks the default rollout recipe's modalities" in meta["reason"]
    checks = _checks(result)
    assert set(checks) == {"rollout_validation", "rollout_lineage"} and all(c.passed for c in checks.values())
    assert checks["rollout_validation"].description.startswith(
        "rollout store not configured, so the store has nothing to check: ")
    assert checks["rollout_lineage"].description.startswith(
        "rollout store not configured, so its lineage has nothing to check: ")
    assert not (Path(resources["storage_root"].url) / "rollouts").exists()
