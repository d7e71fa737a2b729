"""``rollout_store`` with its blocking ``rollout_validation`` and ``rollout_lineage`` checks, on
a dataset the dataset asset wrote from a real (small) demo corpus. ``rollout_validation`` is a
step of its own that only reads, so it also runs alone on a store built earlier. The store
is built from the dataset's current (published) version: a version the dataset step staged
changes nothing for it until it passed its audit and was published."""

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
from dagster import AssetKey, AssetSelection, materialize

from kuration.read import load_committed
from kuration.rollouts import RolloutZarrStoreReader, validate_rollout_zarr_store
from kuration.splits.artifacts import read_split_assignments
from kuration_assets import shards_and_manifest
from rollout_assets import rollout_lineage, rollout_store, rollout_validation
from splits_assets import resolved_splits
from tests.dagster.runs import failure_text, materialization_metadata, plan_budget_for_tests
from tests.dagster.runs import publish_dataset_for_tests


def _rollouts(resources, instance, **config):
    return materialize([rollout_store, rollout_validation, rollout_lineage], resources=resources, instance=instance,
                       raise_on_error=False,
                       run_config={"ops": {"rollout_store": {"config": config}}} if config else None)


def _validation_alone(resources, instance):
    return materialize([rollout_store, rollout_validation], resources=resources, instance=instance,
                       raise_on_error=False, selection=AssetSelection.checks(rollout_validation))


def _step_keys(result) -> set[str]:
    return {event.step_key for event in result.all_events if event.step_key}


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: its mtime (ns) and SHA-256, to prove a check rewrote nothing."""
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def curated(scored, instance):
    """The scored demo corpus with a budget plan and its dataset, written, audited and published."""
    plan_budget_for_tests(scored, instance)
    publish_dataset_for_tests(scored, instance)
    return scored


def _checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_the_store_is_built_validated_and_bound_to_the_split_and_dataset(curated, instance, tmp_path):
    result = _rollouts(curated, instance, discount_gamma=0.9, stride=4, chain_length=8)
    assert result.success, failure_text(result)
    meta = materialization_metadata(result)["rollout_store"]
    store = tmp_path / "storage" / "rollouts" / "rollouts.zarr"
    assert meta["path"] == str(store) and meta["rollouts"] > 0 and meta["candidates"] == 11 * meta["steps"]
    assert "| step | source | selected |" in meta["first_states"]
    assert meta["first_states"].startswith("The first states of the training view (`q_h/`)")
    checks = _checks(result)
    assert set(checks) == {"rollout_validation", "rollout_lineage"}
    assert all(c.passed for c in checks.values()), {n: c.description for n, c in checks.items()}
    assert checks["rollout_validation"].description == (
        f"valid: {meta['rollouts']:,} rollouts, {meta['steps']:,} steps and {meta['candidates']:,} candidate actions; "
        "every array, link, mask, label and source hash checks out, and the training view matches the tables it is "
        "built from")
    reader = RolloutZarrStoreReader(store)
    _, splits_digest = read_split_assignments(tmp_path / "storage")
    config = reader.attrs["config"]
    assert config["split_manifest_hash"] == splits_digest
    summary = meta["summary"]
    assert f"| lineage | split {splits_digest[:12]} (splits.json), dataset {config['source_dataset_version'][:12]} " \
           "(its manifest), recipe motion_direction_v1;" in summary
    assert f"| steps | {meta['steps']:,} recorded states," in summary and "(11 per step)" in summary
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
    assert materialize([shards_and_manifest], resources=curated, instance=instance).success  # v2, staged
    staged = check_rollout_lineage(store, dataset=storage / "dataset", splits_root=storage)
    assert staged.ok, staged.errors  # the store was built from v1, which readers still see
    publish_dataset_for_tests(curated, instance)  # v2 audited and published: now the store is stale
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


def test_the_store_leads_with_counts_and_no_jargon(curated, instance):
    result = _rollouts(curated, instance)
    assert result.success, failure_text(result)
    (event,) = [e for e in result.get_asset_materialization_events()
                if e.step_materialization_data.materialization.asset_key == AssetKey("rollout_store")]
    metadata = event.step_materialization_data.materialization.metadata
    assert list(metadata) == ["summary", "rollouts", "steps", "candidates", "sources", "path", "first_states"]
    assert [row.split(" | ")[0].strip("| ") for row in metadata["summary"].value.splitlines()[2:]] == [
        "rollouts", "steps", "candidate actions", "sources", "validation", "lineage"]
    for name in ("rollouts", "steps", "candidates", "sources"):  # numbers, so the UI plots them across runs
        assert type(metadata[name]).__name__ == "IntMetadataValue", name
    shown = " ".join(str(value.value) for value in metadata.values())
    assert not re.search(r"[0-9a-f]{64}", shown) and "chunking" not in metadata and "manifest" not in metadata


def test_the_validation_check_is_a_step_of_its_own_and_runs_alone(curated, instance, tmp_path):
    built = _rollouts(curated, instance)
    assert built.success and "rollout_store_rollout_validation" in _step_keys(built)
    store = tmp_path / "storage" / "rollouts" / "rollouts.zarr"
    before = _files(store)
    sound = _validation_alone(curated, instance)
    assert sound.success and _step_keys(sound) == {"rollout_store_rollout_validation"}
    assert sound.get_asset_materialization_events() == []
    (check,) = sound.get_asset_check_evaluations()
    assert check.passed and check.description.startswith("valid: ")
    assert _files(store) == before  # the check only read

    chunk = sorted((store / "steps" / "reward").rglob("c/*"))[0]
    chunk.unlink()
    damaged = _validation_alone(curated, instance)
    assert not damaged.success and _step_keys(damaged) == {"rollout_store_rollout_validation"}
    (check,) = damaged.get_asset_check_evaluations()
    assert not check.passed and check.severity.value == "ERROR"
    assert "steps/reward: 1 chunk(s) missing from the store" in check.description


def test_the_validation_check_alone_without_a_store_says_how_to_build_one(scored, instance, tmp_path):
    result = _validation_alone(scored, instance)
    assert not result.success and result.get_asset_materialization_events() == []
    (check,) = result.get_asset_check_evaluations()
    store = tmp_path / "storage" / "rollouts" / "rollouts.zarr"
    assert not check.passed and check.description == (
        f"no rollout store at {store}; materialize rollout_store (the build_rollouts job), then run the check again")
    assert not store.exists()


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
