"""validate_rollout_zarr_store: one test per corruption class, each made by editing a real
store written by write_rollout_zarr_store; every test also shows the clean store passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from kuration.rollouts import RolloutZarrValidationResult, validate_rollout_zarr_store
from kuration.rollouts.writer import write_rollout_zarr_store
from tests.rollouts.store_factory import make_records, tree_digest


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("written") / "store"
    write_rollout_zarr_store(directory, make_records(0, payload=True), field_retention_policy="full",
                             q_h_chunk_states=2, discount_gamma=0.9)
    return directory


@pytest.fixture
def store(written: Path, tmp_path: Path) -> Path:
    """A private copy of one real store (written once per module), checked clean."""
    directory = tmp_path / "store"
    shutil.copytree(written, directory)
    clean = validate_rollout_zarr_store(directory)
    assert clean.ok, clean.errors  # each corruption test starts from a store that passes
    return directory


def _set(store: Path, path: str, row: int | tuple, value) -> None:
    array = zarr.open_array(str(store / path), mode="r+")
    data = array[...]
    data[row] = value
    array[...] = data


def _edit_json(file: Path, edit) -> None:
    data = json.loads(file.read_text())
    edit(data)
    file.write_text(json.dumps(data))


def _errors_with(result: RolloutZarrValidationResult, text: str) -> list[str]:
    assert not result.ok
    found = [error for error in result.errors if text in error]
    assert found, f"no error containing {text!r} in {result.errors}"
    return found


def _candidate(store: Path, *, valid: bool, selected: bool = False) -> int:
    root = zarr.open_group(str(store), mode="r")
    chosen = set(root["steps/selected_candidate_id"][...].tolist())
    flags = root["candidates/valid_action"][...]
    return next(i for i in range(len(flags)) if bool(flags[i]) == valid and (i in chosen) == selected)


def test_clean_store_is_ok_and_counts_rows(store: Path) -> None:
    result = validate_rollout_zarr_store(store)
    assert result.ok and result.errors == []
    assert (result.num_rollouts, result.num_steps, result.num_candidates) == (3, 9, 36)
    assert result.to_dict()["ok"] is True and result.to_dict()["num_candidates"] == 36


def test_deleted_chunk_file_is_reported(store: Path) -> None:
    (store / "steps/reward/c/0").unlink()
    [error] = _errors_with(validate_rollout_zarr_store(store), "steps/reward: 1 chunk(s) missing")
    assert "steps/reward/c/0" in error


def test_deleted_shard_and_emptied_inner_chunk_are_reported(store: Path) -> None:
    (store / "q_h/one_step_labels/c/0/0").unlink()
    shard = store / "q_h/positions/c/0/0/0"
    data = bytearray(shard.read_bytes())
    # The index (5 inner chunks x (offset, length) uint64, then a crc32c) ends the shard:
    # mark inner chunk 1 as not stored.
    start = len(data) - 4 - 5 * 16 + 16
    data[start:start + 16] = b"\xff" * 16
    shard.write_bytes(bytes(data))
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "q_h/one_step_labels: 1 chunk(s) missing from the store: q_h/one_step_labels/c/0/0")
    _errors_with(result, "q_h/positions/c/0/0/0 inner chunk (1, 0, 0)")


def test_flipped_valid_action_is_reported(store: Path) -> None:
    row = _candidate(store, valid=True)
    _set(store, "candidates/valid_action", row, False)
    result = validate_rollout_zarr_store(store)
    _errors_with(result, f"candidates/reason_bits: invalid action without a reason bit at row {row};")
    _errors_with(result, f"candidates/label: finite label on an invalid action at row {row};")
    _errors_with(result, "q_h/valid_action_mask: stale derived view")


def test_flipped_mask_on_the_selected_candidate_is_reported(store: Path) -> None:
    row = _candidate(store, valid=True, selected=True)
    _set(store, "candidates/valid_action", row, False)
    _errors_with(validate_rollout_zarr_store(store), "the selected candidate is not a valid action")


def test_broken_td_link_is_reported(store: Path) -> None:
    _set(store, "steps/next_step_id", 0, 5)
    _set(store, "steps/terminal", 4, False)
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "steps/next_step_id: broken TD link at row 0; expected next_step_id = step_id + 1")
    _errors_with(result, "steps/terminal: terminal flag differs from the chain's end at row 4")


def test_altered_sidecar_is_reported(store: Path) -> None:
    sidecar = store / "rollout_manifest.json"
    _edit_json(sidecar, lambda data: data["config"].update(split_manifest_hash="other"))
    _errors_with(validate_rollout_zarr_store(store), "does not match root attrs manifest_sha256")
    sidecar.write_bytes(sidecar.read_bytes()[:-5])
    _errors_with(validate_rollout_zarr_store(store), "rollout_manifest.json: not a valid rollout manifest")
    sidecar.unlink()
    _errors_with(validate_rollout_zarr_store(store), "rollout_manifest.json: sidecar manifest is missing")


def test_missing_required_root_attr_is_reported(store: Path) -> None:
    _edit_json(store / "zarr.json", lambda meta: meta["attributes"].pop("reason_codes"))
    _errors_with(validate_rollout_zarr_store(store), "root attrs: required attr 'reason_codes' is missing")


def test_wrong_schema_version_and_counts_are_reported(store: Path) -> None:
    def edit(meta: dict) -> None:
        meta["attributes"]["schema_version"] = 2
        meta["attributes"]["counts"]["steps"] = 8
    _edit_json(store / "zarr.json", edit)
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "root attrs schema_version: found 2; expected 1")
    _errors_with(result, "steps/reward: 9 rows, expected 8 (attrs counts.steps)")


def test_stale_q_h_is_reported_both_ways(store: Path) -> None:
    row = _candidate(store, valid=True)
    _set(store, "candidates/label", row, 123.0)
    _errors_with(validate_rollout_zarr_store(store), "q_h/one_step_labels: stale derived view (differs from a rebuild")
    _set(store, "candidates/label", row, zarr.open_array(str(store / "q_h/one_step_labels"))[...].ravel()[0])
    fresh = store.parent / "fresh"
    write_rollout_zarr_store(fresh, make_records(0, payload=True), field_retention_policy="full",
                             q_h_chunk_states=2, discount_gamma=0.9)
    _set(fresh, "q_h/td_return", 2, 7.5)
    [error] = _errors_with(validate_rollout_zarr_store(fresh), "q_h/td_return: stale derived view")
    assert "at row 2;" in error


def test_missing_reward_is_reported(store: Path) -> None:
    _set(store, "steps/reward", 3, np.nan)
    _errors_with(validate_rollout_zarr_store(store), "steps/reward: missing (non-finite) reward at row 3")


def test_empty_strategy_id_in_vocabulary_is_reported(store: Path) -> None:
    def edit(meta: dict) -> None:
        meta["attributes"]["strategy_ids"][0] = ""
    _edit_json(store / "rollouts/zarr.json", edit)
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "rollouts attrs strategy_ids: empty or non-string entries at codes [0]")
    _errors_with(result, "rollouts/strategy_code: code naming an empty entry")
    _errors_with(result, "candidates attrs strategy_ids: differs from rollouts attrs strategy_ids")


def test_finite_label_on_invalid_action_is_reported(store: Path) -> None:
    row = _candidate(store, valid=False)
    _set(store, "candidates/label", row, 0.0)
    _errors_with(validate_rollout_zarr_store(store),
                 f"candidates/label: finite label on an invalid action at row {row}; expected NaN")


def test_undeclared_reason_bit_is_reported(store: Path) -> None:
    row = _candidate(store, valid=False)
    _set(store, "candidates/reason_bits", row, 1 << 9)
    _errors_with(validate_rollout_zarr_store(store), f"candidates/reason_bits: undeclared reason bit set at row {row}")


def test_provenance_and_sentinels_are_reported_together(store: Path) -> None:
    _set(store, "sources/shard_sha256", 1, 0)
    _set(store, "steps/audit_valid_candidates", (slice(0, 2),), -2)
    _set(store, "candidates/mixture_code", 0, 1)
    _edit_json(store / "zarr.json", lambda meta: meta["attributes"]["config"].pop("target_protocol_version"))
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "sources/shard_sha256: all-zero shard SHA-256 (no source hash recorded) at row 1")
    _errors_with(result, "steps/audit_valid_candidates: negative count other than the -1 sentinel at rows [0, 1]")
    _errors_with(result, "candidates/mixture_code:")
    _errors_with(result, "root attrs config.target_protocol_version: found None")


def test_wrong_dtype_is_reported_and_other_checks_still_run(store: Path) -> None:
    group = zarr.open_group(str(store / "steps"), mode="r+")
    values = group["source_row"][...]
    del group["source_row"]
    group.create_array("source_row", data=values.astype(np.float64), config={"write_empty_chunks": True})
    _set(store, "steps/reward", 1, np.inf)
    result = validate_rollout_zarr_store(store)
    _errors_with(result, "steps/source_row: dtype float64, expected int64")
    _errors_with(result, "steps/reward: missing (non-finite) reward at row 1")


@pytest.mark.parametrize("damage", ["no directory", "empty directory", "garbage root json", "garbage group json"])
def test_unopenable_store_is_reported_not_raised(store: Path, damage: str) -> None:
    if damage == "no directory":
        target = store.parent / "absent"
    elif damage == "empty directory":
        target = store.parent / "empty"
        target.mkdir()
    elif damage == "garbage root json":
        target = store
        (store / "zarr.json").write_text("{not json")
    else:
        target = store
        (store / "rollouts/zarr.json").write_bytes(b"\x00\xff garbage")
    result = validate_rollout_zarr_store(target)
    assert not result.ok and result.errors
    if damage == "garbage group json":
        _errors_with(result, "rollouts/")
    else:
        assert len(result.errors) == 1


def test_corrupt_payload_is_skipped_only_when_asked(store: Path) -> None:
    (store / "steps/selected_payload/c/0/0/0").write_bytes(b"not zstd")
    _errors_with(validate_rollout_zarr_store(store), "steps/selected_payload: chunks do not decode")
    assert validate_rollout_zarr_store(store, validate_selected_payload=False).ok


def test_validation_writes_nothing(store: Path) -> None:
    before = tree_digest(store)
    validate_rollout_zarr_store(store)
    assert tree_digest(store) == before
    (store / "steps/reward/c/0").unlink()
    before = tree_digest(store)
    assert not validate_rollout_zarr_store(store).ok
    assert tree_digest(store) == before


def test_many_bad_rows_are_counted_not_listed(store: Path) -> None:
    _set(store, "candidates/candidate_id", slice(None), -7)
    [error] = _errors_with(validate_rollout_zarr_store(store), "candidates/candidate_id: id differs from its position")
    assert "rows [0, 1, 2, 3, 4, ...] (36 rows)" in error
