"""Interop with Cuvis.AI where its own tests found gaps (issue 10, section 6).

Whole-file samples (``SampleRef`` without an index, uid = the source), a repeated sample
in a list of refs, ``uid=``, the error wording of ``categories`` selectors and the order
of offender lists. Expected uids and hashes are derived here from the definitions in
seed 003 and ``cuvis_ai_schemas.training.data.SampleRef`` (uid ``source#index``, or the
source alone; ``universe_hash`` = sha256 over each uid plus ``\\n``), not from Kuration.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from kuration.errors import SelectorError, UniverseError
from kuration.splits import (
    Constraint,
    SampleRef,
    Selector,
    Universe,
    bake_random,
    evaluate_constraints,
    evaluate_leakage,
    load_splits,
    plan_splits,
    resolve_positions,
    resolve_selectors,
    save_splits,
    universe_hash,
)
from kuration.splits.artifacts import load_universe, read_universe_table, validate_universe_table, write_universe


def cuvis_hash(uids: list[str]) -> str:
    digest = hashlib.sha256()
    for uid in uids:
        digest.update(uid.encode("utf-8") + b"\n")
    return digest.hexdigest()


def S(**kwargs) -> Selector:
    return Selector(**kwargs)


# -- whole-file samples -------------------------------------------------------------------


@pytest.fixture
def tiffs() -> list[SampleRef]:
    # what a disk-enumerated module (Cuvis.AI tiff_paired) lists: one whole-file sample per
    # file, sorted by source; plus an indexed recording, as a mixed universe may hold
    return [
        SampleRef(source="cubes/a.tif"),
        SampleRef(source="cubes/b.tif", index=None, stem="b"),
        SampleRef(source="cubes/c.tif", group="site2"),
        SampleRef(source="rec/x.cu3s", index=0),
        SampleRef(source="rec/x.cu3s", index=1),
    ]


def test_a_whole_file_sample_has_the_source_as_its_uid():
    ref = SampleRef("cubes/a.tif")
    assert (ref.index, ref.uid, ref.stem, ref.group) == (None, "cubes/a.tif", "a", "cubes/a.tif")
    assert SampleRef("cubes\\a.tif").uid == "cubes/a.tif"


def test_whole_file_universes_hash_as_cuvis_does(tiffs):
    expected = cuvis_hash(["cubes/a.tif", "cubes/b.tif", "cubes/c.tif", "rec/x.cu3s#0", "rec/x.cu3s#1"])
    universe = Universe.from_refs(tiffs)
    assert universe.uids() == [r.uid for r in tiffs]
    assert universe.hash == universe_hash(tiffs) == universe_hash(list(universe)) == expected
    assert Universe.from_columns([r.source for r in tiffs], [r.index for r in tiffs]).hash == expected


def test_whole_file_refs_come_back_without_an_index(tiffs):
    universe = Universe.from_refs(tiffs)
    assert [r.index for r in universe] == [None, None, None, 0, 1]
    assert list(universe)[2].group == "site2"
    assert list(universe) == tiffs


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (S(kind="files", paths=["cubes/b.tif"]), ["cubes/b.tif"]),
        (S(kind="glob", pattern="*.tif"), ["cubes/a.tif", "cubes/b.tif", "cubes/c.tif"]),
        (S(kind="stems", stems=["c", "x"]), ["cubes/c.tif", "rec/x.cu3s#0", "rec/x.cu3s#1"]),
        (S(kind="dir_indices", ids=[4, 0]), ["rec/x.cu3s#1", "cubes/a.tif"]),
        (S(kind="all"), ["cubes/a.tif", "cubes/b.tif", "cubes/c.tif", "rec/x.cu3s#0", "rec/x.cu3s#1"]),
        (S(kind="except", of=[S(kind="all"), S(kind="file_indices", source="rec/x.cu3s", ids=[0])]),
         ["cubes/a.tif", "cubes/b.tif", "cubes/c.tif", "rec/x.cu3s#1"]),
    ],
)
def test_selectors_resolve_whole_file_samples_over_a_universe_and_a_list(tiffs, selector, expected):
    assert resolve_selectors([selector], Universe.from_refs(tiffs)).uids() == expected
    assert [r.uid for r in resolve_selectors([selector], tiffs)] == expected


def test_file_indices_never_name_a_whole_file_sample(tiffs):
    # a whole-file sample has no read position: index 0 is not it (as in Cuvis.AI)
    with pytest.raises(SelectorError, match=r"selector #0 \(kind 'file_indices', .*\) matched 0 samples"):
        resolve_positions([S(kind="file_indices", source="cubes/a.tif", ids=[0])], Universe.from_refs(tiffs))


def test_a_whole_file_universe_round_trips_through_universe_parquet(tmp_path, tiffs):
    universe = Universe.from_refs(tiffs)
    write_universe(universe, tmp_path)
    table = read_universe_table(tmp_path)
    assert table.column("index").to_pylist() == [None, None, None, 0, 1]
    assert table.column("uid").to_pylist() == universe.uids()
    assert validate_universe_table(table).ok, validate_universe_table(table).errors
    again = load_universe(tmp_path)
    assert again.hash == universe.hash and list(again) == list(universe)


def test_a_whole_file_universe_bakes_to_files_selectors_that_resolve_back(tmp_path, tiffs):
    universe = Universe.from_refs(tiffs)
    cfg = bake_random(universe, seed=3, val_ratio=0.34, test_ratio=0.34, group_by="source")
    kinds = {sel.source or sel.paths[0]: sel.kind.value for stage in ("train", "val", "test")
             for sel in cfg.stage(stage)}
    assert kinds == {"cubes/a.tif": "files", "cubes/b.tif": "files", "cubes/c.tif": "files",
                     "rec/x.cu3s": "file_indices"}
    assert cfg.universe_hash == universe.hash
    save_splits(cfg, tmp_path / "splits.json")
    resolution = plan_splits(load_splits(tmp_path / "splits.json"), universe)
    assert sorted(u for s in ("train", "val", "test")
                  for u in universe.uids(resolution.positions[s])) == sorted(universe.uids())
    table = resolution.stage_table()
    whole = [uid for uid, index in zip(table.column("uid").to_pylist(), table.column("index").to_pylist(), strict=True)
             if index is None]
    assert set(whole) == {"cubes/a.tif", "cubes/b.tif", "cubes/c.tif"}


def test_leakage_over_whole_file_samples(tiffs):
    a, b, c, x0, x1 = tiffs
    (result,) = evaluate_leakage([a, x0], [b], [a, x1]).results
    assert result.status == "violated"
    assert result.offending == ("cubes/a.tif", "rec/x.cu3s#0", "rec/x.cu3s#1") and result.count == 3


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        (
            [SampleRef("rec/x.cu3s"), SampleRef("rec/x.cu3s", 3)],
            r"^universe: source 'rec/x\.cu3s' is a whole-file sample \(no index\) at position 0 and has indexed "
            r"samples too \(index 3 at position 1\); a source is either one whole-file sample or indexed samples$",
        ),
        (
            [SampleRef("cubes/a.tif"), SampleRef("cubes/b.tif"), SampleRef("cubes/a.tif")],
            r"^universe: duplicate identity whole-file sample 'cubes/a\.tif' at position 0 and position 2; "
            r"each \(source, index\) must be unique \(drop the repeated sample\)$",
        ),
        (
            [SampleRef("rec/x.cu3s", 0), SampleRef("rec/x.cu3s#0")],
            r"^universe: whole-file sample 'rec/x\.cu3s#0' at position 1 has the uid of sample \('rec/x\.cu3s', 0\); "
            r"rename the source, every uid must be unique$",
        ),
    ],
)
def test_ambiguous_whole_file_universes_are_refused(refs, message):
    with pytest.raises(UniverseError, match=message):
        Universe.from_refs(refs)


@pytest.mark.parametrize("tail", ["9" * 5000, "9223372036854775808", "\u0661", "2"])
def test_a_whole_file_source_named_like_no_indexed_uid_is_accepted(tail):
    # a '#<digits>' name matching no sample is a plain name, however long its number
    universe = Universe.from_refs([SampleRef("a", 1), SampleRef(f"a#{tail}")])
    assert universe.uids() == ["a#1", f"a#{tail}"]


# -- a repeated sample: refused (a deliberate difference) ------------------------------


def test_a_list_of_refs_repeating_a_sample_is_refused_naming_both_positions():
    refs = [SampleRef("a.cu3s", 0), SampleRef("a.cu3s", 1), SampleRef("a.cu3s", 0)]
    message = (
        r"^universe: duplicate identity \(source, index\)=\('a\.cu3s', 0\) at position 0 and position 2; "
        r"each \(source, index\) must be unique \(drop the repeated sample\)$"
    )
    with pytest.raises(UniverseError, match=message):
        resolve_selectors([S(kind="all")], refs)
    with pytest.raises(UniverseError, match=message):
        Universe.from_refs(refs)


# -- uid= is honoured only when it is the derived uid ------------------------------------


def test_uid_equal_to_the_derived_one_is_accepted():
    assert SampleRef("a.cu3s", 3, uid="a.cu3s#3").uid == "a.cu3s#3"
    assert SampleRef("a.tif", uid="a.tif").uid == "a.tif"
    assert SampleRef("d\\a.cu3s", 3, uid="d\\a.cu3s#3").uid == "d/a.cu3s#3"  # as given, before posix


@pytest.mark.parametrize(("index", "uid"), [(3, "custom-id"), (3, "a.cu3s#4"), (3, "a.cu3s#3#7"), (None, "a.cu3s#0")])
def test_a_different_uid_is_refused_not_ignored(index, uid):
    with pytest.raises(
        UniverseError,
        match=rf"^SampleRef\.uid {re.escape(repr(uid))} differs from the uid '[^']+' of source 'a\.cu3s', index "
              rf"{index}; "
        r"identity is derived from \(source, index\) only\. Drop uid=",
    ):
        SampleRef("a.cu3s", index, uid=uid)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": 5, "index": 0}, r"SampleRef\.source must be a non-empty string, got 5"),
        ({"source": "a", "index": 2**63},
         r"SampleRef\.index must be None \(a whole-file sample\) or an int in \[0, 2\*\*63 - 1\]"),
        ({"source": "a", "index": 1.0}, r"SampleRef\.index must be None"),
        ({"source": "a", "index": 0, "tags": "normal"}, r"SampleRef\.tags must be a list, got 'normal'"),
        ({"source": "a", "index": 0, "category_ids": [1.5]},
         r"SampleRef\.category_ids entries must be ints, got \[1\.5\]"),
        ({"source": "a", "index": 0, "group": 7}, r"SampleRef\.group must be a string, got 7"),
        ({"source": "a", "index": 0, "tags": {"night": True}},
         r"^SampleRef\.tags must be a list, got \{'night': True\} for source 'a'$"),
        ({"source": "a", "index": 0, "category_ids": [1, True, "2", 3]},
         r"^SampleRef\.category_ids entries must be ints, got \[True, '2'\] for source 'a'$"),
    ],
)
def test_bad_sample_ref_fields_are_universe_errors(kwargs, message):
    with pytest.raises(UniverseError, match=message):
        SampleRef(**kwargs)


# -- error wording shared with Cuvis.AI ---------------------------------------------------


def test_categories_errors_open_with_the_cuvis_wording():
    refs = [SampleRef("a.cu3s", 0, category_ids=(1,)), SampleRef("a.cu3s", 1)]
    with pytest.raises(SelectorError, match=r"^category 'ghost' not in dataset categories \['scrap'\]"):
        resolve_selectors([S(kind="categories", any_of=["ghost"])], refs, name_to_id={"scrap": 1})
    with pytest.raises(SelectorError,
                       match=r"^category 'ghost' not in dataset categories \[\]; also unknown: \['rust'\]"):
        resolve_selectors([S(kind="categories", any_of=["scrap", "ghost", "rust"][1:])], refs, name_to_id={})
    with pytest.raises(SelectorError,
                       match=r"^a 'categories' selector needs a category name->id map, but this dataset has none"):
        resolve_selectors([S(kind="categories", any_of=["scrap"])], refs)


# -- offender lists --------------------------------------------------------------------


def test_no_split_overlap_offenders_are_sorted_as_text():
    universe = Universe.from_columns(["a"] * 12, list(range(12)), group=[f"g{i}" for i in range(12)])
    rows = np.asarray([2, 9, 10, 11], np.int64)
    (result,) = evaluate_constraints({"train": rows, "test": rows}, universe, [Constraint("no_split_overlap")]).results
    # universe order would be a#2, a#9, a#10, a#11; Cuvis.AI sorts the uids as text
    assert result.offending == ("a#10", "a#11", "a#2", "a#9") and result.count == 4


def test_a_group_only_overlap_counts_its_samples():
    universe = Universe.from_columns(["r1", "r2", "r3"], [0, 0, 0], group=["site", "site", "other"])
    report = evaluate_constraints({"train": np.asarray([0, 2]), "val": np.asarray([1])}, universe,
                                  [Constraint("no_split_overlap")])
    (result,) = report.results
    assert result.status == "violated" and result.shared_groups == ("site",)
    assert result.count == 2 and result.offending == ("r1#0", "r2#0")
