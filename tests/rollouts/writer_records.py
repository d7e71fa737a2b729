"""Hand-built rollout records for the writer, reader and runner tests: ragged shells (widths
1..A), invalid candidates with reason bits, NaN labels, unavailable audit values, a target
that cannot give labels, and a source shared by several chains."""

from __future__ import annotations

import dataclasses

import numpy as np

from kuration.rollouts.records import (
    CandidateShell,
    RolloutSourceRef,
    RolloutStepRecord,
    RolloutTargetRecord,
    RolloutWriteRecord,
)

SHA_A = "a" * 64
SHA_B = "0123456789abcdef" * 4


def shell(width: int, *, rng: np.random.Generator, positions_width: int = 2, invalid: tuple[int, ...] = (),
          nan_label: tuple[int, ...] = ()) -> CandidateShell:
    valid = np.ones(width, dtype=bool)
    valid[list(invalid)] = False
    reason = np.where(valid, 0, 1 << 0).astype(np.uint32)
    if len(invalid) > 1:
        reason[invalid[1]] = (1 << 1) | (1 << 31)
    labels = rng.normal(size=width).astype(np.float32)
    labels[~valid] = np.nan
    labels[list(nan_label)] = np.nan
    label_valid = valid & np.isfinite(labels)
    return CandidateShell(
        action_ids=np.arange(width, dtype=np.int64) + 100,
        positions=rng.normal(size=(width, positions_width)).astype(np.float32),
        valid_action=valid, reason_bits=reason, labels=labels, label_valid=label_valid)


def step(width: int, *, rng: np.random.Generator, source_row: int, selected: int = 0, reward: float | None = None,
         audit: bool = True, payload: bool = False, **shell_kwargs: object) -> RolloutStepRecord:
    return RolloutStepRecord(
        source_row=source_row, state=rng.normal(size=3).astype(np.float32),
        shell=shell(width, rng=rng, **shell_kwargs),  # type: ignore[arg-type]
        selected_shell_index=selected, reward=float(rng.normal()) if reward is None else reward,
        audit_valid_candidates=width if audit else None, audit_selected_margin=0.0 if audit else None,
        selected_payload=np.full((2, 3), source_row, dtype=np.uint8) if payload else None)


def source(path: str = "train/shard_000000.npz", sha: str = SHA_A, entity: str = "robot_1") -> RolloutSourceRef:
    return RolloutSourceRef(shard_path=path, shard_sha256=sha, entity=entity, split="train", n_states=50)


def target(value: float = 1.0, *, label_valid: bool = True) -> RolloutTargetRecord:
    return RolloutTargetRecord(kind="future_position", value=np.array([value, -value], dtype=np.float32),
                               label_valid=label_valid)


def sample_records(*, payload: bool = False, seed: int = 0) -> list[RolloutWriteRecord]:
    """Four chains over two sources: ragged shells 1..5, invalid candidates, NaN labels,
    unavailable audits, a label-invalid target, and a repeated (source, target)."""
    rng = np.random.default_rng(seed)
    chain_a = (
        step(5, rng=rng, source_row=0, selected=1, invalid=(0, 3), payload=payload),
        step(3, rng=rng, source_row=1, selected=2, nan_label=(1,), audit=False, payload=payload),
        step(1, rng=rng, source_row=2, selected=0, payload=payload),
    )
    chain_b = (step(4, rng=rng, source_row=10, selected=3, invalid=(0,), payload=payload),)
    chain_c = (
        step(2, rng=rng, source_row=5, selected=0, audit=False, payload=payload),
        step(5, rng=rng, source_row=6, selected=4, invalid=(1, 2), nan_label=(0,), payload=payload),
    )
    chain_d = (step(3, rng=rng, source_row=7, selected=1, payload=payload),)
    return [
        RolloutWriteRecord(source=source(), target=target(1.0), strategy_id="greedy", mixture_id="mix_a",
                           steps=chain_a, termination_reason="horizon"),
        RolloutWriteRecord(source=source("train/shard_000001.npz", SHA_B), target=target(2.0, label_valid=False),
                           strategy_id="random", mixture_id="mix_a", steps=chain_b,
                           termination_reason="end_of_recording"),
        RolloutWriteRecord(source=source(), target=target(1.0), strategy_id="greedy", mixture_id="mix_b",
                           steps=chain_c, termination_reason="horizon"),
        RolloutWriteRecord(source=source(), target=target(3.0), strategy_id="recorded", mixture_id="mix_b",
                           steps=chain_d, termination_reason="battery_reserve"),
    ]


def replace_step(records: list[RolloutWriteRecord], record: int, index: int, **changes: object
                 ) -> list[RolloutWriteRecord]:
    """``records`` with one step's fields replaced (``shell__<field>`` replaces a shell field)."""
    old = records[record].steps[index]
    shell_changes = {k[len("shell__"):]: v for k, v in changes.items() if k.startswith("shell__")}
    step_changes = {k: v for k, v in changes.items() if not k.startswith("shell__")}
    new = dataclasses.replace(old, shell=dataclasses.replace(old.shell, **shell_changes), **step_changes)
    steps = list(records[record].steps)
    steps[index] = new
    out = list(records)
    out[record] = dataclasses.replace(records[record], steps=tuple(steps))
    return out
