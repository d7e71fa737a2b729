"""The seams between the rollout modules, through the real objects: RolloutZarrStoreReader's
validate() and acquisition_row_context() on real validation and lineage, q_h_view() on a
packed store, and the atomic runner refusing what the real validation refuses."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from kuration.errors import RolloutStoreError
from kuration.rollouts import (
    RolloutZarrStoreReader,
    RolloutZarrValidationResult,
    RolloutZarrWriteResult,
    pack_rollout_zarr_stores,
    write_rollout_store_atomically,
    write_rollout_zarr_store,
)
from kuration.rollouts.lineage import AcquisitionRowContext
from kuration.rollouts.schema import Q_H_ARRAY_NAMES
from tests.rollouts.store_factory import make_records, tree_digest
from tests.rollouts.writer_records import replace_step, sample_records, source


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seams")
    out = {name: root / name for name in ("in0", "in1", "in2", "packed01", "packed_twice", "payload")}
    for seed in range(3):
        write_rollout_zarr_store(out[f"in{seed}"], make_records(seed, chains=2 + seed, strategy=f"s{seed}"),
                                 split_manifest_hash=f"split-{seed}", discount_gamma=0.8)
    pack_rollout_zarr_stores([out["in0"], out["in1"]], out["packed01"])
    pack_rollout_zarr_stores([out["in2"], out["packed01"]], out["packed_twice"])
    write_rollout_zarr_store(out["payload"], sample_records(payload=True), field_retention_policy="full")
    return out


CopyOf = Callable[[str], Path]


@pytest.fixture
def copy_of(stores: dict[str, Path], tmp_path: Path) -> CopyOf:
    def make(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(stores[name], target)
        return target
    return make


# -- reader.validate() on the real validation -------------------------------------------------


@pytest.mark.parametrize("name", ["in0", "packed01", "packed_twice", "payload"])
def test_validate_of_a_clean_store_is_ok(stores: dict[str, Path], name: str) -> None:
    reader = RolloutZarrStoreReader(stores[name])
    result = reader.validate()
    assert isinstance(result, RolloutZarrValidationResult)
    assert result.ok, result.errors
    assert result.store_dir == Path(reader.store_dir)
    assert (result.num_rollouts, result.num_steps, result.num_candidates) == (
        reader.counts["rollouts"], reader.counts["steps"], reader.counts["candidates"])


def test_validate_of_a_damaged_store_reports_every_error(copy_of: CopyOf) -> None:
    store = copy_of("in1")
    (store / "candidates" / "label" / "c" / "0").unlink()
    column = zarr.open_array(str(store / "candidates" / "valid_action"), mode="r+")
    valid = np.asarray(column[...])
    valid[0] = not valid[0]
    column[...] = valid
    result = RolloutZarrStoreReader(store).validate()
    assert not result.ok
    assert any(e.startswith("candidates/label: 1 chunk(s) missing") for e in result.errors), result.errors
    assert any(e.startswith("candidates/reason_bits:") for e in result.errors), result.errors
    assert result.to_dict()["ok"] is False


def test_validate_selected_payload_false_skips_the_payload(copy_of: CopyOf) -> None:
    store = copy_of("payload")
    chunk = next(p for p in (store / "steps" / "selected_payload").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(b"\x00not a shard" * 4)
    reader = RolloutZarrStoreReader(store)
    full = reader.validate()
    assert not full.ok and all(e.startswith("steps/selected_payload") for e in full.errors), full.errors
    assert reader.validate(validate_selected_payload=False).ok
    assert reader.validate(False).ok  # positional, as the reader's signature allows


# -- reader.acquisition_row_context() on the real lineage ------------------------------------


def test_context_of_a_plain_store_through_the_reader(stores: dict[str, Path]) -> None:
    reader = RolloutZarrStoreReader(stores["in1"])
    context = reader.acquisition_row_context("candidates", 4)
    assert isinstance(context, AcquisitionRowContext)
    assert context.acquisition_manifest_sha256 == reader.attrs["manifest_sha256"]
    assert (context.table, context.row_id, context.acquisition_row_id, context.packing_depth) == (
        "candidates", 4, 4, 0)
    step = int(reader.array("candidates/step_id")[4])
    chain = int(reader.array("steps/rollout_id")[step])
    source_id = int(reader.array("rollouts/source_id")[chain])
    assert context.source["shard_sha256"] == bytes(reader.array("sources/shard_sha256")[source_id]).hex()
    assert context.generation["config"]["split_manifest_hash"] == "split-1"
    assert context.strategy_id.startswith("s1-")


@pytest.mark.parametrize("table", ["rollouts", "steps", "candidates"])
def test_context_of_a_pack_of_packs_through_the_reader(stores: dict[str, Path], table: str) -> None:
    packed = RolloutZarrStoreReader(stores["packed_twice"])
    inputs = {name: RolloutZarrStoreReader(stores[name]) for name in ("in0", "in1", "in2")}
    n2, n0 = inputs["in2"].counts[table], inputs["in0"].counts[table]
    assert packed.counts[table] == n2 + n0 + inputs["in1"].counts[table]
    n1 = inputs["in1"].counts[table]
    # every boundary of the archived ranges, and one row inside each
    for row in sorted({0, 1, n2 - 1, n2, n2 + 1, n2 + n0 - 1, n2 + n0, n2 + n0 + 1, n2 + n0 + n1 - 1}):
        if row < n2:
            name, original, depth = "in2", row, 1
        elif row < n2 + n0:
            name, original, depth = "in0", row - n2, 2
        else:
            name, original, depth = "in1", row - n2 - n0, 2
        context = packed.acquisition_row_context(table, row)
        expected = inputs[name].acquisition_row_context(table, original)
        assert context.acquisition_manifest_sha256 == inputs[name].attrs["manifest_sha256"]
        assert (context.acquisition_row_id, context.packing_depth) == (original, depth)
        assert (context.strategy_id, context.mixture_id, dict(context.source)) == (
            expected.strategy_id, expected.mixture_id, dict(expected.source))
        assert context.generation == expected.generation


def test_context_errors_through_the_reader_are_store_errors(stores: dict[str, Path], copy_of: CopyOf) -> None:
    reader = RolloutZarrStoreReader(stores["packed01"])
    for table, row in (("sources", 0), ("steps", -1), ("steps", reader.counts["steps"]), ("steps", 1.0),
                       ("steps", True), (None, 0)):
        with pytest.raises(RolloutStoreError):
            reader.acquisition_row_context(table, row)  # type: ignore[arg-type]
    store = copy_of("packed01")
    altered = RolloutZarrStoreReader(store)
    sidecar = store / "rollout_manifest.json"
    manifest = json.loads(sidecar.read_text())
    manifest["config"]["split_manifest_hash"] = "forged"
    sidecar.write_text(json.dumps(manifest))
    with pytest.raises(RolloutStoreError, match="does not match root attrs manifest_sha256"):
        altered.acquisition_row_context("steps", 0)


def test_two_readers_of_two_stores_do_not_share_lineage_metadata(stores: dict[str, Path]) -> None:
    # lineage caches metadata per reader: a reader opened after another was dropped (and its
    # id possibly reused) must not see the first store's manifest.
    digests = set()
    for name in ("in0", "in1", "in2", "in0"):
        context = RolloutZarrStoreReader(stores[name]).acquisition_row_context("steps", 0)
        digests.add((name, context.acquisition_manifest_sha256))
        assert context.generation["config"]["split_manifest_hash"] == f"split-{name[-1]}"
    assert len({digest for _, digest in digests}) == 3


# -- q_h_view on a packed store ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["packed01", "packed_twice"])
def test_q_h_view_of_a_packed_store_equals_its_rebuild(stores: dict[str, Path], name: str) -> None:
    reader = RolloutZarrStoreReader(stores[name])
    gamma = reader.attrs["config"]["discount_gamma"]
    assert gamma == 0.8
    persisted, rebuilt = reader.q_h_view(), reader.q_h_view(gamma)
    assert tuple(persisted) == Q_H_ARRAY_NAMES
    for array_name in Q_H_ARRAY_NAMES:
        assert persisted[array_name].dtype == rebuilt[array_name].dtype, array_name
        np.testing.assert_array_equal(persisted[array_name], rebuilt[array_name], err_msg=array_name)
    steps, width = reader.counts["steps"], reader.widths["A"]
    assert persisted["candidate_ids"].shape == (steps, width)
    # the packed view keeps each input's chains: its returns are the inputs' returns, in order
    parts = [RolloutZarrStoreReader(stores[n]).q_h_view()["td_return"]
             for n in (["in0", "in1"] if name == "packed01" else ["in2", "in0", "in1"])]
    np.testing.assert_array_equal(persisted["td_return"], np.concatenate(parts))


# -- the atomic runner refuses what the real validation refuses -------------------------------


def test_the_runner_promotes_nothing_that_fails_the_real_validation(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "s"
    write_rollout_store_atomically(dest, sample_records())
    before = tree_digest(dest)
    def write_then_lose_a_chunk(store_dir: Path, records: Any, **options: Any) -> RolloutZarrWriteResult:
        result = write_rollout_zarr_store(store_dir, records, **options)
        (Path(store_dir) / "steps" / "reward" / "c" / "0").unlink()
        return result

    monkeypatch.setattr("kuration.rollouts.promote.write_rollout_zarr_store", write_then_lose_a_chunk)
    with pytest.raises(RolloutStoreError, match=r"fails validation \(\d+ errors: steps/reward: 1 chunk\(s\) missing.*"
                                                r"not promoted"):
        write_rollout_store_atomically(dest, sample_records(seed=3))
    assert tree_digest(dest) == before
    assert [p.name for p in tmp_path.iterdir()] == ["s"]


def test_the_runner_refuses_a_temp_store_the_real_validation_fails(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer refuses every bad record it can see, so damage the temp store between the
    # write and the promotion (a chunk lost on the way): only the runner's real validation
    # stands between it and the destination.
    from kuration.rollouts import promote

    def write_then_lose_a_chunk(store_dir, records, **options):
        result = write_rollout_zarr_store(store_dir, records, **options)
        chunk = next(p for p in (Path(store_dir) / "candidates" / "label").rglob("*") if p.is_file()
                     and p.name != "zarr.json")
        chunk.unlink()
        return result

    monkeypatch.setattr(promote, "write_rollout_zarr_store", write_then_lose_a_chunk)
    with pytest.raises(RolloutStoreError, match="candidates/label"):
        write_rollout_store_atomically(tmp_path / "s", sample_records())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case, message", [
    ("zero_sha", r"records\[0\]\.source\.shard_sha256: all zeros"),
    ("inf_label", r"records\[0\]\.steps\[1\]\.shell\[1\]\.labels: infinite"),
    ("inf_label_on_invalid", r"records\[0\]\.steps\[0\]\.shell\[0\]\.labels: infinite"),
])
def test_the_writer_refuses_what_validation_refuses(tmp_path: Path, case: str, message: str) -> None:
    # a direct write must not leave a store only the atomic runner's validation would stop
    from kuration.errors import RolloutInputError

    records = sample_records()
    if case == "zero_sha":
        records[0] = dataclasses.replace(records[0], source=source(sha="0" * 64))
    elif case == "inf_label":
        records = replace_step(records, 0, 1, shell__labels=np.array([1.0, np.inf, 1.0], np.float32))
    else:  # candidate 0 of step 0 is invalid: its label must be NaN, never -inf
        labels = records[0].steps[0].shell.labels.copy()
        labels[0] = -np.inf
        records = replace_step(records, 0, 0, shell__labels=labels)
    with pytest.raises(RolloutInputError, match=message):
        write_rollout_zarr_store(tmp_path / "s", records)
    assert not (tmp_path / "s").exists()
