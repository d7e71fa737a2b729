"""Hostile rollout stores: a real small store with its root attrs, sidecar, array metadata
or chunk bytes mutated. Whatever the damage, RolloutZarrStoreReader and its methods either
work or raise a KurationError (RolloutStoreError / RolloutInputError) naming the store,
validate_rollout_zarr_store never raises, acquisition_row_context raises only
RolloutStoreError, and nothing hangs (each example runs under an alarm)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import KurationError, RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, pack_rollout_zarr_stores, validate_rollout_zarr_store
from kuration.rollouts.schema import ARRAYS, MANIFEST_FILENAME
from kuration.rollouts.writer import write_rollout_zarr_store
from kuration.testing.strategies import damaged
from tests.hostile import HUGE_INTS, json_texts, mutated, values
from tests.rollouts.store_factory import make_records
from tests.rollouts.writer_records import sample_records

#: Seconds one example may take before it counts as a hang.
HANG_SECONDS = 10
#: Examples per test: a few by default (the file stays fast); KURATION_FUZZ_EXAMPLES=40 fuzzes longer.
HOSTILE = settings(max_examples=int(os.environ.get("KURATION_FUZZ_EXAMPLES", "5")), deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])
_PATHS = [spec.path for spec in ARRAYS]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    write_rollout_zarr_store(root / "store", sample_records(payload=True), field_retention_policy="full")
    write_rollout_zarr_store(root / "a", make_records(0, chains=2))
    write_rollout_zarr_store(root / "b", make_records(1, chains=2))
    pack_rollout_zarr_stores([root / "a", root / "b"], root / "packed")
    return {"store": root / "store", "packed": root / "packed"}


@contextmanager
def copy_of(store: Path) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        target = Path(folder) / "store"
        shutil.copytree(store, target)
        yield target


@contextmanager
def no_hang(what: str) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what}: still running after {HANG_SECONDS} s")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _call(store: Path, name: str, call: Callable[[], Any], allowed: tuple[type[BaseException], ...]) -> None:
    try:
        call()
    except allowed as exc:
        assert str(store) in str(exc) or MANIFEST_FILENAME in str(exc) or any(p in str(exc) for p in _PATHS) \
            or "root attrs" in str(exc), f"{name}: the error names neither the store nor the file: {exc}"
    except BaseException as exc:  # noqa: BLE001 -- the point: anything else is a failure, shown with its type
        raise AssertionError(f"{name} raised a raw {type(exc).__name__}: {exc}") from exc


#: Arrays the reader reads in every example (one of each kind: plain, sharded, padded view,
#: optional payload, optional audit); an example that damages another array reads that one too.
SAMPLED_PATHS = ("steps/reward", "candidates/position", "q_h/positions", "steps/selected_payload",
                 "steps/audit_valid_candidates")


def exercise(store: Path, *, damaged_path: str | None = None, skip_payload: bool = False) -> list[str]:
    """The reader's entry points, validation and lineage on ``store``; returns the validation
    errors. Fails the test on a raw exception or a hang."""
    with no_hang(str(store)):
        try:
            result = validate_rollout_zarr_store(store, validate_selected_payload=not skip_payload)
        except BaseException as exc:  # noqa: BLE001
            raise AssertionError(f"validate_rollout_zarr_store raised {type(exc).__name__}: {exc}") from exc
        assert isinstance(result.errors, list) and all(isinstance(e, str) for e in result.errors)
        try:
            reader = RolloutZarrStoreReader(store)
        except KurationError as exc:
            assert str(store) in str(exc), exc
            assert not result.ok, f"the reader refused a store validation passes: {exc}"
            # lineage reads through the reader: on a store the reader refuses, it refuses too
            _call(store, "acquisition_row_context", lambda: RolloutZarrStoreReader(store).acquisition_row_context(
                "steps", 0), (RolloutStoreError,))
            return result.errors
        except BaseException as exc:  # noqa: BLE001
            raise AssertionError(f"RolloutZarrStoreReader raised a raw {type(exc).__name__}: {exc}") from exc
        allowed = (KurationError,)
        _call(store, "manifest", reader.manifest, allowed)
        _call(store, "attrs", lambda: (reader.attrs, reader.counts, reader.widths), allowed)
        paths = SAMPLED_PATHS if damaged_path is None else (*SAMPLED_PATHS, damaged_path)
        for path in paths:
            _call(store, f"array({path})", lambda p=path: reader.array(p), allowed)  # type: ignore[misc]
            _call(store, f"array_rows({path})", lambda p=path: reader.array_rows(p, np.array([0, 0])), allowed)  # type: ignore[misc]
            _call(store, f"has_array({path})", lambda p=path: reader.has_array(p), allowed)  # type: ignore[misc]
        _call(store, "candidate_shell_index", reader.candidate_shell_index, allowed)
        if damaged_path is not None and damaged_path.startswith("q_h/"):
            _call(store, "q_h_view()", reader.q_h_view, allowed)
        _call(store, "q_h_view(0.5)", lambda: reader.q_h_view(0.5), allowed)
        for table in ("rollouts", "candidates"):
            _call(store, f"acquisition_row_context({table})", lambda t=table: reader.acquisition_row_context(t, 0),  # type: ignore[misc]
                  (RolloutStoreError,))
    return result.errors


def _write_json(path: Path, document: Any) -> None:
    path.write_text(json.dumps(document, allow_nan=True))


# -- root attrs ---------------------------------------------------------------------------------


@HOSTILE
@given(data=st.data(), which=st.sampled_from(["store", "packed"]))
def test_mutated_root_attrs(pristine: dict[str, Path], data: st.DataObject, which: str) -> None:
    with copy_of(pristine[which]) as store:
        meta = json.loads((store / "zarr.json").read_text())
        before = meta["attributes"]
        meta["attributes"] = data.draw(mutated(before, python=False))
        _write_json(store / "zarr.json", meta)
        errors = exercise(store)
        if meta["attributes"] != before and not isinstance(meta["attributes"], dict):
            assert errors


@HOSTILE
@given(key=st.sampled_from(["counts", "widths", "config", "reason_codes", "schema_version", "packing"]),
       sub=st.sampled_from(["steps", "candidates", "A", "P", "payload", "discount_gamma", "bits", None]),
       value=HUGE_INTS | st.sampled_from([float("nan"), float("inf"), -1, 2**31, 10**12, [10**12], {"x": [[]]}]))
def test_huge_and_odd_numbers_in_root_attrs(pristine: dict[str, Path], key: str, sub: str | None,
                                            value: Any) -> None:
    with copy_of(pristine["packed" if key == "packing" else "store"]) as store:
        meta = json.loads((store / "zarr.json").read_text())
        attrs = meta["attributes"]
        if sub is None or not isinstance(attrs.get(key), dict):
            attrs[key] = value
            known = True
        else:
            known = sub in attrs[key] or key in ("counts", "packing")  # fixed key sets / a digest-bound block
            attrs[key][sub] = value
        _write_json(store / "zarr.json", meta)
        errors = exercise(store)
        if known:
            assert errors


@HOSTILE
@given(data=st.data())
def test_root_zarr_json_as_hostile_text(pristine: dict[str, Path], data: st.DataObject) -> None:
    with copy_of(pristine["store"]) as store:
        meta = json.loads((store / "zarr.json").read_text())
        (store / "zarr.json").write_bytes(data.draw(json_texts(meta)))
        exercise(store)


# -- the sidecar --------------------------------------------------------------------------------


@HOSTILE
@given(data=st.data(), which=st.sampled_from(["store", "packed"]))
def test_hostile_sidecar(pristine: dict[str, Path], data: st.DataObject, which: str) -> None:
    with copy_of(pristine[which]) as store:
        sidecar = store / MANIFEST_FILENAME
        original = sidecar.read_bytes()
        kind = data.draw(st.sampled_from(["text", "cut", "latin1", "bytes"]))
        if kind == "text":
            changed = data.draw(json_texts(json.loads(original)))
        elif kind == "cut":
            changed = original[: data.draw(st.integers(0, len(original) - 1))]
        elif kind == "latin1":
            changed = original.replace(b'"', b'"\xe9\xff', 1)
        else:
            changed = data.draw(damaged(original))
        sidecar.write_bytes(changed)
        errors = exercise(store)
        if json.loads(changed) != json.loads(original) if _is_json(changed) else True:
            assert any(MANIFEST_FILENAME in e for e in errors), errors


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


# -- array metadata ----------------------------------------------------------------------------


@HOSTILE
@given(data=st.data(), path=st.sampled_from(_PATHS))
def test_mutated_array_metadata(pristine: dict[str, Path], data: st.DataObject, path: str) -> None:
    with copy_of(pristine["store"]) as store:
        meta_file = store / path / "zarr.json"
        meta = json.loads(meta_file.read_text())
        field = data.draw(st.sampled_from(["shape", "data_type", "chunk_grid", "fill_value", "codecs", "any",
                                           "text"]))
        if field == "text":
            meta_file.write_bytes(data.draw(json_texts(meta)))
            exercise(store, damaged_path=path)
            return
        if field == "shape":
            meta["shape"] = data.draw(st.lists(st.integers(0, 40) | HUGE_INTS | st.sampled_from([-1, 10**12]),
                                               max_size=4) | values(python=False))
        elif field == "data_type":
            meta["data_type"] = data.draw(st.sampled_from(["float64", "int8", "bool", "uint64", "string", "bytes",
                                                           "complex128", "r16", "nonsense"]) | values(python=False))
        elif field == "chunk_grid":
            chunk = data.draw(st.lists(st.integers(0, 8) | st.sampled_from([10**12, -3]), min_size=0, max_size=4))
            meta["chunk_grid"] = data.draw(st.sampled_from([
                {"name": "regular", "configuration": {"chunk_shape": chunk}},
                {"name": "rectilinear", "configuration": {"chunk_shape": chunk}}, "garbage", None]))
        elif field == "fill_value":
            meta["fill_value"] = data.draw(values(python=False))
        elif field == "codecs":
            changed = data.draw(mutated({"c": meta["codecs"]}, python=False))
            meta["codecs"] = changed.get("c", []) if isinstance(changed, dict) else changed
        else:
            changed = data.draw(mutated(meta, python=False))
            meta = changed if isinstance(changed, dict) else meta | {"node_type": changed}
        _write_json(meta_file, meta)
        exercise(store, damaged_path=path)


@HOSTILE
@given(path=st.sampled_from(["steps/reward", "candidates/position", "q_h/positions", "steps/selected_payload"]),
       rows=st.sampled_from([10**6, 10**9, 10**12, 2**62]), chunk=st.sampled_from([1, 7, 10**6]))
def test_a_huge_declared_array_does_not_hang(pristine: dict[str, Path], path: str, rows: int, chunk: int) -> None:
    """An array whose zarr.json (and root counts) claim trillions of rows: nothing may try to
    read, allocate or walk its whole chunk grid."""
    with copy_of(pristine["store"]) as store:
        meta_file = store / path / "zarr.json"
        meta = json.loads(meta_file.read_text())
        meta["shape"][0] = rows
        grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
        grid[0] = chunk
        _write_json(meta_file, meta)
        assert exercise(store, damaged_path=path)
        root = json.loads((store / "zarr.json").read_text())
        table = "steps" if path.startswith("q_h/") else path.split("/")[0]
        root["attributes"]["counts"][table] = rows
        _write_json(store / "zarr.json", root)
        assert exercise(store, damaged_path=path)


# -- chunk bytes --------------------------------------------------------------------------------


@HOSTILE
@given(data=st.data(), path=st.sampled_from(_PATHS))
def test_damaged_chunk_bytes(pristine: dict[str, Path], data: st.DataObject, path: str) -> None:
    with copy_of(pristine["store"]) as store:
        chunks = sorted(p for p in (store / path).rglob("*") if p.is_file() and p.name != "zarr.json")
        chunk = data.draw(st.sampled_from(chunks))
        original = chunk.read_bytes()
        if data.draw(st.booleans()):
            chunk.write_bytes(data.draw(damaged(original)))
        else:
            chunk.unlink()
        skip_payload = path == "steps/selected_payload" and data.draw(st.booleans())
        errors = exercise(store, damaged_path=path, skip_payload=skip_payload)
        if skip_payload:
            assert not any(e.startswith(path) for e in errors), errors
        elif not chunk.exists():
            assert any(path in e for e in errors), errors


# -- what the fuzz found, pinned ----------------------------------------------------------------


def _edit_root(store: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    meta = json.loads((store / "zarr.json").read_text())
    edit(meta["attributes"])
    _write_json(store / "zarr.json", meta)


def test_a_deleted_chunk_is_refused_by_the_reader_not_read_as_fill(pristine: dict[str, Path]) -> None:
    with copy_of(pristine["store"]) as store:
        (store / "candidates" / "label" / "c" / "0").unlink()
        reader = RolloutZarrStoreReader(store)
        with pytest.raises(RolloutStoreError, match=r"candidates/label: the chunk grid declares 1 chunk\(s\) .* but 0 "
                                                    r"chunk file\(s\) are stored"):
            reader.array("candidates/label")
        assert reader.array("candidates/valid_action").shape == (23,)  # other arrays still read


def test_trillions_of_declared_rows_are_refused_without_reading(pristine: dict[str, Path]) -> None:
    with copy_of(pristine["store"]) as store:
        meta_file = store / "steps" / "reward" / "zarr.json"
        meta = json.loads(meta_file.read_text())
        meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"] = [10**12], [1]
        _write_json(meta_file, meta)
        _edit_root(store, lambda attrs: attrs["counts"].update(steps=10**12))
        with no_hang("huge grid"):
            errors = validate_rollout_zarr_store(store).errors
            assert any("steps/reward: the chunk grid declares 1000000000000 chunk(s)" in e for e in errors), errors
            with pytest.raises(RolloutStoreError, match="chunk grid declares 1000000000000"):
                RolloutZarrStoreReader(store).array("steps/reward")


def test_a_hostile_shell_width_is_refused_before_the_view_is_sized(pristine: dict[str, Path]) -> None:
    with copy_of(pristine["store"]) as store:
        _edit_root(store, lambda attrs: attrs["widths"].update(A=2**31))
        with no_hang("widths.A"):
            with pytest.raises(RolloutStoreError, match=r"does not match root attrs widths.A 2147483648"):
                RolloutZarrStoreReader(store).q_h_view(0.5)
            errors = validate_rollout_zarr_store(store).errors
        assert any(e.startswith("root attrs widths.A: found 2147483648; expected 5") for e in errors), errors


def test_counts_with_an_unknown_table_fail_validation_as_they_fail_the_reader(pristine: dict[str, Path]) -> None:
    with copy_of(pristine["store"]) as store:
        _edit_root(store, lambda attrs: attrs["counts"].update(A=3))
        with pytest.raises(RolloutStoreError, match=r"root attrs counts: unexpected keys \['A'\]"):
            RolloutZarrStoreReader(store)
        assert "root attrs counts: unexpected keys ['A']" in " ".join(validate_rollout_zarr_store(store).errors)


def test_a_nan_in_the_packing_archive_is_a_store_error(pristine: dict[str, Path]) -> None:
    with copy_of(pristine["packed"]) as store:
        _edit_root(store, lambda attrs: attrs["packing"]["inputs"][0]["rows"].update(steps=[0, float("nan")]))
        errors = validate_rollout_zarr_store(store).errors
        assert any("root attrs packing: has no canonical JSON form" in e for e in errors), errors
        with pytest.raises(RolloutStoreError, match="root attrs packing: has no canonical JSON form"):
            RolloutZarrStoreReader(store).acquisition_row_context("steps", 0)
