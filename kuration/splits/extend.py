"""Stable split extension: new samples join a resolved split, and no earlier sample moves.

A computed split (``random`` / ``stratified``) recomputed from scratch over a grown
universe may move existing groups between stages, because both algorithms look at all the
groups at once. Extension instead keeps every earlier assignment exactly and places only
the samples the earlier split never decided about:

1. a new sample of a unit (a ``group``, or a ``source`` with ``group_by="source"``) that
   already has a stage joins that stage, so the unit stays whole;
2. a sample of a new unit goes where the *seeded unit hash* sends the unit
   (:func:`hashed_stage`): ``u = int(sha256("kuration.split-extension.v1\\0<seed>\\0<unit>")[:8]) / 2**64``,
   a number in ``[0, 1)``; the unit goes to ``test`` if ``u < test_ratio``, to ``val``
   if ``u < test_ratio + val_ratio``, else to ``train``. The hash depends on nothing but
   the seed and the unit's name, so a unit gets the same stage whatever else arrives and
   in whatever order, and over many units the shares approach the ratios (per unit, not
   per sample or tag: stratification needs every group at once, so it cannot be done
   incrementally without moving earlier ones);
3. with ``ad_aware``, a new anomalous sample (a non-background category) placed in
   ``train`` is left out of every stage, as the computed split leaves them out.

"Decided about" is what the earlier split assigned or deliberately left out: for a
computed split, its whole universe (an ``ad_aware`` split leaves anomalous train samples
out, and those stay out); for a baked ``splits.json``, every sample one of its stages names,
``predict`` included. A unit the earlier split saw but assigned nowhere (every sample of an
``ad_aware`` train group anomalous) takes ``left_out_stage`` when the caller knows it.

This module is pure: it maps an earlier assignment (:class:`PriorSplit`) and a universe to
new positions (:class:`SplitExtension`). Reading the earlier split from storage, and
deciding when to extend, is :mod:`kuration.splits.artifacts`'s job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kuration.checks import count, first
from kuration.errors import SplitConfigError, SplitGenerationError
from kuration.splits.bake import GROUP_BY, bake_rule, baked_config, check_ratios, computed_constraints
from kuration.splits.config import DataSplitConfig
from kuration.splits.leakage import enforce
from kuration.splits.resolution import plan_splits
from kuration.splits.stages import EXCLUSIVE_STAGES
from kuration.splits.universe import Universe

#: The versioned prefix of every extension hash; a different rule would get a new one.
EXTENSION_SCHEME = "kuration.split-extension.v1"
#: How many units / sources / uids a report or message lists (counts are always exact).
LISTED = 5
_NO_STAGE = -1


def hashed_stage(seed: int, unit: str, *, val_ratio: float, test_ratio: float) -> str:
    """The stage the seeded unit hash gives ``unit`` (a group or source name).

    ``u`` is the first 8 bytes of ``sha256(f"{EXTENSION_SCHEME}\\0{seed}\\0{unit}")`` read as a
    big-endian integer over ``2**64``: ``test`` below ``test_ratio``, ``val`` below
    ``test_ratio + val_ratio``, else ``train``. Same seed and name, same stage, on every
    machine and whatever else is in the universe."""
    check_ratios(val_ratio, test_ratio)
    digest = hashlib.sha256(f"{EXTENSION_SCHEME}\0{seed}\0{unit}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < test_ratio:
        return "test"
    return "val" if u < test_ratio + val_ratio else "train"


def describe_rule(seed: int, *, val_ratio: float, test_ratio: float, group_by: str) -> str:
    """The extension rule in one line, as the split report records it."""
    return (f"{EXTENSION_SCHEME}: a new sample joins its {group_by}'s stage; a new {group_by} goes to test if "
            f"u < {test_ratio:g}, val if u < {test_ratio + val_ratio:g}, else train, where u = sha256('"
            f"{EXTENSION_SCHEME}\\0{seed}\\0<{group_by}>')[:8] / 2**64")


@dataclass(frozen=True)
class PriorSplit:
    """An earlier assignment, seen through the current universe.

    ``positions`` are the current rows the earlier split put in each of train / val / test;
    ``decided`` marks every current row it assigned or deliberately left out. ``removed``
    counts the samples it assigned that the universe no longer holds (None when the basis
    cannot tell, as a baked file cannot); ``removed_units`` keeps their stages, so a unit
    keeps its stage while none of its samples is in the universe."""

    positions: Mapping[str, np.ndarray]
    decided: np.ndarray
    basis: str
    removed: int | None = 0
    first_removed: tuple[str, ...] = ()
    #: ``(source, group, stage)`` of every earlier assigned sample no longer in the universe.
    removed_units: tuple[tuple[str, str, str], ...] = ()

    @property
    def undecided(self) -> np.ndarray:
        """Rows of the current universe the earlier split never decided about."""
        return np.flatnonzero(~self.decided)


@dataclass(frozen=True)
class SplitExtension:
    """What :func:`extend_split` did: the merged positions and the counts the report shows.

    ``kept`` samples keep their earlier stage; of the new ones, ``joined`` went to their
    unit's stage, ``hashed`` to the stage the unit hash chose for a new unit, and
    ``held_out`` (``ad_aware``, anomalous, bound for train) to no stage."""

    positions: Mapping[str, np.ndarray]
    basis: str
    rule: str
    kept: int
    joined: int
    hashed: int
    held_out: int
    new_units: int
    first_new_units: tuple[tuple[str, str], ...]
    removed: int | None
    first_removed: tuple[str, ...] = ()
    stage_added: Mapping[str, int] = field(default_factory=dict)

    @property
    def assigned(self) -> int:
        """New samples placed in a stage."""
        return self.joined + self.hashed

    def summary(self) -> str:
        removed = "" if self.removed is None else f", {count(self.removed, 'removed sample')} dropped out"
        return (f"kept {count(self.kept, 'sample')} where they were, assigned {count(self.assigned, 'new sample')} "
                f"({self.joined:,} joined their unit's stage, {self.hashed:,} in {count(self.new_units, 'new unit')} "
                f"by the seeded unit hash){removed}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis, "rule": self.rule, "kept": self.kept, "assigned": self.assigned,
            "joined": self.joined, "hashed": self.hashed, "held_out": self.held_out,
            "new_units": self.new_units, "first_new_units": [list(pair) for pair in self.first_new_units],
            "added_per_stage": dict(self.stage_added), "removed": self.removed,
            "first_removed": list(self.first_removed), "summary": self.summary(),
        }


def _unit_columns(universe: Universe, group_by: str) -> tuple[np.ndarray, Sequence[str]]:
    if group_by not in GROUP_BY:
        raise SplitGenerationError(f"group_by must be one of {list(GROUP_BY)}, got {group_by!r}")
    if group_by == "group":
        return universe.group_codes, universe.group_names
    return universe.source_codes, universe.source_names


def extend_split(
    universe: Universe,
    prior: PriorSplit,
    *,
    seed: int,
    val_ratio: float,
    test_ratio: float,
    group_by: str = "group",
    ad_aware: bool = False,
    left_out_stage: str | None = None,
) -> SplitExtension:
    """Keep ``prior``'s positions exactly and place the samples it never decided about.

    Raises :class:`SplitGenerationError` when a new sample's unit already spans two stages
    (its stage is ambiguous), and when ``ad_aware`` has no labels to read."""
    check_ratios(val_ratio, test_ratio)
    codes, names = _unit_columns(universe, group_by)
    stage_of_row = np.full(len(universe), _NO_STAGE, np.int64)
    for k, stage in enumerate(EXCLUSIVE_STAGES):
        stage_of_row[prior.positions[stage]] = k
    new_rows = prior.undecided
    # each unit's earlier stages: from the rows kept, and from rows since removed (a group
    # whose earlier samples all left still has its stage: a sample arriving now joins it,
    # as it would have joined had it arrived before the others left)
    placed = np.flatnonzero(stage_of_row != _NO_STAGE)
    pairs = np.unique(np.stack([codes[placed], stage_of_row[placed]]), axis=1) if len(placed) else np.empty((2, 0))
    earlier: dict[int, set[int]] = {}
    for code, stage_code in zip(pairs[0].astype(np.int64).tolist(), pairs[1].astype(np.int64).tolist(), strict=True):
        earlier.setdefault(code, set()).add(stage_code)
    code_of = {name: code for code, name in enumerate(names)}
    for source, group, stage in prior.removed_units:
        code = code_of.get(group if group_by == "group" else source)
        if code is not None:
            earlier.setdefault(code, set()).add(EXCLUSIVE_STAGES.index(stage))
    _refuse_split_units(universe, names, codes, earlier, new_rows, group_by)
    unit_stage = np.full(len(names), _NO_STAGE, np.int64)
    for code, stage_codes in earlier.items():
        unit_stage[code] = min(stage_codes)  # one stage for every unit that takes a new sample
    if left_out_stage is not None:
        seen = np.zeros(len(names), dtype=bool)
        seen[codes[prior.decided]] = True
        unit_stage[seen & (unit_stage == _NO_STAGE)] = EXCLUSIVE_STAGES.index(left_out_stage)
    joins = unit_stage[codes[new_rows]] != _NO_STAGE
    new_units = np.unique(codes[new_rows][~joins])
    first_new: list[tuple[str, str]] = []
    for code in sorted(new_units.tolist(), key=lambda c: names[c]):
        stage = hashed_stage(seed, names[code], val_ratio=val_ratio, test_ratio=test_ratio)
        unit_stage[code] = EXCLUSIVE_STAGES.index(stage)
        if len(first_new) < LISTED:
            first_new.append((names[code], stage))
    stage_of_new = unit_stage[codes[new_rows]]
    if ad_aware:
        stage_of_new = _hold_out_anomalous(universe, new_rows, stage_of_new)
    held = stage_of_new == _NO_STAGE
    added = {stage: new_rows[stage_of_new == k] for k, stage in enumerate(EXCLUSIVE_STAGES)}
    positions = {stage: np.sort(np.concatenate([prior.positions[stage], added[stage]])).astype(np.int64)
                 for stage in EXCLUSIVE_STAGES}
    return SplitExtension(
        positions=positions, basis=prior.basis,
        rule=describe_rule(seed, val_ratio=val_ratio, test_ratio=test_ratio, group_by=group_by),
        kept=int(sum(len(prior.positions[s]) for s in EXCLUSIVE_STAGES)),
        joined=int(np.count_nonzero(joins & ~held)), hashed=int(np.count_nonzero(~joins & ~held)),
        held_out=int(np.count_nonzero(held)), new_units=len(new_units),
        first_new_units=tuple(first_new), removed=prior.removed, first_removed=prior.first_removed,
        stage_added={stage: int(len(rows)) for stage, rows in added.items()},
    )


def _refuse_split_units(universe: Universe, names: Sequence[str], codes: np.ndarray, earlier: Mapping[int, set[int]],
                        new_rows: np.ndarray, group_by: str) -> None:
    """A new sample cannot join a unit that the earlier split already put in two stages."""
    affected = sorted({int(c) for c in np.unique(codes[new_rows]) if len(earlier.get(int(c), ())) > 1},
                      key=lambda c: names[c])
    if not affected:
        return
    unit = affected[0]
    stages = [EXCLUSIVE_STAGES[s] for s in sorted(earlier[unit])]
    new_uid = universe.uids(new_rows[codes[new_rows] == unit][:1])[0]
    others = f" ({count(len(affected) - 1, 'more')} like it)" if len(affected) > 1 else ""
    raise SplitGenerationError(
        f"cannot extend the split: {group_by} {names[unit]!r} already spans {' and '.join(stages)}, so its new "
        f"sample {new_uid} has no one stage to join{others}. Put the {group_by} in one stage in the split, or "
        "extend with group_by='source'"
    )


def _hold_out_anomalous(universe: Universe, new_rows: np.ndarray, stage_of_new: np.ndarray) -> np.ndarray:
    """``stage_of_new`` with the anomalous new samples bound for train set to no stage."""
    train = EXCLUSIVE_STAGES.index("train")
    bound_for_train = new_rows[stage_of_new == train]
    if not len(bound_for_train):
        return stage_of_new
    attrs = universe.attributes(frozenset({"category_ids"}),
                                sources=np.unique(universe.source_codes[bound_for_train]).tolist())
    if "category_ids" not in attrs.loaded:
        raise SplitGenerationError(
            f"{universe.origin or 'universe'}: ad_aware needs labels to keep new anomalous samples out of train, "
            "but no row has an 'annotation' file. Add annotations, or drop ad_aware."
        )
    anomalous = attrs.anomalous_rows(len(universe))[new_rows] & (stage_of_new == train)
    out = stage_of_new.copy()
    out[anomalous] = _NO_STAGE
    return out


# -- where an earlier split comes from -------------------------------------------------


def prior_from_stage_table(universe: Universe, table: pa.Table, *, basis: str) -> PriorSplit:
    """The earlier split recorded in a ``split_assignments.parquet`` table, mapped onto ``universe``.

    Its train / val / test rows are the assignments. Its ``predict`` rows are the universe
    it was resolved against (a computed split's ``predict`` is empty, which means every
    sample), so every one of them was decided about. Samples no longer in the universe are
    counted as removed."""
    missing = {"stage", "uid"} - set(table.column_names)
    if missing:
        raise SplitConfigError(f"{basis}: the stage table lacks column(s) {sorted(missing)}; re-materialize "
                               "'resolved_splits' with a new seed, or remove the splits folder, to resolve afresh")
    frame = table.select([c for c in ("stage", "uid", "source", "group") if c in table.column_names]).to_pandas()
    current = pd.Index(universe.uids())
    exclusive = frame[frame["stage"].isin(EXCLUSIVE_STAGES)]
    twice = exclusive["uid"][exclusive["uid"].duplicated()]
    if len(twice):
        raise SplitConfigError(f"{basis}: sample {twice.iloc[0]} is in two stages of the earlier split; it cannot be "
                               "extended. Resolve afresh (a new seed, or remove the splits folder)")
    where = current.get_indexer(exclusive["uid"])
    positions = {stage: np.sort(where[(exclusive["stage"] == stage).to_numpy() & (where >= 0)]).astype(np.int64)
                 for stage in EXCLUSIVE_STAGES}
    known = pd.unique(frame["uid"])
    decided = np.zeros(len(universe), dtype=bool)
    found = current.get_indexer(known)
    decided[found[found >= 0]] = True
    gone_rows = exclusive[where < 0]
    gone = sorted(gone_rows["uid"])
    units: tuple[tuple[str, str, str], ...] = ()
    if {"source", "group"} <= set(gone_rows.columns):
        units = tuple(sorted(set(zip(gone_rows["source"], gone_rows["group"], gone_rows["stage"], strict=True))))
    return PriorSplit(positions, decided, basis, removed=len(gone), first_removed=tuple(gone[:LISTED]),
                      removed_units=units)


def prior_from_baked(rule: DataSplitConfig, universe: Universe, *, basis: str) -> PriorSplit:
    """A baked file's assignments over ``universe``: what its train / val / test select, and
    every sample any of its stages names (an explicit ``predict`` keeps a sample out of
    the exclusive stages on purpose). Raises as :func:`plan_splits` does for a selector
    that matches nothing."""
    resolution = plan_splits(rule, universe)
    positions = {stage: resolution.positions[stage] for stage in EXCLUSIVE_STAGES}
    decided = np.zeros(len(universe), dtype=bool)
    for stage in EXCLUSIVE_STAGES + (("predict",) if rule.predict else ()):
        decided[resolution.positions[stage]] = True
    return PriorSplit(positions, decided, basis, removed=None)


@dataclass(frozen=True)
class BakedCoverage:
    """Which samples of a changed universe a baked file assigns to no stage.

    Only a *baked* file (concrete selectors, pinned hash) whose pinned universe differs from
    the current one is held to coverage: samples missing from the universe it was baked for
    were left out on purpose, samples added since were never decided about."""

    prior: PriorSplit
    pinned: str | None
    actual: str
    applies: bool
    unassigned: np.ndarray
    first_sources: tuple[str, ...]
    sources: int

    @property
    def needs_extension(self) -> bool:
        return self.applies and len(self.unassigned) > 0

    def message(self, where: str) -> str:
        """Why the file cannot be used as it is, which sources, and how to extend it."""
        return (
            f"{where} was baked against universe {str(self.pinned)[:12]}..., but the universe is now "
            f"{self.actual[:12]}... and {count(len(self.unassigned), 'sample')} from "
            f"{count(self.sources, 'source')} are in none of its stages (first: "
            f"{first(self.first_sources, self.sources)}). A baked split is extended only on request: set "
            "extend_baked: true in the resolved_splits config (or run resolve-splits --rule FILE --extend-baked "
            "--seed N); earlier assignments stay, new samples follow the seeded unit hash. Or bake the file again "
            "against the current universe."
        )

    def to_dict(self, where: str) -> dict[str, Any]:
        return {"samples": int(len(self.unassigned)), "sources": self.sources,
                "first_sources": list(self.first_sources), "message": self.message(where)}


def baked_coverage(rule: DataSplitConfig, universe: Universe, *, where: str) -> BakedCoverage:
    """How far ``rule`` covers ``universe`` (see :class:`BakedCoverage`)."""
    prior = prior_from_baked(rule, universe, basis=f"baked file {where}")
    applies = rule.is_baked and rule.universe_hash != universe.hash
    unassigned = prior.undecided if applies else np.empty(0, np.int64)
    source_codes = np.unique(universe.source_codes[unassigned])
    names = sorted(universe.source_names[c] for c in source_codes)
    return BakedCoverage(prior, rule.universe_hash, universe.hash, applies, unassigned, tuple(names[:LISTED]),
                         len(names))


def extend_baked(
    rule: DataSplitConfig, universe: Universe, *, where: str, seed: int, val_ratio: float, test_ratio: float,
    group_by: str = "group", ad_aware: bool = False, check: bool = True, coverage: BakedCoverage | None = None,
) -> tuple[DataSplitConfig, SplitExtension]:
    """A baked file extended over ``universe``: its assignments exactly, plus the samples of
    a changed universe it names in no stage, placed by :func:`extend_split`. The result
    pins the current universe and keeps the file's constraints and ``predict``.

    ``check`` enforces the result's leakage policy (the CLI); the Dagster asset passes
    False and lets the blocking check gate it. ``coverage`` is :func:`baked_coverage`'s
    answer when the caller already has it."""
    coverage = coverage or baked_coverage(rule, universe, where=where)
    prior = coverage.prior
    if not coverage.applies:  # baked for this very universe (or not baked): nothing is undecided
        prior = PriorSplit(prior.positions, np.ones(len(universe), dtype=bool), prior.basis, removed=None)
    extension = extend_split(universe, prior, seed=seed, val_ratio=val_ratio, test_ratio=test_ratio,
                             group_by=group_by, ad_aware=ad_aware)
    predict = plan_splits(rule, universe).positions["predict"] if rule.predict else np.empty(0, np.int64)
    cfg = baked_config(universe, {**extension.positions, "predict": predict}, constraints=rule.constraints)
    if check:
        enforce(plan_splits(cfg, universe).leakage)
    return cfg, extension


@dataclass(frozen=True)
class FileBake:
    """What a ``splits.json`` bakes to over a universe. ``cfg`` is None when the file is a
    stale baked file that leaves samples unassigned and extension was not asked for
    (``coverage`` then says which). ``mode``: ``rule`` (resolved afresh), ``baked``,
    ``extended_baked`` or ``refused``."""

    cfg: DataSplitConfig | None
    mode: str
    extension: SplitExtension | None = None
    coverage: BakedCoverage | None = None

    def refusal(self, where: str) -> str:
        return self.coverage.message(where) if self.cfg is None and self.coverage is not None else ""


def bake_file(
    rule: DataSplitConfig, universe: Universe, *, where: str, extend: bool = False, seed: int = 0,
    val_ratio: float = 0.2, test_ratio: float = 0.2, group_by: str = "group", ad_aware: bool = False,
    check: bool = True,
) -> FileBake:
    """Bake a rule or baked ``splits.json`` over ``universe``, holding a stale baked file to coverage.

    A rule (any non-concrete selector, or no pinned hash) is resolved as it is, and so is
    a baked file pinned to this very universe: what it leaves out it left out on purpose.
    A baked file pinned to another universe that names some samples in no stage is
    extended when ``extend`` is set (:func:`extend_baked`), else refused. Drift of a
    positional rule raises as :func:`plan_splits` does; ``check`` enforces the leakage
    policy of the result."""
    if not (rule.is_baked and rule.universe_hash != universe.hash):
        return FileBake(bake_rule(rule, universe, check=check), "baked" if rule.is_baked else "rule")
    coverage = baked_coverage(rule, universe, where=where)
    if not coverage.needs_extension:
        return FileBake(bake_rule(rule, universe, check=check), "baked", coverage=coverage)
    if not extend:
        return FileBake(None, "refused", coverage=coverage)
    cfg, extension = extend_baked(rule, universe, where=where, seed=seed, val_ratio=val_ratio, test_ratio=test_ratio,
                                  group_by=group_by, ad_aware=ad_aware, check=check, coverage=coverage)
    return FileBake(cfg, "extended_baked", extension, coverage)


def extend_computed(
    universe: Universe, prior: PriorSplit, *, seed: int, val_ratio: float, test_ratio: float,
    group_by: str = "group", ad_aware: bool = False, leakage: str = "error", check: bool = True,
) -> tuple[DataSplitConfig, SplitExtension]:
    """A computed split's earlier resolution extended over ``universe``, baked with the
    constraints the computed split writes. An ``ad_aware`` split leaves samples out only
    by dropping anomalous ones from train, so a unit it saw but assigned nowhere was train."""
    extension = extend_split(
        universe, prior, seed=seed, val_ratio=val_ratio, test_ratio=test_ratio, group_by=group_by,
        ad_aware=ad_aware, left_out_stage="train" if ad_aware else None,
    )
    cfg = baked_config(universe, extension.positions, constraints=computed_constraints(leakage, ad_aware))
    if check:
        enforce(plan_splits(cfg, universe).leakage)
    return cfg, extension


__all__ = [
    "EXTENSION_SCHEME",
    "BakedCoverage",
    "FileBake",
    "PriorSplit",
    "SplitExtension",
    "bake_file",
    "baked_coverage",
    "describe_rule",
    "extend_baked",
    "extend_computed",
    "extend_split",
    "hashed_stage",
    "prior_from_baked",
    "prior_from_stage_table",
]
