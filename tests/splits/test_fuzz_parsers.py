"""Fuzzing the three split parsers: ``universe.csv``, ``splits.json`` and selector ids.

Each test feeds generated hostile and careless input (the issue 10 list and its
neighbours: wrong line endings, huge cells, numbers past int64, thousands of digits,
repeated header names and keys, deep nesting, values of the wrong type) to one parser and
asserts the one contract: the input is accepted, or a documented error (a
``kuration.errors`` class) is raised. A raw ``KeyError`` / ``TypeError`` /
``OverflowError`` / ``RecursionError`` / ``MemoryError`` fails the test, and so does an
example slower than the deadline. Accepted input is checked too: no ``universe.csv`` row
disappears, and an accepted ``splits.json`` round-trips.

The runs are bounded (``max_examples``, ``deadline``) so the suite stays quick on two
shared cores; the generators lean on the edges rather than on volume.
"""

from __future__ import annotations

import csv
import json
import math
import uuid
from datetime import timedelta

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kuration.errors import KurationError
from kuration.splits import (
    STAGES,
    DataSplitConfig,
    Selector,
    Universe,
    dumps_splits,
    expand_ids,
    loads_splits,
    read_universe_csv,
    resolve_positions,
)
from kuration.splits.selectors import MAX_IDS

FUZZ = settings(
    max_examples=150,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INT64_MAX = 2**63 - 1


# -- numbers at the edges ---------------------------------------------------------------


def digit_strings() -> st.SearchStrategy[str]:
    """Decimal strings: small, around int64's end, far past it, thousands of digits long."""
    return st.one_of(
        st.integers(0, 40).map(str),
        st.integers(0, 3).map(lambda k: str(INT64_MAX - k)),
        st.integers(1, 3).map(lambda k: str(INT64_MAX + k)),
        st.integers(19, 60).map(lambda n: "9" * n),
        st.sampled_from(["0" * 30 + "7", "9" * 4400, "1" + "0" * 5000]),
    )


def range_strings() -> st.SearchStrategy[str]:
    step = st.one_of(st.just(""), digit_strings().map(lambda d: f":{d}"))
    return st.tuples(digit_strings(), digit_strings(), step).map(lambda t: f"{t[0]}-{t[1]}{t[2]}")


# -- universe.csv -----------------------------------------------------------------------

HEADER_NAMES = ["source", "index", "group", "split", "materialized_path", "annotation", "format", "note", "", " index "]


def cells() -> st.SearchStrategy[str]:
    text = st.text(alphabet=st.sampled_from('ab/\\. -:,"\r\n\u0663\u00e9#'), max_size=12)
    return st.one_of(
        digit_strings(),
        range_strings(),
        text,
        st.sampled_from(["rec/a.cu3s", "rec/b.cu3s", "../up.cu3s", "train", "val", "", "x" * 140_000]),
    )


def quoted(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"' if any(ch in cell for ch in ',"\r\n') else cell


@st.composite
def universe_files(draw) -> bytes:
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=200))
    header = draw(st.lists(st.sampled_from(HEADER_NAMES), min_size=1, max_size=5))
    if draw(st.booleans()):
        header = ["source", "index", *header]
    rows = draw(st.lists(st.lists(cells(), min_size=len(header), max_size=len(header) + 1), max_size=6))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines = [",".join(quoted(c) for c in header)]
    for row in rows:
        if draw(st.integers(0, 5)) == 0:
            lines.append("")  # a blank line
        lines.append(",".join(quoted(c) for c in row))
    text = ending.join(lines) + (ending if draw(st.booleans()) else "")
    return (b"\xef\xbb\xbf" if draw(st.integers(0, 9)) == 0 else b"") + text.encode("utf-8")


@pytest.fixture(scope="module")
def memory_root():
    fs = fsspec.filesystem("memory")
    root = f"/kuration-fuzz-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    if fs.exists(root):
        fs.rm(root, recursive=True)


def data_record_lines(data: bytes) -> list[int]:
    """Lines on which the csv module sees a non-blank data record (the header excluded)."""
    reader = csv.reader(data.decode("utf-8-sig").splitlines(keepends=True))
    lines, previous = [], 0
    for record in reader:
        if record:
            lines.append(previous + 1)
        previous = reader.line_num
    return lines[1:]


@FUZZ
@given(data=universe_files())
def test_universe_csv_raises_only_documented_errors(memory_root, data):
    url = f"{memory_root}/{uuid.uuid4().hex}/universe.csv"
    with fsspec.open(url, "wb") as handle:
        handle.write(data)
    try:
        universe = read_universe_csv(url, max_samples=10_000)
    except KurationError:
        return
    # accepted: every data row gave at least one sample, none vanished
    assert len(universe) >= 1
    assert set(universe.row_numbers.tolist()) == set(data_record_lines(data))
    assert len(set(universe.uids())) == len(universe)


# -- splits.json and DataSplitConfig.from_dict ------------------------------------------

KEYS = [*STAGES, "universe_hash", "splits_path", "constraints", "leakage_check", "kind", "of", "ids", "source",
        "paths", "stems", "pattern", "any_of", "severity", "extra"]
KINDS = ["files", "file_indices", "dir_indices", "stems", "glob", "tag", "categories", "all", "union", "except",
         "intersect", "regex"]


def scalars() -> st.SearchStrategy:
    return st.one_of(
        st.none(), st.booleans(), st.integers(-3, 40), st.sampled_from([INT64_MAX, INT64_MAX + 1, 10**30, 2**70]),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(KINDS), range_strings(),
        st.sampled_from(["error", "warn", "off", "no_split_overlap", "no_source_overlap", "", "a.cu3s", "*"]),
    )


def json_values(max_leaves: int = 25) -> st.SearchStrategy:
    # keys of a Python dict need not be strings (json.dumps turns 1 and None into "1", "null")
    keys = st.one_of(st.sampled_from(KEYS), st.integers(-1, 1), st.none())
    return st.recursive(
        scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(keys, children, max_size=5),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def selector_docs(draw, depth: int = 0) -> dict:
    """Mostly well-formed selectors, so the fuzz gets past the first check."""
    kind = draw(st.sampled_from(KINDS))
    doc: dict = {"kind": kind}
    if kind in ("union", "except", "intersect") and depth < 40:
        doc["of"] = draw(st.lists(selector_docs(depth + 1), min_size=1, max_size=2 if depth < 3 else 1))
    elif kind in ("file_indices", "dir_indices"):
        doc["ids"] = draw(st.lists(st.one_of(st.integers(-1, 50), range_strings(), scalars()), min_size=1, max_size=3))
        if kind == "file_indices":
            doc["source"] = "a.cu3s"
    elif kind in ("files", "stems", "tag", "categories"):
        key = {"files": "paths", "stems": "stems"}.get(kind, "any_of")
        doc[key] = draw(st.lists(scalars(), min_size=1, max_size=2))
    elif kind == "glob":
        doc["pattern"] = draw(scalars())
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.one_of(st.sampled_from(KEYS), st.integers(0, 2), st.none()))] = draw(json_values(5))
    return doc


@st.composite
def config_docs(draw):
    doc = {stage: draw(st.lists(selector_docs(), max_size=2)) for stage in draw(st.sets(st.sampled_from(STAGES)))}
    for key in draw(st.sets(st.sampled_from(["universe_hash", "splits_path", "constraints", "leakage_check",
                                             "extra"]))):
        doc[key] = draw(json_values(6))
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.sampled_from(STAGES))] = draw(scalars())  # false, 0, "", null ...
    return doc


def nested_union(depth: int) -> dict:
    doc: dict = {"kind": "all"}
    for _ in range(depth - 1):
        doc = {"kind": "union", "of": [doc]}
    return doc


def mutated_text(doc: dict, how: int, depth: int) -> str:
    """JSON text for ``doc``, sometimes spoiled the way careless and hostile files are."""
    text = json.dumps(doc, allow_nan=True)
    if how == 1 and text.startswith("{") and len(text) > 2:
        return '{"train": [], ' + text[1:]  # a duplicate key when doc has a train stage
    if how == 2:
        return '{"train": [' + '{"kind": "union", "of": [' * depth + '{"kind": "all"}' + "]}" * depth + "]}"
    if how == 3:
        return text[: len(text) // 2]
    if how == 4:
        return text.replace("0", "1e999", 1)
    return text


def lenient_read(text: str) -> tuple[object, bool]:
    """(value, whether plain ``json`` had to guess): a repeated key or a non-finite number."""
    guessed = False

    def pairs(items):
        nonlocal guessed
        guessed |= len({k for k, _ in items}) != len(items)
        return dict(items)

    def constant(token):
        nonlocal guessed
        guessed = True
        return float(token)

    def number(token):  # 1e999 parses as inf: a guess too, but only where it is a number, not inside a string
        nonlocal guessed
        value = float(token)
        guessed |= not math.isfinite(value)
        return value

    value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_float=number)
    return value, guessed


def stages_are_lists(data: object) -> bool:
    return isinstance(data, dict) and all(isinstance(data[s], list) for s in STAGES if s in data)


@FUZZ
@given(doc=config_docs(), how=st.integers(0, 6), depth=st.integers(20, 3000))
# "1e999" written into a path string is a valid path, not a non-finite number (found by CI)
@example(doc={"train": [{"kind": "files", "paths": ["0-0"]}]}, how=4, depth=20)
# and written as a number it is refused
@example(doc={"train": [{"kind": "files", "indices": [0]}]}, how=4, depth=20)
def test_splits_json_raises_only_documented_errors(doc, how, depth):
    text = mutated_text(doc, how, depth)
    try:
        cfg = loads_splits(text, where="fuzz.json")
    except KurationError:
        return
    # accepted: nothing was guessed at, no stage was read from a non-list, and it round-trips
    value, guessed = lenient_read(text)
    assert not guessed and stages_are_lists(value)
    assert loads_splits(dumps_splits(cfg)) == cfg


@FUZZ
@given(
    data=st.one_of(
        config_docs(),
        json_values(),
        st.builds(lambda v: {"train": v}, json_values()),
        st.integers(20, 3000).map(lambda d: {"val": [nested_union(d)]}),
    )
)
def test_from_dict_raises_only_documented_errors(data):
    try:
        cfg = DataSplitConfig.from_dict(data, where="fuzz")
    except KurationError:
        return
    assert stages_are_lists(data)
    assert DataSplitConfig.from_dict(cfg.to_dict()) == cfg


@FUZZ
@given(
    kwargs=st.dictionaries(
        st.sampled_from(["universe_hash", "train", "val", "test", "predict", "constraints", "splits_path",
                         "leakage_check"]),
        st.one_of(scalars(), st.lists(st.one_of(scalars(), st.just(Selector(kind="all"))), max_size=3)),
        max_size=4,
    )
)
def test_the_constructor_raises_only_documented_errors(kwargs):
    try:
        DataSplitConfig(**kwargs)
    except KurationError:
        pass


# -- selector ids and ranges ------------------------------------------------------------

UNIVERSE = Universe.from_columns(
    ["a.cu3s"] * 6 + ["b.cu3s"] * 2, [0, 1, 2, 7, INT64_MAX - 1, INT64_MAX, 0, 3]
)


def id_items() -> st.SearchStrategy:
    return st.one_of(
        st.integers(-2, 10),
        st.sampled_from([INT64_MAX, INT64_MAX + 1, 2**64, 10**5000, True, False, 1.0, None, b"1", [1]]),
        range_strings(),
        st.text(alphabet=st.sampled_from("0123456789-: \u0663x"), max_size=10),
    )


@FUZZ
@given(kind=st.sampled_from(["file_indices", "dir_indices"]), ids=st.lists(id_items(), max_size=4))
def test_selector_ids_raise_only_documented_errors(kind, ids):
    fields = {"source": "a.cu3s"} if kind == "file_indices" else {}
    try:
        sel = Selector(kind=kind, ids=ids, **fields)
    except KurationError:
        if ids:  # an empty list is refused by the selector, and is no id error
            with pytest.raises(KurationError):
                expand_ids(ids, limit=MAX_IDS)
        return
    try:
        positions = resolve_positions([sel], UNIVERSE)
    except KurationError:
        return
    wanted = expand_ids(sel.ids)  # accepted ids count at most MAX_IDS, and these stay small
    if kind == "file_indices":
        expected = [p for p in range(6) if int(UNIVERSE.indices[p]) in set(wanted)]
    else:
        expected = list(dict.fromkeys(wanted))
    assert positions.tolist() == expected
    assert positions.dtype == np.int64
