"""Split pools: every source belongs to exactly one split before any budget is filled.

Budgets are decoupled: ``train`` is filled only from the train pool, ``test`` only from the
test pool, so a spread-out priority can never starve test. The pools come from one of:

- **resolved splits** (``split_assignments.parquet`` of :mod:`kuration.splits.artifacts`):
  a source goes to the stage its samples were resolved to (``predict``, which may overlap
  the others, is ignored), its group is the split's leakage group. A source whose samples sit in two stages, or a group
  in two stages, is refused: the plan would otherwise leak it. Scored sources the split does not mention are reported as
  ``not_in_split`` and never admitted;
- **a seeded partition** by ``group_of`` (default: each source is its own group): groups,
  visited in a seeded hash order, each go to the requested split furthest below its share
  of the candidate data (shares proportional to the requested budgets). Whole groups move,
  so no group straddles two pools.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.errors import BudgetError
from kuration.canonical.hashing import canonical_digest
from kuration.splits.stages import EXCLUSIVE_STAGES, STAGES

GroupOf = Callable[[str], str] | Mapping[str, str] | None
#: The columns of resolved split assignments that decide the split pools.
ASSIGNMENT_COLUMNS = ("stage", "source", "group")


@dataclass(frozen=True)
class SplitPools:
    """``split_of[source]`` and ``group_of[source]`` for every assigned source; ``origin`` is
    ``"resolved_splits"`` or ``"seeded_partition"``; ``not_in_split`` lists scored sources
    the resolved splits leave out."""

    split_of: dict[str, str]
    group_of: dict[str, str]
    origin: str
    not_in_split: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert_exclusive(self.split_of, self.group_of)


def assert_exclusive(split_of: Mapping[str, str], group_of: Mapping[str, str]) -> None:
    """Raise :class:`BudgetError` if a group's sources are in more than one split (a source
    maps to one split by construction of the mapping)."""
    seen: dict[str, str] = {}
    for source in sorted(split_of):
        group = group_of.get(source, source)
        split = split_of[source]
        other = seen.setdefault(group, split)
        if other != split:
            raise BudgetError(
                f"split pools: group {group!r} is in both {other!r} and {split!r} (source {source!r}); a group's "
                "sources must share one split, or it would leak across them"
            )


def pools_from_assignments(assignments: pa.Table, sources: Iterable[str]) -> SplitPools:
    """Pools from resolved split assignments (columns ``stage``, ``source``, ``group``)."""
    missing = [c for c in ASSIGNMENT_COLUMNS if c not in assignments.column_names]
    if missing:
        raise BudgetError(f"split assignments: missing column(s) {missing}; it has {assignments.column_names}")
    stage = assignments.column("stage").to_pylist()
    source = assignments.column("source").to_pylist()
    group = assignments.column("group").to_pylist()
    stages_of: dict[str, set[str]] = {}
    groups_of: dict[str, set[str]] = {}
    for st, src, grp in zip(stage, source, group, strict=True):
        if st in STAGES and st not in EXCLUSIVE_STAGES:  # predict: inference-only, may overlap, never budgeted
            continue
        if st not in EXCLUSIVE_STAGES:
            raise BudgetError(f"split assignments: stage {st!r} of source {src!r} is not one of "
                              f"{list(EXCLUSIVE_STAGES)}")
        stages_of.setdefault(src, set()).add(st)
        groups_of.setdefault(src, set()).add(src if grp is None else str(grp))
    for src in sorted(stages_of):
        if len(stages_of[src]) > 1:
            raise BudgetError(
                f"split assignments: source {src!r} has samples in {sorted(stages_of[src])}; the budget admits whole "
                "sources to one split, so resolve the split with whole sources per stage (group_by source or coarser)"
            )
        if len(groups_of[src]) > 1:
            raise BudgetError(
                f"split assignments: source {src!r} has samples in groups {sorted(groups_of[src])}; the budget's group "
                "cap and leakage guard need one group per source"
            )
    wanted = sorted(set(sources))
    split_of = {s: next(iter(stages_of[s])) for s in wanted if s in stages_of}
    group_of = {s: next(iter(groups_of[s])) for s in split_of}
    return SplitPools(split_of, group_of, "resolved_splits", tuple(s for s in wanted if s not in stages_of))


def split_assignments_identity(split_assignments: pa.Table) -> dict[str, Any]:
    """The identity of a resolved split's assignments: the SHA-256 of its distinct (stage,
    source, group) rows, what the split pools are made of, in canonical order. The dataset
    writer records it in ``config.json``'s provenance (``provenance.split``); readers that
    must prove a dataset came from a split (rollout generation) recompute it and compare.
    :class:`BudgetError` names the argument when it is not a resolved split's table."""
    if not isinstance(split_assignments, pa.Table):
        raise BudgetError(
            f"split_assignments: expected the pyarrow Table of a resolved split (read_split_assignments(root)[0], or "
            f"plan_splits(load_splits('splits.json'), universe).stage_table()), got {type(split_assignments).__name__}")
    missing = [c for c in ASSIGNMENT_COLUMNS if c not in split_assignments.column_names]
    if missing:
        raise BudgetError(f"split_assignments: missing column(s) {missing}; it has {split_assignments.column_names}. "
                          "Pass a resolved split's assignments (columns stage, source, group)")
    distinct = split_assignments.select(list(ASSIGNMENT_COLUMNS)).group_by(list(ASSIGNMENT_COLUMNS)).aggregate([])
    rows = sorted(zip(*(distinct.column(c).to_pylist() for c in ASSIGNMENT_COLUMNS), strict=True),
                  key=lambda row: [(v is None, "" if v is None else str(v)) for v in row])
    return {"origin": "split_assignments", "columns": list(ASSIGNMENT_COLUMNS),
            "sha256": canonical_digest([list(row) for row in rows])}


def seeded_hash(seed: int, text: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{text}".encode(), digest_size=8).digest(), "little")


def _group_mapping(group_of: GroupOf, sources: list[str]) -> dict[str, str]:
    if group_of is None:
        return {s: s for s in sources}
    out = {}
    for s in sources:
        try:
            group = group_of[s] if isinstance(group_of, Mapping) else group_of(s)
        except KeyError:
            raise BudgetError(f"group_of: no group for source {s!r}; give every scored source a group") from None
        if group is None:
            raise BudgetError(f"group_of: source {s!r} maps to None; return a group name")
        out[s] = str(group)
    return out


def seeded_pools(
    source_weights: Mapping[str, float], requested: Mapping[str, float], *, seed: int, group_of: GroupOf = None,
) -> SplitPools:
    """Partition sources into split pools without resolved splits. ``source_weights`` is
    each source's candidate data (seconds or segments); ``requested`` the budget per split."""
    sources = sorted(source_weights)
    groups = _group_mapping(group_of, sources)
    wanted = [s for s in EXCLUSIVE_STAGES if requested.get(s, 0) > 0]
    if not wanted:
        raise BudgetError("split pools: no split requests anything; nothing to partition sources for")
    total_request = sum(requested[s] for s in wanted)
    weight_of_group: dict[str, float] = {}
    for s in sources:
        weight_of_group[groups[s]] = weight_of_group.get(groups[s], 0.0) + float(source_weights[s])
    total = sum(weight_of_group.values())
    share = np.array([requested[s] / total_request for s in wanted])
    assigned = np.zeros(len(wanted))
    split_of_group: dict[str, str] = {}
    for group in sorted(weight_of_group, key=lambda g: (seeded_hash(seed, g), g)):
        # Furthest below its target share of all candidate data gets the next group; ties go
        # to the split listed first (train, val, test).
        deficit = share * total - assigned
        k = int(np.argmax(deficit))
        split_of_group[group] = wanted[k]
        assigned[k] += weight_of_group[group]
    split_of = {s: split_of_group[groups[s]] for s in sources}
    return SplitPools(split_of, groups, "seeded_partition")


__all__ = ["ASSIGNMENT_COLUMNS", "GroupOf", "SplitPools", "assert_exclusive", "pools_from_assignments", "seeded_hash",
           "seeded_pools", "split_assignments_identity"]
