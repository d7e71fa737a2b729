"""``read_universe_csv``: the explicit universe file (seed 003, Cuvis.AI ``universe.csv``).

Covers the canonical order, posix sources, index ranges, the optional columns and every
rejection. Each rejection must name the file, the line (the header is line 1) and the
column, so the tests match on all three.
"""

from __future__ import annotations

import json
import re
import uuid
import warnings
from pathlib import Path

import fsspec
import pytest

from kuration.errors import UniverseError
from kuration.splits import (
    DataSplitConfig,
    Selector,
    SelectorKind,
    read_universe_csv,
    resolve_selectors,
    universe_hash,
)


def write_csv(folder: Path, text: str, name: str = "universe.csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def uids(universe) -> list[str]:
    return [ref.uid for ref in universe]


# -- canonical order and identity ---------------------------------------------------


def test_rows_are_sorted_by_source_then_numeric_index(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index\n"
        "rec/b.cu3s,10\n"
        "rec/a.cu3s,2\n"
        "rec/b.cu3s,9\n"
        "rec.cu3s,0\n"
        "rec/a.cu3s,0\n"
        "Rec/z.cu3s,5\n",
    )
    universe = read_universe_csv(path)
    # codepoint order of the posix source ('R' < 'r', '.' < '/'), then the index as a number
    assert uids(universe) == [
        "Rec/z.cu3s#5",
        "rec.cu3s#0",
        "rec/a.cu3s#0",
        "rec/a.cu3s#2",
        "rec/b.cu3s#9",
        "rec/b.cu3s#10",
    ]
    assert universe.hash == universe_hash(list(universe))


def test_row_order_in_the_file_does_not_change_the_universe_or_its_hash(tmp_path):
    rows = ["s/a.cu3s,0", "s/a.cu3s,1", "s/b.cu3s,0", "s/c.cu3s,3"]
    forward = read_universe_csv(write_csv(tmp_path / "f", "source,index\n" + "\n".join(rows) + "\n"))
    backward = read_universe_csv(write_csv(tmp_path / "b", "source,index\n" + "\n".join(reversed(rows)) + "\n"))
    assert uids(forward) == uids(backward)
    assert forward.hash == backward.hash


def test_backslash_sources_are_normalized_to_posix(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index\n"
        "day1\\session\\rec_a.cu3s,1\n"
        "day1/session/rec_a.cu3s,0\n",
    )
    universe = read_universe_csv(path)
    # both spellings are one source, so both rows land under it
    assert universe.source_names == ("day1/session/rec_a.cu3s",)
    assert uids(universe) == ["day1/session/rec_a.cu3s#0", "day1/session/rec_a.cu3s#1"]
    assert universe[0].stem == "rec_a"
    picked = resolve_selectors(
        [Selector(kind=SelectorKind.FILE_INDICES, source="day1/session/rec_a.cu3s", ids=(1,))], universe
    )
    assert [r.uid for r in picked] == ["day1/session/rec_a.cu3s#1"]


def test_the_same_sample_spelled_with_both_separators_is_a_duplicate(tmp_path):
    path = write_csv(tmp_path, "source,index\nday1\\rec.cu3s,4\nday1/rec.cu3s,4\n")
    with pytest.raises(UniverseError, match=r"duplicate identity \(source, index\)=\('day1/rec\.cu3s', 4\)"):
        read_universe_csv(path)


# -- index ranges ----------------------------------------------------------------------


def test_ranges_fan_out_inclusively_with_an_optional_step(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index\n"
        "a.cu3s,0-3\n"
        "b.cu3s,10-20:5\n"
        "c.cu3s,0-5:2\n"
        "d.cu3s,7-7\n"
        "e.cu3s,42\n",
    )
    universe = read_universe_csv(path)
    assert uids(universe) == [
        "a.cu3s#0", "a.cu3s#1", "a.cu3s#2", "a.cu3s#3",
        "b.cu3s#10", "b.cu3s#15", "b.cu3s#20",
        "c.cu3s#0", "c.cu3s#2", "c.cu3s#4",
        "d.cu3s#7",
        "e.cu3s#42",
    ]
    # every fanned-out sample remembers the line it came from
    assert universe.row_numbers.tolist() == [2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6]


def test_a_range_carries_its_row_columns_onto_every_sample(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,group,annotation,format\n"
        "rec/a.cu3s,0-2,site1,labels/a.json,cu3s\n",
    )
    refs = list(read_universe_csv(path))
    assert [r.index for r in refs] == [0, 1, 2]
    assert {r.group for r in refs} == {"site1"}
    assert {r.annotation for r in refs} == {f"{tmp_path}/labels/a.json"}
    assert {r.format for r in refs} == {"cu3s"}
    assert {r.materialized_path for r in refs} == {f"{tmp_path}/rec/a.cu3s"}


# -- optional and unknown columns ----------------------------------------------------


def test_unknown_columns_are_ignored(tmp_path):
    plain = read_universe_csv(write_csv(tmp_path / "plain", "source,index\nrec/a.cu3s,0\nrec/b.cu3s,1\n"))
    extra = read_universe_csv(
        write_csv(
            tmp_path / "extra",
            "camera,source,acquisition_day,index,notes\n"
            "cam1,rec/a.cu3s,2024-05-01,0,ok\n"
            "cam2,rec/b.cu3s,2024-05-02,1,\n",
        )
    )
    assert uids(extra) == uids(plain)
    assert extra.hash == plain.hash
    assert [r.group for r in extra] == ["rec/a.cu3s", "rec/b.cu3s"]


def test_group_is_carried_and_defaults_to_the_source(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,group\n"
        "rec/a.cu3s,0,site\\north\n"
        "rec/a.cu3s,1,\n"
        "rec/b.cu3s,0,site/north\n",
    )
    refs = list(read_universe_csv(path))
    assert [(r.uid, r.group) for r in refs] == [
        ("rec/a.cu3s#0", "site/north"),
        ("rec/a.cu3s#1", "rec/a.cu3s"),
        ("rec/b.cu3s#0", "site/north"),
    ]


def test_without_a_group_column_every_group_is_its_source(tmp_path):
    refs = list(read_universe_csv(write_csv(tmp_path, "source,index\nx/a.cu3s,0\nx/b.cu3s,0\n")))
    assert [r.group for r in refs] == ["x/a.cu3s", "x/b.cu3s"]


def test_paths_are_resolved_relative_to_the_csv_folder(tmp_path):
    folder = tmp_path / "dataset"
    path = write_csv(
        folder,
        "source,index,materialized_path,annotation,format,split\n"
        "raw/a.cu3s,0,frames\\a_0.npz,labels/day1.json,npz,train\n"
        "raw/a.cu3s,1,,labels/day1.json,,val\n"
        "raw/b.cu3s,0,frames/b_0.npz,,npz,\n",
    )
    universe = read_universe_csv(path)
    refs = list(universe)
    assert [r.materialized_path for r in refs] == [
        f"{folder}/frames/a_0.npz",  # backslashes normalized
        f"{folder}/raw/a.cu3s",  # defaults to the source
        f"{folder}/frames/b_0.npz",
    ]
    assert [r.annotation for r in refs] == [f"{folder}/labels/day1.json", f"{folder}/labels/day1.json", None]
    assert [r.format for r in refs] == ["npz", None, "npz"]
    assert list(universe.split_column) == ["train", "val", ""]
    # identity is the logical source, never the physical path
    assert uids(universe) == ["raw/a.cu3s#0", "raw/a.cu3s#1", "raw/b.cu3s#0"]


@pytest.mark.parametrize("absolute",
                         ["/data/labels/day1.json", "C:/data/labels/day1.json", "s3://bucket/labels/day1.json"])
def test_absolute_paths_and_urls_pass_through(tmp_path, absolute):
    path = write_csv(
        tmp_path / "ds",
        f"source,index,materialized_path,annotation\nrec/a.cu3s,0,{absolute},{absolute}\n",
    )
    (ref,) = read_universe_csv(path)
    assert ref.annotation == absolute
    assert ref.materialized_path == absolute


def test_dots_inside_a_name_are_not_an_escape(tmp_path):
    path = write_csv(tmp_path, "source,index,materialized_path\nrec..v2/a..b.cu3s,0,out/a..b.npz\n")
    (ref,) = read_universe_csv(path)
    assert ref.source == "rec..v2/a..b.cu3s"
    assert ref.materialized_path == f"{tmp_path}/out/a..b.npz"


def test_header_cells_and_values_are_stripped(tmp_path):
    path = write_csv(tmp_path, " source , index , group \n rec/a.cu3s , 3 , g1 \n")
    (ref,) = read_universe_csv(path)
    assert (ref.uid, ref.group) == ("rec/a.cu3s#3", "g1")


def test_reading_emits_no_warnings(tmp_path):
    path = write_csv(tmp_path, "source,index,materialized_path,annotation\na.cu3s,0-1,a.npz,a.json\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_universe_csv(path)) == 2


# -- materialized_path uniqueness ------------------------------------------------------


def test_shared_materialized_path_is_allowed_by_default(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,materialized_path\nrec/a.cu3s,0,shared.npz\nrec/b.cu3s,0,shared.npz\n",
    )
    refs = list(read_universe_csv(path))
    assert [r.materialized_path for r in refs] == [f"{tmp_path}/shared.npz"] * 2


def test_one_file_per_row_accepts_distinct_paths(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,materialized_path\nrec/a.cu3s,0,a0.npz\nrec/a.cu3s,1,a1.npz\n",
    )
    assert [r.materialized_path for r in read_universe_csv(path, one_file_per_row=True)] == [
        f"{tmp_path}/a0.npz",
        f"{tmp_path}/a1.npz",
    ]


def test_one_file_per_row_rejects_a_duplicate_materialized_path(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,materialized_path\n"
        "rec/a.cu3s,0,frames/x.npz\n"
        "rec/b.cu3s,0,frames/y.npz\n"
        "rec/c.cu3s,0,frames\\x.npz\n",
    )
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: duplicate materialized_path '{re.escape(str(tmp_path))}/frames/x\.npz' "
        r"on lines 2 and 4; each row must point at a distinct file$",
    ):
        read_universe_csv(path, one_file_per_row=True)


def test_one_file_per_row_rejects_a_range_sharing_one_file(tmp_path):
    path = write_csv(tmp_path, "source,index,materialized_path\nrec/a.cu3s,0,a.npz\nrec/b.cu3s,0-1,b.npz\n")
    with pytest.raises(UniverseError, match=r"duplicate materialized_path '.*/b\.npz' on lines 3 and 3"):
        read_universe_csv(path, one_file_per_row=True)


def test_one_file_per_row_requires_a_materialized_path(tmp_path):
    path = write_csv(tmp_path, "source,index,materialized_path\nrec/a.cu3s,0,a.npz\nrec/b.cu3s,0,\n")
    with pytest.raises(
        UniverseError,
        match=r"universe\.csv: line 3, column 'materialized_path': required when each sample is its own file"
    ):
        read_universe_csv(path, one_file_per_row=True)


# -- rejections ------------------------------------------------------------------------


def test_duplicate_source_index_names_the_file_and_both_lines(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,1\nrec/b.cu3s,1\nrec/a.cu3s,1\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: duplicate identity \(source, index\)=\('rec/a\.cu3s', 1\) "
        r"at line 2 and line 4; each \(source, index\) must be unique \(drop the repeated sample\)$",
    ):
        read_universe_csv(path)


def test_a_range_overlapping_a_plain_row_is_a_duplicate(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,5\nrec/b.cu3s,0\nrec/a.cu3s,3-7\n")
    with pytest.raises(
        UniverseError,
        match=r"universe\.csv: duplicate identity \(source, index\)=\('rec/a\.cu3s', 5\) at line 2 and line 4"
    ):
        read_universe_csv(path)


def test_two_overlapping_ranges_are_a_duplicate(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,0-4:2\nrec/a.cu3s,3-4\n")
    with pytest.raises(UniverseError,
                       match=r"duplicate identity \(source, index\)=\('rec/a\.cu3s', 4\) at line 2 and line 3"):
        read_universe_csv(path)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("materialized_path", "../outside.npz"),
        ("materialized_path", "frames/../../outside.npz"),
        ("materialized_path", "frames\\..\\x.npz"),
        ("annotation", "../labels.json"),
        ("annotation", "labels/.."),
        ("source", "../rec.cu3s"),
        ("source", "day1\\..\\..\\rec.cu3s"),
    ],
)
def test_dotdot_escape_is_rejected_naming_line_and_column(tmp_path, column, value):
    cells = {"source": "rec/ok.cu3s", "index": "1", "materialized_path": "ok.npz", "annotation": "ok.json"}
    bad = {**cells, column: value, "index": "2"}
    header = ",".join(cells)
    path = write_csv(tmp_path, f"{header}\n{','.join(cells.values())}\n{','.join(bad.values())}\n")
    shown = value.replace("\\", "/") if column == "source" else value
    with pytest.raises(
        UniverseError,
        match=rf"universe\.csv: 1 invalid cell\(s\):\n  line 3, column '{column}': value {re.escape(repr(shown))} "
        r"must not contain a '\.\.' path component",
    ):
        read_universe_csv(path)


def test_missing_required_column_names_the_file_and_the_column(tmp_path):
    path = write_csv(tmp_path, "source,frame,group\nrec/a.cu3s,0,g\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: missing required column\(s\) \['index'\]; found \['source', 'frame', "
              r"'group'\]",
    ):
        read_universe_csv(path)


@pytest.mark.parametrize("value", ["x", "1.5", "-1", "", "3-", "1e3", "0x10"])
def test_non_integer_index_is_rejected_naming_line_and_column(tmp_path, value):
    path = write_csv(tmp_path, f"source,index\nrec/a.cu3s,0\nrec/a.cu3s,{value}\n")
    with pytest.raises(
        UniverseError,
        match=rf"universe\.csv: 1 invalid cell\(s\):\n  line 3, column 'index': value {re.escape(repr(value))} "
        r"must be a non-negative integer or an 'a-b' range",
    ):
        read_universe_csv(path)


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_empty_file_is_rejected(tmp_path, text):
    path = write_csv(tmp_path, text)
    with pytest.raises(UniverseError,
                       match=rf"^{re.escape(str(path))}: the file is empty; expected a header with columns"):
        read_universe_csv(path)


def test_header_only_file_is_rejected(tmp_path):
    path = write_csv(tmp_path, "source,index,group\n")
    with pytest.raises(UniverseError, match=rf"^{re.escape(str(path))}: the file has a header but no rows$"):
        read_universe_csv(path)


@pytest.mark.parametrize("value", ["training", "TRAIN", "predict", "validation"])
def test_bad_split_value_is_rejected(tmp_path, value):
    path = write_csv(tmp_path, f"source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,1,{value}\n")
    with pytest.raises(
        UniverseError,
        match=rf"universe\.csv: 1 invalid cell\(s\):\n  line 3, column 'split': value '{value}' "
        r"must be empty or one of \['train', 'val', 'test'\]",
    ):
        read_universe_csv(path)


@pytest.mark.parametrize("value", ["5-2", "3-4:0"])
def test_reversed_or_zero_step_range_is_rejected(tmp_path, value):
    path = write_csv(tmp_path, f"source,index\nrec/a.cu3s,0\nrec/b.cu3s,{value}\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: line 3, column 'index': range '{value}' must have start <= stop "
              r"and step > 0$",
    ):
        read_universe_csv(path)


def test_every_bad_cell_is_listed_in_line_order(tmp_path):
    path = write_csv(
        tmp_path,
        "source,index,split\n"
        "rec/a.cu3s,x,train\n"
        "../b.cu3s,1,train\n"
        "rec/c.cu3s,2,nope\n",
    )
    with pytest.raises(UniverseError) as info:
        read_universe_csv(path)
    message = str(info.value)
    assert message.startswith(f"{path}: 3 invalid cell(s):")
    assert re.findall(r"line (\d+), column '(\w+)'", message) == [("2", "index"), ("3", "source"), ("4", "split")]


def test_line_numbers_count_blank_lines_and_multiline_cells(tmp_path):
    path = write_csv(tmp_path, 'source,index\n"rec\na.cu3s",1\n\n\nrec/c.cu3s,-3\n')
    with pytest.raises(UniverseError, match=r"line 6, column 'index': value '-3'"):
        read_universe_csv(path)


def test_rejections_are_value_errors(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,x\n")
    with pytest.raises(ValueError, match=r"column 'index'"):
        read_universe_csv(path)


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(UniverseError, match=r"universe file not found: .*nowhere\.csv"):
        read_universe_csv(tmp_path / "nowhere.csv")


# -- fsspec URLs ------------------------------------------------------------------------


@pytest.fixture
def memory_dir():
    fs = fsspec.filesystem("memory")
    root = f"/kuration-test-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_reads_from_an_fsspec_url(memory_dir):
    url = f"{memory_dir}/ds/universe.csv"
    with fsspec.open(url, "wb") as handle:
        handle.write(
            b"source,index,annotation,materialized_path\n"
            b"rec\\b.cu3s,1,labels/b.json,\n"
            b"rec/a.cu3s,0-1,,frames/a.npz\n"
        )
    with fsspec.open(f"{memory_dir}/ds/labels/b.json", "wb") as handle:
        handle.write(json.dumps({
            "images": [{"id": 1, "file_name": "b1.png", "tags": ["dusk"]}],
            "annotations": [{"id": 7, "image_id": 1, "category_id": 3}],
            "categories": [{"id": 0, "name": "background"}, {"id": 3, "name": "dent"}],
        }).encode())

    universe = read_universe_csv(url)
    assert universe.origin == url
    assert uids(universe) == ["rec/a.cu3s#0", "rec/a.cu3s#1", "rec/b.cu3s#1"]
    refs = list(universe)
    assert refs[2].annotation == f"{memory_dir}/ds/labels/b.json"
    assert refs[0].materialized_path == f"{memory_dir}/ds/frames/a.npz"
    assert refs[2].materialized_path == f"{memory_dir}/ds/rec/b.cu3s"
    # the annotation is read through the same URL scheme
    tagged = resolve_selectors([Selector(kind=SelectorKind.TAG, any_of=("dusk",))], universe)
    assert [(r.uid, r.tags, r.category_ids) for r in tagged] == [("rec/b.cu3s#1", ("anomalous", "dusk"), ())]
    plan = DataSplitConfig(train=(Selector(kind=SelectorKind.CATEGORIES, any_of=("dent",)),))
    assert [r.uid for r in resolve_selectors(plan.train, universe)] == ["rec/b.cu3s#1"]


def test_rejections_from_an_fsspec_url_name_the_url(memory_dir):
    url = f"{memory_dir}/universe.csv"
    with fsspec.open(url, "wb") as handle:
        handle.write(b"source,index\nrec/a.cu3s,0\nrec/a.cu3s,0\n")
    with pytest.raises(UniverseError, match=rf"^{re.escape(url)}: duplicate identity"):
        read_universe_csv(url)


def test_backslash_annotation_paths_resolve_like_posix_ones(tmp_path):
    universe = read_universe_csv(write_csv(tmp_path, "source,index,annotation\nr.parquet,0,labels\\day1.json\n"))
    (ref,) = list(universe)
    assert ref.annotation == f"{tmp_path}/labels/day1.json"


def test_a_duplicate_made_by_an_earlier_range_names_the_lines_in_file_order(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,3-5\nrec/a.cu3s,4\n")
    with pytest.raises(UniverseError, match=r"\('rec/a\.cu3s', 4\) at line 2 and line 3; each"):
        read_universe_csv(path)


# -- hostile and careless input (issue 10) ----------------------------------------------


def write_bytes(folder: Path, data: bytes, name: str = "universe.csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def test_lone_cr_line_endings_read_like_lf_ones(tmp_path):
    lf = read_universe_csv(write_bytes(tmp_path / "lf", b"source,index,group\nrec/b.cu3s,1,g\nrec/a.cu3s,0-1,g\n"))
    cr = read_universe_csv(write_bytes(tmp_path / "cr", b"source,index,group\rrec/b.cu3s,1,g\rrec/a.cu3s,0-1,g\r"))
    assert uids(cr) == uids(lf) == ["rec/a.cu3s#0", "rec/a.cu3s#1", "rec/b.cu3s#1"]
    assert cr.hash == lf.hash
    assert cr.row_numbers.tolist() == [3, 3, 2]


def test_lone_cr_line_numbers_name_the_right_line(tmp_path):
    path = write_bytes(tmp_path, b'source,index\r"rec\ra.cu3s",1\r\rrec/c.cu3s,x\r')
    with pytest.raises(UniverseError, match=r"line 5, column 'index': value 'x'"):
        read_universe_csv(path)


@pytest.mark.parametrize("quoted", [False, True])
def test_a_cell_over_the_field_limit_is_refused_naming_the_line(tmp_path, quoted):
    from kuration.splits.universe_csv import MAX_CELL_CHARS

    long = "a" * (MAX_CELL_CHARS + 1)
    cell = f'"{long}"' if quoted else long
    path = write_csv(tmp_path, f"source,index,note\nrec/a.cu3s,0,short\nrec/b.cu3s,1,{cell}\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: line 3: a cell is longer than {MAX_CELL_CHARS} characters, the limit for "
              r"every cell$",
    ):
        read_universe_csv(path)


def test_a_cell_at_the_field_limit_is_read(tmp_path):
    from kuration.splits.universe_csv import MAX_CELL_CHARS

    path = write_csv(tmp_path, f"source,index,note\nrec/a.cu3s,0,{'n' * MAX_CELL_CHARS}\n")
    assert uids(read_universe_csv(path)) == ["rec/a.cu3s#0"]


def test_a_long_cell_after_a_blank_line_is_refused_the_same_way(tmp_path):
    # the blank line sends line numbering through the csv module, whose field limit used to
    # escape as a raw csv.Error while the same cell without a blank line was accepted
    from kuration.splits.universe_csv import MAX_CELL_CHARS

    path = write_csv(tmp_path, f"source,index\n\nrec/{'b' * MAX_CELL_CHARS}.cu3s,1\n")
    with pytest.raises(UniverseError, match=r"line 3"):
        read_universe_csv(path)


@pytest.mark.parametrize(
    "value",
    ["9223372036854775808", "9" * 40, "9" * 5000, "0-9223372036854775808", "1-2:99999999999999999999",
     f"{'9' * 4400}-1"],
)
def test_indices_beyond_int64_are_refused_naming_line_and_column(tmp_path, value):
    path = write_csv(tmp_path, f"source,index\nrec/a.cu3s,0\nrec/b.cu3s,{value}\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: line 3, column 'index': .* is above the largest index 9223372036854775807",
    ) as info:
        read_universe_csv(path)
    assert len(str(info.value)) < 400  # a 5000-digit cell is shown cut short


def test_int64_max_and_leading_zeros_are_read(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,9223372036854775807\nrec/b.cu3s,0000000000000000000000007\n")
    assert uids(read_universe_csv(path)) == ["rec/a.cu3s#9223372036854775807", "rec/b.cu3s#7"]


def test_a_range_ending_at_int64_max_keeps_every_sample(tmp_path):
    # `stop + 1` overflowed int64, np.arange came back empty and the row vanished
    path = write_csv(tmp_path, "source,index\na,9223372036854775805-9223372036854775807\nb,0\n")
    assert uids(read_universe_csv(path)) == [
        "a#9223372036854775805", "a#9223372036854775806", "a#9223372036854775807", "b#0",
    ]


def test_no_row_disappears_from_a_full_int64_range(tmp_path):
    path = write_csv(tmp_path, "source,index\na,0-9223372036854775807\nb,0\n")
    with pytest.raises(UniverseError,
                       match=r"line 2, column 'index': range '0-9223372036854775807' holds 9223372036854775808 "
                             r"samples"):
        read_universe_csv(path)


def test_a_huge_range_is_refused_before_allocating(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,0-99999999999\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: line 2, column 'index': range '0-99999999999' holds 100000000000 samples, "
        r"more than max_samples=50000000; split the file, or pass a larger max_samples",
    ):
        read_universe_csv(path)


def test_many_ranges_together_over_the_limit_are_refused(tmp_path):
    path = write_csv(tmp_path, "source,index\na,0-5\nb,0-5\nc,0-5\n")
    assert len(read_universe_csv(path, max_samples=18)) == 18
    with pytest.raises(UniverseError, match=r"up to line 4 the rows already hold 18 samples, more than max_samples=17"):
        read_universe_csv(path, max_samples=17)


def test_plain_rows_over_the_limit_are_refused(tmp_path):
    # the limit was checked only when the file had a range row
    path = write_csv(tmp_path, "source,index\na,0\na,1\na,2\n")
    assert len(read_universe_csv(path, max_samples=3)) == 3
    with pytest.raises(UniverseError, match=r"up to line 4 the rows already hold 3 samples, more than max_samples=2"):
        read_universe_csv(path, max_samples=2)


def test_the_limit_counts_rows_in_file_order(tmp_path):
    path = write_csv(tmp_path, "source,index\na,0-5\nb,0\nc,0\n")
    assert len(read_universe_csv(path, max_samples=8)) == 8
    with pytest.raises(UniverseError, match=r"up to line 3 the rows already hold 7 samples, more than max_samples=6"):
        read_universe_csv(path, max_samples=6)
    path = write_csv(tmp_path, "source,index\nb,0\nc,0\na,0-5\n")
    with pytest.raises(UniverseError, match=r"up to line 4 the rows already hold 8 samples, more than max_samples=7"):
        read_universe_csv(path, max_samples=7)


@pytest.mark.parametrize(
    ("header", "repeated"),
    [("source,index,source", "source"), ("source,index,group,group", "group"), ("source, index ,index", "index")],
)
def test_a_repeated_header_name_is_refused(tmp_path, header, repeated):
    extra = ",x" * (header.count(",") - 1)
    path = write_csv(tmp_path, f"{header}\nrec/a.cu3s,0{extra}\n")
    with pytest.raises(
        UniverseError,
        match=rf"^{re.escape(str(path))}: line 1 \(the header\): column name\(s\) \['{repeated}'\] appear more than "
              r"once",
    ):
        read_universe_csv(path)


def test_non_ascii_digits_are_not_indices(tmp_path):
    path = write_csv(tmp_path, "source,index\nrec/a.cu3s,\u0663\n")
    with pytest.raises(UniverseError, match=r"line 2, column 'index': value '\u0663' must be a non-negative integer"):
        read_universe_csv(path)


def test_text_that_is_not_utf8_is_refused(tmp_path):
    path = write_bytes(tmp_path, b"source,index\nrec/\xff.cu3s,0\n")
    with pytest.raises(UniverseError,
                       match=rf"^{re.escape(str(path))}: not UTF-8 text \(invalid start byte at byte 17\)"):
        read_universe_csv(path)


def test_a_long_cell_is_refused_naming_its_column_even_if_the_csv_limit_was_raised(tmp_path):
    # csv.field_size_limit is process-wide; another library may have raised it
    import csv

    from kuration.splits.universe_csv import MAX_CELL_CHARS

    path = write_csv(tmp_path, f"source,index,note\nrec/a.cu3s,0,{'n' * (MAX_CELL_CHARS + 5)}\n")
    previous = csv.field_size_limit(10 * MAX_CELL_CHARS)
    try:
        with pytest.raises(
            UniverseError,
            match=rf"line 2, column 'note': the cell is {MAX_CELL_CHARS + 5} characters long; cells are limited to "
                  rf"{MAX_CELL_CHARS}",
        ):
            read_universe_csv(path)
    finally:
        csv.field_size_limit(previous)
