"""Baking by generation (``bake_*``) and the ``resolve-splits`` CLI.

A baked file holds only ``file_indices`` selectors plus the ``universe_hash``; resolving it
must give exactly the membership the generator chose. Universes with tags and anomalies
are built from real COCO annotation files, read through ``CocoAnnotationAttributes``.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kuration.errors import SplitGenerationError, SplitLeakageError, UniverseDriftError
from kuration.splits import (
    STAGES,
    Constraint,
    ConstraintKind,
    ConstraintSeverity,
    DataSplitConfig,
    Selector,
    SelectorKind,
    bake_from_split_column,
    bake_random,
    bake_rule,
    bake_stratified,
    dumps_splits,
    enumerate_folder,
    load_splits,
    plan_splits,
    read_universe_csv,
    save_splits,
)
from kuration_cli import main as kuration

EXCLUSIVE = ("train", "val", "test")
BAKERS = [bake_random, bake_stratified]
#: The entry point installed next to the interpreter running the tests (``.venv/bin``).
CONSOLE_SCRIPT = Path(sys.executable).with_name("resolve-splits")


def main(argv: list[str]) -> int:
    """``kuration resolve-splits ARGV``."""
    return kuration(["resolve-splits", *argv])


# -- universes -----------------------------------------------------------------------------


def write_universe(folder: Path, recordings: list[dict], *, with_group: bool = True,
                   with_annotation: bool = True) -> Path:
    """One row per recording (``index`` as a range) plus one COCO file per recording.

    A recording is ``{"source", "frames", "group", "tags", "anomalous", "background"}``:
    ``tags`` go on every COCO image, ``anomalous`` frames get category 2 (scratch) and
    ``background`` frames an annotation of category 0.
    """
    (folder / "labels").mkdir(parents=True, exist_ok=True)
    columns = ["source", "index"] + (["group"] if with_group else []) + (["annotation"] if with_annotation else [])
    lines = [",".join(columns)]
    for rec in recordings:
        stem = rec["source"].replace("/", "_").replace(".cu3s", "")
        n = rec["frames"]
        annotations = [{"id": len(lines) * 100 + i, "image_id": i, "category_id": 2} for i in rec.get("anomalous", ())]
        annotations += [{"id": 5000 + i, "image_id": i, "category_id": 0} for i in rec.get("background", ())]
        doc = {
            "images": [{"id": i, "file_name": f"{stem}_{i}.png", "tags": list(rec.get("tags", ()))} for i in range(n)],
            "annotations": annotations,
            "categories": [{"id": 0, "name": "background"}, {"id": 2, "name": "scratch"}],
        }
        (folder / "labels" / f"{stem}.json").write_text(json.dumps(doc))
        cells = [rec["source"], f"0-{n - 1}" if n > 1 else "0"]
        if with_group:
            cells.append(rec.get("group", ""))
        if with_annotation:
            cells.append(f"labels/{stem}.json")
        lines.append(",".join(cells))
    path = folder / "universe.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def day_night_recordings() -> list[dict]:
    """12 recordings at 6 sites (two per site); sites 0-2 shoot by day, 3-5 by night."""
    recs = []
    for k in range(12):
        site = k // 2
        recs.append({
            "source": f"rec/s{k:02d}.cu3s",
            "frames": 3 + k % 3,
            "group": f"site{site}",
            "tags": ["day"] if site < 3 else ["night"],
            "anomalous": [1] if k % 4 == 0 else [],
            "background": [0] if k % 4 == 1 else [],
        })
    return recs


@pytest.fixture
def site_universe(tmp_path):
    return read_universe_csv(write_universe(tmp_path / "sites", day_night_recordings()))


@pytest.fixture
def source_universe(tmp_path):
    """The same recordings without a group column: every group is its source."""
    return read_universe_csv(write_universe(tmp_path / "sources", day_night_recordings(), with_group=False))


def stage_uids(cfg: DataSplitConfig, universe) -> dict[str, list[str]]:
    resolution = plan_splits(cfg, universe)
    return {stage: universe.uids(resolution.positions[stage]) for stage in STAGES}


def keys_by_stage(cfg: DataSplitConfig, universe, key: str) -> dict[str, set[str]]:
    resolution = plan_splits(cfg, universe)
    codes, names = (universe.group_codes, universe.group_names) if key == "group" else (
        universe.source_codes, universe.source_names)
    return {s: {names[c] for c in codes[resolution.positions[s]]} for s in EXCLUSIVE}


def assert_baked_shape(cfg: DataSplitConfig, universe) -> None:
    assert cfg.is_baked
    assert cfg.universe_hash == universe.hash
    for stage in STAGES:
        for sel in cfg.stage(stage):
            assert sel.kind is SelectorKind.FILE_INDICES
            assert not sel.of
    data = json.loads(dumps_splits(cfg))
    kinds = {sel["kind"] for stage in STAGES for sel in data[stage]}
    assert kinds <= {"file_indices"}
    assert data["predict"] == []


def anomalous_uids(universe) -> set[str]:
    attrs = universe.attributes(frozenset({"category_ids"}))
    return set(universe.uids(np.flatnonzero(attrs.anomalous_rows(len(universe)))))


# -- bake_from_split_column ------------------------------------------------------------------


SPLIT_CSV = (
    "source,index,split,group\n"
    "rec/b.cu3s,0-2,val,\n"
    "rec/a.cu3s,0-3,train,\n"
    "rec/c.cu3s,0,test,\n"
    "rec/c.cu3s,1,test,\n"
    "rec/d.cu3s,5,,\n"
    "rec/e.cu3s,0-1,train,\n"
)


def test_split_column_is_imported_as_concrete_selectors(tmp_path):
    path = tmp_path / "universe.csv"
    path.write_text(SPLIT_CSV)
    universe = read_universe_csv(path)
    cfg = bake_from_split_column(universe)
    assert_baked_shape(cfg, universe)
    assert [(s.source, s.ids) for s in cfg.train] == [("rec/a.cu3s", ("0-3",)), ("rec/e.cu3s", ("0-1",))]
    assert [(s.source, s.ids) for s in cfg.val] == [("rec/b.cu3s", ("0-2",))]
    assert [(s.source, s.ids) for s in cfg.test] == [("rec/c.cu3s", ("0-1",))]
    assert cfg.constraints == (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),)
    stages = stage_uids(cfg, universe)
    assert stages["train"] == [f"rec/a.cu3s#{i}" for i in range(4)] + ["rec/e.cu3s#0", "rec/e.cu3s#1"]
    assert stages["val"] == [f"rec/b.cu3s#{i}" for i in range(3)]
    assert stages["test"] == ["rec/c.cu3s#0", "rec/c.cu3s#1"]
    # a row with no split value is in no exclusive stage; empty predict is everything
    assert "rec/d.cu3s#5" not in stages["train"] + stages["val"] + stages["test"]
    assert len(stages["predict"]) == len(universe) == 12


def test_split_column_membership_equals_the_column_per_row(tmp_path):
    # frames of one recording in several stages, grouped per frame so that is not leakage
    rows = ["source,index,split,group"]
    expected = {s: [] for s in EXCLUSIVE}
    for i in range(10):
        split = EXCLUSIVE[(i * 7) % 3]
        rows.append(f"rec/a.cu3s,{i},{split},frame{i}")
        expected[split].append(f"rec/a.cu3s#{i}")
    path = tmp_path / "universe.csv"
    path.write_text("\n".join(rows) + "\n")
    universe = read_universe_csv(path)
    cfg = bake_from_split_column(universe)
    assert_baked_shape(cfg, universe)
    assert cfg.train[0].ids == (0, 3, 6, 9)
    stages = stage_uids(cfg, universe)
    assert {s: stages[s] for s in EXCLUSIVE} == expected


def test_split_column_spanning_a_recording_is_refused_by_the_group_policy(tmp_path):
    # the group defaults to the source, so one recording in train and val is group leakage
    path = tmp_path / "universe.csv"
    path.write_text("source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,1,val\nrec/b.cu3s,0,test\n")
    universe = read_universe_csv(path)
    with pytest.raises(SplitLeakageError, match=r"1 group\(s\) in both train and val: 'rec/a\.cu3s'"):
        bake_from_split_column(universe)
    relaxed = bake_from_split_column(universe, leakage="warn")
    assert relaxed.leakage_check == "warn"
    assert stage_uids(relaxed, universe)["val"] == ["rec/a.cu3s#1"]


def test_split_column_is_required(tmp_path):
    path = tmp_path / "universe.csv"
    path.write_text("source,index\nrec/a.cu3s,0\n")
    with pytest.raises(SplitGenerationError, match=r"universe\.csv: no 'split' column values to import"):
        bake_from_split_column(read_universe_csv(path))
    path.write_text("source,index,split\nrec/a.cu3s,0,\nrec/a.cu3s,1,\n")
    with pytest.raises(SplitGenerationError,
                       match=r"no 'split' column values to import.*--strategy random\|stratified"):
        bake_from_split_column(read_universe_csv(path))


# -- random and stratified ---------------------------------------------------------------------


@pytest.mark.parametrize("bake", BAKERS)
@pytest.mark.parametrize("seed", [0, 1, 7, 123])
def test_groups_stay_whole_with_group_by_group(bake, seed, site_universe):
    cfg = bake(site_universe, seed=seed, group_by="group")
    assert_baked_shape(cfg, site_universe)
    groups = keys_by_stage(cfg, site_universe, "group")
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"] or groups["val"] & groups["test"])
    assert all(groups[s] for s in EXCLUSIVE)
    if bake is bake_random:
        # ratios are shares of groups: 6 sites * 0.2 rounds to 1 site each for val and test
        assert (len(groups["val"]), len(groups["test"]), len(groups["train"])) == (1, 1, 4)
    stages = stage_uids(cfg, site_universe)
    assert sorted(stages["train"] + stages["val"] + stages["test"]) == sorted(site_universe.uids())


@pytest.mark.parametrize("bake", BAKERS)
@pytest.mark.parametrize("seed", [0, 1, 7, 123])
def test_sources_stay_whole_with_group_by_source(bake, seed, source_universe):
    cfg = bake(source_universe, seed=seed, group_by="source")
    assert_baked_shape(cfg, source_universe)
    sources = keys_by_stage(cfg, source_universe, "source")
    assert not (sources["train"] & sources["val"] or sources["train"] & sources["test"]
                or sources["val"] & sources["test"])
    assert sum(len(s) for s in sources.values()) == 12
    # one selector per source, and it names every frame of that source
    for stage in EXCLUSIVE:
        for sel in cfg.stage(stage):
            (code,) = [c for c, name in enumerate(source_universe.source_names) if name == sel.source]
            n = int((source_universe.source_codes == code).sum())
            assert sel.ids == ((f"0-{n - 1}",) if n > 1 else (0,))


@pytest.mark.parametrize("bake", BAKERS)
def test_group_by_source_never_writes_a_split_that_breaks_up_a_group(bake, site_universe):
    # sites span two recordings: splitting by recording may separate a site, which the
    # group-aware leakage policy refuses; whatever is written keeps every site whole
    refused = 0
    for seed in range(12):
        try:
            cfg = bake(site_universe, seed=seed, group_by="source")
        except SplitLeakageError as exc:
            assert "group(s) in both" in str(exc)
            refused += 1
            continue
        groups = keys_by_stage(cfg, site_universe, "group")
        assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"]
                    or groups["val"] & groups["test"])
    assert refused > 0


@pytest.mark.parametrize("seed", [0, 7, 2024])
def test_random_assignment_is_a_seeded_shuffle_of_the_sorted_groups(site_universe, seed):
    # golden rule, written independently: sort the group names, shuffle positions with
    # random.Random(seed), then carve test, then val, then train (counts by rounding)
    names = sorted(site_universe.group_names)
    order = list(range(len(names)))
    random.Random(seed).shuffle(order)
    expected = {"test": {names[order[0]]}, "val": {names[order[1]]}, "train": {names[i] for i in order[2:]}}
    cfg = bake_random(site_universe, seed=seed)
    assert keys_by_stage(cfg, site_universe, "group") == expected


@pytest.mark.parametrize("bake", BAKERS)
def test_same_seed_gives_identical_text(bake, site_universe, tmp_path):
    first = dumps_splits(bake(site_universe, seed=11))
    again = dumps_splits(bake(site_universe, seed=11))
    assert first == again
    # reading the universe again, with its rows in another order, changes nothing
    shuffled = list(reversed(day_night_recordings()))
    other = read_universe_csv(write_universe(tmp_path / "shuffled", shuffled))
    assert other.hash == site_universe.hash
    assert dumps_splits(bake(other, seed=11)) == first


@pytest.mark.parametrize("bake", BAKERS)
def test_different_seeds_typically_differ(bake, tmp_path):
    # ten interchangeable recordings: only the seed decides (for stratified it breaks the ties)
    recs = [{"source": f"rec/u{k}.cu3s", "frames": 3, "group": f"g{k}"} for k in range(10)]
    universe = read_universe_csv(write_universe(tmp_path, recs))
    texts = {dumps_splits(bake(universe, seed=seed)) for seed in range(10)}
    assert len(texts) >= 5


@pytest.mark.parametrize("bake", BAKERS)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"val_ratio": -0.1}, r"^val_ratio must be a number in \[0, 1\), got -0\.1$"),
        ({"test_ratio": 1.0}, r"^test_ratio must be a number in \[0, 1\), got 1\.0$"),
        ({"test_ratio": float("nan")}, r"^test_ratio must be a number in \[0, 1\), got nan$"),
        ({"val_ratio": "0.2"}, r"^val_ratio must be a number in \[0, 1\), got '0\.2'$"),
        ({"val_ratio": 10**400}, r"^val_ratio must be a number in \[0, 1\), got 1000"),  # not an OverflowError
        (
            {"val_ratio": 0.5, "test_ratio": 0.5},
            r"^val_ratio \+ test_ratio must leave something for train, got 0\.5 \+ 0\.5 >= 1$",
        ),
        ({"group_by": "site"}, r"^group_by must be one of \['group', 'source'\], got 'site'$"),
    ],
)
def test_bad_options_are_rejected(bake, kwargs, message, site_universe):
    with pytest.raises(SplitGenerationError, match=message):
        bake(site_universe, seed=0, **kwargs)


@pytest.mark.parametrize("bake", BAKERS)
def test_too_few_groups_is_an_error(bake, tmp_path):
    recs = [{"source": "rec/a.cu3s", "frames": 10}, {"source": "rec/b.cu3s", "frames": 1}]
    universe = read_universe_csv(write_universe(tmp_path, recs, with_annotation=False))
    with pytest.raises(
        SplitGenerationError,
        match=r"^only 2 group\(s\) to split: a test ratio of 0\.2 gets no whole group\. Use fewer stages \(ratio 0\)",
    ):
        bake(universe, seed=0)
    with pytest.raises(SplitGenerationError,
                       match=r"^only 2 source\(s\) to split: a val ratio of 0\.2 gets no whole source"):
        bake(universe, seed=0, group_by="source", test_ratio=0.0)
    # with val and test switched off, everything is train
    train_only = bake(universe, seed=0, val_ratio=0.0, test_ratio=0.0)
    assert (train_only.val, train_only.test) == ((), ())
    assert stage_uids(train_only, universe)["train"] == universe.uids()


def test_stratified_never_leaves_a_requested_stage_empty(tmp_path):
    # one big group would pull both small ones into train by fill alone; each stage still gets one
    recs = [{"source": "rec/a.cu3s", "frames": 1}, {"source": "rec/b.cu3s", "frames": 1},
            {"source": "rec/c.cu3s", "frames": 100}]
    universe = read_universe_csv(write_universe(tmp_path, recs, with_annotation=False))
    resolution = plan_splits(bake_stratified(universe, seed=0), universe)
    assert resolution.group_counts()["train"] == 1
    assert resolution.group_counts()["val"] == 1
    assert resolution.group_counts()["test"] == 1


@pytest.mark.parametrize("n_groups,val,test", [(6, 0.1, 0.1), (6, 0.3, 0.1), (3, 0.2, 0.2), (4, 0.25, 0.25)])
def test_stratified_fills_every_stage_whenever_the_group_count_allows(tmp_path, n_groups, val, test):
    recs = [{"source": f"rec/r{i}.cu3s", "frames": 5 + 7 * i} for i in range(n_groups)]
    universe = read_universe_csv(write_universe(tmp_path, recs, with_annotation=False))
    for seed in range(5):
        counts = plan_splits(bake_stratified(universe, seed=seed, val_ratio=val, test_ratio=test),
                             universe).group_counts()
        assert all(counts[s] >= 1 for s in ("train", "val", "test")), (seed, counts)


def tag_imbalance(universe, positions: dict[str, np.ndarray], ratios: dict[str, float]) -> float:
    """Sum over tags and stages of |share of the tag's samples in the stage - stage ratio|."""
    attrs = universe.attributes(frozenset({"tags"}))
    total = 0.0
    for code in range(len(attrs.tag_names)):
        rows = attrs.tag_rows[attrs.tag_codes == code]
        for stage, ratio in ratios.items():
            total += abs(np.isin(rows, positions[stage]).sum() / len(rows) - ratio)
    return total


def test_stratified_balances_tags_better_than_a_skewed_assignment(site_universe):
    ratios = {"train": 0.6, "val": 0.2, "test": 0.2}
    codes = {name: i for i, name in enumerate(site_universe.group_names)}

    def rows_of(*sites):
        return np.flatnonzero(np.isin(site_universe.group_codes, [codes[s] for s in sites]))

    # every day site in val / test, every night site in train
    skewed = {"val": rows_of("site0"), "test": rows_of("site1"), "train": rows_of("site2", "site3", "site4", "site5")}
    worst = tag_imbalance(site_universe, skewed, ratios)
    stratified, shuffled = [], []
    for seed in range(10):
        cfg = bake_stratified(site_universe, seed=seed)
        positions = plan_splits(cfg, site_universe).positions
        stratified.append(tag_imbalance(site_universe, positions, ratios))
        # both light conditions are present in train and in at least one held-out stage
        tags = site_universe.attributes(frozenset({"tags"}))
        held_out = np.r_[positions["val"], positions["test"]]
        for name in ("day", "night"):
            rows = tags.tag_rows[tags.tag_codes == tags.tag_names.index(name)]
            assert np.isin(rows, positions["train"]).any()
            assert np.isin(rows, held_out).any()
        cfg_random = bake_random(site_universe, seed=seed)
        shuffled.append(tag_imbalance(site_universe, plan_splits(cfg_random, site_universe).positions, ratios))
    assert max(stratified) < worst
    assert np.mean(stratified) < np.mean(shuffled)


@pytest.mark.parametrize("bake", BAKERS)
@pytest.mark.parametrize("seed", [0, 3, 9])
def test_ad_aware_drops_anomalous_samples_from_train_only(bake, seed, site_universe):
    plain = stage_uids(bake(site_universe, seed=seed), site_universe)
    cfg = bake(site_universe, seed=seed, ad_aware=True)
    assert_baked_shape(cfg, site_universe)
    assert cfg.constraints == (
        Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
        Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS, ConstraintSeverity.ERROR),
    )
    aware = stage_uids(cfg, site_universe)
    anomalous = anomalous_uids(site_universe)
    assert anomalous == {"rec/s00.cu3s#1", "rec/s04.cu3s#1", "rec/s08.cu3s#1"}
    assert aware["train"] == [uid for uid in plain["train"] if uid not in anomalous]
    assert aware["val"] == plain["val"] and aware["test"] == plain["test"]
    # a background-only annotation (category 0) is normal and stays in train
    background = {"rec/s01.cu3s#0", "rec/s05.cu3s#0", "rec/s09.cu3s#0"}
    assert background & set(plain["train"]) <= set(aware["train"])
    report = {r.kind: r for r in plan_splits(cfg, site_universe).leakage.results}
    assert report["no_train_anomalous"].status == "satisfied"
    assert json.loads(dumps_splits(cfg))["constraints"][1] == {"kind": "no_train_anomalous", "severity": "error"}


@pytest.mark.parametrize("bake", BAKERS)
def test_ad_aware_needs_annotations(bake, tmp_path):
    universe = read_universe_csv(write_universe(tmp_path, day_night_recordings(), with_annotation=False))
    with pytest.raises(SplitGenerationError,
                       match=r"universe\.csv: --ad-aware needs labels to tell anomalous samples apart"):
        bake(universe, seed=0, ad_aware=True)


def test_leakage_option_is_written_into_the_file(site_universe):
    assert bake_random(site_universe, seed=0, leakage="warn").leakage_check == "warn"
    off = bake_stratified(site_universe, seed=0, leakage="off", ad_aware=True)
    assert off.constraints == (Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS, ConstraintSeverity.ERROR),)


# -- bake_rule -----------------------------------------------------------------------------------


def rule_config(universe_hash: str | None = None, **extra) -> DataSplitConfig:
    return DataSplitConfig(
        universe_hash=universe_hash,
        train=(
            Selector(kind=SelectorKind.GLOB, pattern="rec/s0[0-3].cu3s"),
            Selector(
                kind=SelectorKind.EXCEPT,
                of=(
                    Selector(kind=SelectorKind.STEMS, stems=("s04", "s05", "s06", "s07")),
                    Selector(kind=SelectorKind.TAG, any_of=("anomalous",)),
                ),
            ),
        ),
        val=(Selector(kind=SelectorKind.DIR_INDICES, ids=("40-44", 39)),),
        # positions 39-44 are rec/s10 #0-3 and rec/s11 #0-1
        test=(Selector(kind=SelectorKind.FILES, paths=("rec/s08.cu3s", "rec/s09.cu3s")),),
        constraints=(
            Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
            Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),
        ),
        **extra,
    )


def test_bake_rule_freezes_the_same_membership(site_universe):
    rule = rule_config(universe_hash=site_universe.hash)
    baked = bake_rule(rule, site_universe)
    assert_baked_shape(baked, site_universe)
    assert baked.constraints == rule.constraints
    live, frozen = stage_uids(rule, site_universe), stage_uids(baked, site_universe)
    for stage in STAGES:
        assert sorted(frozen[stage]) == sorted(live[stage])
        assert frozen[stage] == [u for u in site_universe.uids() if u in set(live[stage])]  # canonical order
    assert live["val"] == ["rec/s10.cu3s#1", "rec/s10.cu3s#2", "rec/s10.cu3s#3", "rec/s11.cu3s#0", "rec/s11.cu3s#1",
                           "rec/s10.cu3s#0"]
    # the except removed only the anomalous frame of its own operand
    assert "rec/s04.cu3s#1" not in live["train"] and "rec/s00.cu3s#1" in live["train"]
    assert len(live["train"]) == len([u for u in site_universe.uids() if u < "rec/s08"]) - 1


def test_bake_rule_keeps_a_nonempty_predict(site_universe):
    rule = rule_config(predict=(Selector(kind=SelectorKind.STEMS, stems=("s11",)),))
    baked = bake_rule(rule, site_universe)
    assert [(s.source, s.ids) for s in baked.predict] == [("rec/s11.cu3s", ("0-4",))]


def test_bake_rule_refuses_a_leaking_rule(site_universe):
    rule = DataSplitConfig(
        train=(Selector(kind=SelectorKind.STEMS, stems=("s00",)),),
        val=(Selector(kind=SelectorKind.FILE_INDICES, source="rec/s00.cu3s", ids=(2,)),),
    )
    with pytest.raises(SplitLeakageError, match=r"1 sample\(s\) shared between train and val"):
        bake_rule(rule, site_universe)


def test_bake_rule_refuses_a_drifted_positional_rule(site_universe):
    with pytest.raises(UniverseDriftError, match=r"universe changed since splits\.json was committed"):
        bake_rule(rule_config(universe_hash="0" * 64), site_universe)


# -- the CLI -------------------------------------------------------------------------------------


@pytest.fixture
def sites_csv(tmp_path):
    return write_universe(tmp_path / "sites", day_night_recordings())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_from_csv(tmp_path, capsys):
    csv_path = tmp_path / "universe.csv"
    csv_path.write_text(SPLIT_CSV)
    out = tmp_path / "out" / "splits.json"
    code, stdout, stderr = run(capsys, "--from-csv", csv_path, "--out", out)
    assert (code, stderr) == (0, "")
    universe = read_universe_csv(csv_path)
    assert out.read_text() == dumps_splits(bake_from_split_column(universe))
    assert load_splits(out).is_baked
    assert stdout.startswith(f"wrote {out}: train=6 samples/2 groups, val=3 samples/1 groups, test=2 samples/1 groups;")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((), lambda u: bake_random(u, seed=7)),
        (("--strategy", "stratified"), lambda u: bake_stratified(u, seed=7)),
        (
            ("--strategy", "stratified", "--group-by", "group", "--ad-aware", "--val-ratio", "0.3",
             "--test-ratio", "0.2"),
            lambda u: bake_stratified(u, seed=7, ad_aware=True, val_ratio=0.3, test_ratio=0.2),
        ),
        (("--leakage", "warn"), lambda u: bake_random(u, seed=7, leakage="warn")),
    ],
)
def test_cli_strategy_writes_what_the_library_bakes(sites_csv, tmp_path, capsys, flags, expected):
    out = tmp_path / "splits.json"
    argv = ["--universe-csv", sites_csv, "--seed", "7", "--out", out, "-q", *flags]
    if "--strategy" not in flags:
        argv += ["--strategy", "random"]
    code, stdout, stderr = run(capsys, *argv)
    assert (code, stdout, stderr) == (0, "", "")
    assert out.read_text() == dumps_splits(expected(read_universe_csv(sites_csv)))


def test_cli_group_by_source(tmp_path, capsys):
    csv_path = write_universe(tmp_path / "u", day_night_recordings(), with_group=False)
    out = tmp_path / "splits.json"
    code, _, _ = run(capsys, "--universe-csv", csv_path, "--strategy", "random", "--seed", "3", "--group-by", "source",
                     "--out", out)
    assert code == 0
    assert out.read_text() == dumps_splits(bake_random(read_universe_csv(csv_path), seed=3, group_by="source"))


@pytest.mark.parametrize("strategy", ["random", "stratified"])
def test_cli_output_is_byte_identical_across_runs(sites_csv, tmp_path, capsys, strategy):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        code, _, _ = run(capsys, "--universe-csv", sites_csv, "--strategy", strategy, "--seed", "5", "--out", out)
        assert code == 0
    assert first.read_bytes() == second.read_bytes()
    assert not first.read_bytes().endswith(b"\n")


def test_cli_rule(sites_csv, tmp_path, capsys):
    universe = read_universe_csv(sites_csv)
    rule_path = tmp_path / "rule.json"
    save_splits(rule_config(universe_hash=universe.hash), rule_path)
    out = tmp_path / "splits.json"
    code, stdout, _ = run(capsys, "--universe-csv", sites_csv, "--rule", rule_path, "--out", out)
    assert code == 0
    assert out.read_text() == dumps_splits(bake_rule(rule_config(universe_hash=universe.hash), universe))
    assert "wrote" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--universe-csv", "U.csv", "--strategy", "random", "--out", "o.json"], r"--strategy needs --seed N"),
        (["--universe-csv", "U.csv", "--seed", "1", "--out", "o.json"],
         r"--universe-csv needs --strategy random\|stratified or --rule R\.json"),
        (["--from-csv", "U.csv", "--strategy", "random", "--seed", "1", "--out", "o.json"],
         r"--from-csv imports the split column; it takes neither --strategy nor --rule"),
        (["--from-csv", "U.csv", "--rule", "r.json", "--out", "o.json"], r"--from-csv imports the split column"),
        (["--from-csv", "U.csv", "--universe-csv", "U.csv", "--out", "o.json"],
         r"argument --universe-csv: not allowed with argument --from-csv"),
        (["--universe-csv", "U.csv", "--strategy", "random", "--rule", "r.json", "--seed", "1", "--out", "o.json"],
         r"argument --rule: not allowed with argument --strategy"),
        (["--universe-csv", "U.csv", "--strategy", "kmeans", "--seed", "1", "--out", "o.json"],
         r"argument --strategy: invalid choice: 'kmeans'"),
        (["--from-csv", "U.csv"], r"the following arguments are required: --out"),
        (["--out", "o.json"], r"one of the arguments --from-csv --universe-csv --folder is required"),
        (["--universe-csv", "U.csv", "--strategy", "random", "--seed", "x", "--out", "o.json"],
         r"argument --seed: invalid int value: 'x'"),
        # a folder-enumerated universe
        (["--folder", "F", "--out", "o.json"], r"--folder needs --strategy random\|stratified or --rule R\.json"),
        (["--universe-csv", "U.csv", "--pattern", "*.npz", "--strategy", "random", "--seed", "1", "--out", "o.json"],
         r"--pattern picks the files of --folder DIR"),
        (["--folder", "F", "--universe-csv", "U.csv", "--out", "o.json"],
         r"argument --universe-csv: not allowed with argument --folder"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kuration resolve-splits")
    assert re.search(message, err), err
    assert not (tmp_path / "o.json").exists()


def validation_cases(tmp_path: Path, sites_csv: Path) -> dict[str, tuple[list, str]]:
    dup = tmp_path / "dup.csv"
    dup.write_text("source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,0,val\n")
    span = tmp_path / "span.csv"
    span.write_text("source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,1,val\nrec/b.cu3s,0,test\n")
    nosplit = tmp_path / "nosplit.csv"
    nosplit.write_text("source,index\nrec/a.cu3s,0\n")
    bad_rule = tmp_path / "rule.json"
    bad_rule.write_text(json.dumps({"train": [{"kind": "glob", "ids": [1]}]}))
    plain = write_universe(tmp_path / "plain", day_night_recordings(), with_annotation=False)
    strat = ["--universe-csv", sites_csv, "--strategy", "random", "--seed", "1"]
    return {
        "duplicate row": (["--from-csv", dup], r"dup\.csv: duplicate identity \(source, index\)=\('rec/a\.cu3s', 0\)"),
        "missing universe": (["--from-csv", tmp_path / "nope.csv"], r"universe file not found: .*nope\.csv"),
        "no split column": (["--from-csv", nosplit], r"no 'split' column values to import"),
        "leaking import": (["--from-csv", span], r"no_split_overlap violated .*'rec/a\.cu3s'"),
        "ratios": ([*strat, "--val-ratio", "0.6", "--test-ratio", "0.4"],
                   r"val_ratio \+ test_ratio must leave something for train"),
        "too few groups": ([*strat, "--test-ratio", "0.01"],
                           r"only 6 group\(s\) to split: a test ratio of 0\.01 gets no whole group"),
        "ad-aware without labels": (["--universe-csv", plain, "--strategy", "stratified", "--seed", "1", "--ad-aware"],
                                    r"--ad-aware needs labels"),
        "bad rule": (["--universe-csv", sites_csv, "--rule", bad_rule],
                     r"rule\.json: train\[0\]: selector kind 'glob' must not set field\(s\) \['ids'\]"),
        "missing rule": (["--universe-csv", sites_csv, "--rule", tmp_path / "none.json"],
                         r"splits file not found: .*none\.json"),
        "one file per row": (["--from-csv", span, "--one-file-per-row"],
                             r"line 2, column 'materialized_path': required"),
    }


CASES = ["duplicate row", "missing universe", "no split column", "leaking import", "ratios", "too few groups",
         "ad-aware without labels", "bad rule", "missing rule", "one file per row"]


@pytest.mark.parametrize("case", CASES)
def test_cli_validation_errors_return_2_and_write_nothing(tmp_path, sites_csv, capsys, case):
    argv, message = validation_cases(tmp_path, sites_csv)[case]
    out = tmp_path / "result" / "splits.json"
    code, stdout, stderr = run(capsys, *argv, "--out", out)
    assert code == 2
    assert stdout == ""
    assert stderr.startswith("kuration resolve-splits: error: ")
    assert re.search(message, stderr), stderr
    assert not out.exists()


def test_cli_failure_leaves_an_existing_file_untouched(tmp_path, capsys):
    dup = tmp_path / "dup.csv"
    dup.write_text("source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,0,val\n")
    out = tmp_path / "splits.json"
    out.write_text("previous")
    code, _, _ = run(capsys, "--from-csv", dup, "--out", out)
    assert code == 2
    assert out.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.csv", "splits.json"]


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kuration resolve-splits")
    for flag in ("--from-csv", "--universe-csv", "--folder", "--pattern", "--strategy", "--rule", "--seed",
                 "--group-by", "--ad-aware", "--out"):
        assert flag in out
    assert "  kuration resolve-splits --folder " in out and "exit status:" in out


def test_installed_console_script_runs():
    # seed 003's name for the command stays: the same parser under it, and a line naming the verb
    result = subprocess.run([str(CONSOLE_SCRIPT), "--help"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: resolve-splits")
    assert "--strategy {random,stratified}" in result.stdout
    assert result.stderr == "resolve-splits: the same as `kuration resolve-splits` (a name seed 003 (the Cuvis.AI " \
                            "command) gives; it stays)\n"


# -- a folder-enumerated universe ------------------------------------------------------------------


@pytest.fixture
def frames(tmp_path):
    """A folder of converted frames with no universe.csv: one sample per file (seed 003's
    disk-enumerated module), beside files that are not samples."""
    folder = tmp_path / "frames"
    for rel in ["site_a/f0.npz", "site_a/f1.npz", "site_b/f0.npz", "site_b/f1.npz", "site_c/f0.npz",
                "site_d/f0.npz", "site_e/f0.npz", "notes.txt", ".cache/x.npz"]:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(b"x")
    return folder


def test_cli_bakes_a_folder_enumerated_universe(frames, tmp_path, capsys):
    out = tmp_path / "splits.json"
    code, stdout, stderr = run(capsys, "--folder", frames, "--pattern", "*.npz", "--strategy", "random", "--seed", "4",
                               "--out", out)
    assert (code, stderr) == (0, "")
    universe = enumerate_folder(frames, pattern="*.npz")
    assert universe.uids() == ["site_a/f0.npz#0", "site_a/f1.npz#0", "site_b/f0.npz#0", "site_b/f1.npz#0",
                               "site_c/f0.npz#0", "site_d/f0.npz#0", "site_e/f0.npz#0"]
    assert out.read_text() == dumps_splits(bake_random(universe, seed=4))
    baked = load_splits(out)
    assert baked.is_baked and baked.universe_hash == universe.hash
    assert stdout.startswith(f"wrote {out}: ") and "universe 7 samples" in stdout
    # the baked file resolves against the same folder, every file in exactly one stage
    resolved = plan_splits(baked, universe)
    assert sorted(ref.uid for stage in EXCLUSIVE for ref in resolved.refs(stage)) == universe.uids()


def test_cli_resolves_a_rule_over_a_folder(frames, tmp_path, capsys):
    universe = enumerate_folder(frames, pattern="*.npz")
    rule = tmp_path / "rule.json"
    rule.write_text(json.dumps({"train": [{"kind": "glob", "pattern": "site_[ab]/*"}],
                                "val": [{"kind": "glob", "pattern": "site_c/*"}],
                                "test": [{"kind": "glob", "pattern": "site_[de]/*"}]}))
    out = tmp_path / "splits.json"
    code, _, stderr = run(capsys, "--folder", frames, "--pattern", "*.npz", "--rule", rule, "--out", out, "-q")
    assert (code, stderr) == (0, "")
    assert out.read_text() == dumps_splits(bake_rule(load_splits(rule), universe))
    assert [ref.uid for ref in plan_splits(load_splits(out), universe).refs("val")] == ["site_c/f0.npz#0"]


def test_cli_folder_without_a_pattern_takes_every_visible_file(frames, tmp_path, capsys):
    out = tmp_path / "splits.json"
    assert run(capsys, "--folder", frames, "--strategy", "random", "--seed", "1", "--out", out, "-q")[0] == 0
    assert out.read_text() == dumps_splits(bake_random(enumerate_folder(frames), seed=1))
    assert "notes.txt" in out.read_text() and ".cache" not in out.read_text()


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "missing", r"cannot enumerate .*missing: not a directory"),
    (lambda tmp: tmp, r"no files matching '\*\.tif' under "),
])
def test_cli_folder_that_holds_no_sample_exits_2_and_writes_nothing(tmp_path, capsys, make, message):
    out = tmp_path / "out" / "splits.json"
    code, stdout, stderr = run(capsys, "--folder", make(tmp_path), "--pattern", "*.tif", "--strategy", "random",
                               "--seed", "1", "--out", out)
    assert (code, stdout) == (2, "") and stderr.startswith("kuration resolve-splits: error: ")
    assert re.search(message, stderr), stderr
    assert not out.exists()
