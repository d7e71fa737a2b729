"""One way to read a rollout store: the pure schema checks the reader and validation share,
the StoreRows surface lineage and the typed projections read through (a second, in-memory
implementation gives what the reader gives), the reader's once-per-reader lineage metadata,
and seed 004's names accepted as aliases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import RolloutInputError, RolloutStoreError
from kuration.rollouts import (
    RolloutZarrStoreConfig,
    RolloutZarrStoreReader,
    pack_rollout_zarr_stores,
    validate_rollout_zarr_store,
    write_rollout_store_atomically,
    write_rollout_zarr_store,
)
from kuration.rollouts.lineage import acquisition_row_context
from kuration.rollouts.read_model import step_view
from kuration.rollouts.schema import (
    ARRAYS,
    TABLES,
    VOCABULARIES,
    array_problems,
    root_attr_problems,
    spec_of,
)
from tests.rollouts.store_factory import make_records
from tests.rollouts.writer_records import sample_records


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("one-way")
    out = {name: root / name for name in ("a", "b", "packed", "payload")}
    write_rollout_zarr_store(out["a"], make_records(0, chains=2, strategy="s0"), split_manifest_hash="split-a")
    write_rollout_zarr_store(out["b"], make_records(1, chains=3, strategy="s1"), split_manifest_hash="split-b")
    pack_rollout_zarr_stores([out["a"], out["b"]], out["packed"])
    write_rollout_zarr_store(out["payload"], sample_records(payload=True), field_retention_policy="full")
    return out


def _root_attrs(store: Path) -> dict[str, Any]:
    return json.loads((store / "zarr.json").read_text())["attributes"]


# -- the pure checks ------------------------------------------------------------------------------


def test_a_written_store_declares_no_problem(stores: dict[str, Path]) -> None:
    for store in stores.values():
        attrs = _root_attrs(store)
        assert root_attr_problems(attrs) == []
        root = zarr.open_group(str(store), mode="r")
        for spec in ARRAYS:
            assert array_problems(spec, root.get(spec.path), attrs) == [], spec.path


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda a: a.update(schema_id="other"), "root attrs schema_id: found 'other'; expected 'kuration.rollout_zarr_"),
    (lambda a: a.update(schema_version=True), "root attrs schema_version: found True; expected 1"),
    (lambda a: a.pop("config"), "root attrs: required attr 'config' is missing"),
    (lambda a: a.update(counts={"steps": 3}), "root attrs counts.sources: found None; expected a row count >= 0"),
    (lambda a: a["counts"].update(extra=1), "root attrs counts: unexpected keys ['extra']"),
    (lambda a: a.update(widths=[1]), "root attrs widths: found [1]; expected an object of widths"),
    (lambda a: a["widths"].update(payload=[2, -1]), "root attrs widths.payload: found [2, -1]; expected null"),
    (lambda a: a["widths"].update(D_s=True), "root attrs widths.D_s: found True; expected a width >= 0"),
    (lambda a: a.update(config="x"), "root attrs config: found 'x'; expected an object"),
    (lambda a: a["reason_codes"]["bits"].update(far=40), "root attrs reason_codes: found"),
    (lambda a: a.update(manifest_sha256="A" * 64), "is not a SHA-256 hex digest"),
])
def test_each_broken_root_attr_is_one_problem_the_reader_raises_and_validation_lists(
        stores: dict[str, Path], tmp_path: Path, edit: Any, problem: str) -> None:
    store = tmp_path / "store"
    shutil.copytree(stores["a"], store)
    meta = json.loads((store / "zarr.json").read_text())
    edit(meta["attributes"])
    (store / "zarr.json").write_text(json.dumps(meta))
    problems = root_attr_problems(meta["attributes"])
    assert any(problem in p for p in problems), problems
    with pytest.raises(RolloutStoreError) as refused:
        RolloutZarrStoreReader(store)
    assert problems[0] in str(refused.value)  # the reader raises the first problem
    errors = validate_rollout_zarr_store(store).errors
    assert all(p in errors for p in problems), errors  # validation reports every one


def test_not_an_object_is_one_problem() -> None:
    assert root_attr_problems([1, 2]) == ["root attrs: found [1, 2]; expected a JSON object"]


class _Meta:
    def __init__(self, dtype: str, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = np.dtype(dtype), shape


@pytest.fixture(scope="module")
def attrs(stores: dict[str, Path]) -> dict[str, Any]:
    return _root_attrs(stores["payload"])


def test_array_problems_name_the_path_what_was_found_and_what_is_expected(attrs: dict[str, Any]) -> None:
    steps = attrs["counts"]["steps"]
    reward = spec_of("steps/reward")
    assert array_problems(reward, _Meta("float32", (steps,)), attrs) == []
    assert array_problems(reward, _Meta("float64", (steps,)), attrs) == [
        "steps/reward: dtype float64, expected float32"]
    assert array_problems(reward, _Meta("float32", (steps + 2,)), attrs) == [
        f"steps/reward: {steps + 2} rows, expected {steps} (attrs counts.steps): shape ({steps + 2},), expected "
        f"({steps},)"]
    assert array_problems(reward, None, attrs) == [
        "steps/reward: required array is missing; expected float32 with one value a row (the store is incomplete)"]
    assert array_problems(spec_of("steps/audit_selected_margin"), None, attrs) == []  # optional: its sentinel
    assert array_problems(reward, object(), attrs) == ["steps/reward: is a object; expected a float32 array"]
    positions = spec_of("q_h/positions")  # q_h/ rows are the steps; trailing A x P from the widths
    width_a, width_p = attrs["widths"]["A"], attrs["widths"]["P"]
    assert array_problems(positions, _Meta("float32", (steps, width_a, width_p)), attrs) == []
    assert array_problems(positions, _Meta("float32", (steps, width_a + 1, width_p)), attrs) == [
        f"q_h/positions: trailing shape [{width_a + 1}, {width_p}], expected [{width_a}, {width_p}] from attrs widths"]
    compact = {**attrs, "widths": {**attrs["widths"], "payload": None}}
    assert array_problems(spec_of("steps/selected_payload"), _Meta("uint8", (steps, 2, 3)), compact) == [
        "steps/selected_payload: trailing widths ['payload'] not declared in attrs widths"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from([spec.path for spec in ARRAYS]), rows=st.integers(0, 40),
       extra=st.lists(st.integers(0, 6), max_size=3), dtype=st.sampled_from(["float32", "int64", "bool", "uint8"]))
def test_an_array_has_no_problem_exactly_when_it_fits_the_attrs(attrs: dict[str, Any], path: str, rows: int,
                                                                  extra: list[int], dtype: str) -> None:
    spec = spec_of(path)
    table = "steps" if spec.group == "q_h" else spec.group
    expected_trailing: list[int] = []
    for dim in spec.trailing:
        width = dim if isinstance(dim, int) else attrs["widths"][dim]
        expected_trailing += width if isinstance(width, list) else [width]
    shape = (rows, *extra)
    fits = dtype == spec.dtype and rows == attrs["counts"][table] and list(extra) == expected_trailing
    assert (array_problems(spec, _Meta(dtype, shape), attrs) == []) == fits


# -- StoreRows: lineage and the typed projections read only through it ----------------------------


class InMemoryRows:
    """A second StoreRows: every array of a store held in memory (what a test double, or a
    store served from another medium, looks like to lineage and the read model)."""

    def __init__(self, reader: RolloutZarrStoreReader) -> None:
        self.store_dir = reader.store_dir
        self._attrs = reader.attrs
        self._manifest = reader.manifest()
        self._arrays = {spec.path: reader.array(spec.path) for spec in ARRAYS if reader.has_array(spec.path)}
        self._vocabularies = {(table, name): reader.vocabulary(table, name)
                              for table, names in VOCABULARIES.items() for name in names.values()}
        self.reads: list[str] = []

    @property
    def attrs(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._attrs))

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._attrs["counts"])

    def vocabulary(self, table: str, name: str) -> list[str]:
        return list(self._vocabularies[table, name])

    def has_array(self, path: str) -> bool:
        return path in self._arrays

    def array(self, path: str) -> np.ndarray:
        self.reads.append(path)
        return self._arrays[path].copy()

    def array_rows(self, path: str, positions: Any) -> np.ndarray:
        self.reads.append(path)
        return self._arrays[path][np.asarray(positions)]

    def manifest(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._manifest))


def test_lineage_and_step_views_read_any_store_rows_alike(stores: dict[str, Path]) -> None:
    for name in ("packed", "payload"):
        reader = RolloutZarrStoreReader(stores[name])
        rows = InMemoryRows(reader)
        for table in ("rollouts", "steps", "candidates"):
            for row in (0, reader.counts[table] - 1):
                assert acquisition_row_context(rows, table, row) == reader.acquisition_row_context(table, row)
        for step in range(reader.counts["steps"]):
            assert step_view(rows, step) == reader.step_view(step)


def test_the_reader_keeps_its_lineage_metadata_and_link_columns(stores: dict[str, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    reader = RolloutZarrStoreReader(stores["packed"])
    sidecar_reads, array_reads = [], []
    manifest, array = RolloutZarrStoreReader.manifest, RolloutZarrStoreReader.array
    monkeypatch.setattr(RolloutZarrStoreReader, "manifest", lambda self: sidecar_reads.append(1) or manifest(self))
    monkeypatch.setattr(RolloutZarrStoreReader, "array",
                        lambda self, path: array_reads.append(path) or array(self, path))
    contexts = [reader.acquisition_row_context("candidates", row) for row in range(reader.counts["candidates"])]
    assert len(sidecar_reads) == 1 and len(array_reads) == len(set(array_reads))  # read once, for this reader
    fresh = RolloutZarrStoreReader(stores["packed"])  # another reader keeps its own, never one looked up by id()
    assert contexts[-1] == fresh.acquisition_row_context("candidates", reader.counts["candidates"] - 1)
    assert len(sidecar_reads) == 2


# -- seed 004's names ------------------------------------------------------------------------------


def test_the_seed_names_of_the_writer_options_are_aliases(tmp_path: Path) -> None:
    records = make_records(0, chains=2, payload=True)
    renamed = write_rollout_zarr_store(tmp_path / "renamed", records, field_retention_policy="full",
                                       source_dataset_version="dataset-v1", oracle_id="oracle-a",
                                       selected_payload_chunk_steps=2)
    seed = write_rollout_zarr_store(tmp_path / "seed", records, field_retention_policy="full",
                                    source_offline_store_version="dataset-v1", oracle_query_mode="oracle-a",
                                    selected_depth_chunk_steps=2)
    assert seed.manifest_sha256 == renamed.manifest_sha256 and seed.chunking == renamed.chunking
    config = RolloutZarrStoreReader(tmp_path / "seed").attrs["config"]
    assert (config["source_dataset_version"], config["oracle_id"], config["selected_payload_chunk_steps"]) == (
        "dataset-v1", "oracle-a", 2)
    atomically = write_rollout_store_atomically(tmp_path / "atomic", records, field_retention_policy="full",
                                                source_offline_store_version="dataset-v1",
                                                oracle_query_mode="oracle-a", selected_depth_chunk_steps=2)
    assert atomically.manifest_sha256 == renamed.manifest_sha256
    # both names with the same value are one option
    write_rollout_zarr_store(tmp_path / "both", records, oracle_id="o", oracle_query_mode="o")
    with pytest.raises(RolloutInputError, match=r"oracle_id='o' and oracle_query_mode='p' \(seed 004's name for "
                                                r"oracle_id\) disagree; pass one of them"):
        write_rollout_zarr_store(tmp_path / "refused", records, oracle_id="o", oracle_query_mode="p")
    assert not (tmp_path / "refused").exists()


def test_the_config_answers_to_the_seed_names() -> None:
    config = RolloutZarrStoreConfig(store_dir="x", source_dataset_version="v", oracle_id="o",
                                    selected_payload_chunk_steps=4)
    assert (config.source_offline_store_version, config.oracle_query_mode, config.selected_depth_chunk_steps) == (
        "v", "o", 4)
    assert RolloutZarrStoreConfig.from_keywords(store_dir="x", seed_aliases={"oracle_query_mode": "o"}).oracle_id == "o"


def test_validate_selected_depth_payload_is_the_seed_name_of_the_payload_switch(stores: dict[str, Path],
                                                                                 tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(stores["payload"], store)
    chunk = next(p for p in (store / "steps" / "selected_payload").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(b"not zstd")
    assert not validate_rollout_zarr_store(store).ok
    assert validate_rollout_zarr_store(store, validate_selected_depth_payload=False).ok
    reader = RolloutZarrStoreReader(store)
    assert reader.validate(validate_selected_depth_payload=False).ok
    assert reader.validate(False).ok and not reader.validate().ok  # the seed calls it positionally
    with pytest.raises(RolloutInputError, match="validate_selected_depth_payload"):
        validate_rollout_zarr_store(store, validate_selected_payload=False, validate_selected_depth_payload=True)


def test_every_table_is_read_through_the_reader_by_packing(stores: dict[str, Path], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real = zarr.open_group

    def counting(store: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(kwargs.get("mode", "a"))
        return real(store, *args, **kwargs)

    monkeypatch.setattr(zarr, "open_group", counting)
    pack_rollout_zarr_stores([stores["a"], stores["b"]], tmp_path / "packed")
    # per input: validation and the reader; then the one write of the packed store
    assert opened == ["r", "r", "r", "r", "w"]
    assert set(TABLES) <= set(RolloutZarrStoreReader(tmp_path / "packed").counts)
