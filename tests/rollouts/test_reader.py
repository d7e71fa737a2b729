"""RolloutZarrStoreReader: strict, read-only, sentinels for absent optional arrays, row
reads, the shell index, q_h_view against a brute-force TD loop, and hostile stores."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import RolloutInputError, RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, write_rollout_zarr_store
from kuration.rollouts.schema import ARRAYS, MANIFEST_FILENAME, Q_H_ARRAY_NAMES
from tests.rollouts.td_reference import brute_force_returns
from tests.rollouts.writer_records import sample_records


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reader") / "store"
    write_rollout_zarr_store(path, sample_records(payload=True), field_retention_policy="full", discount_gamma=0.75)
    return path


@pytest.fixture
def copy(store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(store, target)
    return target


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()} | {
        str(p.relative_to(root)) + "/": ("dir", p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_dir()}


def test_the_reader_writes_nothing(store: Path) -> None:
    before = snapshot(store)
    reader = RolloutZarrStoreReader(store)
    reader.manifest()
    for spec in ARRAYS:
        reader.array(spec.path)
        reader.array_rows(spec.path, np.array([0, 0]))
    index = reader.candidate_shell_index()
    index.candidate_id(1, 2)
    reader.q_h_view()
    reader.q_h_view(0.5)
    _ = reader.attrs, reader.counts, reader.widths
    assert snapshot(store) == before


def test_arrays_and_rows(store: Path) -> None:
    reader = RolloutZarrStoreReader(store)
    positions = reader.array("candidates/position")
    rows = np.array([22, 0, 5, 5, 17])
    np.testing.assert_array_equal(reader.array_rows("candidates/position", rows), positions[rows])
    np.testing.assert_array_equal(reader.array_rows("steps/reward", np.array([], dtype=np.int64)),
                                  np.empty(0, np.float32))
    assert reader.array_rows("steps/selected_payload", np.array([6, 0])).shape == (2, 2, 3)
    assert reader.array("sources/shard_sha256").shape == (2, 32)


@pytest.mark.parametrize(("positions", "match"), [
    (np.array([-1]), "outside 0..22"), (np.array([23]), "outside 0..22"), (np.array([1.0]), "integer"),
    (np.array([[1]]), "1-D"), (np.array([True]), "integer"), ([0, "a"], "integer"),
])
def test_bad_positions_are_refused(store: Path, positions: object, match: str) -> None:
    with pytest.raises(RolloutInputError, match=match):
        RolloutZarrStoreReader(store).array_rows("candidates/label", positions)


def test_unknown_path_lists_the_valid_ones(store: Path) -> None:
    with pytest.raises(RolloutStoreError, match=r"unknown rollout store array 'steps/rewards'; valid paths: .*"
                                                 r"'steps/reward'"):
        RolloutZarrStoreReader(store).array("steps/rewards")


def test_an_absent_optional_array_reads_as_its_sentinel(copy: Path) -> None:
    shutil.rmtree(copy / "steps" / "audit_valid_candidates")
    shutil.rmtree(copy / "steps" / "audit_selected_margin")
    reader = RolloutZarrStoreReader(copy)
    counts = reader.array("steps/audit_valid_candidates")
    assert counts.dtype == np.int32 and counts.tolist() == [-1] * 7
    assert np.isnan(reader.array("steps/audit_selected_margin")).all()
    assert reader.array_rows("steps/audit_valid_candidates", np.array([3, 3])).tolist() == [-1, -1]
    assert not reader.has_array("steps/audit_valid_candidates") and reader.has_array("steps/reward")


def test_compact_store_has_no_payload(tmp_path: Path) -> None:
    write_rollout_zarr_store(tmp_path / "s", sample_records())
    with pytest.raises(RolloutStoreError, match="field_retention_policy"):
        RolloutZarrStoreReader(tmp_path / "s").array("steps/selected_payload")


def test_candidate_shell_index_is_cached_read_only_and_checked(store: Path) -> None:
    reader = RolloutZarrStoreReader(store)
    index = reader.candidate_shell_index()
    assert reader.candidate_shell_index() is index
    assert index.candidate_start.tolist() == [0, 5, 8, 9, 13, 15, 20]
    assert index.candidate_count.tolist() == [5, 3, 1, 4, 2, 5, 3]
    with pytest.raises(ValueError):
        index.candidate_start[0] = 1
    assert index.candidate_id(np.array([1, 6]), np.array([2, 0])).tolist() == [7, 20]
    selected = reader.array("steps/selected_candidate_id")
    np.testing.assert_array_equal(index.candidate_id(np.arange(7), reader.array("steps/selected_shell_index")),
                                  selected)
    with pytest.raises(RolloutInputError, match="shell_index 3 is outside the shell of step 1"):
        index.candidate_id(1, 3)
    with pytest.raises(RolloutInputError, match="step_id 7"):
        index.candidate_id(7, 0)


def test_persisted_view_equals_the_rebuild_at_the_written_gamma(store: Path) -> None:
    reader = RolloutZarrStoreReader(store)
    persisted, rebuilt = reader.q_h_view(), reader.q_h_view(0.75)
    assert tuple(persisted) == Q_H_ARRAY_NAMES
    for name in Q_H_ARRAY_NAMES:
        assert persisted[name].dtype == rebuilt[name].dtype
        np.testing.assert_array_equal(persisted[name], rebuilt[name], err_msg=name)
    assert not np.array_equal(reader.q_h_view(0.5)["td_return"], persisted["td_return"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gamma=st.floats(0.01, 1.0))
def test_q_h_view_matches_brute_force_td(store: Path, gamma: float) -> None:
    reader = RolloutZarrStoreReader(store)
    view = reader.q_h_view(gamma)
    chains = [[s.reward for s in r.steps] for r in sample_records(payload=True)]
    assert view["td_return"].tolist() == brute_force_returns(chains, gamma)
    terminal = view["td_terminal"]
    assert (view["td_discount"][terminal] == 0).all() and (view["td_discount"][~terminal] == np.float32(gamma)).all()


@pytest.mark.parametrize("gamma", [0.0, 1.01, float("nan"), True, "0.5"])
def test_q_h_view_refuses_a_bad_gamma(store: Path, gamma: object) -> None:
    with pytest.raises(RolloutInputError, match="discount_gamma"):
        RolloutZarrStoreReader(store).q_h_view(gamma)  # type: ignore[arg-type]


def test_manifest_holds_attrs_and_sidecar(store: Path) -> None:
    manifest = RolloutZarrStoreReader(store).manifest()
    assert manifest["attrs"]["manifest_sha256"] == manifest["sidecar_sha256"]
    assert manifest["sidecar"]["config"]["discount_gamma"] == 0.75


# -- hostile stores ---------------------------------------------------------------------------


def edit_root_attrs(store: Path, change: object) -> None:
    meta_path = store / "zarr.json"
    meta = json.loads(meta_path.read_text())
    change(meta["attributes"])  # type: ignore[operator]
    meta_path.write_text(json.dumps(meta))


@pytest.mark.parametrize(("damage", "match"), [
    (lambda p: (p / "zarr.json").write_text("{not json"), "not a readable zarr v3 group"),
    (lambda p: (p / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": []}'),
     "not a readable zarr v3 group|root attrs"),
    (lambda p: (p / "zarr.json").unlink(), "not a readable zarr v3 group"),
    (lambda p: edit_root_attrs(p, lambda a: a.update(schema_id="other")), "schema_id: found 'other'"),
    (lambda p: edit_root_attrs(p, lambda a: a.pop("schema_id")), "schema_id: found None"),
    (lambda p: edit_root_attrs(p, lambda a: a.update(schema_version=2)), "schema_version: found 2; expected 1"),
    (lambda p: edit_root_attrs(p, lambda a: a.pop("manifest_sha256")), "required attr 'manifest_sha256' is missing"),
    (lambda p: edit_root_attrs(p, lambda a: a.update(counts={"steps": -1})), r"counts\.sources: found None; expected "
                                                                             "a row count"),
    (lambda p: edit_root_attrs(p, lambda a: a.update(widths={"P": "2"})), "widths.P: found '2'; expected a width"),
    (lambda p: edit_root_attrs(p, lambda a: a.update(manifest_sha256="xyz")), "not a SHA-256"),
])
def test_a_broken_root_is_refused(copy: Path, damage: object, match: str) -> None:
    damage(copy)  # type: ignore[operator]
    with pytest.raises(RolloutStoreError, match=match):
        RolloutZarrStoreReader(copy)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RolloutStoreError, match="no rollout store here"):
        RolloutZarrStoreReader(tmp_path / "nothing")


def test_a_deleted_required_array_is_refused(copy: Path) -> None:
    shutil.rmtree(copy / "steps" / "reward")
    reader = RolloutZarrStoreReader(copy)
    with pytest.raises(RolloutStoreError, match="steps/reward: required array is missing"):
        reader.array("steps/reward")
    with pytest.raises(RolloutStoreError, match="steps/reward: required array is missing"):
        reader.q_h_view(0.5)


@pytest.mark.parametrize(("edit", "match"), [
    (lambda m: m.update(data_type="float64"), "dtype float64, expected float32"),
    (lambda m: m.update(shape=[3]), r"shape \(3,\), expected \(7,\)"),
    (lambda m: m.update(chunk_grid="garbage"), "unreadable metadata"),
])
def test_array_metadata_that_breaks_the_schema_is_refused(copy: Path, edit: object, match: str) -> None:
    meta_path = copy / "steps" / "reward" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)  # type: ignore[operator]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RolloutStoreError, match=match):
        RolloutZarrStoreReader(copy).array("steps/reward")


def test_a_corrupt_chunk_is_a_store_error(copy: Path) -> None:
    chunk = copy / "candidates" / "label" / "c" / "0"
    chunk.write_bytes(b"\x00garbage" * 3)
    reader = RolloutZarrStoreReader(copy)
    with pytest.raises(RolloutStoreError, match="candidates/label: a chunk cannot be read"):
        reader.array("candidates/label")
    with pytest.raises(RolloutStoreError, match="a chunk cannot be read"):
        reader.array_rows("candidates/label", np.array([1]))


@pytest.mark.parametrize("content", [b"{bad", b'{"a": 1, "a": 2}', b"[1]", b'{"x": NaN}'])
def test_a_bad_sidecar_is_a_store_error(copy: Path, content: bytes) -> None:
    (copy / MANIFEST_FILENAME).write_bytes(content)
    with pytest.raises(RolloutStoreError, match="rollout manifest sidecar"):
        RolloutZarrStoreReader(copy).manifest()


def test_a_missing_sidecar_is_a_store_error(copy: Path) -> None:
    os.unlink(copy / MANIFEST_FILENAME)
    with pytest.raises(RolloutStoreError, match="sidecar not found"):
        RolloutZarrStoreReader(copy).manifest()


def test_shells_out_of_order_are_refused_by_the_index(tmp_path: Path) -> None:
    import zarr

    path = tmp_path / "s"
    write_rollout_zarr_store(path, sample_records())
    array = zarr.open_array(str(path / "candidates" / "shell_index"), mode="r+")
    values = array[...]
    values[[0, 1]] = values[[1, 0]]
    array[...] = values
    with pytest.raises(RolloutStoreError, match=r"candidates/shell_index\[0\] is 1, expected 0"):
        RolloutZarrStoreReader(path).candidate_shell_index()


def test_validate_and_lineage_delegate(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kuration.rollouts.reader as reader_module

    calls: list[tuple] = []
    monkeypatch.setattr(reader_module, "validate_rollout_zarr_store", lambda d, **k: calls.append((d, k)) or "report")
    monkeypatch.setattr(reader_module.StoreLineage, "row_context", lambda self, t, i: calls.append((t, i)) or "context")
    reader = RolloutZarrStoreReader(store)
    assert reader.validate(validate_selected_payload=False) == "report"
    assert reader.acquisition_row_context("steps", 3) == "context"
    assert calls == [(reader.store_dir, {"validate_selected_payload": False}), ("steps", 3)]
