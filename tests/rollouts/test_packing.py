"""pack_rollout_zarr_stores: round trips of real stores, refusals, and the archived mapping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from kuration.errors import RolloutInputError, RolloutStoreError
from kuration.rollouts import pack_rollout_zarr_stores, validate_rollout_zarr_store
from kuration.rollouts import schema
from kuration.rollouts.qh import build_q_h
from kuration.rollouts.writer import write_rollout_zarr_store
from tests.rollouts.store_factory import make_records


def _write(directory: Path, seed: int, **options) -> Path:
    write_rollout_zarr_store(directory, make_records(seed, chains=2 + seed % 2, strategy=f"s{seed}"),
                             discount_gamma=options.pop("discount_gamma", 0.9), **options)
    return directory


def _decoded(root: zarr.Group, path: str) -> np.ndarray:
    """A column with vocabulary codes replaced by their strings (codes differ after merging)."""
    group, name = path.split("/")
    values = root[path][...]
    vocab_name = schema.VOCABULARIES.get(group, {}).get(name)
    if vocab_name is None:
        return values
    return np.asarray(root[group].attrs[vocab_name], dtype=object)[values]


def test_round_trip_of_three_stores(tmp_path: Path) -> None:
    inputs = [_write(tmp_path / f"in{seed}", seed) for seed in range(3)]
    result = pack_rollout_zarr_stores(inputs, tmp_path / "packed")
    packed = zarr.open_group(str(tmp_path / "packed"), mode="r")
    sources = [zarr.open_group(str(directory), mode="r") for directory in inputs]
    for table in schema.TABLES:
        assert packed.attrs["counts"][table] == sum(root.attrs["counts"][table] for root in sources)
    assert result.num_candidates == sum(root.attrs["counts"]["candidates"] for root in sources)
    offsets = dict.fromkeys(schema.TABLES, 0)
    shift = {"targets/source_id": "sources", "rollouts/source_id": "sources", "rollouts/target_id": "targets",
             "rollouts/first_step": "steps", "steps/rollout_id": "rollouts", "steps/candidate_start": "candidates",
             "steps/selected_candidate_id": "candidates", "candidates/step_id": "steps"}
    for root in sources:
        for spec in schema.ARRAYS:
            if spec.group not in schema.TABLES or spec.path not in root:
                continue
            n = root.attrs["counts"][spec.group]
            got = _decoded(packed, spec.path)[offsets[spec.group]:offsets[spec.group] + n]
            want = _decoded(root, spec.path)
            if spec.name == schema.table_arrays(spec.group)[0].name:
                want = want + offsets[spec.group]
            elif spec.path in shift:
                want = want + offsets[shift[spec.path]]
            elif spec.path == "steps/next_step_id":
                want = np.where(want == -1, -1, want + offsets["steps"])
            np.testing.assert_array_equal(got, want, err_msg=spec.path)
        for table in schema.TABLES:
            offsets[table] += root.attrs["counts"][table]
    validation = validate_rollout_zarr_store(tmp_path / "packed")
    assert validation.ok, validation.errors
    columns = {spec.path: packed[spec.path][...] for spec in schema.ARRAYS if spec.group in schema.TABLES
               and spec.path in packed}
    rebuilt = build_q_h(columns, discount_gamma=0.9, widths=packed.attrs["widths"])
    for name, expected in rebuilt.items():
        np.testing.assert_array_equal(packed[f"q_h/{name}"][...], expected, err_msg=name)
    archive = packed.attrs["packing"]["inputs"]
    assert [entry["rows"]["steps"] for entry in archive] == [
        [sum(r.attrs["counts"]["steps"] for r in sources[:k]), sources[k].attrs["counts"]["steps"]] for k in range(3)]


def test_mismatched_gamma_is_refused(tmp_path: Path) -> None:
    first = _write(tmp_path / "a", 0, discount_gamma=0.9)
    second = _write(tmp_path / "b", 1, discount_gamma=0.5)
    with pytest.raises(RolloutInputError, match=r"config.discount_gamma differs: 0.5 in .* vs 0.9"):
        pack_rollout_zarr_stores([first, second], tmp_path / "packed")
    assert not (tmp_path / "packed").exists()


def test_mismatched_reason_codes_and_widths_are_refused(tmp_path: Path) -> None:
    first = _write(tmp_path / "a", 0)
    second = _write(tmp_path / "b", 1, reason_codes={"out_of_bounds": 0, "resource_below_reserve": 1, "other": 5})
    with pytest.raises(RolloutInputError, match="config.reason_codes differs"):
        pack_rollout_zarr_stores([first, second], tmp_path / "packed")
    third = tmp_path / "c"
    write_rollout_zarr_store(third, make_records(2, payload=True), field_retention_policy="full", discount_gamma=0.9)
    with pytest.raises(RolloutInputError, match="field_retention_policy differs"):
        pack_rollout_zarr_stores([first, third], tmp_path / "packed")


def test_invalid_input_is_refused_with_its_errors(tmp_path: Path) -> None:
    first, second = _write(tmp_path / "a", 0), _write(tmp_path / "b", 1)
    (second / "steps/reward/c/0").unlink()
    with pytest.raises(RolloutStoreError, match=r"fails validation: steps/reward: 1 chunk\(s\) missing"):
        pack_rollout_zarr_stores([first, second], tmp_path / "packed")
    with pytest.raises(RolloutInputError, match="is also an input"):
        pack_rollout_zarr_stores([first], first)
    with pytest.raises(RolloutInputError, match="no input stores"):
        pack_rollout_zarr_stores([], tmp_path / "packed")


def test_the_packing_archive_is_committed_with_the_manifest_digest(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The root attrs are updated once, last, with the packing block and manifest_sha256
    together: a crash before that update leaves neither, after it both."""
    inputs = [_write(tmp_path / f"in{seed}", seed) for seed in range(2)]
    updates: list[tuple[str, set[str]]] = []
    real_update = zarr.core.attributes.Attributes.update

    def recording_update(self: zarr.core.attributes.Attributes, *args: object, **kwargs: object) -> None:
        updates.append((self._obj.path, set(dict(*args, **kwargs))))  # type: ignore[arg-type]
        real_update(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zarr.core.attributes.Attributes, "update", recording_update)
    pack_rollout_zarr_stores(inputs, tmp_path / "packed")
    root_updates = [keys for path, keys in updates if path == ""]
    assert len(root_updates) == 1 and {"packing", "manifest_sha256"} <= root_updates[0]
    assert validate_rollout_zarr_store(tmp_path / "packed").ok
