"""Small hand-built rollout records and real stores written from them, for the validation,
packing and lineage tests. Every store is written by the project's writer; the tests then
corrupt it with plain zarr writes and file edits.

Records are deterministic in ``seed``; shells vary in width (so ``q_h/`` pads), every shell
has an invalid candidate (reason bit 0 or 1, NaN label) and chains have different lengths.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from kuration.rollouts.records import (
    CandidateShell,
    RolloutSourceRef,
    RolloutStepRecord,
    RolloutTargetRecord,
    RolloutWriteRecord,
)

STATE_WIDTH = 3
POSITION_WIDTH = 2


def _shell(rng: np.random.Generator, width: int) -> CandidateShell:
    valid = np.ones(width, dtype=bool)
    valid[-1] = False  # the last candidate of every shell is invalid: a masked row with a reason bit
    reason_bits = np.where(valid, 0, 1 << int(rng.integers(0, 2))).astype(np.uint32)
    labels = np.where(valid, rng.normal(size=width), np.nan).astype(np.float32)
    return CandidateShell(action_ids=np.arange(width, dtype=np.int32),
                          positions=rng.normal(size=(width, POSITION_WIDTH)).astype(np.float32),
                          valid_action=valid, reason_bits=reason_bits, labels=labels,
                          label_valid=valid & np.isfinite(labels))


def make_records(seed: int = 0, *, chains: int = 3, strategy: str = "greedy", mixture: str = "mix-a",
                 payload: bool = False) -> list[RolloutWriteRecord]:
    """``chains`` chains of 2, 3, 4, ... steps with shells 3..5 wide, from two sources."""
    rng = np.random.default_rng(seed)
    records = []
    for chain in range(chains):
        shard = f"train/shard_{seed:03d}_{chain % 2}.npz"
        source = RolloutSourceRef(shard_path=shard, shard_sha256=hashlib.sha256(shard.encode()).hexdigest(),
                                  entity=f"robot-{chain % 2}", split="train", n_states=100_000)
        steps = []
        for index in range(2 + chain):
            shell = _shell(rng, 3 + (index + chain) % 3)
            steps.append(RolloutStepRecord(
                source_row=10 * chain + index, state=rng.normal(size=STATE_WIDTH).astype(np.float32), shell=shell,
                selected_shell_index=int(index % (len(shell) - 1)), reward=float(rng.normal()),
                audit_valid_candidates=int(shell.valid_action.sum()) if index % 2 == 0 else None,
                audit_selected_margin=None if index % 2 else float(abs(rng.normal())),
                selected_payload=rng.integers(0, 255, size=(2, 2), dtype=np.uint8) if payload else None))
        target = RolloutTargetRecord(kind="future_position", value=rng.normal(size=2).astype(np.float32))
        records.append(RolloutWriteRecord(
            source=source, target=target,
            strategy_id=f"{strategy}-{chain % 2}", mixture_id=mixture, steps=tuple(steps),
            termination_reason="horizon" if chain % 2 else "reached"))
    return records


def tree_digest(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file below ``directory``: its SHA-256 and mtime (ns), to show nothing was written."""
    return {str(path.relative_to(directory)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
            for path in sorted(directory.rglob("*")) if path.is_file()}


def all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
