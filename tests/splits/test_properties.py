"""Hypothesis properties of the resolver and the leakage detector.

Random universes (sources, indices, tags, categories, groups) and random selector trees are
resolved by the real, columnar resolver and by a brute-force reference over plain lists
(``tests.splits._universes.ref_resolve``); the set-algebra laws, determinism under input
shuffling, first-occurrence dedup and the leakage verdicts are checked against Python
set / list semantics.
"""

from __future__ import annotations

import hashlib
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import SelectorError, SplitLeakageError
from kuration.splits import (
    Constraint,
    DataSplitConfig,
    SampleRef,
    Selector,
    Universe,
    evaluate_constraints,
    evaluate_leakage,
    resolve_positions,
    resolve_selectors,
    resolve_splits,
    universe_hash,
    validate_leakage,
)
from kuration.splits.leakage import MAX_LISTED
from tests.splits._universes import NAME_TO_ID, ref_resolve, sort_refs, uids, universe_from_refs

SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# Mixed case on purpose: posix sources keep case, Windows-looking selector paths fold it.
SOURCES = ["d1/A.npz", "d1/b.npz", "D2/a.npz", "d2/C1.npz", "D3/Ab.npz", "e.npz"]
TAGS = ["normal", "anomalous", "night"]
GROUPS = [None, None, "g1", "g2", "g3"]
PATTERNS = ["*", "d1/*", "*a*", "?", "C?", "D?/*", "*.npz", "x*", "[aA]", "d?/*"]


def S(**kwargs) -> Selector:
    return Selector(**kwargs)


@st.composite
def ref_lists(draw, *, min_size: int = 1, max_size: int = 14) -> list[SampleRef]:
    """Random refs with unique (source, index), in arbitrary (drawn) order."""
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(SOURCES), st.integers(0, 11)),
            min_size=min_size, max_size=max_size, unique=True,
        )
    )
    out = []
    for source, index in keys:
        out.append(SampleRef(
            source, index,
            group=draw(st.sampled_from(GROUPS)),
            tags=tuple(draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))),
            category_ids=tuple(draw(st.lists(st.sampled_from([0, 1, 2]), max_size=2, unique=True))),
        ))
    return out


def leaves(refs: list[SampleRef]) -> st.SearchStrategy[Selector]:
    # Mostly names that exist (so results are non-trivial), sometimes names that do not.
    n = len(refs)
    present = sorted({r.source for r in refs})
    indices = sorted({r.index for r in refs})
    paths = st.sampled_from([*present, *present, "missing.npz", *(p.replace("/", "\\") for p in present),
                             "./d1/../d1/A.npz"])
    sources = st.sampled_from([*present, *present, *(p.replace("/", "\\").upper() for p in present), "missing.npz"])
    ids = st.lists(st.one_of(st.sampled_from(indices), st.integers(0, 12)), min_size=1, max_size=4)
    stems = st.sampled_from([*(r.stem for r in refs), "zz"])
    return st.one_of(
        st.just(S(kind="all")),
        st.lists(paths, min_size=1, max_size=3).map(lambda p: S(kind="files", paths=p)),
        st.builds(lambda s, i: S(kind="file_indices", source=s, ids=i), sources, ids),
        st.lists(st.integers(0, n - 1), min_size=1, max_size=4).map(lambda ids: S(kind="dir_indices", ids=ids)),
        st.lists(stems, min_size=1, max_size=2).map(lambda s: S(kind="stems", stems=s)),
        st.sampled_from(PATTERNS).map(lambda p: S(kind="glob", pattern=p)),
        st.lists(st.sampled_from([*TAGS, "unused"]), min_size=1, max_size=2).map(lambda t: S(kind="tag", any_of=t)),
        st.lists(st.sampled_from(sorted(NAME_TO_ID)), min_size=1, max_size=2).map(
            lambda c: S(kind="categories", any_of=c)
        ),
    )


def trees(refs: list[SampleRef]) -> st.SearchStrategy[Selector]:
    def extend(children):
        return st.one_of(
            st.lists(children, min_size=1, max_size=3).map(lambda of: S(kind="union", of=of)),
            st.lists(children, min_size=2, max_size=3).map(lambda of: S(kind="except", of=of)),
            st.lists(children, min_size=2, max_size=3).map(lambda of: S(kind="intersect", of=of)),
        )

    return st.recursive(leaves(refs), extend, max_leaves=6)


def outcome(fn):
    """A resolution's uids, or the marker ``"raises"`` for a SelectorError."""
    try:
        return uids(fn())
    except SelectorError:
        return "raises"


def as_set(universe: Universe, sel: Selector) -> list[str]:
    """The uids one selector picks, with "matched nothing" read as the empty list.

    At top level a zero match raises; that is exactly the empty result of set algebra.
    """
    try:
        return universe.uids(resolve_positions([sel], universe))
    except SelectorError as exc:
        assert "matched 0 samples" in str(exc)
        return []


# -- differential: the real resolver equals the brute-force reference ------------------


@SETTINGS
@given(st.data())
def test_resolver_matches_brute_force_reference(data) -> None:
    refs = data.draw(ref_lists())
    canonical = sort_refs(refs)
    universe, _ = universe_from_refs(refs)
    assert universe.uids() == uids(canonical)
    selectors = data.draw(st.lists(trees(canonical), min_size=1, max_size=3))
    expected = outcome(lambda: ref_resolve(selectors, canonical))
    assert outcome(lambda: resolve_selectors(selectors, universe)) == expected
    # A plain list of refs in canonical order resolves identically, to the very objects.
    got = outcome(lambda: resolve_selectors(selectors, canonical, name_to_id=NAME_TO_ID))
    assert got == expected
    if expected != "raises":
        ids = {id(r) for r in canonical}
        assert all(id(r) in ids for r in resolve_selectors(selectors, canonical, name_to_id=NAME_TO_ID))


# -- set-algebra laws -------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_union_laws(data) -> None:
    refs = sort_refs(data.draw(ref_lists()))
    universe, _ = universe_from_refs(refs)
    a, b, c = (data.draw(trees(refs)) for _ in range(3))
    A, B, C = (as_set(universe, x) for x in (a, b, c))

    def U(*of: Selector) -> list[str]:
        return as_set(universe, S(kind="union", of=of))

    # Order-preserving first-occurrence union: A's order, then what B adds.
    assert U(a, b) == A + [x for x in B if x not in A]
    assert set(U(a, b)) == set(U(b, a)) == set(A) | set(B)
    assert U(U_sel := S(kind="union", of=[a, b]), c) == U(a, S(kind="union", of=[b, c])) == U(a, b, c)
    assert set(as_set(universe, U_sel)) == set(A) | set(B)
    assert U(a, a) == A == U(a)
    assert len(U(a, b, c)) == len(set(U(a, b, c)))


@SETTINGS
@given(st.data())
def test_except_and_intersect_laws(data) -> None:
    refs = sort_refs(data.draw(ref_lists()))
    universe, _ = universe_from_refs(refs)
    a, b, c = (data.draw(trees(refs)) for _ in range(3))
    A, B, C = (as_set(universe, x) for x in (a, b, c))

    def op(kind: str, *of: Selector) -> list[str]:
        return as_set(universe, S(kind=kind, of=of))

    # except: left operand order minus the union of the rest.
    assert op("except", a, b) == [x for x in A if x not in B]
    assert op("except", a, b, c) == op("except", a, S(kind="union", of=[b, c])) == [
        x for x in A if x not in B and x not in C
    ]
    assert op("except", a, a) == []
    # intersect: left operand order filtered by membership in all others.
    assert op("intersect", a, b) == [x for x in A if x in B]
    assert op("intersect", a, b, c) == [x for x in A if x in B and x in C]
    assert set(op("intersect", a, b)) == set(op("intersect", b, a)) == set(A) & set(B)
    assert op("intersect", a, a) == A
    # A splits into (A & B) and (A - B).
    assert set(op("union", S(kind="intersect", of=[a, b]), S(kind="except", of=[a, b]))) == set(A)
    # De Morgan over the universe.
    everything = S(kind="all")
    assert set(op("except", everything, S(kind="union", of=[a, b]))) == set(
        op("intersect", S(kind="except", of=[everything, a]), S(kind="except", of=[everything, b]))
    )


@SETTINGS
@given(st.data())
def test_empty_top_level_result_raises_but_nested_empty_is_fine(data) -> None:
    refs = sort_refs(data.draw(ref_lists()))
    universe, _ = universe_from_refs(refs)
    a = data.draw(trees(refs))
    A = as_set(universe, a)
    nothing = S(kind="except", of=[a, a])
    with pytest.raises(SelectorError, match=r"selector #0 \(kind 'except', 2 operands\) matched 0 samples"):
        resolve_selectors([nothing], universe)
    assert as_set(universe, S(kind="union", of=[nothing, S(kind="all")])) == universe.uids()
    assert as_set(universe, S(kind="except", of=[S(kind="all"), nothing])) == universe.uids()
    if A:
        assert uids(resolve_selectors([S(kind="union", of=[nothing, a])], universe)) == A


# -- stage semantics --------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_stage_is_first_occurrence_union_of_its_selectors(data) -> None:
    refs = sort_refs(data.draw(ref_lists()))
    universe, _ = universe_from_refs(refs)
    selectors = data.draw(st.lists(trees(refs), min_size=1, max_size=4))
    parts = [as_set(universe, s) for s in selectors]
    if not all(parts):
        with pytest.raises(SelectorError, match=f"selector #{[bool(p) for p in parts].index(False)} "):
            resolve_selectors(selectors, universe)
        return
    got = uids(resolve_selectors(selectors, universe))
    assert len(got) == len(set(got))
    expected: list[str] = []
    for part in parts:
        expected += [x for x in part if x not in expected]
    assert got == expected
    # Repeating a selector never changes the stage.
    assert uids(resolve_selectors([*selectors, *selectors], universe)) == got


# -- determinism ------------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_construction_order_does_not_matter(data) -> None:
    refs = data.draw(ref_lists())
    shuffled = data.draw(st.permutations(refs))
    u1, _ = universe_from_refs(refs)
    u2, _ = universe_from_refs(shuffled)
    canonical = sort_refs(refs)
    assert u1.uids() == u2.uids() == uids(canonical)
    text = "".join(f"{r.source}#{r.index}\n" for r in canonical)
    assert u1.hash == u2.hash == universe_hash(canonical) == hashlib.sha256(text.encode()).hexdigest()
    assert [r.group for r in u1] == [r.group for r in u2] == [r.group for r in canonical]
    selectors = data.draw(st.lists(trees(canonical), min_size=1, max_size=3))
    first = outcome(lambda: resolve_selectors(selectors, u1))
    assert outcome(lambda: resolve_selectors(selectors, u2)) == first
    assert outcome(lambda: resolve_selectors(selectors, u1)) == first  # same input, same output
    if first != "raises":
        a, b = resolve_selectors(selectors, u1), resolve_selectors(selectors, u2)
        assert [(r.tags, r.category_ids, r.group) for r in a] == [(r.tags, r.category_ids, r.group) for r in b]


# -- leakage vs brute force -------------------------------------------------------------


@st.composite
def assignments(draw):
    refs = sort_refs(draw(ref_lists(max_size=16)))
    n = len(refs)
    stages = {
        stage: sorted(draw(st.sets(st.integers(0, n - 1), max_size=n)))
        for stage in ("train", "val", "test", "predict")
    }
    return refs, stages


@SETTINGS
@given(assignments())
def test_leakage_detector_matches_brute_force(case) -> None:
    refs, stages = case
    universe, _ = universe_from_refs(refs)
    exclusive = ("train", "val", "test")
    uid_sets = {s: {refs[p].uid for p in stages[s]} for s in exclusive}
    group_sets = {s: {refs[p].group for p in stages[s]} for s in exclusive}
    source_sets = {s: {refs[p].source for p in stages[s]} for s in exclusive}
    shared_uids = set().union(*(uid_sets[a] & uid_sets[b] for a, b in combinations(exclusive, 2)))
    shared_groups = set().union(*(group_sets[a] & group_sets[b] for a, b in combinations(exclusive, 2)))
    spanning = set().union(*(source_sets[a] & source_sets[b] for a, b in combinations(exclusive, 2)))
    leaked = bool(shared_uids or shared_groups)

    positions = {s: np.asarray(rows, np.int64) for s, rows in stages.items()}
    report = evaluate_constraints(positions, universe,
                                  [Constraint("no_split_overlap"), Constraint("no_source_overlap")])
    split, source = report.results
    assert split.status == ("violated" if leaked else "satisfied")
    # the offenders are the samples that leak (shared, or of a shared group), sorted as text
    leaking = {refs[p].uid for s in exclusive for p in stages[s] if refs[p].uid in shared_uids
               or refs[p].group in shared_groups}
    assert split.count == len(leaking) and split.group_count == len(shared_groups)
    assert list(split.offending) == sorted(leaking)[:MAX_LISTED]
    assert list(split.shared_groups) == sorted(shared_groups)[:MAX_LISTED]
    assert source.status == ("violated" if spanning else "satisfied")
    assert source.count == len(spanning) and set(source.offending) == spanning
    assert report.ok == (not leaked and not spanning)

    lists = {s: [refs[p] for p in stages[s]] for s in stages}
    (by_refs,) = evaluate_leakage(lists["train"], lists["val"], lists["test"]).results
    assert by_refs.status == split.status
    assert (by_refs.count, by_refs.group_count) == (split.count, split.group_count)
    assert list(by_refs.offending) == sorted(leaking)[:MAX_LISTED]
    assert by_refs.shared_groups == split.shared_groups
    if leaked:
        with pytest.raises(SplitLeakageError):
            validate_leakage(lists["train"], lists["val"], lists["test"])
    else:
        assert validate_leakage(lists["train"], lists["val"], lists["test"]).ok


@SETTINGS
@given(assignments())
def test_resolve_splits_enforces_exactly_the_brute_force_verdict(case) -> None:
    refs, stages = case
    universe, _ = universe_from_refs(refs)
    exclusive = ("train", "val", "test")
    keys = {s: {refs[p].uid for p in stages[s]} | {"group:" + refs[p].group for p in stages[s]} for s in exclusive}
    leaked = any(keys[a] & keys[b] for a, b in combinations(exclusive, 2))
    cfg = DataSplitConfig(**{
        stage: (S(kind="dir_indices", ids=rows),) if rows else () for stage, rows in stages.items()
    })
    if leaked:
        with pytest.raises(SplitLeakageError):
            resolve_splits(cfg, universe)
        return
    out = resolve_splits(cfg, universe)
    for stage in exclusive:
        assert uids(out[stage]) == [refs[p].uid for p in stages[stage]]
    # predict may overlap anything; empty predict means the whole universe.
    assert uids(out["predict"]) == ([refs[p].uid for p in stages["predict"]] or universe.uids())
