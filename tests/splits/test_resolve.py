"""The universe and the selector resolver: every kind, set algebra, ordering, dedup, errors,
lazy attributes, ``universe_hash`` and the columnar ``Universe`` itself.

Semantics follow Cuvis.AI's ``cuvis_ai_core.data.selectors.resolve_selectors``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest

from kuration.errors import SelectorError, UniverseError
from kuration.splits import (
    DataSplitConfig,
    SampleRef,
    Selector,
    Universe,
    enumerate_folder,
    required_attrs,
    resolve_positions,
    resolve_selectors,
    resolve_splits,
    universe_hash,
)
from tests.splits._universes import NAME_TO_ID, CountingLoader, uids

# Canonical order of the fixture universe (sources sort as posix strings: "O" < "c").
CANONICAL = [
    "day1/cam_a.npz#0",  # 0 normal      cats [0]
    "day1/cam_a.npz#1",  # 1 anomalous   cats [1]
    "day1/cam_a.npz#2",  # 2 normal      cats []
    "day1/cam_b.npz#0",  # 3 anomalous, day-night  cats [2]
    "day1/cam_b.npz#1",  # 4 normal
    "day2/Other.npz#0",  # 5 anomalous   cats [1, 2]
    "day2/cam_a.npz#0",  # 6 normal
    "day2/cam_a.npz#1",  # 7 normal
]
ATTRS = {
    "day1/cam_a.npz#0": (["normal"], [0]),
    "day1/cam_a.npz#1": (["anomalous"], [1]),
    "day1/cam_a.npz#2": (["normal"], []),
    "day1/cam_b.npz#0": (["anomalous", "day-night"], [2]),
    "day1/cam_b.npz#1": (["normal"], []),
    "day2/Other.npz#0": (["anomalous"], [1, 2]),
    "day2/cam_a.npz#0": (["normal"], []),
    "day2/cam_a.npz#1": (["normal"], []),
}


def S(**kwargs) -> Selector:
    return Selector(**kwargs)


def build_universe(loader: CountingLoader | None = None) -> Universe:
    # Deliberately not in canonical order, with a Windows separator: from_columns sorts
    # and normalizes.
    rows = [
        ("day2\\cam_a.npz", 1, None), ("day1/cam_b.npz", 0, "site1"), ("day2/Other.npz", 0, None),
        ("day1/cam_a.npz", 2, "site1"), ("day2/cam_a.npz", 0, None), ("day1/cam_a.npz", 0, "site1"),
        ("day1/cam_b.npz", 1, "site1"), ("day1/cam_a.npz", 1, "site1"),
    ]
    return Universe.from_columns(
        [r[0] for r in rows], [r[1] for r in rows], group=[r[2] for r in rows],
        attributes=loader if loader is not None else CountingLoader(ATTRS),
    )


@pytest.fixture
def loader() -> CountingLoader:
    return CountingLoader(ATTRS)


@pytest.fixture
def universe(loader: CountingLoader) -> Universe:
    return build_universe(loader)


def picked(selectors: Sequence[Selector], universe: Universe, **kwargs) -> list[str]:
    return uids(resolve_selectors(list(selectors), universe, **kwargs))


def at(*positions: int) -> list[str]:
    return [CANONICAL[p] for p in positions]


# -- Universe -------------------------------------------------------------------------


class TestUniverseSequence:
    def test_canonical_order_and_posix_sources(self, universe: Universe) -> None:
        assert universe.uids() == CANONICAL
        assert [r.uid for r in universe] == CANONICAL
        assert universe.source_names == ("day1/cam_a.npz", "day1/cam_b.npz", "day2/Other.npz", "day2/cam_a.npz")

    def test_len_indexing_and_negative_index(self, universe: Universe) -> None:
        assert len(universe) == 8
        assert universe[0].uid == CANONICAL[0]
        assert universe[5].source == "day2/Other.npz" and universe[5].index == 0
        assert universe[5].stem == "Other"
        assert universe[-1].uid == CANONICAL[-1]
        assert universe[-8].uid == CANONICAL[0]
        assert universe[np.int64(3)].uid == CANONICAL[3]
        with pytest.raises(IndexError, match="out of range"):
            universe[8]
        with pytest.raises(IndexError, match="out of range"):
            universe[-9]

    def test_slices_and_sequence_mixins(self, universe: Universe) -> None:
        assert uids(universe[2:5]) == CANONICAL[2:5]
        assert uids(universe[::-3]) == CANONICAL[::-3]
        assert universe[3] in universe
        assert universe.index(universe[6]) == 6
        assert uids(reversed(universe)) == CANONICAL[::-1]

    def test_group_defaults_to_source(self, universe: Universe) -> None:
        groups = {r.uid: r.group for r in universe}
        assert groups["day1/cam_a.npz#0"] == "site1"
        assert groups["day2/cam_a.npz#1"] == "day2/cam_a.npz"
        assert groups["day2/Other.npz#0"] == "day2/Other.npz"

    def test_from_refs_keeps_list_order(self) -> None:
        refs = [SampleRef("b.npz", 0), SampleRef("a.npz", 3), SampleRef("a.npz", 1)]
        u = Universe.from_refs(refs)
        assert u.uids() == ["b.npz#0", "a.npz#3", "a.npz#1"]

    def test_from_refs_rejects_duplicate_uid(self) -> None:
        refs = [SampleRef("a.npz", 0), SampleRef("b.npz", 1), SampleRef("a.npz", 0, group="other")]
        with pytest.raises(UniverseError, match=r"duplicate identity .*'a.npz', 0.*position 0.*position 2"):
            Universe.from_refs(refs)

    def test_from_columns_rejects_duplicates_after_normalization(self) -> None:
        with pytest.raises(UniverseError, match=r"duplicate identity .*'d/a.npz', 4"):
            Universe.from_columns(["d/a.npz", "d\\a.npz"], [4, 4])

    def test_from_columns_rejects_negative_index(self) -> None:
        with pytest.raises(UniverseError,
                           match=r"'index': -1 must be an int in \[0, 2\*\*63 - 1\], or None for a whole-file sample"):
            Universe.from_columns(["a", "b"], [0, -1])

    def test_empty_universe(self) -> None:
        u = Universe.from_columns([], [])
        assert len(u) == 0 and list(u) == [] and u.uids() == []


class TestArrowRoundTrip:
    def test_round_trip_preserves_rows_columns_and_hash(self) -> None:
        u = Universe.from_columns(
            ["s/b.npz", "s/a.npz", "s/a.npz"], [0, 1, 0], group=["g1", None, "g2"],
            annotation=["ann.json", None, "ann.json"], materialized_path=["b.npz", "a1.npz", "a0.npz"],
            format=["npz", "npz", None],
        )
        table = u.to_arrow()
        assert table.column("uid").to_pylist() == ["s/a.npz#0", "s/a.npz#1", "s/b.npz#0"]
        assert table.schema.metadata[b"kuration.universe_hash"].decode() == u.hash
        back = Universe.from_arrow(table)
        assert back.uids() == u.uids()
        assert back.hash == u.hash
        for before, after in zip(u, back, strict=True):
            assert before == after
            assert (after.group, after.materialized_path) == (before.group, before.materialized_path)
        assert [r.group for r in back] == ["g2", "s/a.npz", "g1"]
        assert [r.materialized_path for r in back] == ["a0.npz", "a1.npz", "b.npz"]

    def test_round_trip_of_empty_universe(self) -> None:
        u = Universe.from_columns([], [])
        assert Universe.from_arrow(u.to_arrow()).hash == u.hash

    @staticmethod
    def _replace(table: pa.Table, name: str, values: list) -> pa.Table:
        i = table.schema.get_field_index(name)
        return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))

    def test_modified_index_keeping_metadata_is_refused(self, universe: Universe) -> None:
        table = universe.to_arrow()
        index = table.column("index").to_pylist()
        index[2] = 9
        tampered = self._replace(table, "index", index)
        assert tampered.schema.metadata == table.schema.metadata
        with pytest.raises(UniverseError, match="modified after it was written"):
            Universe.from_arrow(tampered, origin="universe.parquet")

    def test_modified_source_keeping_metadata_is_refused(self, universe: Universe) -> None:
        table = universe.to_arrow()
        source = table.column("source").to_pylist()
        source[5] = "day2/Renamed.npz"
        with pytest.raises(UniverseError, match=r"universe.parquet: rows hash to .*but the file pins"):
            Universe.from_arrow(self._replace(table, "source", source), origin="universe.parquet")

    @pytest.mark.parametrize("uid", ["day2/Renamed.npz#0", None])
    def test_an_edited_uid_column_is_refused(self, universe: Universe, uid: str | None) -> None:
        # uid is derived from source and index, so neither the pinned hash nor the digest covers it
        table = universe.to_arrow()
        uids = table.column("uid").to_pylist()
        uids[3] = uid
        with pytest.raises(UniverseError, match=rf"^universe\.parquet: row 3: uid {re.escape(repr(uid))} is not "
                                                rf"source#index \({re.escape(repr(universe.uids()[3]))}\); the file "
                                                "was modified after it was written"):
            Universe.from_arrow(self._replace(table, "uid", uids), origin="universe.parquet")

    def test_reordered_or_dropped_rows_are_refused(self, universe: Universe) -> None:
        table = universe.to_arrow()
        order = list(range(len(table)))
        order[0], order[1] = order[1], order[0]
        with pytest.raises(UniverseError, match="modified"):
            Universe.from_arrow(table.take(order))
        with pytest.raises(UniverseError, match="modified"):
            Universe.from_arrow(table.slice(1))

    def test_duplicated_row_is_refused(self, universe: Universe) -> None:
        table = universe.to_arrow()
        doubled = pa.concat_tables([table, table.slice(0, 1)])
        with pytest.raises(UniverseError, match="duplicate identity"):
            Universe.from_arrow(doubled)


class TestEnumerateFolder:
    @pytest.fixture
    def folder(self, tmp_path):
        for rel in ["b.npz", "a.npz", "sub/c.npz", "sub/deeper/d.npz", ".hidden.npz", ".git/x.npz",
                    "sub/.cache/y.npz", "notes.txt"]:
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")
        return tmp_path

    def test_sorted_hidden_skipped_pattern_applied(self, folder) -> None:
        u = enumerate_folder(folder, pattern="*.npz")
        assert u.uids() == ["a.npz#0", "b.npz#0", "sub/c.npz#0", "sub/deeper/d.npz#0"]
        assert [r.index for r in u] == [0, 0, 0, 0]
        for ref in u:
            assert ref.materialized_path.replace("\\", "/").endswith(ref.source)
            assert (folder / ref.source).exists()
        assert u.origin == str(folder)

    def test_default_pattern_takes_every_visible_file(self, folder) -> None:
        assert enumerate_folder(folder).uids() == [
            "a.npz#0", "b.npz#0", "notes.txt#0", "sub/c.npz#0", "sub/deeper/d.npz#0"
        ]

    def test_non_recursive(self, folder) -> None:
        assert enumerate_folder(folder, pattern="*.npz", recursive=False).uids() == ["a.npz#0", "b.npz#0"]

    def test_nothing_matching_raises(self, folder) -> None:
        with pytest.raises(UniverseError, match=r"no files matching '\*.tif' under"):
            enumerate_folder(folder, pattern="*.tif")

    def test_not_a_directory_raises(self, folder) -> None:
        with pytest.raises(UniverseError, match="not a directory"):
            enumerate_folder(folder / "a.npz")

    def test_enumerated_universe_resolves(self, folder) -> None:
        u = enumerate_folder(folder, pattern="*.npz")
        assert uids(resolve_selectors([S(kind="glob", pattern="sub/*")], u)) == ["sub/c.npz#0", "sub/deeper/d.npz#0"]


# -- universe_hash ----------------------------------------------------------------------


class TestUniverseHash:
    def test_sha256_of_uid_lines_by_hand(self, universe: Universe) -> None:
        text = (
            "day1/cam_a.npz#0\nday1/cam_a.npz#1\nday1/cam_a.npz#2\nday1/cam_b.npz#0\n"
            "day1/cam_b.npz#1\nday2/Other.npz#0\nday2/cam_a.npz#0\nday2/cam_a.npz#1\n"
        )
        expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert universe_hash(universe) == expected
        assert universe.hash == expected

    def test_universe_and_list_agree(self, universe: Universe) -> None:
        fresh = [SampleRef(uid.rsplit("#", 1)[0], int(uid.rsplit("#", 1)[1])) for uid in CANONICAL]
        assert universe_hash(list(universe)) == universe_hash(universe)
        assert universe_hash(fresh) == universe_hash(universe)
        assert universe_hash(Universe.from_refs(fresh)) == universe_hash(universe)

    def test_empty_universe_hash(self) -> None:
        assert universe_hash([]) == hashlib.sha256(b"").hexdigest()
        assert universe_hash(Universe.from_columns([], [])) == hashlib.sha256(b"").hexdigest()

    def test_order_and_membership_sensitive(self, universe: Universe) -> None:
        refs = list(universe)
        assert universe_hash(refs[::-1]) != universe_hash(refs)
        assert universe_hash(refs[:-1]) != universe_hash(refs)

    def test_attributes_and_groups_are_not_identity(self) -> None:
        plain = [SampleRef("a.npz", 0), SampleRef("a.npz", 1)]
        decorated = [SampleRef("a.npz", 0, tags=("x",), group="g"), SampleRef("a.npz", 1, category_ids=(3,))]
        assert universe_hash(plain) == universe_hash(decorated)

    def test_non_ascii_uid(self) -> None:
        refs = [SampleRef("müll/ß.npz", 2)]
        expected = hashlib.sha256("müll/ß.npz#2\n".encode()).hexdigest()
        assert universe_hash(refs) == expected == universe_hash(Universe.from_refs(refs))


# -- the kinds --------------------------------------------------------------------------


class TestKinds:
    def test_all(self, universe: Universe) -> None:
        assert picked([S(kind="all")], universe) == CANONICAL

    def test_files_in_universe_order(self, universe: Universe) -> None:
        assert picked([S(kind="files", paths=["day2/Other.npz", "day1/cam_b.npz"])], universe) == at(3, 4, 5)

    @pytest.mark.parametrize(
        "path",
        [
            "day1/cam_b.npz",
            "day1\\cam_b.npz",
            "./day1/cam_b.npz",
            "day2/../day1/./cam_b.npz",
            "DAY1\\CAM_B.NPZ",  # Windows-looking: compared case-insensitively
        ],
    )
    def test_files_normalizes_the_selector_path(self, universe: Universe, path: str) -> None:
        assert picked([S(kind="files", paths=[path])], universe) == at(3, 4)

    def test_files_windows_path_follows_cuvis_and_says_how_to_fix(self, universe: Universe, caplog) -> None:
        # Cuvis.AI case-folds a Windows-looking selector path but not the posix source, so
        # day2\Other.npz never names day2/Other.npz there. A file must select the same
        # samples in both tools: no match here either, with a warning naming the fix.
        with caplog.at_level(logging.WARNING, logger="kuration.splits.resolve"):
            with pytest.raises(SelectorError, match="matched 0 samples"):
                resolve_selectors([S(kind="files", paths=["day2\\Other.npz"])], universe)
        assert "write it as 'day2/Other.npz'" in caplog.text
        # inside a set operation the non-match is silent in Cuvis.AI too: nothing subtracted
        kept = picked([S(kind="except", of=[S(kind="glob", pattern="day2/*"),
                                            S(kind="files", paths=["day2\\Other.npz"])])], universe)
        assert kept == at(5, 6, 7)
        # lower-case sources do match a case-folded Windows path, in both tools
        assert picked([S(kind="file_indices", source="DAY1\\CAM_B.NPZ", ids=[0])], universe) == at(3)

    def test_files_posix_path_keeps_case(self, universe: Universe) -> None:
        with pytest.raises(SelectorError, match="matched 0 samples"):
            resolve_selectors([S(kind="files", paths=["DAY1/cam_b.npz"])], universe)

    def test_files_partial_match_warns_naming_missing(self, universe: Universe, caplog) -> None:
        with caplog.at_level(logging.WARNING, logger="kuration.splits.resolve"):
            got = picked([S(kind="files", paths=["day1/cam_b.npz", "day9/gone.npz"])], universe)
        assert got == at(3, 4)
        (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "matched 1 of 2" in record.getMessage()
        assert "day9/gone.npz" in record.getMessage()

    def test_file_indices_in_universe_order_with_ranges(self, universe: Universe) -> None:
        assert picked([S(kind="file_indices", source="day1/cam_a.npz", ids=[2, 0])], universe) == at(0, 2)
        assert picked([S(kind="file_indices", source="day1/cam_a.npz", ids=["0-2"])], universe) == at(0, 1, 2)
        assert picked([S(kind="file_indices", source="day1/cam_a.npz", ids=["0-2:2"])], universe) == at(0, 2)
        assert picked([S(kind="file_indices", source="day1/cam_a.npz", ids=["1-1", 1])], universe) == at(1)

    def test_file_indices_partial_match_warns_and_does_not_raise(self, universe: Universe, caplog) -> None:
        sel = S(kind="file_indices", source="day1/cam_a.npz", ids=[9, 0, 7])
        with caplog.at_level(logging.WARNING, logger="kuration.splits.resolve"):
            got = picked([sel], universe)
        assert got == at(0)
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        message = warnings[0].getMessage()
        assert "'day1/cam_a.npz'" in message
        assert "matched 1 of 3" in message
        assert "missing index: 7, 9" in message

    def test_file_indices_full_match_does_not_warn(self, universe: Universe, caplog) -> None:
        with caplog.at_level(logging.WARNING):
            picked([S(kind="file_indices", source="day1/cam_a.npz", ids=["0-2"])], universe)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    def test_file_indices_nothing_matching_raises_without_warning(self, universe: Universe, caplog) -> None:
        with caplog.at_level(logging.WARNING), pytest.raises(SelectorError,
                                                             match=r"selector #0 \(kind 'file_indices', "
                                                                   r"source='day1/cam_a.npz', ids=\(7, 9\)\) matched 0 "
                                                                   r"samples"):
            resolve_selectors([S(kind="file_indices", source="day1/cam_a.npz", ids=[7, 9])], universe)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        with pytest.raises(SelectorError, match="matched 0 samples"):
            resolve_selectors([S(kind="file_indices", source="nowhere.npz", ids=[0])], universe)

    def test_dir_indices_requested_order_deduped(self, universe: Universe) -> None:
        assert picked([S(kind="dir_indices", ids=[5, 0, 5, 2, 0])], universe) == at(5, 0, 2)
        assert picked([S(kind="dir_indices", ids=["6-7", 1, "0-4:2"])], universe) == at(6, 7, 1, 0, 2, 4)

    def test_dir_indices_out_of_range_raises(self, universe: Universe) -> None:
        with pytest.raises(SelectorError, match=r"dir_indices positions \[8, 12\] out of range \(universe size 8"):
            resolve_selectors([S(kind="dir_indices", ids=[0, 8, 12])], universe)

    def test_dir_indices_out_of_range_raises_inside_set_operations(self, universe: Universe) -> None:
        nested = S(kind="except", of=[S(kind="all"), S(kind="union", of=[S(kind="dir_indices", ids=[99])])])
        with pytest.raises(SelectorError, match=r"positions \[99\] out of range"):
            resolve_selectors([nested], universe)

    @pytest.mark.parametrize("ids", [[-1], [0, -3], ["-1"], ["3-1"], ["0-4:0"], [True], ["x"]])
    def test_dir_indices_negative_or_malformed_rejected(self, ids) -> None:
        with pytest.raises(SelectorError):
            S(kind="dir_indices", ids=ids)

    def test_stems_compare_filename_stem(self, universe: Universe) -> None:
        assert picked([S(kind="stems", stems=["cam_a"])], universe) == at(0, 1, 2, 6, 7)
        assert picked([S(kind="stems", stems=["Other", "cam_b"])], universe) == at(3, 4, 5)
        with pytest.raises(SelectorError, match="matched 0 samples"):
            resolve_selectors([S(kind="stems", stems=["cam_a.npz"])], universe)
        with pytest.raises(SelectorError, match="matched 0 samples"):
            resolve_selectors([S(kind="stems", stems=["other"])], universe)

    def test_glob_on_stem_or_source_case_sensitive(self, universe: Universe) -> None:
        assert picked([S(kind="glob", pattern="cam_*")], universe) == at(0, 1, 2, 3, 4, 6, 7)
        assert picked([S(kind="glob", pattern="day2/*")], universe) == at(5, 6, 7)
        assert picked([S(kind="glob", pattern="*/cam_b.*")], universe) == at(3, 4)
        assert picked([S(kind="glob", pattern="O?her")], universe) == at(5)
        with pytest.raises(SelectorError, match="matched 0 samples"):
            resolve_selectors([S(kind="glob", pattern="CAM_*")], universe)

    def test_tag(self, universe: Universe) -> None:
        assert picked([S(kind="tag", any_of=["anomalous"])], universe) == at(1, 3, 5)
        assert picked([S(kind="tag", any_of=["day-night", "normal"])], universe) == at(0, 2, 3, 4, 6, 7)
        with pytest.raises(SelectorError, match=r"kind 'tag', any_of=\('anomolous',\)\) matched 0 samples"):
            resolve_selectors([S(kind="tag", any_of=["anomolous"])], universe)

    def test_tagged_refs_carry_their_tags(self, universe: Universe) -> None:
        refs = resolve_selectors([S(kind="tag", any_of=["day-night"])], universe)
        assert [(r.uid, r.tags) for r in refs] == [("day1/cam_b.npz#0", ("anomalous", "day-night"))]

    def test_categories_by_name(self, universe: Universe) -> None:
        assert picked([S(kind="categories", any_of=["scratch"])], universe) == at(1, 5)
        assert picked([S(kind="categories", any_of=["dent", "background"])], universe) == at(0, 3, 5)
        refs = resolve_selectors([S(kind="categories", any_of=["dent"])], universe)
        assert [r.category_ids for r in refs] == [(2,), (1, 2)]

    def test_categories_unknown_name_lists_valid_names(self, universe: Universe) -> None:
        with pytest.raises(SelectorError,
                           match=r"^category 'rust' not in dataset categories \['background', 'dent', 'scratch'\] "
                                 r"\(selector"):
            resolve_selectors([S(kind="categories", any_of=["scratch", "rust"])], universe)

    def test_categories_unknown_name_raises_even_nested(self, universe: Universe) -> None:
        nested = S(kind="except", of=[S(kind="all"), S(kind="categories", any_of=["rust"])])
        with pytest.raises(SelectorError, match=r"^category 'rust' not in dataset categories \['background'"):
            resolve_selectors([nested], universe)

    def test_categories_explicit_name_map_wins(self, universe: Universe) -> None:
        assert picked([S(kind="categories", any_of=["defect"])], universe, name_to_id={"defect": 2}) == at(3, 5)
        with pytest.raises(SelectorError, match=r"^category 'scratch' not in dataset categories \['defect'\]"):
            resolve_selectors([S(kind="categories", any_of=["scratch"])], universe, name_to_id={"defect": 2})

    def test_categories_without_any_name_map_raises(self) -> None:
        u = Universe.from_columns(["a.npz"], [0], attributes=CountingLoader({"a.npz#0": ((), (1,))}, name_to_id=None))
        with pytest.raises(SelectorError,
                           match=r"^a 'categories' selector needs a category name->id map, but this dataset has none"):
            resolve_selectors([S(kind="categories", any_of=["scratch"])], u)


class TestSetAlgebra:
    def test_union_keeps_first_occurrence_order(self, universe: Universe) -> None:
        sel = S(kind="union", of=[S(kind="stems", stems=["cam_b"]), S(kind="dir_indices", ids=[4, 0]), S(kind="all")])
        assert picked([sel], universe) == at(3, 4, 0, 1, 2, 5, 6, 7)

    def test_except_left_order_minus_union_of_rest(self, universe: Universe) -> None:
        assert picked([S(kind="except", of=[S(kind="all"), S(kind="glob", pattern="day1/*")])], universe) == at(5, 6, 7)
        left = S(kind="dir_indices", ids=[7, 5, 0, 6])
        assert picked([S(kind="except", of=[left, S(kind="stems", stems=["Other"])])], universe) == at(7, 0, 6)
        many = S(kind="except", of=[S(kind="all"), S(kind="stems", stems=["cam_a"]), S(kind="stems", stems=["cam_b"])])
        assert picked([many], universe) == at(5)

    def test_except_with_empty_operands_is_fine(self, universe: Universe, caplog) -> None:
        sel = S(kind="except", of=[
            S(kind="dir_indices", ids=[2, 1]),
            S(kind="stems", stems=["no_such_stem"]),
            S(kind="file_indices", source="deleted.npz", ids=[0]),
            S(kind="files", paths=["deleted.npz"]),
        ])
        with caplog.at_level(logging.WARNING):
            assert picked([sel], universe) == at(2, 1)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    def test_intersect_left_order_filtered_by_all_others(self, universe: Universe) -> None:
        sel = S(kind="intersect", of=[
            S(kind="dir_indices", ids=[7, 3, 1, 6, 5]),
            S(kind="glob", pattern="day2/*"),
            S(kind="stems", stems=["cam_a", "cam_b"]),
        ])
        assert picked([sel], universe) == at(7, 6)

    def test_intersect_with_an_empty_operand_inside_union(self, universe: Universe) -> None:
        empty = S(kind="intersect", of=[S(kind="all"), S(kind="stems", stems=["nothing"])])
        assert picked([S(kind="union", of=[empty, S(kind="dir_indices", ids=[1])])], universe) == at(1)

    def test_nested(self, universe: Universe) -> None:
        sel = S(kind="except", of=[
            S(kind="union", of=[S(kind="glob", pattern="day1/*"), S(kind="stems", stems=["Other"])]),
            S(kind="intersect", of=[S(kind="tag", any_of=["anomalous"]), S(kind="all")]),
        ])
        assert picked([sel], universe) == at(0, 2, 4)

    def test_top_level_set_operation_matching_nothing_raises(self, universe: Universe) -> None:
        disjoint = S(kind="intersect", of=[S(kind="stems", stems=["cam_b"]), S(kind="stems", stems=["Other"])])
        with pytest.raises(SelectorError, match=r"selector #1 \(kind 'intersect', 2 operands\) matched 0 samples"):
            resolve_selectors([S(kind="all"), disjoint], universe)
        with pytest.raises(SelectorError, match=r"kind 'except'.* matched 0 samples"):
            resolve_selectors([S(kind="except", of=[S(kind="all"), S(kind="all")])], universe)

    @pytest.mark.parametrize("kind", ["except", "intersect"])
    def test_binary_operations_need_two_operands(self, kind: str) -> None:
        with pytest.raises(SelectorError, match="at least 2 operands"):
            S(kind=kind, of=[S(kind="all")])


class TestStageSemantics:
    def test_union_in_selector_order_first_occurrence(self, universe: Universe) -> None:
        assert picked([S(kind="stems", stems=["Other"]), S(kind="all")], universe) == at(5, 0, 1, 2, 3, 4, 6, 7)
        sels = [S(kind="dir_indices", ids=[4]), S(kind="stems", stems=["cam_b"]), S(kind="dir_indices", ids=[4, 0])]
        assert picked(sels, universe) == at(4, 3, 0)

    def test_zero_match_message_names_selector_and_stage(self, universe: Universe) -> None:
        sels = [S(kind="all"), S(kind="glob", pattern="day3/*")]
        with pytest.raises(SelectorError) as info:
            resolve_positions(sels, universe, stage="val")
        message = str(info.value)
        assert message.startswith("val selector #1 (kind 'glob', pattern='day3/*') matched 0 samples")
        assert "universe of 8 samples from 4 sources" in message

    def test_zero_match_after_dedup_is_not_an_error(self, universe: Universe) -> None:
        # The second selector matches, it just adds nothing new: not a zero match.
        assert picked([S(kind="all"), S(kind="dir_indices", ids=[0])], universe) == CANONICAL

    def test_empty_selector_list(self, universe: Universe) -> None:
        assert resolve_selectors([], universe) == []
        assert resolve_positions([], universe).tolist() == []

    def test_non_selector_rejected(self, universe: Universe) -> None:
        with pytest.raises(SelectorError, match=r"train\[1\]: expected a Selector"):
            resolve_positions([S(kind="all"), {"kind": "all"}], universe, stage="train")

    def test_positions_match_refs(self, universe: Universe) -> None:
        sels = [S(kind="dir_indices", ids=[6, 1]), S(kind="stems", stems=["cam_b"])]
        positions = resolve_positions(sels, universe)
        assert positions.dtype == np.int64
        assert positions.tolist() == [6, 1, 3, 4]
        assert [universe[p].uid for p in positions] == picked(sels, universe)


class TestPlainListInput:
    def test_returns_the_very_objects_passed_in(self, universe: Universe) -> None:
        refs = list(universe)
        sels = [S(kind="dir_indices", ids=[5, 0]), S(kind="glob", pattern="cam_b")]
        got = resolve_selectors(sels, refs)
        assert uids(got) == at(5, 0, 3, 4)
        assert got[0] is refs[5] and got[1] is refs[0] and got[2] is refs[3] and got[3] is refs[4]
        assert uids(got) == picked(sels, universe)

    def test_list_order_is_the_canonical_order(self) -> None:
        refs = [SampleRef("z.npz", 0), SampleRef("a.npz", 0), SampleRef("m.npz", 0)]
        assert uids(resolve_selectors([S(kind="dir_indices", ids=[0])], refs)) == ["z.npz#0"]
        assert uids(resolve_selectors([S(kind="all")], refs)) == ["z.npz#0", "a.npz#0", "m.npz#0"]

    def test_preloaded_tags_and_categories(self) -> None:
        refs = [
            SampleRef("a.npz", 0, tags=("normal",), category_ids=(0,)),
            SampleRef("a.npz", 1, tags=("anomalous",), category_ids=(2,)),
            SampleRef("b.npz", 0, tags=("anomalous",), category_ids=(1,)),
        ]
        got = resolve_selectors([S(kind="tag", any_of=["anomalous"])], refs)
        assert got == refs[1:] and got[0] is refs[1]
        got = resolve_selectors([S(kind="categories", any_of=["dent"])], refs, name_to_id=NAME_TO_ID)
        assert len(got) == 1 and got[0] is refs[1]
        with pytest.raises(SelectorError,
                           match=r"^a 'categories' selector needs a category name->id map, but this dataset has none"):
            resolve_selectors([S(kind="categories", any_of=["dent"])], refs)

    def test_duplicate_uid_in_list_raises(self) -> None:
        with pytest.raises(UniverseError, match="duplicate identity"):
            resolve_selectors([S(kind="all")], [SampleRef("a", 0), SampleRef("a", 0)])


# -- lazy attributes --------------------------------------------------------------------


class TestLazyAttributes:
    STRUCTURAL = [
        S(kind="all"),
        S(kind="files", paths=["day1/cam_b.npz"]),
        S(kind="file_indices", source="day1/cam_a.npz", ids=[0]),
        S(kind="dir_indices", ids=[0]),
        S(kind="stems", stems=["cam_a"]),
        S(kind="glob", pattern="day2/*"),
        S(kind="union", of=[S(kind="all")]),
        S(kind="except", of=[S(kind="all"), S(kind="stems", stems=["cam_a"])]),
        S(kind="intersect", of=[S(kind="all"), S(kind="glob", pattern="*")]),
    ]

    def test_structural_selectors_never_load_attributes(self, universe: Universe, loader: CountingLoader) -> None:
        for sel in self.STRUCTURAL:
            refs = resolve_selectors([sel], universe)
            assert all(r.tags == () and r.category_ids == () for r in refs)
        assert required_attrs(self.STRUCTURAL) == frozenset()
        list(universe)
        universe[3]
        assert loader.calls == []

    def test_structural_split_never_loads_attributes(self, universe: Universe, loader: CountingLoader) -> None:
        cfg = DataSplitConfig(
            train=(S(kind="glob", pattern="day1/*"),), val=(S(kind="stems", stems=["Other"]),),
            test=(S(kind="dir_indices", ids=[6, 7]),),
        )
        out = resolve_splits(cfg, universe)
        assert uids(out["test"]) == at(6, 7)
        assert loader.calls == []

    def test_tag_loads_tags_once(self, universe: Universe, loader: CountingLoader) -> None:
        sels = [S(kind="tag", any_of=["anomalous"]),
                S(kind="except", of=[S(kind="all"), S(kind="tag", any_of=["normal"])])]
        assert required_attrs(sels) == frozenset({"tags"})
        assert picked(sels, universe) == at(1, 3, 5)
        assert loader.calls == [frozenset({"tags"})]
        picked(sels, universe)
        picked([S(kind="tag", any_of=["day-night"])], universe)
        assert loader.calls == [frozenset({"tags"})]

    def test_categories_load_category_ids_once(self, universe: Universe, loader: CountingLoader) -> None:
        sels = [S(kind="categories", any_of=["scratch"]), S(kind="categories", any_of=["dent"])]
        assert required_attrs(sels) == frozenset({"category_ids"})
        assert picked(sels, universe) == at(1, 5, 3)
        picked(sels, universe)
        assert loader.calls == [frozenset({"category_ids"})]

    def test_tag_and_categories_together_load_once(self, universe: Universe, loader: CountingLoader) -> None:
        sels = [S(kind="tag", any_of=["day-night"]), S(kind="categories", any_of=["scratch"])]
        refs = resolve_selectors(sels, universe)
        assert [(r.uid, r.tags, r.category_ids) for r in refs] == [
            ("day1/cam_b.npz#0", ("anomalous", "day-night"), (2,)),
            ("day1/cam_a.npz#1", ("anomalous",), (1,)),
            ("day2/Other.npz#0", ("anomalous",), (1, 2)),
        ]
        assert loader.calls == [frozenset({"tags", "category_ids"})]

    def test_whole_split_loads_once(self, universe: Universe, loader: CountingLoader) -> None:
        cfg = DataSplitConfig(
            train=(S(kind="tag", any_of=["normal"]),),
            test=(S(kind="categories", any_of=["dent"]),),
            predict=(S(kind="glob", pattern="*"),),
        ).with_leakage_check("off")
        assert required_attrs(cfg) == frozenset({"tags", "category_ids"})
        out = resolve_splits(cfg, universe)
        assert uids(out["test"]) == at(3, 5)
        assert out["train"][0].tags == ("normal",)
        assert out["test"][0].category_ids == (2,)
        assert loader.calls == [frozenset({"tags", "category_ids"})]

    def test_refs_carry_only_what_was_required_whatever_is_cached(
        self, universe: Universe, loader: CountingLoader
    ) -> None:
        resolve_selectors([S(kind="tag", any_of=["normal"]), S(kind="categories", any_of=["dent"])], universe)
        assert all(r.tags == () and r.category_ids == () for r in resolve_selectors([S(kind="all")], universe))
        tagged = resolve_selectors([S(kind="tag", any_of=["day-night"])], universe)
        assert [(r.tags, r.category_ids) for r in tagged] == [(("anomalous", "day-night"), ())]
        assert len(loader.calls) == 1

    def test_required_attrs_sees_nested_selectors(self) -> None:
        nested = S(kind="union", of=[S(kind="except", of=[S(kind="all"), S(kind="categories", any_of=["x"])])])
        assert required_attrs([nested]) == frozenset({"category_ids"})
        assert required_attrs(DataSplitConfig(predict=(nested,), val=(S(kind="tag", any_of=["t"]),))) == frozenset(
            {"tags", "category_ids"}
        )


class TestCocoAnnotations:
    @staticmethod
    def _coco(path, images, annotations, categories) -> str:
        path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
        return str(path)

    @pytest.fixture
    def coco_universe(self, tmp_path) -> Universe:
        cats = [{"id": 0, "name": "background"}, {"id": 1, "name": "scratch"}, {"id": 2, "name": "dent"}]
        day1 = self._coco(
            tmp_path / "day1.json",
            [{"id": 0}, {"id": 1, "tags": ["blurry"]}, {"id": 2}],
            [{"image_id": 1, "category_id": 1}, {"image_id": 2, "category_id": 0}, {"image_id": 1, "category_id": 2}],
            cats,
        )
        return Universe.from_columns(
            ["d1.cu3s", "d1.cu3s", "d1.cu3s", "d2.cu3s"], [0, 1, 2, 0], annotation=[day1, day1, day1, None]
        )

    def test_tags_derived_from_annotations(self, coco_universe: Universe) -> None:
        assert uids(resolve_selectors([S(kind="tag", any_of=["anomalous"])], coco_universe)) == ["d1.cu3s#1"]
        normal = resolve_selectors([S(kind="tag", any_of=["normal"])], coco_universe)
        assert uids(normal) == ["d1.cu3s#0", "d1.cu3s#2", "d2.cu3s#0"]
        blurry = resolve_selectors([S(kind="tag", any_of=["blurry"])], coco_universe)
        assert [(r.uid, r.tags) for r in blurry] == [("d1.cu3s#1", ("anomalous", "blurry"))]

    def test_categories_by_coco_name(self, coco_universe: Universe) -> None:
        refs = resolve_selectors([S(kind="categories", any_of=["dent"])], coco_universe)
        assert [(r.uid, r.category_ids) for r in refs] == [("d1.cu3s#1", (1, 2))]
        assert uids(resolve_selectors([S(kind="categories", any_of=["background"])], coco_universe)) == ["d1.cu3s#2"]
        with pytest.raises(SelectorError, match=r"\['background', 'dent', 'scratch'\]"):
            resolve_selectors([S(kind="categories", any_of=["crack"])], coco_universe)

    def test_each_annotation_file_is_read_once(self, coco_universe: Universe, monkeypatch) -> None:
        from kuration.splits import universe as universe_module

        reads: list[str] = []
        real = universe_module.storage.read_bytes

        def counting(url):
            reads.append(str(url))
            return real(url)

        monkeypatch.setattr(universe_module.storage, "read_bytes", counting)
        cfg = DataSplitConfig(
            train=(S(kind="tag", any_of=["normal"]),), test=(S(kind="categories", any_of=["dent"]),),
        ).with_leakage_check("off")
        out = resolve_splits(cfg, coco_universe)
        assert uids(out["test"]) == ["d1.cu3s#1"]
        resolve_selectors([S(kind="tag", any_of=["blurry"]), S(kind="categories", any_of=["scratch"])], coco_universe)
        assert len(reads) == 1 and reads[0].endswith("day1.json")

    def test_conflicting_category_ids_across_files_raise(self, tmp_path) -> None:
        a = self._coco(tmp_path / "a.json", [{"id": 0}], [], [{"id": 1, "name": "scratch"}])
        b = self._coco(tmp_path / "b.json", [{"id": 0}], [], [{"id": 2, "name": "scratch"}])
        u = Universe.from_columns(["a", "b"], [0, 0], annotation=[a, b])
        with pytest.raises(UniverseError, match="'scratch' has id"):
            resolve_selectors([S(kind="categories", any_of=["scratch"])], u)

    def test_missing_annotation_file_raises_only_when_needed(self, tmp_path) -> None:
        u = Universe.from_columns(["a"], [0], annotation=[str(tmp_path / "missing.json")])
        assert uids(resolve_selectors([S(kind="all")], u)) == ["a#0"]
        with pytest.raises(UniverseError, match="annotation file not found"):
            resolve_selectors([S(kind="tag", any_of=["normal"])], u)


# -- annotation files are read strictly (issue 10) ---------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"categories": [{"id": 1, "name": "dent", "id": 2}]}', r"not a valid COCO JSON file \(duplicate key 'id'"),
        ('{"annotations": [{"image_id": 0, "category_id": NaN}]}',
         r"not a valid COCO JSON file \(non-finite number NaN"),
        ('{"annotations": [{"image_id": 0, "category_id": 1.5}]}',
         r"annotations\[0\]\.category_id must be an integer, got 1\.5"),
        ('{"annotations": [{"image_id": 0, "category_id": 1e300}]}',
         r"annotations\[0\]\.category_id must be an integer, got 1e\+300"),
        ('{"annotations": [{"image_id": true, "category_id": 1}]}',
         r"annotations\[0\]\.image_id must be an integer, got True"),
        ('{"images": [{"id": 0, "tags": "night"}]}', r"images\[0\]\.tags must be a list of strings, got 'night'"),
        ('{"categories": [{"id": 1, "name": 7}]}', r"categories\[0\]\.name must be a string, got 7"),
        ('{"annotations": {"image_id": 0}}', r"'annotations' must be a list of objects"),
        ("[1, 2]", r"expected a COCO JSON object, got list"),
    ],
)
def test_a_malformed_annotation_file_is_refused_naming_it(tmp_path, text, message) -> None:
    path = tmp_path / "day1.json"
    path.write_text(text)
    u = Universe.from_columns(["a"], [0], annotation=[str(path)])
    with pytest.raises(UniverseError, match=rf"^annotation file {path}: {message}"):
        resolve_selectors([S(kind="categories", any_of=["dent"])], u)


def test_a_split_report_that_is_not_strict_json_is_refused(tmp_path) -> None:
    from kuration.errors import SplitConfigError
    from kuration.splits.artifacts import read_split_report

    (tmp_path / "splits").mkdir()
    (tmp_path / "splits" / "split_report.json").write_text('{"status": "refused", "status": "resolved"}')
    with pytest.raises(SplitConfigError,
                       match=r"split_report\.json: not a valid split report \(duplicate key 'status'"):
        read_split_report(tmp_path)
    (tmp_path / "splits" / "split_report.json").write_text('["resolved"]')
    with pytest.raises(SplitConfigError, match=r"split_report\.json: a split report is a JSON object, got list"):
        read_split_report(tmp_path)
