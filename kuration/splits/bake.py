"""Baking by generation: produce a concrete ``splits.json`` from a universe.

A baked split holds only ``file_indices`` selectors (``files`` for whole-file samples) plus the ``universe_hash`` it was
generated against, so it is position-independent and drift-guarded. There is no
"lower a rule in place" step; a baked file is always generated, by one of:

* :func:`bake_from_split_column`: the universe's ``split`` column, imported as is;
* :func:`bake_random`: seeded shuffle of whole groups into stages by ratio;
* :func:`bake_stratified`: whole groups assigned greedily so every tag's share is as
  even across stages as the ratios allow (the idea of scikit-learn's
  ``StratifiedGroupKFold``, for a train/val/test carve instead of k folds);
* :func:`bake_rule`: a hand-authored rule file resolved against the universe.

Everything is deterministic: groups are ordered by name before a ``random.Random(seed)``
shuffle (whose algorithm Python keeps stable), so the same universe, options and seed
give byte-identical files on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kuration.errors import SplitGenerationError, shown
from kuration.numbers import finite_float
from kuration.splits.config import (
    Constraint,
    ConstraintKind,
    ConstraintSeverity,
    DataSplitConfig,
    constraints_for_leakage_check,
)
from kuration.splits.leakage import enforce
from kuration.splits.resolution import plan_splits
from kuration.splits.selectors import Selector, SelectorKind, compress_ids
from kuration.splits.stages import EXCLUSIVE_STAGES, STAGES
from kuration.splits.universe import WHOLE_FILE, Universe

GROUP_BY = ("group", "source")


def baked_config(
    universe: Universe,
    stage_positions: Mapping[str, np.ndarray],
    *,
    constraints: Sequence[Constraint],
) -> DataSplitConfig:
    """A concrete config selecting exactly ``stage_positions``: one ``file_indices``
    selector per source, sources in canonical order, ids as compact ranges; a whole-file
    sample is named by a ``files`` selector (``file_indices`` cannot match it), as
    Cuvis.AI bakes it."""
    stages: dict[str, tuple[Selector, ...]] = {}
    for stage in STAGES:
        rows = np.asarray(stage_positions.get(stage, []), np.int64)
        selectors = []
        if len(rows):
            order = np.lexsort((universe.indices[rows], universe.source_codes[rows]))
            rows = rows[order]
            codes = universe.source_codes[rows]
            starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
            for begin, end in zip(starts, np.r_[starts[1:], len(rows)], strict=True):
                source = universe.source_names[int(codes[begin])]
                indices = universe.indices[rows[begin:end]]
                if indices[0] == WHOLE_FILE:  # then it is the source's only sample
                    selectors.append(Selector(kind=SelectorKind.FILES, paths=(source,)))
                    continue
                selectors.append(Selector(
                    kind=SelectorKind.FILE_INDICES, source=source, ids=tuple(compress_ids(indices.tolist())),
                ))
        stages[stage] = tuple(selectors)
    return DataSplitConfig(universe_hash=universe.hash, constraints=tuple(constraints), train=stages["train"],
                           val=stages["val"], test=stages["test"], predict=stages["predict"])


def bake_from_split_column(universe: Universe, *, leakage: str = "error", check: bool = True) -> DataSplitConfig:
    """Import the universe's ``split`` column (train / val / test) as concrete selectors."""
    column = universe.split_column
    if column is None or not any(column):
        raise SplitGenerationError(
            f"{universe.origin or 'universe'}: no 'split' column values to import. Add a 'split' column "
            "(train/val/test), or compute a split with --strategy random|stratified instead of --from-csv."
        )
    values = np.asarray(column, dtype=object)
    positions = {stage: np.flatnonzero(values == stage) for stage in EXCLUSIVE_STAGES}
    return _checked(universe, baked_config(universe, positions, constraints=constraints_for_leakage_check(leakage)),
                    check)


@dataclass(frozen=True)
class _Groups:
    keys: list[str]
    rows: list[np.ndarray]


def _groups(universe: Universe, group_by: str) -> _Groups:
    if group_by not in GROUP_BY:
        raise SplitGenerationError(f"group_by must be one of {list(GROUP_BY)}, got {group_by!r}")
    codes, names = (
        (universe.group_codes, universe.group_names) if group_by == "group" else (universe.source_codes,
                                                                                  universe.source_names)
    )
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    keys, rows = [], []
    for code in np.argsort(np.asarray(names, dtype=object), kind="stable"):
        chunk = order[bounds[code]: bounds[code + 1]]
        if len(chunk):
            keys.append(names[code])
            rows.append(chunk)
    return _Groups(keys, rows)


def check_ratios(val_ratio: float, test_ratio: float) -> dict[str, float]:
    """The stage shares ``val_ratio`` / ``test_ratio`` leave, refused unless each is in
    [0, 1) and something is left for train."""
    for name, value in (("val_ratio", val_ratio), ("test_ratio", test_ratio)):
        number = finite_float(value)
        if number is None or not 0 <= number < 1:
            raise SplitGenerationError(f"{name} must be a number in [0, 1), got {shown(value)}")
    if val_ratio + test_ratio >= 1:
        raise SplitGenerationError(
            f"val_ratio + test_ratio must leave something for train, got {val_ratio} + {test_ratio} >= 1"
        )
    return {"train": 1 - val_ratio - test_ratio, "val": val_ratio, "test": test_ratio}


def _stage_counts(n_groups: int, ratios: Mapping[str, float], group_by: str) -> dict[str, int]:
    n_test = math.floor(n_groups * ratios["test"] + 0.5)
    n_val = math.floor(n_groups * ratios["val"] + 0.5)
    counts = {"test": n_test, "val": n_val, "train": n_groups - n_test - n_val}
    for stage, n in counts.items():
        if ratios[stage] > 0 and n < 1:
            raise SplitGenerationError(
                f"only {n_groups} {group_by}(s) to split: a {stage} ratio of {ratios[stage]:g} gets no whole "
                f"{group_by}. Use fewer stages (ratio 0), larger ratios, or finer groups."
            )
    return counts


def _drop_anomalous_from_train(universe: Universe, positions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    attrs = universe.attributes(frozenset({"category_ids"}))
    if "category_ids" not in attrs.loaded:
        raise SplitGenerationError(
            f"{universe.origin or 'universe'}: --ad-aware needs labels to tell anomalous samples apart, but no row "
            "has an 'annotation' file. Add annotations, or drop --ad-aware."
        )
    anomalous = attrs.anomalous_rows(len(universe))
    train = positions["train"]
    return {**positions, "train": train[~anomalous[train]]}


def computed_constraints(leakage: str, ad_aware: bool) -> tuple[Constraint, ...]:
    """The constraints a computed split writes: the leakage policy, and ``no_train_anomalous``
    when ``ad_aware``."""
    extra = (Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS, ConstraintSeverity.ERROR),) if ad_aware else ()
    return constraints_for_leakage_check(leakage) + extra


def _checked(universe: Universe, cfg: DataSplitConfig, check: bool) -> DataSplitConfig:
    """Resolve the generated file once and enforce its own policy before anyone writes it.

    ``check=False`` is for callers that gate on the constraint report themselves (the
    Dagster asset, whose blocking check must see a leaking split to stop downstream)."""
    if check:
        enforce(plan_splits(cfg, universe).leakage)
    return cfg


def _bake_assignment(
    universe: Universe, groups: _Groups, assigned: Mapping[str, Sequence[int]], *, ad_aware: bool, leakage: str,
    check: bool
) -> DataSplitConfig:
    """The baked config for whole groups assigned to stages (group indices per stage)."""
    positions = {
        stage: np.sort(np.concatenate([groups.rows[g] for g in assigned.get(stage, ())] or [np.empty(0, np.int64)]))
        for stage in EXCLUSIVE_STAGES
    }
    if ad_aware:
        positions = _drop_anomalous_from_train(universe, positions)
    constraints = computed_constraints(leakage, ad_aware)
    return _checked(universe, baked_config(universe, positions, constraints=constraints), check)


def bake_random(
    universe: Universe,
    *,
    seed: int,
    val_ratio: float = 0.2,
    test_ratio: float = 0.2,
    group_by: str = "group",
    ad_aware: bool = False,
    leakage: str = "error",
    check: bool = True,
) -> DataSplitConfig:
    """Shuffle whole groups with ``seed`` and carve test, then val, then train by ratio."""
    ratios = check_ratios(val_ratio, test_ratio)
    groups = _groups(universe, group_by)
    counts = _stage_counts(len(groups.keys), ratios, group_by)
    order = list(range(len(groups.keys)))
    random.Random(seed).shuffle(order)
    bounds = {"test": (0, counts["test"]), "val": (counts["test"], counts["test"] + counts["val"]),
              "train": (counts["test"] + counts["val"], len(order))}
    assigned = {stage: order[a:b] for stage, (a, b) in bounds.items()}
    return _bake_assignment(universe, groups, assigned, ad_aware=ad_aware, leakage=leakage, check=check)


def bake_stratified(
    universe: Universe,
    *,
    seed: int,
    val_ratio: float = 0.2,
    test_ratio: float = 0.2,
    group_by: str = "group",
    ad_aware: bool = False,
    leakage: str = "error",
    check: bool = True,
) -> DataSplitConfig:
    """Keep groups whole while balancing every tag's share across stages.

    Ratios here are shares of *samples* (per tag), not of groups as in
    :func:`bake_random`. Groups are visited from the most tag-skewed to the least (ties in seeded order), and
    each goes to the stage that leaves the per-tag fill (count / target) most even across
    stages, sample counts included as one more "tag". Samples with no tag count as
    ``(untagged)``.
    """
    ratios = check_ratios(val_ratio, test_ratio)
    groups = _groups(universe, group_by)
    _stage_counts(len(groups.keys), ratios, group_by)
    attrs = universe.attributes(frozenset({"tags"}))
    n = len(universe)
    tag_names = list(attrs.tag_names)
    untagged = np.ones(n, dtype=bool)
    untagged[attrs.tag_rows] = False
    # one column per tag, plus "(untagged)", plus the sample count
    per_row = np.zeros((n, len(tag_names) + 2), dtype=np.float64)
    np.add.at(per_row, (attrs.tag_rows, attrs.tag_codes), 1.0)
    per_row[:, len(tag_names)] = untagged
    per_row[:, -1] = 1.0
    group_counts = np.stack([per_row[rows].sum(axis=0) for rows in groups.rows])
    live = [s for s in EXCLUSIVE_STAGES if ratios[s] > 0]
    share = np.asarray([ratios[s] for s in live])
    targets = share[:, None] * group_counts.sum(axis=0)[None, :]
    targets[targets == 0] = 1.0

    tie_break = list(range(len(groups.keys)))
    random.Random(seed).shuffle(tie_break)
    rank = {g: i for i, g in enumerate(tie_break)}
    tag_part = group_counts[:, :-1]
    skew = np.std(tag_part / np.maximum(tag_part.sum(axis=1, keepdims=True), 1.0), axis=1)
    visit = sorted(range(len(groups.keys)), key=lambda g: (-round(float(skew[g]), 12), rank[g]))

    filled = np.zeros_like(targets)
    assigned: dict[str, list[int]] = {s: [] for s in EXCLUSIVE_STAGES}
    for visited, g in enumerate(visit):
        # Once the groups left are only enough to give each still-empty stage one, they
        # must go there: a stage asked for by its ratio is never left empty.
        empty = [i for i, stage in enumerate(live) if not assigned[stage]]
        candidates = empty if len(visit) - visited <= len(empty) else range(len(live))

        def balance(i: int, g: int = g) -> tuple[float, float, int]:
            """How uneven the stages' fill would be with group ``g`` in stage ``i`` (lower is better)."""
            trial = filled.copy()
            trial[i] += group_counts[g]
            fill = trial / targets
            return round(float(np.std(fill, axis=0).sum()), 12), round(float(fill[i, -1]), 12), i

        i = min(candidates, key=balance)
        filled[i] += group_counts[g]
        assigned[live[i]].append(g)
    return _bake_assignment(universe, groups, assigned, ad_aware=ad_aware, leakage=leakage, check=check)


def bake_rule(rule: DataSplitConfig, universe: Universe, *, check: bool = True) -> DataSplitConfig:
    """Resolve a hand-authored rule (any selector kinds) into its concrete equivalent.

    The rule's own drift guard and leakage policy apply; its constraints carry over. An
    empty ``predict`` stays empty (it means the whole universe either way).
    """
    resolution = plan_splits(rule, universe)
    if check:
        enforce(resolution.leakage)
    positions = dict(resolution.positions)
    if not rule.predict:
        positions["predict"] = np.empty(0, np.int64)
    return baked_config(universe, positions, constraints=rule.constraints)
