"""RolloutChainBatch: chains of one source as columns. The writer takes batches and records
mixed, refuses a malformed batch naming the field (and a bad row as ``records[i].<field>[row]``),
and writes the same bytes whichever way the same chains come."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import RolloutInputError
from kuration.rollouts import RolloutChainBatch, write_rollout_store_atomically, write_rollout_zarr_store
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.records import RolloutSourceRef
from kuration.rollouts.normalize import normalize_rollout_records
from tests.rollouts.writer_records import SHA_A, SHA_B, replace_step, sample_records


def all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def random_batch(rng: np.random.Generator, *, sha: str = SHA_A, chains: int = 2, max_steps: int = 3,
                 max_shell: int = 4, strategy: str = "greedy", payload: bool = False) -> RolloutChainBatch:
    """A well-formed batch: ragged chains and shells, invalid candidates with reason bits,
    NaN labels, -0.0 values, unavailable audits, repeated targets."""
    lengths = rng.integers(1, max_steps + 1, chains)
    num_steps = int(lengths.sum())
    counts = rng.integers(1, max_shell + 1, num_steps)
    n = int(counts.sum())
    valid = rng.random(n) >= 0.3
    starts = np.cumsum(counts) - counts
    selected = rng.integers(0, counts)
    valid[starts + selected] = True
    labels = rng.normal(size=n).astype(np.float32)
    labels[rng.random(n) < 0.2] = -0.0
    labels[rng.random(n) < 0.15] = np.nan
    labels[~valid] = np.nan
    audit = rng.integers(-1, counts + 1)
    margin = rng.normal(size=num_steps)
    margin[rng.random(num_steps) < 0.3] = np.nan
    values = rng.integers(0, 2, (chains, 2)).astype(np.float64)
    values[rng.random(values.shape) < 0.3] *= -1.0  # -0.0 among the zeros: one target with 0.0
    return RolloutChainBatch(
        source=RolloutSourceRef(shard_path=f"train/shard_{sha[:4]}.npz", shard_sha256=sha, entity="robot_1",
                                split="train", n_states=20),
        strategy_id=strategy, mixture_id="mix_a",
        target_kind=["future_position", "goal"][int(rng.integers(0, 2))] if rng.random() < 0.5
        else [str(k) for k in rng.choice(["future_position", "goal"], chains)],
        target_values=values, target_label_valid=rng.random(chains) < 0.8, chain_lengths=lengths,
        termination_reasons=[str(r) for r in rng.choice(["horizon", "end_of_recording"], chains)],
        source_rows=rng.integers(0, 20, num_steps), states=rng.normal(size=(num_steps, 3)).astype(np.float32),
        shell_counts=counts, selected_shell_index=selected, rewards=rng.normal(size=num_steps),
        action_ids=rng.integers(0, 50, n), positions=rng.normal(size=(n, 2)).astype(np.float32),
        valid_action=valid, reason_bits=np.where(valid, 0, rng.choice([1, 2, 1 << 31], n)).astype(np.uint32),
        labels=labels, label_valid=valid & np.isfinite(labels),
        audit_valid_candidates=audit, audit_selected_margin=margin,
        selected_payload=rng.integers(0, 255, (num_steps, 2, 2)).astype(np.uint8) if payload else None)


def base_batch() -> RolloutChainBatch:
    return random_batch(np.random.default_rng(7), chains=3, max_steps=3)


# -- round trip and mixed input ----------------------------------------------------------------


def test_a_batch_round_trips_through_plain_zarr(tmp_path: Path) -> None:
    batch = base_batch()
    result = write_rollout_zarr_store(tmp_path / "s", [batch], discount_gamma=0.9)
    root = zarr.open_group(str(tmp_path / "s"), mode="r")
    lengths = np.asarray(batch.chain_lengths)
    assert (result.num_rollouts, result.num_steps, result.num_candidates) == (
        3, int(lengths.sum()), int(np.sum(batch.shell_counts)))
    assert root["rollouts/num_steps"][:].tolist() == lengths.tolist()
    assert root["steps/source_row"][:].tolist() == np.asarray(batch.source_rows).tolist()
    assert root["steps/candidate_count"][:].tolist() == np.asarray(batch.shell_counts).tolist()
    assert root["candidates/action_id"][:].tolist() == np.asarray(batch.action_ids).tolist()
    np.testing.assert_array_equal(root["candidates/position"][:], batch.positions)
    np.testing.assert_array_equal(root["candidates/label"][:], batch.labels)
    np.testing.assert_array_equal(root["steps/audit_valid_candidates"][:], batch.audit_valid_candidates)
    np.testing.assert_array_equal(root["steps/audit_selected_margin"][:],
                                  np.asarray(batch.audit_selected_margin, dtype=np.float32))
    reasons = root["rollouts"].attrs["termination_reasons"]
    assert [reasons[c] for c in root["rollouts/termination_code"][:]] == list(batch.termination_reasons)
    assert root["sources/n_states"][:].tolist() == [20]


def test_equal_targets_of_a_batch_are_stored_once(tmp_path: Path) -> None:
    batch = dataclasses.replace(base_batch(), target_kind="goal", target_values=np.ones((3, 2)) * [[1], [2], [1]],
                                target_label_valid=np.array([True, True, True]))
    write_rollout_zarr_store(tmp_path / "s", [batch])
    root = zarr.open_group(str(tmp_path / "s"), mode="r")
    assert root["rollouts/target_id"][:].tolist() == [0, 1, 0]
    assert root["targets/value"][:].tolist() == [[1.0, 1.0], [2.0, 2.0]]


def test_records_and_batches_mix_in_the_order_given(tmp_path: Path) -> None:
    records = sample_records()
    batch = dataclasses.replace(random_batch(np.random.default_rng(3), sha=SHA_B, chains=2), strategy_id="batched")
    result = write_rollout_zarr_store(tmp_path / "mixed", [records[0], batch, *records[1:]])
    root = zarr.open_group(str(tmp_path / "mixed"), mode="r")
    strategies = root["rollouts"].attrs["strategy_ids"]
    assert [strategies[c] for c in root["rollouts/strategy_code"][:]] == [
        "greedy", "batched", "batched", "random", "greedy", "recorded"]
    assert result.num_rollouts == 6
    # The same chains given as records only give the same store.
    write_rollout_zarr_store(tmp_path / "records", [records[0], *batch.to_records(), *records[1:]])
    assert all_files(tmp_path / "mixed") == all_files(tmp_path / "records")


def test_the_atomic_runner_takes_batches(tmp_path: Path) -> None:
    batch = base_batch()
    result = write_rollout_store_atomically(tmp_path / "s", [batch, *sample_records()])
    assert result.num_rollouts == 3 + 4
    write_rollout_zarr_store(tmp_path / "direct", [*batch.to_records(), *sample_records()])
    assert all_files(tmp_path / "s") == all_files(tmp_path / "direct")


@st.composite
def chain_inputs(draw: Any) -> tuple[list[RolloutChainBatch], list[bool], bool]:
    """Batches over two sources and two strategies, which of them to give as records, and
    whether to keep payloads."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    payload = draw(st.booleans())
    batches = [random_batch(rng, sha=draw(st.sampled_from([SHA_A, SHA_B])), chains=draw(st.integers(1, 3)),
                            max_steps=draw(st.integers(1, 4)), max_shell=draw(st.integers(1, 5)),
                            strategy=draw(st.sampled_from(["greedy", "random"])), payload=payload)
               for _ in range(draw(st.integers(1, 3)))]
    as_records = draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    return batches, as_records, payload


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain_inputs())
def test_the_same_chains_give_the_same_bytes_as_records_or_batches(tmp_path_factory: pytest.TempPathFactory,
                                                                   drawn: tuple[list[RolloutChainBatch], list[bool],
                                                                                bool]) -> None:
    batches, as_records, payload = drawn
    tmp = tmp_path_factory.mktemp("bytes")
    options: dict[str, Any] = {"field_retention_policy": "full" if payload else "compact", "discount_gamma": 0.9}
    records = [record for batch in batches for record in batch.to_records()]
    mixed = [item for batch, flat in zip(batches, as_records, strict=True)
             for item in (batch.to_records() if flat else (batch,))]
    write_rollout_zarr_store(tmp / "records", records, **options)
    write_rollout_zarr_store(tmp / "batches", batches, **options)
    write_rollout_zarr_store(tmp / "mixed", mixed, **options)
    expected = all_files(tmp / "records")
    assert all_files(tmp / "batches") == expected
    assert all_files(tmp / "mixed") == expected


# -- refusals ------------------------------------------------------------------------------------


def _with(**changes: Any) -> list[Any]:
    return [dataclasses.replace(base_batch(), **changes)]


def _column(name: str, row: int, value: Any) -> np.ndarray:
    array = np.array(getattr(base_batch(), name))
    array[row] = value
    return array


def refusals() -> list[tuple[str, list[Any], str]]:
    b = base_batch()
    steps = int(np.sum(b.chain_lengths))
    n = int(np.sum(b.shell_counts))
    starts = np.cumsum(b.shell_counts) - b.shell_counts
    invalid = int(np.flatnonzero(~np.asarray(b.valid_action))[0])
    unselected_invalid_step = next(s for s in range(steps) if not np.all(b.valid_action[starts[s]:starts[s]
                                                                                         + b.shell_counts[s]]))
    bad_pick = int(np.flatnonzero(~b.valid_action[starts[unselected_invalid_step]:])[0])
    return [
        ("not an input", [object()], r"records\[0\]: expected a RolloutWriteRecord or a RolloutChainBatch"),
        ("no chains", _with(chain_lengths=np.zeros(0, np.int64)), r"records\[0\]\.chain_lengths: a batch needs at "
         "least one chain"),
        ("zero-length chain", _with(chain_lengths=_column("chain_lengths", 1, 0)),
         r"records\[0\]\.chain_lengths\[1\]: 0 is not >= 1"),
        ("negative chain length", _with(chain_lengths=_column("chain_lengths", 2, -3)),
         r"records\[0\]\.chain_lengths\[2\]: -3 is not >= 1"),
        ("float chain lengths", _with(chain_lengths=np.asarray(b.chain_lengths, np.float64)),
         r"records\[0\]\.chain_lengths: expected a 1-D integer array, found dtype float64"),
        ("2-D chain lengths", _with(chain_lengths=np.asarray(b.chain_lengths)[None, :]),
         r"records\[0\]\.chain_lengths: expected a 1-D integer array, found dtype int64 shape \(1, 3\)"),
        ("target rows", _with(target_values=np.zeros((2, 2))),
         r"records\[0\]\.target_values: 2 rows, but len\(chain_lengths\) 3"),
        ("1-D target values", _with(target_values=np.zeros(3)),
         r"records\[0\]\.target_values: expected a 2-D numeric array"),
        ("int target label_valid", _with(target_label_valid=np.ones(3, np.int8)),
         r"records\[0\]\.target_label_valid: expected a 1-D bool array"),
        ("target kinds count", _with(target_kind=["goal", "goal"]),
         r"records\[0\]\.target_kind: 2 strings, but len\(chain_lengths\) 3"),
        ("empty target kind", _with(target_kind=["goal", "", "goal"]),
         r"records\[0\]\.target_kind\[1\]: expected a non-empty string"),
        ("blank shared kind", _with(target_kind=" "), r"records\[0\]\.target_kind: expected a non-empty string"),
        ("termination as one string", _with(termination_reasons="horizon"),
         r"records\[0\]\.termination_reasons: expected a sequence of 3 strings, found 'horizon'"),
        ("termination count", _with(termination_reasons=["horizon"]),
         r"records\[0\]\.termination_reasons: 1 strings, but len\(chain_lengths\) 3"),
        ("termination not text", _with(termination_reasons=["horizon", 3, "horizon"]),
         r"records\[0\]\.termination_reasons\[1\]: expected a non-empty string, found 3"),
        ("bad sha", _with(source=dataclasses.replace(b.source, shard_sha256="A" * 64)),
         r"records\[0\]\.source\.shard_sha256"),
        ("empty strategy", _with(strategy_id=""), r"records\[0\]\.strategy_id"),
        ("source rows count", _with(source_rows=np.zeros(steps + 1, np.int64)),
         rf"records\[0\]\.source_rows: {steps + 1} rows, but sum\(chain_lengths\) {steps}"),
        ("1-D states", _with(states=np.zeros(steps)), r"records\[0\]\.states: expected a 2-D numeric array"),
        ("zero shell", _with(shell_counts=_column("shell_counts", 2, 0)),
         r"records\[0\]\.shell_counts\[2\]: 0 is not >= 1"),
        ("shell counts count", _with(shell_counts=np.ones(steps - 1, np.int64)),
         r"records\[0\]\.shell_counts: \d+ rows, but sum\(chain_lengths\)"),
        ("action ids count", _with(action_ids=np.zeros(n - 1, np.int64)),
         rf"records\[0\]\.action_ids: {n - 1} rows, but sum\(shell_counts\) {n}"),
        ("1-D positions", _with(positions=np.zeros(n)), r"records\[0\]\.positions: expected a 2-D numeric array"),
        ("int valid mask", _with(valid_action=np.asarray(b.valid_action, np.int64)),
         r"records\[0\]\.valid_action: expected a 1-D bool array, found dtype int64"),
        ("text labels", _with(labels=np.asarray(b.labels).astype(str)),
         r"records\[0\]\.labels: expected a 1-D numeric array, found dtype <U"),
        ("bool rewards", _with(rewards=np.ones(steps, bool)), r"records\[0\]\.rewards: expected a 1-D numeric array"),
        ("audit count", _with(audit_valid_candidates=np.zeros(2, np.int64)),
         rf"records\[0\]\.audit_valid_candidates: 2 rows, but sum\(chain_lengths\) {steps}"),
        ("ragged column", _with(rewards=[[1.0], [1.0, 2.0]]), r"records\[0\]\.rewards: expected an array"),
        ("uint64 beyond int64", _with(action_ids=np.full(n, 2**63, np.uint64)),
         r"records\[0\]\.action_ids\[0\]: 9223372036854775808 is outside the int64 range"),
        # row rules, named in the batch's own columns
        ("nan reward", _with(rewards=_column("rewards", 4, np.nan)),
         r"records\[0\]\.rewards\[4\] \(chain \d, step \d\): nan is not finite"),
        ("source row", _with(source_rows=_column("source_rows", 3, 20)),
         r"records\[0\]\.source_rows\[3\] \(chain \d, step \d\): 20 is outside the source's 20 states"),
        ("negative audit", _with(audit_valid_candidates=_column("audit_valid_candidates", 1, -2)),
         r"records\[0\]\.audit_valid_candidates\[1\] \(chain \d, step \d\): expected an int in -1\.\.2147483647, "
         "found -2"),
        ("audit above the shell", _with(audit_valid_candidates=_column("audit_valid_candidates", 0, 99)),
         r"records\[0\]\.audit_valid_candidates\[0\] \(chain 0, step 0\): 99 valid candidates, but the shell has"),
        ("infinite margin", _with(audit_selected_margin=_column("audit_selected_margin", 1, -np.inf)),
         r"records\[0\]\.audit_selected_margin\[1\] \(chain \d, step \d\): -inf is infinite"),
        ("selected out of range", _with(selected_shell_index=_column("selected_shell_index", 0, 9)),
         r"records\[0\]\.selected_shell_index\[0\] \(chain 0, step 0\): 9 is out of range"),
        ("selected invalid", _with(selected_shell_index=_column("selected_shell_index", unselected_invalid_step,
                                                                bad_pick)),
         rf"records\[0\]\.selected_shell_index\[{unselected_invalid_step}\] \(chain \d, step \d\): selects "
         rf"candidate {bad_pick}, which is not a valid action"),
        ("finite label on invalid", _with(labels=_column("labels", invalid, 0.5)),
         rf"records\[0\]\.labels\[{invalid}\] \(chain \d, step \d, shell\[\d\]\): finite on an invalid action"),
        ("bit outside the table", _with(reason_bits=_column("reason_bits", invalid, 1 << 9)),
         rf"records\[0\]\.reason_bits\[{invalid}\] \(chain \d, step \d, shell\[\d\]\): has a bit outside"),
        ("second item's row", [*sample_records()[:1], *_with(rewards=_column("rewards", 2, np.inf))],
         r"records\[1\]\.rewards\[2\] \(chain \d, step \d\): inf is not finite"),
        ("record audit above the shell", replace_step(sample_records(), 0, 2, audit_valid_candidates=2),
         r"records\[0\]\.steps\[2\]\.audit_valid_candidates: 2 valid candidates, but the shell has 1"),
        ("record infinite margin", replace_step(sample_records(), 1, 0, audit_selected_margin=1e39),
         r"records\[1\]\.steps\[0\]\.audit_selected_margin: 1e\+39 is infinite in float32"),
        # across items
        ("D_t across items", [*sample_records()[:1], *_with(target_values=np.zeros((3, 3)))],
         r"records\[1\]\.target_values\[0\]: width D_t 3, but earlier targets have 2"),
        ("P across items", [*sample_records()[:1], *_with(positions=np.zeros((n, 4)))],
         r"records\[1\]\.positions: width \(4,\), but records\[0\]\.steps\[0\]\.shell\.positions has \(2,\)"),
        ("D_s across batches", [base_batch(), *_with(states=np.zeros((steps, 5)))],
         r"records\[1\]\.states: width \(5,\), but records\[0\]\.states has \(3,\)"),
        ("source split disagrees", [base_batch(), *_with(source=dataclasses.replace(b.source, split="val"))],
         r"records\[1\]\.source: shard"),
    ]


@pytest.mark.parametrize(("name", "items", "match"), refusals(), ids=[r[0] for r in refusals()])
def test_bad_batches_are_refused_before_anything_is_written(tmp_path: Path, name: str, items: list[Any],
                                                            match: str) -> None:
    with pytest.raises(RolloutInputError, match=match):
        write_rollout_zarr_store(tmp_path / "s", items)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("payload", "match"), [
    (None, r"records\[0\]\.selected_payload: missing, but field_retention_policy='full'"),
    (np.zeros((1, 2), np.float32), r"records\[0\]\.selected_payload: expected an N-D \(N >= 2\) uint8 array"),
    (np.zeros((1,), np.uint8), r"records\[0\]\.selected_payload: expected an N-D \(N >= 2\) uint8 array"),
    (np.zeros((1, 2), np.uint8), r"records\[0\]\.selected_payload: 1 rows, but sum\(chain_lengths\)"),
])
def test_the_full_policy_checks_a_batch_payload(payload: Any, match: str) -> None:
    batch = dataclasses.replace(base_batch(), selected_payload=payload)
    with pytest.raises(RolloutInputError, match=match):
        normalize_rollout_records([batch], config=RolloutZarrStoreConfig(store_dir="x", field_retention_policy="full"))


def test_a_payload_shape_that_differs_between_items_is_named() -> None:
    rng = np.random.default_rng(1)
    first, second = random_batch(rng, payload=True), random_batch(rng, payload=True)
    second = dataclasses.replace(second, selected_payload=np.zeros((int(np.sum(second.chain_lengths)), 3),
                                                                   np.uint8))
    with pytest.raises(RolloutInputError, match=r"records\[1\]\.selected_payload: width \(3,\), but "
                                                 r"records\[0\]\.selected_payload has \(2, 2\)"):
        normalize_rollout_records([first, second], config=RolloutZarrStoreConfig(store_dir="x",
                                                                                 field_retention_policy="full"))


def test_lists_and_narrow_dtypes_give_the_same_columns() -> None:
    """Columns given as lists or as other int/float widths normalize to the same tables."""
    batch = base_batch()
    loose = dataclasses.replace(
        batch, chain_lengths=list(map(int, batch.chain_lengths)),
        shell_counts=np.asarray(batch.shell_counts, np.uint16), action_ids=np.asarray(batch.action_ids, np.int32),
        reason_bits=np.asarray(batch.reason_bits, np.int64),
        rewards=np.asarray(batch.rewards, np.float32).astype(">f8"),
        termination_reasons=tuple(batch.termination_reasons), labels=np.asarray(batch.labels, np.float64))
    config = RolloutZarrStoreConfig(store_dir="x")
    rewards32 = dataclasses.replace(batch, rewards=np.asarray(batch.rewards, np.float32))
    expected = normalize_rollout_records([rewards32], config=config).columns
    got = normalize_rollout_records([loose], config=config).columns
    assert expected.keys() == got.keys()
    for path in expected:
        np.testing.assert_array_equal(got[path], expected[path], err_msg=path)
        assert got[path].dtype == expected[path].dtype, path
