"""write_rollout_zarr_store: the factual tables round-trip through plain zarr, every input
refusal names record, step and field, and the same records give the same bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import zarr

from kuration.errors import RolloutInputError
from kuration.canonical.hashing import canonical_digest
from kuration.rollouts import RolloutZarrStoreConfig, write_rollout_zarr_store
from kuration.rollouts.qh import build_q_h
from kuration.rollouts.schema import (
    ARRAYS,
    MANIFEST_FILENAME,
    Q_H_ARRAY_NAMES,
    Q_H_TD_SEMANTICS,
    REQUIRED_ROOT_ATTRS,
    ROLLOUT_ZARR_SCHEMA_ID,
    VOCABULARIES,
)
from kuration.rollouts.normalize import normalize_rollout_records
from kuration.rollouts.writer import TARGET_CHUNK_BYTES, _layout, write_rollout_tables
from tests.rollouts.store_factory import all_files
from tests.rollouts.writer_records import SHA_A, replace_step, sample_records, source, target


def test_round_trip_through_plain_zarr(tmp_path: Path) -> None:
    records = sample_records(payload=True)
    result = write_rollout_zarr_store(tmp_path / "store", records, field_retention_policy="full",
                                      discount_gamma=0.9, split_manifest_hash="f" * 64,
                                      manifest_context={"invocation": {"argv": ["x"]}})
    assert (result.num_rollouts, result.num_steps, result.num_candidates) == (4, 7, 23)
    assert (result.num_sources, result.num_targets) == (2, 3)  # the shared source and target deduplicated
    root = zarr.open_group(str(tmp_path / "store"), mode="r")
    for name in REQUIRED_ROOT_ATTRS:
        assert name in root.attrs
    assert root.attrs["schema_id"] == ROLLOUT_ZARR_SCHEMA_ID
    assert root.attrs["widths"] == {"P": 2, "D_s": 3, "D_t": 2, "A": 5, "payload": [2, 3]}
    assert root.attrs["reason_codes"]["bits"]["recipe_other"] == 31
    for spec in ARRAYS:  # every table readable by plain zarr, with the schema dtype and row count
        array = root[spec.path]
        assert array.dtype == np.dtype(spec.dtype), spec.path
        assert array.shape[0] == (root.attrs["counts"][spec.group] if spec.group != "q_h" else 7)
        array[...]
    for group, names in VOCABULARIES.items():
        for attr in names.values():
            assert isinstance(root[group].attrs[attr], list)
    strategies = root["rollouts"].attrs["strategy_ids"]
    assert [strategies[c] for c in root["rollouts/strategy_code"][:]] == ["greedy", "random", "greedy", "recorded"]
    assert root["candidates/strategy_code"][:].tolist() == [0] * 9 + [1] * 4 + [0] * 7 + [2] * 3
    paths = root["sources"].attrs["shard_paths"]
    assert [paths[c] for c in root["sources/shard_path_code"][:]] == ["train/shard_000000.npz",
                                                                      "train/shard_000001.npz"]
    assert bytes(root["sources/shard_sha256"][0]).hex() == SHA_A
    # candidate columns in shell order, straight from the records
    flat = [s for r in records for s in r.steps]
    labels = np.concatenate([s.shell.labels for s in flat])
    np.testing.assert_array_equal(root["candidates/label"][:], labels)
    np.testing.assert_array_equal(root["candidates/valid_action"][:],
                                  np.concatenate([s.shell.valid_action for s in flat]))
    np.testing.assert_array_equal(root["steps/reward"][:], np.array([s.reward for s in flat], np.float32))
    assert root["steps/terminal"][:].tolist() == [False, False, True, True, False, True, True]
    assert root["steps/next_step_id"][:].tolist() == [1, 2, -1, -1, 5, -1, -1]
    assert root["steps/selected_candidate_id"][:].tolist() == [1, 7, 8, 12, 13, 19, 21]
    # unavailable audit values: -1 and NaN; a measured 0 stays 0
    assert root["steps/audit_valid_candidates"][:].tolist() == [5, -1, 1, 4, -1, 5, 3]
    margin = root["steps/audit_selected_margin"][:]
    assert np.isnan(margin[[1, 4]]).all() and (margin[[0, 2, 3, 5, 6]] == 0.0).all()
    assert (root["steps/selected_payload"][:, 0, 0] == [s.source_row for s in flat]).all()
    # q_h is the rebuild at the written gamma, with its semantics in the group attrs
    assert root["q_h"].attrs["discount_gamma"] == 0.9 and root["q_h"].attrs["td_semantics"] == Q_H_TD_SEMANTICS
    columns = {spec.path: root[spec.path][...] for spec in ARRAYS if spec.group != "q_h"}
    rebuilt = build_q_h(columns, discount_gamma=0.9, widths=root.attrs["widths"])
    for name in Q_H_ARRAY_NAMES:
        np.testing.assert_array_equal(root[f"q_h/{name}"][...], rebuilt[name], err_msg=name)
    # the sidecar's digest is bound into the root attrs
    sidecar = json.loads((tmp_path / "store" / MANIFEST_FILENAME).read_text())
    assert canonical_digest(sidecar) == root.attrs["manifest_sha256"] == result.manifest_sha256
    assert sidecar["invocation"] == {"argv": ["x"]} and sidecar["lineage"]["split_manifest_hash"] == "f" * 64
    assert set(sidecar["runtime"]) == {"python", "numpy", "zarr", "kuration"}


def test_compact_policy_drops_the_payload(tmp_path: Path) -> None:
    write_rollout_zarr_store(tmp_path / "s", sample_records(payload=True))
    root = zarr.open_group(str(tmp_path / "s"), mode="r")
    assert "selected_payload" not in root["steps"] and root.attrs["widths"]["payload"] is None


def test_a_direct_write_replaces_the_destination(tmp_path: Path) -> None:
    dest = tmp_path / "s"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    write_rollout_zarr_store(dest, sample_records())
    assert not (dest / "stale.txt").exists()
    write_rollout_zarr_store(dest, sample_records()[:1])
    assert zarr.open_group(str(dest), mode="r").attrs["counts"]["rollouts"] == 1


def test_same_records_give_identical_bytes(tmp_path: Path) -> None:
    write_rollout_zarr_store(tmp_path / "a", sample_records(payload=True), field_retention_policy="full")
    write_rollout_zarr_store(tmp_path / "b", sample_records(payload=True), field_retention_policy="full")
    first, second = all_files(tmp_path / "a"), all_files(tmp_path / "b")
    assert first.keys() == second.keys() and len(first) > 60
    assert first == second


def test_negative_zero_and_nan_payloads_are_canonical(tmp_path: Path) -> None:
    records = sample_records()
    odd_nan = np.frombuffer(np.uint32(0xFFC00001).tobytes(), dtype=np.float32)[0]
    labels = records[0].steps[1].shell.labels.copy()
    labels[1] = odd_nan
    records = replace_step(records, 0, 1, reward=-0.0, audit_selected_margin=-0.0, shell__labels=labels)
    write_rollout_zarr_store(tmp_path / "a", records)
    clean = replace_step(records, 0, 1, reward=0.0, audit_selected_margin=0.0,
                         shell__labels=np.where(np.isnan(labels), np.nan, labels))
    write_rollout_zarr_store(tmp_path / "b", clean)
    assert all_files(tmp_path / "a") == all_files(tmp_path / "b")


def test_chunks_aim_at_about_a_megabyte_and_wide_arrays_are_sharded() -> None:
    config = RolloutZarrStoreConfig(store_dir="x")
    from kuration.rollouts.schema import spec_of

    chunks, shards = _layout(spec_of("candidates/label"), (10_000_000,), config)
    assert chunks == (TARGET_CHUNK_BYTES // 4,) and shards is None
    chunks, shards = _layout(spec_of("candidates/position"), (10_000_000, 3), config)
    assert chunks[0] * 12 >= TARGET_CHUNK_BYTES and shards is not None and shards[0] % chunks[0] == 0
    assert _layout(spec_of("candidates/label"), (10,), config) == ((10,), None)
    chunks, _ = _layout(spec_of("q_h/positions"), (1000, 8, 3), RolloutZarrStoreConfig(store_dir="x",
                                                                                        q_h_chunk_states=64))
    assert chunks == (64, 8, 3)


def _shell_labels_with(records: list, r: int, s: int, index: int, value: float) -> np.ndarray:
    labels = records[r].steps[s].shell.labels.copy()
    labels[index] = value
    return labels


def _bits(records: list, r: int, s: int, index: int, value: int) -> np.ndarray:
    bits = records[r].steps[s].shell.reason_bits.copy()
    bits[index] = value
    return bits


def _flag(records: list, r: int, s: int, field: str, index: int, value: bool) -> np.ndarray:
    array = getattr(records[r].steps[s].shell, field).copy()
    array[index] = value
    return array


def _with_step(records: list, r: int, s: int, **changes: object) -> list:
    """``records`` with one step's fields replaced as given (no shell__ handling, so the
    shell itself can be replaced by something that is not one)."""
    steps = list(records[r].steps)
    steps[s] = dataclasses.replace(steps[s], **changes)
    out = list(records)
    out[r] = dataclasses.replace(records[r], steps=tuple(steps))
    return out


def refusals() -> list[tuple[str, object, str]]:
    base = sample_records()
    r0 = base[0]
    return [
        ("unequal shell arrays", replace_step(base, 0, 1, shell__labels=np.zeros(2, np.float32)),
         r"records\[0\]\.steps\[1\]\.shell\.labels: 2 entries"),
        ("reason 0 on invalid", replace_step(base, 0, 0, shell__reason_bits=_bits(base, 0, 0, 0, 0)),
         r"records\[0\]\.steps\[0\]\.shell\[0\]\.reason_bits: 0 on an invalid"),
        ("reason on valid", replace_step(base, 0, 0, shell__reason_bits=_bits(base, 0, 0, 1, 4)),
         r"records\[0\]\.steps\[0\]\.shell\[1\]\.reason_bits: nonzero on a valid"),
        ("bit outside the table", replace_step(base, 0, 0, shell__reason_bits=_bits(base, 0, 0, 0, 1 << 9)),
         r"records\[0\]\.steps\[0\]\.shell\[0\]\.reason_bits: has a bit outside"),
        ("label_valid on NaN", replace_step(base, 0, 1, shell__label_valid=_flag(base, 0, 1, "label_valid", 1, True)),
         r"records\[0\]\.steps\[1\]\.shell\[1\]\.labels: not finite on a label_valid"),
        ("label_valid on invalid", replace_step(
            base, 0, 0, shell__label_valid=_flag(base, 0, 0, "label_valid", 0, True)),
         r"records\[0\]\.steps\[0\]\.shell\[0\]\.label_valid: True on an invalid action"),
        ("finite label on invalid", replace_step(base, 0, 0, shell__labels=_shell_labels_with(base, 0, 0, 3, 0.0)),
         r"records\[0\]\.steps\[0\]\.shell\[3\]\.labels: finite on an invalid action"),
        ("selected out of range", replace_step(base, 2, 1, selected_shell_index=5),
         r"records\[2\]\.steps\[1\]\.selected_shell_index: 5 is out of range"),
        ("selected invalid", replace_step(base, 0, 0, selected_shell_index=3),
         r"records\[0\]\.steps\[0\]\.selected_shell_index: selects candidate 3, which is not a valid"),
        ("nan reward", replace_step(base, 1, 0, reward=float("nan")), r"records\[1\]\.steps\[0\]\.reward: nan"),
        ("inf reward", replace_step(base, 1, 0, reward=float("inf")), r"records\[1\]\.steps\[0\]\.reward: inf"),
        ("reward None", replace_step(base, 1, 0, reward=None), r"records\[1\]\.steps\[0\]\.reward: expected a number"),
        ("empty chain", [dataclasses.replace(r0, steps=())], r"records\[0\]\.steps: a chain needs"),
        ("empty strategy", [dataclasses.replace(r0, strategy_id="")], r"records\[0\]\.strategy_id"),
        ("empty mixture", [dataclasses.replace(r0, mixture_id=" ")], r"records\[0\]\.mixture_id"),
        ("empty termination", [dataclasses.replace(r0, termination_reason="")], r"records\[0\]\.termination_reason"),
        ("bad sha", [dataclasses.replace(r0, source=source(sha="A" * 64))], r"records\[0\]\.source\.shard_sha256"),
        ("short sha", [dataclasses.replace(r0, source=source(sha="ab"))], r"records\[0\]\.source\.shard_sha256"),
        ("width P", replace_step(base, 0, 1, shell__positions=np.zeros((3, 4), np.float32)),
         r"records\[0\]\.steps\[1\]\.shell\.positions: width P \(4,\)"),
        ("width D_s", replace_step(base, 2, 0, state=np.zeros(5, np.float32)),
         r"records\[2\]\.steps\[0\]\.state: width D_s \(5,\)"),
        ("width D_t", [r0, dataclasses.replace(base[1], target=dataclasses.replace(target(), value=np.zeros(3)))],
         r"records\[1\]\.target\.value: width D_t 3"),
        ("source row", replace_step(base, 0, 2, source_row=50), r"records\[0\]\.steps\[2\]\.source_row: 50"),
        ("negative row", replace_step(base, 0, 2, source_row=-1), r"records\[0\]\.steps\[2\]\.source_row"),
        ("int mask", replace_step(base, 0, 1, shell__valid_action=np.ones(3, np.int64)),
         r"records\[0\]\.steps\[1\]\.shell\.valid_action: expected a 1-D bool"),
        ("no records", [], "no rollout chains"),
        ("not a record", [object()], r"records\[0\]: expected a RolloutWriteRecord"),
        ("source disagrees", [r0, dataclasses.replace(r0, source=dataclasses.replace(r0.source, n_states=99))],
         r"records\[1\]\.source: shard"),
        ("negative audit", replace_step(base, 0, 0, audit_valid_candidates=-2),
         r"records\[0\]\.steps\[0\]\.audit_valid_candidates"),
        ("bool among int rows", replace_step(base, 0, 1, source_row=True),
         r"records\[0\]\.steps\[1\]\.source_row: expected an int in 0\.\.\d+, found True"),
        ("bool audit count", replace_step(base, 2, 1, audit_valid_candidates=np.bool_(True)),
         r"records\[2\]\.steps\[1\]\.audit_valid_candidates: expected an int"),
        ("bool margin", replace_step(base, 3, 0, audit_selected_margin=False),
         r"records\[3\]\.steps\[0\]\.audit_selected_margin: expected a number, found False"),
        ("text reward", replace_step(base, 2, 0, reward="1.0"), r"records\[2\]\.steps\[0\]\.reward: expected a number"),
        ("shell not a shell", _with_step(base, 2, 1, shell=object()),
         r"records\[2\]\.steps\[1\]\.shell: expected a CandidateShell, found object"),
        ("step not a step", [dataclasses.replace(r0, steps=(r0.steps[0], cast(Any, "step")))],
         r"records\[0\]\.steps\[1\]: expected a RolloutStepRecord, found str"),
        ("action_ids without a length", replace_step(base, 1, 0, shell__action_ids=7),
         r"records\[1\]\.steps\[0\]\.shell\.action_ids: expected a 1-D array, found 7"),
        ("2-D labels", replace_step(base, 0, 2, shell__labels=np.zeros((1, 1), np.float32)),
         r"records\[0\]\.steps\[2\]\.shell\.labels: expected a 1-D numeric array"),
        ("label overflows float32", replace_step(
            base, 3, 0, shell__labels=_shell_labels_with(base, 3, 0, 2, 0.0).astype(np.float64) + [0, 0, 1e39]),
         r"records\[3\]\.steps\[0\]\.shell\[2\]\.labels: overflows float32"),
        ("short valid mask late", replace_step(base, 2, 1, shell__valid_action=np.ones(4, bool)),
         r"records\[2\]\.steps\[1\]\.shell\.valid_action: 4 entries, but the shell has 5"),
    ]


@pytest.mark.parametrize(("name", "records", "match"), refusals(), ids=[r[0] for r in refusals()])
def test_bad_records_are_refused_before_anything_is_written(tmp_path: Path, name: str, records: list,
                                                            match: str) -> None:
    with pytest.raises(RolloutInputError, match=match):
        write_rollout_zarr_store(tmp_path / "s", records)
    assert not (tmp_path / "s").exists()


def test_full_policy_needs_a_payload_on_every_step(tmp_path: Path) -> None:
    with pytest.raises(RolloutInputError, match=r"records\[0\]\.steps\[0\]\.selected_payload: missing"):
        write_rollout_zarr_store(tmp_path / "s", sample_records(), field_retention_policy="full")


@pytest.mark.parametrize(("options", "match"), [
    ({"discount_gamma": 0.0}, "discount_gamma"), ({"discount_gamma": 1.5}, "discount_gamma"),
    ({"discount_gamma": float("nan")}, "discount_gamma"), ({"field_retention_policy": "all"}, "field_retention"),
    ({"q_h_chunk_states": 0}, "q_h_chunk_states"), ({"reason_codes": {"x": 32}}, r"reason_codes\['x'\]"),
    ({"reason_codes": {"x": 1, "y": 1}}, "share bit 1"), ({"reason_codes": {}}, "reason_codes"),
    ({"oracle_id": ""}, "oracle_id"), ({"split_manifest_hash": None}, "split_manifest_hash"),
    ({"manifest_context": {"who": 1}}, "unknown key"),
    ({"manifest_context": {"invocation": {"x": float("nan")}}}, "not JSON-serializable"),
])
def test_bad_options_are_refused(tmp_path: Path, options: dict, match: str) -> None:
    with pytest.raises(RolloutInputError, match=match):
        write_rollout_zarr_store(tmp_path / "s", sample_records(), **options)


def test_a_remote_destination_is_refused() -> None:
    with pytest.raises(RolloutInputError, match="remote URL"):
        write_rollout_zarr_store("s3://bucket/store", sample_records())


def test_config_round_trips_and_refuses_unknown_keys() -> None:
    config = RolloutZarrStoreConfig(store_dir="s", discount_gamma=0.5, reason_codes={"a": 3, "b": 0})
    assert RolloutZarrStoreConfig.from_dict(config.to_dict()) == config
    assert list(config.reason_codes) == ["b", "a"] and config.declared_reason_mask == 0b1001
    assert "store_dir" not in config.persisted()
    with pytest.raises(RolloutInputError, match="unknown key"):
        RolloutZarrStoreConfig.from_dict({**config.to_dict(), "paths": {}})
    with pytest.raises(RolloutInputError, match="store_dir"):
        RolloutZarrStoreConfig.from_dict({"discount_gamma": 1.0})


def test_every_chunk_file_is_written_even_when_it_holds_only_fill_values(tmp_path: Path) -> None:
    records = [dataclasses.replace(r, steps=tuple(dataclasses.replace(s, audit_valid_candidates=None)
                                                  for s in r.steps)) for r in sample_records()]
    write_rollout_zarr_store(tmp_path / "s", records)
    chunk = tmp_path / "s" / "steps" / "audit_valid_candidates" / "c" / "0"
    assert chunk.is_file()
    digest = hashlib.sha256(chunk.read_bytes()).hexdigest()
    assert digest  # a real file, not a fill-value hole


@pytest.mark.parametrize("layout", ["lists", "strided", "mixed_int_widths", "big_endian"])
def test_shell_arrays_in_any_layout_give_the_same_store(tmp_path: Path, layout: str) -> None:
    """The one-call join and the per-step fallback give the same bytes: Python lists,
    non-contiguous views, int32 mixed with int64 and big-endian floats all normalize alike."""
    records = sample_records()
    step = records[0].steps[0]
    shell = step.shell
    if layout == "lists":
        changes = {"shell__action_ids": shell.action_ids.tolist(), "shell__labels": shell.labels.tolist(),
                   "state": step.state.tolist()}
    elif layout == "strided":
        changes = {"shell__positions": np.asfortranarray(shell.positions),
                   "shell__labels": np.repeat(shell.labels, 2)[::2], "state": np.repeat(step.state, 2)[::2]}
    elif layout == "mixed_int_widths":
        changes = {"shell__action_ids": shell.action_ids.astype(np.int32),
                   "shell__reason_bits": shell.reason_bits.astype(np.int64)}
    else:
        changes = {"shell__labels": shell.labels.astype(">f4"), "shell__positions": shell.positions.astype(">f4")}
    write_rollout_zarr_store(tmp_path / "a", records)
    write_rollout_zarr_store(tmp_path / "b", replace_step(records, 0, 0, **changes))
    assert all_files(tmp_path / "a") == all_files(tmp_path / "b")
    tables = normalize_rollout_records(replace_step(records, 0, 0, **changes),
                                       config=RolloutZarrStoreConfig(store_dir="x"))
    for path, column in tables.columns.items():
        assert column.flags.writeable, path


def test_extra_root_attrs_join_the_final_commit(tmp_path: Path) -> None:
    config = RolloutZarrStoreConfig(store_dir=str(tmp_path / "s"))
    tables = normalize_rollout_records(sample_records(), config=config)
    result = write_rollout_tables(config, tables, extra_root_attrs={"note": {"by": "test", "n": [1, 2]}})
    root = zarr.open_group(str(tmp_path / "s"), mode="r")
    assert root.attrs["note"] == {"by": "test", "n": [1, 2]}
    assert root.attrs["manifest_sha256"] == result.manifest_sha256


@pytest.mark.parametrize(("extra", "match"), [
    ({"manifest_sha256": "0" * 64}, r"\['manifest_sha256'\] are root attrs the writer sets"),
    ({"counts": {}, "widths": {}}, r"\['counts', 'widths'\] are root attrs the writer sets"),
    ({"x": float("nan")}, "not JSON-serializable"),
    ({"": 1}, "non-empty strings"),
    ({1: "a"}, "non-empty strings"),
    (["packing"], "expected a mapping"),
])
def test_bad_extra_root_attrs_are_refused_before_anything_is_written(tmp_path: Path, extra: object,
                                                                    match: str) -> None:
    config = RolloutZarrStoreConfig(store_dir=str(tmp_path / "s"))
    tables = normalize_rollout_records(sample_records(), config=config)
    with pytest.raises(RolloutInputError, match=match):
        write_rollout_tables(config, tables, extra_root_attrs=extra)  # type: ignore[arg-type]
    assert not (tmp_path / "s").exists()
