"""Hypothesis: the budget plan's contract on random pools of scored segments.

The pools are drawn by ``tests/budget/random_pools.py``: 1-12 sources of 1-3 tracks,
windowed or arbitrary segments, priorities from a small tie-heavy palette plus -inf and NaN,
tags from ``a``/``b``/``rare``. Plans are made over seeded pools, a ``group_of`` mapping
(fewer groups than sources) or resolved split assignments, for an hours or a count request.

The two ``test_regression_*`` tests at the bottom are minimal reproductions of two bugs
found while writing these tests in ``kuration/budget/fill.py`` (float drift at the cut, and a tiny
``min_tag_frac`` rounding the count reserve to zero); both are fixed there since.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pyarrow as pa
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kuration.budget import BudgetOptions, plan_budget, validate_budget_plan
from kuration.budget.fill import ADMITTED_REASONS, CANDIDATE_REASONS
from kuration.scoring.strategy import Strategy
from tests.budget.random_pools import SETTINGS, SPLITS, TOL, Case, cases, segment_table


# -- reading a plan ------------------------------------------------------------------------


def view(plan) -> dict[str, np.ndarray]:
    it = plan.items
    n = it.num_rows
    col = lambda name: np.array(it.column(name).to_pylist(), dtype=object)  # noqa: E731
    return {
        "source": col("source_id"), "entity": col("entity_id"), "split": col("split"), "group": col("group"),
        "reason": col("reason"), "status": col("status"), "reserved_for": col("reserved_for"), "tags": col("tags"),
        "admitted": it.column("admitted").to_numpy(zero_copy_only=False).astype(bool),
        "rank": it.column("fill_rank").to_numpy(),
        "priority": it.column("priority").to_numpy().astype(np.float64),
        "start": it.column("start").to_numpy(), "stop": it.column("stop").to_numpy(),
        "weight": np.ones(n) if plan.options.unit == "segments" else it.column("seconds").to_numpy().astype(np.float64),
    }


def candidates_of(v, split: str) -> np.ndarray:
    return (v["split"] == split) & np.isin(v["reason"], CANDIDATE_REASONS)


def normalized(values: list) -> list:
    """NaN-aware: NaN compares equal to NaN, and floats compare bit for bit otherwise."""
    return [("nan",) if isinstance(x, float) and math.isnan(x) else x for x in values]


def assert_same_items(a: pa.Table, b: pa.Table) -> None:
    assert a.column_names == b.column_names
    for name in a.column_names:
        assert normalized(a.column(name).to_pylist()) == normalized(b.column(name).to_pylist()), name


def assert_same_tree(a, b, path="accounting") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for k in a:
            assert_same_tree(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tree(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert a == b and type(a) is type(b), f"{path}: {a!r} != {b!r}"


def expected_loud_failures(plan) -> list[str]:
    """The patterns of the errors a sound plan must still fail with, in the validator's order:
    scored sources in no split, then each split (train, val, test) that requests something
    and admits nothing."""
    v = view(plan)
    patterns = []
    outside = sorted(set(v["source"][v["reason"] == "not_in_split"]))
    if outside:
        scored = len(set(v["source"]))
        patterns.append(rf"^not_in_split: none of the {scored} scored sources? is in the resolved split "
                        if len(outside) == scored else rf"^not_in_split: {len(outside)} of the {scored} scored sources "
                                                       rf"(is|are) in no split ")
    for s in SPLITS:
        if plan.accounting["splits"][s]["requested"] > 0 and not (v["admitted"] & (v["split"] == s)).any():
            patterns.append(rf"^{s}: .+ requested, nothing admitted: ")
    return patterns


def assert_only_loud_failures(plan, errors: tuple[str, ...]) -> None:
    patterns = expected_loud_failures(plan)
    assert len(errors) == len(patterns), (errors, patterns)
    for error, pattern in zip(errors, patterns, strict=True):
        assert re.match(pattern, error), (error, pattern)


# -- 1. the budget, to within one span -----------------------------------------------------


def assert_within_one_span(plan) -> None:
    v = view(plan)
    for s in SPLITS:
        requested = plan.accounting["splits"][s]["requested"]
        mine = v["admitted"] & (v["split"] == s)
        if not mine.any():
            continue
        assert requested > 0, f"{s}: admitted items against no request"
        last = v["weight"][mine][np.argmax(v["rank"][mine])]
        total = math.fsum(v["weight"][mine])
        assert total - last < requested, f"{s}: {total} admitted, last item {last}, requested {requested}"


@SETTINGS
@given(cases())
def test_budget_is_honoured_within_one_span(case):
    """Admitted total (summed exactly, fsum) minus the last admitted item (by fill_rank) is
    below the request."""
    assert_within_one_span(case.plan())


@settings(SETTINGS, max_examples=60)
@given(cases(unit="seconds", snap=True, fine=True))
def test_exact_multiple_requests_admit_no_extra_span(case):
    """The same at the float boundary: one sample rate, spans of 1-5 steps and requests of
    a whole number of spans, where summed seconds drift below the request."""
    plan = case.plan()
    assert_within_one_span(plan)
    assert_only_loud_failures(plan, validate_budget_plan(plan.items, plan.accounting).errors)


@SETTINGS
@given(cases())
def test_underfill_means_the_pool_is_exhausted(case):
    """Below the request, no candidate was turned away for a full budget (only the group cap
    may have skipped some); a count admits exactly min(request, cap-eligible candidates)."""
    plan = case.plan()
    v = view(plan)
    for s in SPLITS:
        requested = plan.accounting["splits"][s]["requested"]
        cand = candidates_of(v, s)
        mine = v["admitted"] & (v["split"] == s)
        if requested <= 0:
            assert not mine.any() and set(v["reason"][cand]) <= {"not_requested"}
            continue
        total = math.fsum(v["weight"][mine])
        # The cut keeps a 1e-9 relative margin for float drift (fill.py, step 5): "under" is
        # below the request by clearly more than that.
        if total < requested - 1e-8 * max(requested, 1.0):
            reasons = set(v["reason"][cand])
            assert reasons <= {"reserved", "admitted", "group_cap"}, f"{s}: underfilled but {reasons}"
        if plan.options.unit == "segments":
            skipped = int((cand & (v["reason"] == "group_cap")).sum())
            assert int(mine.sum()) == min(int(requested), int(cand.sum()) - skipped)
            if plan.strategy["selection"]["max_group_overshoot"] is None:
                assert int(mine.sum()) == min(int(requested), int(cand.sum()))


# -- 2. no leakage -------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_no_source_or_group_crosses_splits(case):
    plan = case.plan()
    v = view(plan)
    in_pool = v["split"] != None  # noqa: E711
    for key in ("source", "group"):
        for mask, what in ((v["admitted"], "admitted"), (in_pool, "pooled")):
            seen: dict[str, set] = {}
            for k, s in zip(v[key][mask], v["split"][mask], strict=True):
                seen.setdefault(k, set()).add(s)
            assert all(len(x) == 1 for x in seen.values()), f"{what} {key} in two splits: {seen}"
    # The pools are the ones asked for.
    if case.group_of is not None:
        assert all(g == case.group_of[s] for s, g in zip(v["source"], v["group"], strict=True))
    if case.assignments is not None:
        a = case.assignments.to_pydict()
        stage = {s: st for st, s in zip(a["stage"], a["source"], strict=True) if st != "predict"}
        group = {s: g for st, s, g in zip(a["stage"], a["source"], a["group"], strict=True) if st != "predict"}
        for s, sp, g, r in zip(v["source"], v["split"], v["group"], v["reason"], strict=True):
            assert sp == stage.get(s) and g == group.get(s)
            assert (r == "not_in_split") == (s not in stage)
    else:
        requested = plan.options.requested()
        assert all(requested[s] > 0 for s in v["split"]), "seeded pools go to requesting splits only"
        assert not (v["reason"] == "not_in_split").any()


# -- 3. a priority prefix, modulo reserve and cap ------------------------------------------


@SETTINGS
@given(cases())
def test_admitted_set_is_a_priority_prefix_modulo_reserve_and_cap(case):
    plan = case.plan()
    v = view(plan)
    for s in SPLITS:
        cand = candidates_of(v, s)
        r, p, rank = v["reason"], v["priority"], v["rank"]
        assert sorted(rank[cand]) == list(range(int(cand.sum()))), "fill_rank numbers the candidates"
        assert (rank[~cand & (v["split"] == s)] == -1).all()
        by_priority = cand & (r == "admitted")
        full = cand & (r == "budget_full")
        if by_priority.any() and full.any():
            assert p[by_priority].min() >= p[full].max()
        if full.any() and (cand & v["admitted"]).any():
            assert rank[full].min() > rank[cand & v["admitted"]].max()
        # Reserved items lead the sequence; the rest follow in descending priority.
        reserved = cand & (r == "reserved")
        rest = cand & ~reserved & (r != "not_requested")
        if reserved.any() and rest.any():
            assert rank[reserved].max() < rank[rest].min()
        seq = p[rest][np.argsort(rank[rest])]
        assert (np.diff(seq) <= 0).all(), "non-reserved candidates in descending priority"
        # A reserved item is the best candidate of its tag, within the reserve bound.
        bound = plan.accounting["splits"][s]["reserve_bound"]
        if reserved.any():
            assert math.fsum(v["weight"][reserved]) <= bound * (1 + TOL) + TOL
        for i in np.flatnonzero(reserved):
            tag = v["reserved_for"][i]
            carriers = cand & np.array([tag in t for t in v["tags"]], bool)
            assert tag in v["tags"][i] and p[i] == p[carriers].max()
        # The block's tag coverage agrees with the items.
        for tag, entry in plan.accounting["splits"][s]["tag_coverage"].items():
            carriers = cand & np.array([tag in t for t in v["tags"]], bool)
            assert entry["admitted_items"] == int((carriers & v["admitted"]).sum())
            assert (entry.get("reserve") == "reserved") == bool((reserved & (v["reserved_for"] == tag)).any())
            if entry.get("reserve") == "not_in_pool":
                assert not carriers.any()
            if entry.get("reserve") == "carried_by_reserved_item":
                assert (carriers & reserved).any()


# -- 4. input order --------------------------------------------------------------------------


@SETTINGS
@given(cases(), st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_row_order_and_chunking_do_not_matter(case, perm_seed, pieces):
    plan = case.plan()
    n = case.segments.num_rows
    shuffled = case.segments.take(pa.array(np.random.default_rng(perm_seed).permutation(n), pa.int64()))
    cuts = sorted({0, n, *np.random.default_rng(perm_seed + 1).integers(0, n + 1, pieces - 1).tolist()})
    chunked = pa.concat_tables([shuffled.slice(a, b - a) for a, b in itertools.pairwise(cuts)] or [shuffled])
    other = case.plan(segments=chunked)
    assert_same_items(plan.items, other.items)
    assert_same_tree(plan.accounting, other.accounting)


# -- 5. what can never be admitted ---------------------------------------------------------


@settings(SETTINGS, max_examples=40)
@given(cases())
def test_statuses_and_span_priorities_follow_the_segments(case):
    """Admitted items are ``ok`` with a finite priority. Every item's status, priority and
    tags are recomputed from its overlapping present segments (present fraction above 0):
    -inf everywhere is ``filtered``, any NaN is ``non_finite``, no overlapping segment is
    ``unscored``, overlapping segments none of them present is ``absent``; an ok span
    aggregates the finite ones."""
    plan = case.plan()
    v = view(plan)
    assert (v["status"][v["admitted"]] == "ok").all()
    assert np.isfinite(v["priority"][v["admitted"]]).all()
    assert set(v["reason"][v["admitted"]]) <= set(ADMITTED_REASONS)
    seg = case.segments.to_pydict()
    clip = plan.accounting["clip_aggregate"]
    assert clip == (plan.options.clip_aggregate or case.strategy.default_clip_aggregate)
    agg = {"max": np.nanmax, "min": np.nanmin, "mean": np.nanmean}[clip]
    tracks: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(seg["source_id"], seg["entity_id"], strict=True)):
        tracks.setdefault(key, []).append(i)
    counting = plan.options.unit == "segments"
    index = plan.items.column(plan.index_column).to_pylist()
    for key, rows in tracks.items():
        rows = np.array(rows)
        ss, se = np.array(seg["start"])[rows], np.array(seg["stop"])[rows]
        pr = np.array(seg["priority"], np.float64)[rows]
        seen = np.array(seg["present_fraction"])[rows] > 0
        tags = [set(seg["tags"][i]) for i in rows]
        mine = np.flatnonzero((v["source"] == key[0]) & (v["entity"] == key[1]))
        if counting:
            assert len(mine) == len(rows)
            ov = np.array([[seg["segment_index"][rows[j]] == index[i] for j in range(len(rows))] for i in mine])
        else:
            steps = seg["track_steps"][rows[0]]
            span = plan.options.span_steps or steps
            assert len(mine) == -(-steps // span), "spans tile the whole track"
            assert (v["start"][mine] == np.arange(len(mine)) * span).all()
            assert (v["stop"][mine] == np.minimum(v["start"][mine] + span, steps)).all()
            ov = (ss[None, :] < v["stop"][mine][:, None]) & (se[None, :] > v["start"][mine][:, None])
        for k, i in enumerate(mine):
            p = pr[ov[k] & seen]
            want = ("unscored" if not ov[k].any() else "absent" if not len(p)
                    else "non_finite" if (np.isnan(p) | np.isposinf(p)).any()
                    else "filtered" if np.isneginf(p).all() else "ok")
            assert v["status"][i] == want, (key, i, p)
            if v["split"][i] is None:
                assert v["reason"][i] == "not_in_split"
            elif want != "ok":
                assert v["reason"][i] == want and v["rank"][i] == -1
            else:
                assert v["reason"][i] in CANDIDATE_REASONS
                want_p = agg(p[np.isfinite(p)]) if not counting else p[0]
                assert math.isclose(v["priority"][i], want_p, rel_tol=1e-9, abs_tol=1e-9), (key, i, p)
            if want == "filtered":
                assert v["priority"][i] == -np.inf
            if want in ("absent", "unscored", "non_finite"):
                assert math.isnan(v["priority"][i])
            if not counting:
                assert set(v["tags"][i]) == set().union(*[tags[j] for j in np.flatnonzero(ov[k] & seen)])
            else:
                assert set(v["tags"][i]) == set().union(*[tags[j] for j in np.flatnonzero(ov[k])])


# -- 6. count floors -----------------------------------------------------------------------


@SETTINGS
@given(cases(unit="segments", coverage=True, cap=True),
       st.sampled_from([1e-12, 1e-10, 1e-6, 1e-3, 0.01, 0.1, 0.3, 2 / 3, 1.0]))
def test_count_floors_round_up(case, frac):
    """Count mode: reserve_bound = ceil(min_tag_frac * requested) >= 1 and group_cap =
    ceil(overshoot * requested / groups) >= 1 (ceil up to float slop, never a whole unit
    more), even for fractions far below the 1e-9 rounding slop."""
    sel = case.strategy.to_dict()
    sel["selection"]["min_tag_frac"] = frac
    case = replace(case, strategy=Strategy.from_dict(sel))
    plan = case.plan()
    v = view(plan)
    overshoot = case.strategy.selection.max_group_overshoot
    for s in SPLITS:
        block = plan.accounting["splits"][s]
        requested = block["requested"]
        cand = candidates_of(v, s)
        if requested < 1 or not cand.any():
            continue
        bound = block["reserve_bound"]
        assert bound == int(bound)
        assert max(1, frac * requested - 1e-6) <= bound <= max(1, math.ceil(frac * requested - 1e-6))
        n_groups = len(set(v["group"][cand]))
        assert block["groups"] == n_groups
        cap = block["group_cap"]
        x = overshoot * requested / n_groups
        assert cap == int(cap) and max(1, x - 1e-6) <= cap <= max(1, math.ceil(x - 1e-6))


# -- 7. validation -------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_every_plan_validates(case):
    """plan_budget's own plans break no contract of validate_budget_plan: its only errors are
    the two loud failures of a plan that is sound but unusable, exactly when they hold (a
    requested split that admits nothing; scored sources in no split). An underfilled pool
    that admits something is a warning, never an error."""
    plan = case.plan()
    result = validate_budget_plan(plan.items, plan.accounting)
    assert_only_loud_failures(plan, result.errors)
    assert result.ok == (not expected_loud_failures(plan))


@SETTINGS
@given(cases(snap=False), st.data())
def test_validator_catches_a_tampered_plan(case, data):
    plan = case.plan()
    v = view(plan)
    full = np.flatnonzero(v["reason"] == "budget_full")
    assume(len(full))
    i = int(data.draw(st.sampled_from(full.tolist())))
    s = v["split"][i]
    admitted = v["admitted"].copy()
    admitted[i] = True
    tampered = plan.items.set_column(plan.items.column_names.index("admitted"), "admitted", pa.array(admitted))
    # Only the flag changed: the block no longer matches the items.
    assert not validate_budget_plan(tampered, plan.accounting).ok
    # The block patched to agree: the budget check itself must fire, the split being full.
    block = plan.accounting["splits"][s]
    if math.fsum(v["weight"][v["admitted"] & (v["split"] == s)]) > block["requested"] * (1 + 1e-6) + 1e-6:
        patched = {**plan.accounting, "splits": {**plan.accounting["splits"], s: {
            **block, "admitted": block["admitted"] + float(v["weight"][i]),
            "items": {**block["items"], "admitted": block["items"]["admitted"] + 1}}}}
        errors = validate_budget_plan(tampered, patched).errors
        assert any("more than one item over budget" in e for e in errors), errors
    # An admitted item that is not ok is caught too, whatever the block says.
    bad = np.flatnonzero(v["status"] != "ok")
    if len(bad):
        flag = v["admitted"].copy()
        flag[bad[0]] = True
        t2 = plan.items.set_column(plan.items.column_names.index("admitted"), "admitted", pa.array(flag))
        assert any("without a finite priority" in e for e in validate_budget_plan(t2, plan.accounting).errors)


# -- 8. the group cap ----------------------------------------------------------------------


@SETTINGS
@given(cases(cap=True))
def test_group_cap_is_never_exceeded_and_skips_only_what_would_exceed_it(case):
    plan = case.plan()
    v = view(plan)
    overshoot = case.strategy.selection.max_group_overshoot
    counting = plan.options.unit == "segments"
    for s in SPLITS:
        block = plan.accounting["splits"][s]
        cand = candidates_of(v, s)
        if block["requested"] <= 0 or not cand.any():
            continue
        x = overshoot * block["requested"] / len(set(v["group"][cand]))
        cap = block["group_cap"]
        assert (max(1, math.ceil(x - 1e-9)) == cap) if counting else math.isclose(cap, x, rel_tol=1e-12)
        tol = TOL * max(cap, 1.0)
        for g in set(v["group"][cand]):
            mine = cand & (v["group"] == g)
            took = mine & v["admitted"]
            assert math.fsum(v["weight"][took]) <= cap + tol, f"{s}/{g} over its cap {cap}"
            # First fit: a skipped item would have taken its group over the cap at its turn.
            for i in np.flatnonzero(mine & (v["reason"] == "group_cap")):
                before = math.fsum(v["weight"][took & (v["rank"] < v["rank"][i])])
                assert before + v["weight"][i] > cap - tol, f"{s}/{g}: item {i} skipped but fits"


# -- 9. seed determinism -------------------------------------------------------------------


def _fresh(case: Case, seed: int) -> tuple[pa.Table, BudgetOptions, Strategy]:
    return (pa.Table.from_pylist(case.segments.to_pylist(), schema=case.segments.schema),
            BudgetOptions.from_dict({**case.options.to_dict(), "seed": seed}),
            Strategy.from_dict(case.strategy.to_dict()))


@SETTINGS
@given(cases(palette=[0.0, 1.0]), st.integers(0, 2**31 - 1))
def test_a_seed_decides_the_plan(case, other_seed):
    for seed in (case.options.seed, other_seed):
        plans = []
        for _ in range(2):
            segments, options, strategy = _fresh(case, seed)
            plans.append(replace(case, strategy=strategy).plan(segments=segments, options=options))
        assert_same_items(plans[0].items, plans[1].items)
        assert_same_tree(plans[0].accounting, plans[1].accounting)


# -- regressions: two bugs found while writing these tests -------------------------------


def _one_track(steps: int, hz: float, tags: list[str] | None = None) -> pa.Table:
    return segment_table([{
        "source_id": "s", "entity_id": "e", "segment_index": i, "start": i, "stop": i + 1, "present_fraction": 1.0,
        "track_steps": steps, "sample_hz": hz, "f.mean": 1.0, "g.max": 0.0, "tags": tags or [], "priority": 1.0,
        "passed": True,
    } for i in range(steps)])


def test_regression_exact_multiple_request_admits_no_extra_span():
    """Was a bug (fill_split's cut, before ``cut_tolerance``). One 30 Hz track of 60 steps,
    spans of 3 steps (0.1 s), all priority 1; train_hours = 1/3600 (1.0 s = exactly 10 spans).

    ``before = cumsum(taken) - taken`` drifts: the 11th span's ``before`` is
    0.9999999999999999 < 1.0, so the fill admitted 11 spans (1.1 s), an overshoot of a
    whole span, and validate_budget_plan rejected plan_budget's own plan."""
    plan = plan_budget(_one_track(60, 30.0), BudgetOptions(train_hours=1 / 3600, span_steps=3),
                       strategy=Strategy.from_dict({"method": "inclusion", "priority": {"f.mean": 1.0}}))
    assert plan.accounting["splits"]["train"]["requested"] == 1.0
    errors = validate_budget_plan(plan.items, plan.accounting).errors
    assert plan.admitted().num_rows == 10, f"admitted {plan.admitted().num_rows} spans of 0.1 s for 1.0 s; {errors}"
    assert not errors


def test_regression_tiny_min_tag_frac_reserves_one_segment():
    """Was a bug (``fill._round_up`` without its ``max(1, ...)``). Count mode, train_count=1,
    tag_coverage with min_tag_frac=1e-10 (valid: > 0): ``ceil(1e-10 - 1e-9)`` was 0, so the
    reserve bound was 0 segments and tag "a" went ``over_reserve_bound``, although a
    positive min_tag_frac must never become zero segments."""
    strategy = Strategy.from_dict({"method": "inclusion", "priority": {"f.mean": 1.0}, "tags": ["a"],
                                   "selection": {"tag_coverage": True, "min_tag_frac": 1e-10}})
    plan = plan_budget(_one_track(10, 10.0, ["a"]), BudgetOptions(train_count=1), strategy=strategy)
    block = plan.accounting["splits"]["train"]
    assert block["reserve_bound"] == 1, block["tag_coverage"]
    assert block["tag_coverage"]["a"]["reserve"] == "reserved"
