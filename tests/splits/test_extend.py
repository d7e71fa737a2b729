"""Stable split extension: a grown universe keeps every earlier assignment.

The seeded unit hash is checked against its documented formula; extension is checked by
hypothesis over random universes that gain and lose samples; the storage level checks
that a computed split extends itself when its rule is unchanged and resolves afresh when
it changed, and that a baked file covering a changed universe only partly is refused until
``extend_baked`` (or ``resolve-splits --extend-baked``) asks for the extension.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import SplitConfigError, SplitGenerationError
from kuration.splits import SampleRef, Universe, bake_random, bake_stratified, plan_splits, save_splits
from kuration.splits.artifacts import SplitRequest, check_universe_drift, materialize_splits, read_split_report
from kuration.splits.extend import (
    EXTENSION_SCHEME,
    PriorSplit,
    extend_computed,
    extend_split,
    hashed_stage,
    prior_from_stage_table,
)
from kuration_cli import main as kuration
from tests.splits._universes import universe_from_refs

EXCLUSIVE = ("train", "val", "test")


def main(argv: list[str]) -> int:
    """``kuration resolve-splits ARGV``."""
    return kuration(["resolve-splits", *argv])


SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _universe(spec: dict[str, tuple[str, int]]) -> Universe:
    """``{source: (group, n_samples)}`` as a universe, indices 0..n-1."""
    return Universe.from_refs([SampleRef(source, i, group=group)
                               for source, (group, n) in sorted(spec.items()) for i in range(n)])


def _stages(cfg, universe: Universe) -> dict[str, str]:
    """uid -> stage over train / val / test."""
    resolution = plan_splits(cfg, universe)
    return {uid: stage for stage in EXCLUSIVE for uid in universe.uids(resolution.positions[stage])}


def _extend(old_cfg, old: Universe, new: Universe, **options):
    prior = prior_from_stage_table(new, plan_splits(old_cfg, old).stage_table(), basis="earlier")
    options = {"seed": 1, "val_ratio": 0.2, "test_ratio": 0.2, **options}
    return extend_computed(new, prior, **options)


SITES = {f"site_{s}/rec_{r}.parquet": (f"site_{s}", 4) for s in "abcde" for r in (1, 2)}


# -- the seeded unit hash ---------------------------------------------------------------


def _documented_stage(seed: int, unit: str, val: float, test: float) -> str:
    """The rule exactly as docs/splits.md and the module docstring state it."""
    u = int.from_bytes(hashlib.sha256(f"kuration.split-extension.v1\0{seed}\0{unit}".encode()).digest()[:8], "big")
    u /= 2**64
    return "test" if u < test else "val" if u < test + val else "train"


@given(seed=st.integers(-(2**63), 2**63 - 1), unit=st.text(max_size=40),
       ratios=st.tuples(st.floats(0, 0.49), st.floats(0, 0.49)))
@SETTINGS
def test_the_unit_hash_is_the_documented_formula(seed, unit, ratios):
    val, test = ratios
    assert hashed_stage(seed, unit, val_ratio=val, test_ratio=test) == _documented_stage(seed, unit, val, test)
    assert EXTENSION_SCHEME == "kuration.split-extension.v1"


def test_the_unit_hash_pins_these_stages():
    """A golden list: changing the rule changes these, and must change EXTENSION_SCHEME too."""
    got = [hashed_stage(7, f"site_{i}", val_ratio=0.2, test_ratio=0.2) for i in range(10)]
    assert got == [_documented_stage(7, f"site_{i}", 0.2, 0.2) for i in range(10)]
    assert got == ["train", "test", "train", "train", "train", "train", "train", "test", "test", "val"]


@pytest.mark.parametrize(("val", "test"), [(0.2, 0.2), (0.1, 0.3), (0.0, 0.25), (0.5, 0.0)])
def test_the_unit_hash_honours_the_ratios_over_many_units(val, test):
    n = 20_000
    shares = Counter(hashed_stage(3, f"group-{i}", val_ratio=val, test_ratio=test) for i in range(n))
    for stage, want in (("val", val), ("test", test), ("train", 1 - val - test)):
        assert abs(shares[stage] / n - want) < 0.015, (stage, shares)
    if val == 0:
        assert shares["val"] == 0


def test_the_unit_hash_depends_on_the_seed():
    first = [hashed_stage(1, f"g{i}", val_ratio=0.3, test_ratio=0.3) for i in range(200)]
    again = [hashed_stage(1, f"g{i}", val_ratio=0.3, test_ratio=0.3) for i in range(200)]
    other = [hashed_stage(2, f"g{i}", val_ratio=0.3, test_ratio=0.3) for i in range(200)]
    assert first == again and first != other


@pytest.mark.parametrize(("val", "test", "message"), [
    (0.6, 0.5, "val_ratio \\+ test_ratio must leave something for train"),
    (-0.1, 0.2, "val_ratio must be a number in \\[0, 1\\), got -0.1"),
    (float("nan"), 0.2, "val_ratio must be a number in \\[0, 1\\)"),
])
def test_the_unit_hash_refuses_bad_ratios(val, test, message):
    with pytest.raises(SplitGenerationError, match=message):
        hashed_stage(0, "g", val_ratio=val, test_ratio=test)


# -- extension, as a property -------------------------------------------------------------


@st.composite
def grown_universes(draw):
    """An old universe (3-7 groups, 1-3 sources each) and a new one that adds indices to
    old sources, new sources to old groups, new groups, and drops some old sources."""
    n_groups = draw(st.integers(3, 7))
    old: dict[str, tuple[str, int]] = {}
    for g in range(n_groups):
        for r in range(draw(st.integers(1, 3))):
            old[f"g{g}/r{r}.parquet"] = (f"g{g}", draw(st.integers(1, 4)))
    new = dict(old)
    for source in draw(st.lists(st.sampled_from(sorted(old)), max_size=3, unique=True)):
        group, n = new[source]
        new[source] = (group, n + draw(st.integers(1, 3)))
    for g in draw(st.lists(st.integers(0, n_groups - 1), max_size=3)):
        new[f"g{g}/extra_{len(new)}.parquet"] = (f"g{g}", draw(st.integers(1, 3)))
    for g in range(draw(st.integers(0, 6))):
        new[f"new{g}/r0.parquet"] = (f"new{g}", draw(st.integers(1, 3)))
    removable = [s for s in sorted(old) if s in new]
    for source in draw(st.lists(st.sampled_from(removable), max_size=2, unique=True)):
        if len(new) > 1:
            del new[source]
    return _universe(old), _universe(new)


@given(universes=grown_universes(), seed=st.integers(0, 10_000), strategy=st.sampled_from([bake_random,
                                                                                           bake_stratified]),
       group_by=st.sampled_from(["group", "source"]))
@SETTINGS
def test_extension_never_moves_an_earlier_assignment(universes, seed, strategy, group_by):
    old, new = universes
    # by source, a group spanning sources may sit in two stages: the leakage check refuses
    # that, and extension leaves it exactly as it was
    old_cfg = strategy(old, seed=seed, group_by=group_by, check=False)
    before = _stages(old_cfg, old)
    cfg, extension = _extend(old_cfg, old, new, seed=seed, group_by=group_by, check=False)
    after = _stages(cfg, new)
    new_uids = set(new.uids())
    # every earlier sample still here keeps its stage; removed ones drop out
    assert {uid: stage for uid, stage in after.items() if uid in before} == {
        uid: stage for uid, stage in before.items() if uid in new_uids}
    removed = sorted(set(before) - new_uids)
    assert extension.removed == len(removed) and list(extension.first_removed) == removed[:5]
    # every new sample got a stage (no ad_aware here), and no unit is in two stages
    assert set(after) == new_uids
    assert extension.kept == len(before) - len(removed)
    assert extension.assigned == len(new_uids - set(before)) == extension.joined + extension.hashed
    units = new.group_names if group_by == "group" else new.source_names
    codes = new.group_codes if group_by == "group" else new.source_codes
    unit_stages: dict[str, set[str]] = {}
    for row, uid in enumerate(new.uids()):
        unit_stages.setdefault(units[codes[row]], set()).add(after[uid])
    assert all(len(stages) == 1 for stages in unit_stages.values())
    # a new unit went where the hash sends it; an old unit's new samples joined it
    old_units = set(old.group_names if group_by == "group" else old.source_names)
    for unit, (stage,) in unit_stages.items():
        if unit not in old_units:
            assert stage == hashed_stage(seed, unit, val_ratio=0.2, test_ratio=0.2)
    # deterministic: the same inputs give the same baked file
    assert _extend(old_cfg, old, new, seed=seed, group_by=group_by, check=False)[0] == cfg


@given(universes=grown_universes(), seed=st.integers(0, 100))
@SETTINGS
def test_extending_twice_in_steps_equals_extending_once(universes, seed):
    """Samples arriving in two batches land where they land when they arrive together
    (the removals happen in the second batch: a group keeps its stage through the step in
    which its last earlier sample leaves)."""
    old, new = universes
    old_cfg = bake_random(old, seed=seed)
    once, _ = _extend(old_cfg, old, new, seed=seed)
    middle_uids = set(old.uids()) | set(new.uids()[::2])
    middle = Universe.from_refs([ref for ref in new if ref.uid in middle_uids]
                                + [ref for ref in old if ref.uid not in set(new.uids())])
    step, _ = _extend(old_cfg, old, middle, seed=seed)
    twice, _ = _extend(step, middle, new, seed=seed)
    assert _stages(twice, new) == _stages(once, new)


# -- extension, by example --------------------------------------------------------------


def test_a_new_sample_of_an_existing_group_joins_its_stage():
    old = _universe(SITES)
    old_cfg = bake_random(old, seed=4)
    before = _stages(old_cfg, old)
    grown = {**SITES, "site_c/rec_3.parquet": ("site_c", 2), "site_d/rec_1.parquet": ("site_d", 6)}
    new = _universe(grown)
    cfg, extension = _extend(old_cfg, old, new, seed=4)
    after = _stages(cfg, new)
    assert after["site_c/rec_3.parquet#0"] == after["site_c/rec_3.parquet#1"] == before["site_c/rec_1.parquet#0"]
    assert after["site_d/rec_1.parquet#5"] == before["site_d/rec_1.parquet#0"]  # more indices of an old source
    assert (extension.kept, extension.joined, extension.hashed, extension.new_units) == (40, 4, 0, 0)
    assert extension.summary() == ("kept 40 samples where they were, assigned 4 new samples (4 joined their unit's "
                                   "stage, 0 in 0 new units by the seeded unit hash), 0 removed samples dropped out")


def test_a_unit_already_in_two_stages_cannot_take_a_new_sample():
    universe = _universe({"a/1.parquet": ("a", 2), "a/2.parquet": ("a", 2), "b/1.parquet": ("b", 2),
                          "a/3.parquet": ("a", 1)})
    # rows: a/1 #0 #1, a/2 #0 #1, a/3 #0 (new), b/1 #0 #1
    positions = {"train": np.array([0, 1]), "val": np.array([2, 3]), "test": np.array([5, 6])}
    decided = np.ones(len(universe), dtype=bool)
    decided[universe.uids().index("a/3.parquet#0")] = False
    prior = PriorSplit(positions, decided, "hand-made")
    with pytest.raises(SplitGenerationError, match=r"group 'a' already spans train and val, so its new sample "
                                                   r"a/3.parquet#0 has no one stage to join"):
        extend_split(universe, prior, seed=0, val_ratio=0.2, test_ratio=0.2)
    # by source the unit is a/3.parquet, which is new: the hash places it
    extension = extend_split(universe, prior, seed=0, val_ratio=0.2, test_ratio=0.2, group_by="source")
    assert extension.hashed == 1 and extension.first_new_units == (
        ("a/3.parquet", hashed_stage(0, "a/3.parquet", val_ratio=0.2, test_ratio=0.2)),)


def _labelled(spec: dict[str, tuple[str, list[int]]]) -> Universe:
    """``{source: (group, [category per sample])}``; category 0 is background, others anomalous."""
    refs = [SampleRef(source, i, group=group, annotation="labels.json", category_ids=(cat,))
            for source, (group, cats) in sorted(spec.items()) for i, cat in enumerate(cats)]
    return universe_from_refs(refs)[0]


def test_ad_aware_keeps_new_anomalous_samples_out_of_train():
    spec = {f"s{i}/r.parquet": (f"s{i}", [0, 0]) for i in range(6)}
    spec["s9/r.parquet"] = ("s9", [1, 1])  # every sample anomalous: the computed split leaves it out
    old = _labelled(spec)
    old_cfg = bake_random(old, seed=2, ad_aware=True)
    before = _stages(old_cfg, old)
    assert not any(uid.startswith("s9/") for uid in before)  # s9 was a train group, dropped entirely
    train_site = next(uid.split("/")[0] for uid, stage in before.items() if stage == "train")
    grown = {**spec, f"{train_site}/new.parquet": (train_site, [0, 2]), "s9/new.parquet": ("s9", [0, 1])}
    new = _labelled(grown)
    cfg, extension = _extend(old_cfg, old, new, seed=2, ad_aware=True)
    after = _stages(cfg, new)
    assert after[f"{train_site}/new.parquet#0"] == "train" and f"{train_site}/new.parquet#1" not in after
    # s9's earlier samples stay out; its new normal sample joins train, the stage s9 had
    assert "s9/r.parquet#0" not in after and after["s9/new.parquet#0"] == "train"
    assert "s9/new.parquet#1" not in after
    assert (extension.joined, extension.held_out, extension.hashed) == (2, 2, 0)
    report = {r.kind: r.status for r in plan_splits(cfg, new).leakage.results}
    assert report["no_train_anomalous"] == "satisfied"


def test_ad_aware_extension_needs_labels():
    old = _universe(SITES)
    grown = sorted({**SITES, "site_z/r.parquet": ("site_z", 1)}.items())
    # built without preloaded attributes, so labels come from (absent) annotation files
    new = Universe.from_columns([s for s, (_, n) in grown for _ in range(n)],
                                [i for _, (_, n) in grown for i in range(n)],
                                group=[g for _, (g, n) in grown for _ in range(n)])
    prior = prior_from_stage_table(new, plan_splits(bake_random(old, seed=0), old).stage_table(), basis="x")
    # pick a seed whose hash sends site_z to train, where anomalous samples must be told apart
    seed = next(s for s in range(100) if hashed_stage(s, "site_z", val_ratio=0.2, test_ratio=0.2) == "train")
    with pytest.raises(SplitGenerationError, match="ad_aware needs labels to keep new anomalous samples out of train"):
        extend_computed(new, prior, seed=seed, val_ratio=0.2, test_ratio=0.2, ad_aware=True)


def test_a_stage_table_with_a_sample_in_two_stages_is_refused():
    import pyarrow as pa

    universe = _universe({"a/1.parquet": ("a", 1)})
    table = pa.table({"stage": ["train", "val"], "uid": ["a/1.parquet#0", "a/1.parquet#0"]})
    with pytest.raises(SplitConfigError, match="sample a/1.parquet#0 is in two stages of the earlier split"):
        prior_from_stage_table(universe, table, basis="t")
    with pytest.raises(SplitConfigError, match=r"lacks column\(s\) \['stage'\]"):
        prior_from_stage_table(universe, pa.table({"uid": ["a/1.parquet#0"]}), basis="t")


# -- on storage: a computed split extends itself ------------------------------------------


def _materialize(root: Path, universe: Universe, **request):
    from kuration.splits.artifacts import write_universe

    write_universe(universe, root)
    return materialize_splits(universe, SplitRequest(**request), root)


def _stored_stages(root: Path) -> dict[str, str]:
    table = pq.read_table(root / "splits" / "split_assignments.parquet").to_pandas()
    exclusive = table[table.stage != "predict"]
    return dict(zip(exclusive.uid, exclusive.stage, strict=True))


def test_a_computed_split_is_extended_when_its_rule_is_unchanged(tmp_path):
    first = _materialize(tmp_path, _universe(SITES), strategy="stratified", seed=5)
    assert first.mode == "fresh"
    assert read_split_report(tmp_path)["resolution"] == {"mode": "fresh",
                                                         "reason": "no earlier resolution under the storage root"}
    before = _stored_stages(tmp_path)
    grown = {k: v for k, v in SITES.items() if k != "site_e/rec_2.parquet"}
    grown.update({f"site_{s}/rec_1.parquet": (f"site_{s}", 40) for s in "fghij"})
    second = _materialize(tmp_path, _universe(grown), strategy="stratified", seed=5)
    after = _stored_stages(tmp_path)
    assert {u: s for u, s in after.items() if u in before} == {
        u: s for u, s in before.items() if not u.startswith("site_e/rec_2")}
    assert second.mode == "extended" and second.extension is not None
    report = read_split_report(tmp_path)
    resolution = report["resolution"]
    assert resolution["mode"] == "extended" and resolution["kept"] == 36 and resolution["assigned"] == 200
    assert resolution["removed"] == 4 and resolution["first_removed"][0] == "site_e/rec_2.parquet#0"
    assert resolution["new_units"] == 5 and resolution["hashed"] == 200
    assert resolution["rule"].startswith("kuration.split-extension.v1: a new sample joins its group's stage; a new "
                                         "group goes to test if u < 0.2, val if u < 0.4, else train")
    assert resolution["basis"].startswith(f"earlier resolution {tmp_path}/splits/split_assignments.parquet")
    for unit, stage in resolution["first_new_units"]:
        assert {s for u, s in after.items() if u.startswith(unit + "/")} == {stage}
    assert report["status"] == "resolved" and report["leakage"]["ok"] is True
    assert check_universe_drift(tmp_path).passed


def test_an_unchanged_universe_re_resolves_to_the_identical_file(tmp_path):
    universe = _universe(SITES)
    _materialize(tmp_path, universe, strategy="random", seed=5)
    grown = _universe({**SITES, "site_x/r.parquet": ("site_x", 3)})
    _materialize(tmp_path, grown, strategy="random", seed=5)
    text = (tmp_path / "splits" / "splits.json").read_bytes()
    again = _materialize(tmp_path, grown, strategy="random", seed=5)
    assert (tmp_path / "splits" / "splits.json").read_bytes() == text
    assert again.extension is not None and (again.extension.kept, again.extension.assigned) == (43, 0)


@pytest.mark.parametrize(("change", "reason"), [
    ({"seed": 6}, "seed 5 -> 6"),
    ({"val_ratio": 0.3}, "val_ratio 0.2 -> 0.3"),
    ({"strategy": "random"}, "strategy 'stratified' -> 'random'"),
    ({"group_by": "source"}, "group_by 'group' -> 'source'"),
])
def test_a_changed_rule_resolves_afresh(tmp_path, change, reason):
    _materialize(tmp_path, _universe(SITES), strategy="stratified", seed=5)
    grown = _universe({**SITES, "site_x/r.parquet": ("site_x", 3)})
    artifacts = _materialize(tmp_path, grown, **{"strategy": "stratified", "seed": 5, **change})
    assert artifacts.mode == "fresh" and artifacts.extension is None
    resolution = read_split_report(tmp_path)["resolution"]
    assert resolution["reason"] == f"the rule changed since the earlier resolution ({reason})"
    # exactly what a fresh bake of the grown universe gives
    bake = bake_random if (change.get("strategy") == "random") else bake_stratified
    options = {"seed": 5, **{k: v for k, v in change.items() if k != "strategy"}}
    expected = bake(grown, **options, check=False)
    assert _stored_stages(tmp_path) == _stages(expected, grown)


def test_an_earlier_split_from_a_file_is_not_extended(tmp_path):
    rule = tmp_path / "rule.json"
    rule.write_text(json.dumps({"train": [{"kind": "all"}]}))
    _materialize(tmp_path, _universe(SITES), splits_json=str(rule))
    artifacts = _materialize(tmp_path, _universe(SITES), strategy="random", seed=1)
    assert artifacts.mode == "fresh"
    assert read_split_report(tmp_path)["resolution"]["reason"].startswith("the earlier resolution came from a "
                                                                          "splits_json")


@pytest.mark.parametrize("tamper", ["assignments", "report"])
def test_an_unreadable_earlier_split_of_the_same_rule_is_an_error_not_a_fresh_start(tmp_path, tamper):
    _materialize(tmp_path, _universe(SITES), strategy="random", seed=1)
    if tamper == "assignments":
        path = tmp_path / "splits" / "split_assignments.parquet"
        table = pq.read_table(path)
        pq.write_table(table.slice(1), path)
        message = r"split_assignments\.parquet changed after the split report was written"
    else:
        (tmp_path / "splits" / "split_report.json").write_text("{not json")
        message = "split report"
    with pytest.raises(SplitConfigError, match=message) as caught:
        _materialize(tmp_path, _universe(SITES), strategy="random", seed=1)
    assert "The earlier split cannot be extended. To resolve afresh instead (sources may move between stages), " \
           f"remove {tmp_path}/splits or change the seed." in str(caught.value)


def test_extend_baked_needs_a_splits_json():
    with pytest.raises(SplitConfigError, match="extend_baked extends a baked splits_json; it needs splits_json"):
        SplitRequest(strategy="random", extend_baked=True)


# -- on storage and in the CLI: a baked file is extended only on request -------------------


@pytest.fixture
def baked(tmp_path) -> tuple[Path, Universe, dict[str, str]]:
    """A splits.json baked over SITES, and the assignments it makes."""
    old = _universe(SITES)
    cfg = bake_random(old, seed=3)
    path = tmp_path / "baked.json"
    save_splits(cfg, path)
    return path, old, _stages(cfg, old)


GROWN = {**SITES, "site_a/rec_3.parquet": ("site_a", 2), "site_q/rec_1.parquet": ("site_q", 3),
         "site_r/rec_1.parquet": ("site_r", 1)}


def test_a_baked_file_on_a_grown_universe_is_refused_naming_the_new_sources(tmp_path, baked):
    path, _, _ = baked
    root = tmp_path / "store"
    artifacts = _materialize(root, _universe(GROWN), splits_json=str(path))
    assert artifacts.refused and artifacts.splits_url is None
    assert artifacts.refusal.startswith(f"{path} was baked against universe ")
    assert ("and 6 samples from 3 sources are in none of its stages (first: site_a/rec_3.parquet, "
            "site_q/rec_1.parquet, site_r/rec_1.parquet)") in artifacts.refusal
    report = read_split_report(root)
    assert report["status"] == "refused_unassigned"
    assert report["resolution"]["unassigned"]["first_sources"] == ["site_a/rec_3.parquet", "site_q/rec_1.parquet",
                                                                   "site_r/rec_1.parquet"]
    check = check_universe_drift(root)
    assert check.severity == "error" and check.verdict.startswith(f"split refused: {path} was baked against")
    assert not (root / "splits" / "splits.json").exists()


def test_a_baked_file_is_extended_on_request_keeping_its_assignments(tmp_path, baked):
    path, _, before = baked
    root = tmp_path / "store"
    grown = _universe(GROWN)
    artifacts = _materialize(root, grown, splits_json=str(path), extend_baked=True, seed=11)
    assert artifacts.mode == "extended_baked" and not artifacts.refused
    after = _stored_stages(root)
    assert {u: after[u] for u in before} == before
    assert after["site_a/rec_3.parquet#1"] == before["site_a/rec_1.parquet#0"]
    for unit in ("site_q", "site_r"):
        assert after[f"{unit}/rec_1.parquet#0"] == hashed_stage(11, unit, val_ratio=0.2, test_ratio=0.2)
    resolution = read_split_report(root)["resolution"]
    assert (resolution["kept"], resolution["joined"], resolution["hashed"], resolution["removed"]) == (40, 2, 4, None)
    assert resolution["basis"] == f"baked file {path}"
    assert check_universe_drift(root).passed
    # the file pins the grown universe now; re-running against it changes nothing
    again = _materialize(root, grown, splits_json=str(root / "splits" / "splits.json"))
    assert again.mode == "baked" and _stored_stages(root) == after


def test_a_baked_file_that_still_covers_the_universe_needs_no_extension(tmp_path, baked):
    path, old, before = baked
    shrunk = _universe({**SITES, "site_b/rec_2.parquet": ("site_b", 2)})  # two samples fewer
    root = tmp_path / "store"
    artifacts = _materialize(root, shrunk, splits_json=str(path))
    assert artifacts.mode == "baked" and not artifacts.refused
    assert _stored_stages(root) == {u: s for u, s in before.items() if u not in {"site_b/rec_2.parquet#2",
                                                                               "site_b/rec_2.parquet#3"}}
    assert check_universe_drift(root).passed


def test_cli_refuses_a_stale_baked_file_and_extends_it_on_request(tmp_path, baked, capsys):
    path, _, before = baked
    csv = tmp_path / "universe.csv"
    csv.write_text("source,index,group\n" + "".join(f"{s},0-{n - 1},{g}\n" for s, (g, n) in sorted(GROWN.items())))
    out = tmp_path / "out.json"
    assert main(["--universe-csv", str(csv), "--rule", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kuration resolve-splits: error: {path} was baked against universe ")
    assert "(first: site_a/rec_3.parquet, site_q/rec_1.parquet, site_r/rec_1.parquet)" in err
    assert "resolve-splits --rule FILE --extend-baked --seed N" in err and not out.exists()
    assert main(["--universe-csv", str(csv), "--rule", str(path), "--extend-baked", "--seed", "11",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"extended {path}: kept 40 samples where they were, assigned 6 new samples (2 joined" in printed
    from kuration.splits import load_splits, read_universe_csv

    universe = read_universe_csv(csv)
    after = _stages(load_splits(out), universe)
    assert {u: after[u] for u in before} == before and set(after) == set(universe.uids())
    # the same as the asset writes for the same request
    root = tmp_path / "store"
    _materialize(root, universe, splits_json=str(path), extend_baked=True, seed=11)
    assert (root / "splits" / "splits.json").read_text() == out.read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--extend-baked", "--seed", "1", "--strategy", "random"],
     "--extend-baked extends the baked file given as --rule"),
    (["--extend-baked", "--rule", "r.json"], "--extend-baked needs --seed N"),
])
def test_cli_extend_baked_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as caught:
        main(["--universe-csv", "u.csv", "--out", str(tmp_path / "o.json"), *argv])
    assert caught.value.code == 2 and message in capsys.readouterr().err
