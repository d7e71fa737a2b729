"""The selector language and ``splits.json`` (``DataSplitConfig``), in the Cuvis.AI formats.

The field tables below are written out by hand from the Cuvis.AI schema
(``cuvis_ai_schemas.training.data``), not imported, so a wrong table in Kuration fails here.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from pathlib import Path

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.errors import SelectorError, SplitConfigError, UniverseDriftError
from kuration.splits import (
    STAGES,
    Constraint,
    ConstraintKind,
    ConstraintSeverity,
    DataSplitConfig,
    Selector,
    SelectorKind,
    compress_ids,
    dumps_splits,
    expand_ids,
    load_splits,
    loads_splits,
    plan_splits,
    read_universe_csv,
    save_splits,
)

DATA = Path(__file__).parent / "data"
ALL = {"kind": "all"}
STEMS = {"kind": "stems", "stems": ["a"]}
SELECTOR_KEYS = ["kind", "paths", "source", "ids", "stems", "pattern", "any_of", "of"]

#: Exactly the fields each kind sets (Cuvis.AI ``_ALLOWED_FIELDS`` == ``_REQUIRED_FIELDS``).
VALID = {
    "files": {"paths": ["day1/a.cu3s", "day1/b.cu3s"]},
    "file_indices": {"source": "day1/a.cu3s", "ids": [0, "2-4"]},
    "dir_indices": {"ids": ["0-8:2", 11]},
    "stems": {"stems": ["a", "b"]},
    "glob": {"pattern": "day1/*"},
    "tag": {"any_of": ["normal"]},
    "categories": {"any_of": ["scratch"]},
    "all": {},
    "union": {"of": [ALL]},
    "except": {"of": [ALL, STEMS]},
    "intersect": {"of": [ALL, STEMS]},
}
#: A non-empty value for every field, to add where it does not belong.
FIELD_VALUES = {
    "paths": ["x.cu3s"],
    "source": "x.cu3s",
    "ids": [1],
    "stems": ["x"],
    "pattern": "*",
    "any_of": ["x"],
    "of": [ALL],
}
LIST_FIELDS = {"paths", "ids", "stems", "any_of", "of"}


def selector(kind: str, **fields) -> dict:
    return {"kind": kind, **fields}


def full_dump(kind: str, **fields) -> dict:
    """What Cuvis.AI ``model_dump`` writes: every field, defaults included."""
    base = {"kind": kind, "paths": [], "source": None, "ids": [], "stems": [], "pattern": None, "any_of": [], "of": []}
    return {**base, **fields}


# -- per-kind structure ------------------------------------------------------------------


def test_the_table_covers_all_eleven_kinds():
    assert sorted(VALID) == sorted(k.value for k in SelectorKind)
    assert len(VALID) == 11


@pytest.mark.parametrize("kind", sorted(VALID))
def test_exactly_the_valid_fields_parse_and_round_trip(kind):
    sel = Selector.from_dict(selector(kind, **VALID[kind]))
    assert sel.kind is SelectorKind(kind)
    dumped = sel.to_dict()
    assert list(dumped) == SELECTOR_KEYS
    assert Selector.from_dict(dumped) == sel
    for name, value in VALID[kind].items():
        if name != "of":
            assert dumped[name] == value


@pytest.mark.parametrize("kind", sorted(VALID))
def test_the_full_cuvis_dump_with_empty_defaults_is_accepted(kind):
    # model_dump writes [] / null for every unused field; those count as "not set"
    sel = Selector.from_dict(full_dump(kind, **VALID[kind]))
    assert sel == Selector.from_dict(selector(kind, **VALID[kind]))


MISSING = [
    (kind, field)
    for kind, fields in sorted(VALID.items())
    for field in fields
]


@pytest.mark.parametrize(("kind", "field"), MISSING)
def test_a_missing_required_field_is_rejected(kind, field):
    data = selector(kind, **{k: v for k, v in VALID[kind].items() if k != field})
    qualifier = "non-empty " if field in LIST_FIELDS else ""
    with pytest.raises(SelectorError, match=rf"^selector: selector kind '{kind}' requires {qualifier}'{field}'$"):
        Selector.from_dict(data)


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k, f in MISSING if f in LIST_FIELDS])
def test_an_empty_list_counts_as_missing(kind, field):
    data = selector(kind, **{**VALID[kind], field: []})
    with pytest.raises(SelectorError, match=rf"selector kind '{kind}' requires non-empty '{field}'"):
        Selector.from_dict(data)


EXTRA = [
    (kind, field)
    for kind in sorted(VALID)
    for field in FIELD_VALUES
    if field not in VALID[kind]
]


@pytest.mark.parametrize(("kind", "field"), EXTRA)
def test_an_extra_field_is_rejected(kind, field):
    data = selector(kind, **VALID[kind], **{field: FIELD_VALUES[field]})
    takes = re.escape(str(list(VALID[kind]))) if VALID[kind] else "no fields"
    with pytest.raises(
        SelectorError,
        match=rf"^selector: selector kind '{kind}' must not set field\(s\) \['{field}'\]; it takes exactly {takes}$"
    ):
        Selector.from_dict(data)


def test_the_extra_field_check_runs_on_direct_construction_too():
    with pytest.raises(SelectorError, match=r"selector kind 'glob' must not set field\(s\) \['ids'\]"):
        Selector(kind=SelectorKind.GLOB, pattern="*", ids=(1,))
    with pytest.raises(ValueError, match=r"selector kind 'all' must not set field\(s\) \['paths', 'stems'\]"):
        Selector(kind="all", paths=("a",), stems=("b",))


def test_an_empty_pattern_string_is_set():
    # source / pattern count as set when not null (the Cuvis rule), even if empty
    assert Selector.from_dict(selector("glob", pattern="")).pattern == ""
    with pytest.raises(SelectorError, match=r"selector kind 'all' must not set field\(s\) \['pattern'\]"):
        Selector.from_dict(full_dump("all", pattern=""))


@pytest.mark.parametrize("kind", ["except", "intersect"])
def test_except_and_intersect_need_two_operands(kind):
    with pytest.raises(SelectorError,
                       match=rf"^selector: selector kind '{kind}' requires at least 2 operands in 'of', got 1$"):
        Selector.from_dict(selector(kind, of=[ALL]))
    assert len(Selector.from_dict(selector(kind, of=[ALL, STEMS, ALL])).of) == 3


def test_union_takes_a_single_operand():
    assert Selector.from_dict(selector("union", of=[STEMS])).of == (Selector(kind=SelectorKind.STEMS, stems=("a",)),)


BAD_IDS = [
    (-1, r"index -1 must be >= 0"),
    ("x", r"ids must be ints or 'a-b' ranges \(optionally 'a-b:step'\), got 'x'"),
    ("5-2", r"range '5-2': start 5 must be <= stop 2"),
    ("1-9:0", r"range '1-9:0': step must be > 0"),
    (True, r"ids must be ints or 'a-b' ranges, got True"),
    (False, r"ids must be ints or 'a-b' ranges, got False"),
    (1.5, r"ids must be ints or 'a-b' ranges, got 1\.5"),
    (None, r"ids must be ints or 'a-b' ranges, got None"),
    ("-1", r"ids must be ints or 'a-b' ranges \(optionally 'a-b:step'\), got '-1'"),
    ("²", r"ids must be ints or 'a-b' ranges \(optionally 'a-b:step'\), got '²'"),
    ("3-", r"ids must be ints or 'a-b' ranges \(optionally 'a-b:step'\), got '3-'"),
]


@pytest.mark.parametrize("kind", ["file_indices", "dir_indices"])
@pytest.mark.parametrize(("bad", "message"), BAD_IDS)
def test_bad_ids_are_rejected(kind, bad, message):
    fields = {"ids": [0, bad]} if kind == "dir_indices" else {"source": "a.cu3s", "ids": [0, bad]}
    with pytest.raises(SelectorError, match=rf"^selector: selector kind '{kind}': {message}$"):
        Selector.from_dict(selector(kind, **fields))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "all", "idz": [1]}, r"unknown key\(s\) \['idz'\]; valid keys: \['kind', 'paths', 'source'"),
        ({"paths": ["a"]}, r"selector has no 'kind'"),
        ({"kind": "regex", "pattern": "a.*"}, r"unknown selector kind 'regex'; valid kinds: \['all', 'categories'"),
        ({"kind": "files", "paths": "a.cu3s"}, r"field 'paths' must be a list, got 'a\.cu3s'"),
        ({"kind": "file_indices", "source": 3, "ids": [1]}, r"field 'source' must be a string, got 3"),
        ({"kind": "union", "of": ALL}, r"field 'of' must be a list"),
        ({"kind": "files", "paths": ["ok", 3]}, r"selector kind 'files': 'paths' entries must be strings, got \[3\]"),
        ({"kind": "tag", "any_of": ["ok", 5]}, r"selector kind 'tag': 'any_of' entries must be strings, got \[5\]"),
        (["kind", "all"], r"a selector must be a JSON object"),
        ({"kind": "all", 1: 2, None: 3}, r"unknown key\(s\) \[1, None\]; valid keys: \['kind', "),
    ],
)
def test_malformed_selector_json_is_rejected(data, message):
    with pytest.raises(SelectorError, match=rf"^here: {message}"):
        Selector.from_dict(data, where="here")


# -- error locations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "location", "message"),
    [
        (
            {"train": [ALL, {"kind": "union", "of": [ALL, {"kind": "glob", "ids": [1]}]}]},
            "train[1].of[1]",
            r"selector kind 'glob' must not set field\(s\) \['ids'\]; it takes exactly \['pattern'\]",
        ),
        (
            {"train": [{"kind": "union", "of": [ALL, {"kind": "glob"}]}]},
            "train[0].of[1]",
            r"selector kind 'glob' requires 'pattern'",
        ),
        (
            {"val": [ALL, ALL, {"kind": "except", "of": [{"kind": "intersect", "of": [ALL, {"kind": "tag"}]}, ALL]}]},
            "val[2].of[0].of[1]",
            r"selector kind 'tag' requires non-empty 'any_of'",
        ),
        (
            {"test": [{"kind": "except", "of": [ALL]}]},
            "test[0]",
            r"selector kind 'except' requires at least 2 operands in 'of', got 1",
        ),
        (
            {"predict": [{"kind": "union", "of": [{"kind": "all", "id": 3}]}]},
            "predict[0].of[0]",
            r"unknown key\(s\) \['id'\]; valid keys: \['kind', ",
        ),
        (
            {"train": [{"kind": "dir_indices", "ids": ["4-1"]}]},
            "train[0]",
            r"selector kind 'dir_indices': range '4-1': start 4 must be <= stop 1",
        ),
    ],
)
def test_errors_name_the_selector_location(doc, location, message):
    with pytest.raises(SplitConfigError, match=rf"^my/splits\.json: {re.escape(location)}: {message}"):
        loads_splits(json.dumps(doc), where="my/splits.json")


def test_selector_from_dict_prefixes_nested_locations():
    data = {"kind": "union", "of": [ALL, {"kind": "except", "of": [ALL, {"kind": "stems", "stems": [7]}]}]}
    with pytest.raises(
        SelectorError,
        match=r"^train\[0\]\.of\[1\]\.of\[1\]: selector kind 'stems': 'stems' entries must be strings",
    ):
        Selector.from_dict(data, where="train[0]")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"trian": []}, r"unknown key\(s\) \['trian'\]; valid keys: \["),
        ({"train": {"kind": "all"}}, r"'train' must be a list of selectors"),
        ({"universe_hash": 12}, r"'universe_hash' must be a string or null, got 12"),
        ({"splits_path": ["a"]}, r"'splits_path' must be a string or null"),
        ([ALL], r"expected a JSON object, got list"),
    ],
)
def test_malformed_config_json_is_rejected(doc, message):
    with pytest.raises(SplitConfigError, match=rf"^s\.json: {message}"):
        loads_splits(json.dumps(doc), where="s.json")


def test_invalid_json_text_is_rejected():
    with pytest.raises(SplitConfigError,
                       match=r"^s\.json: not a valid splits\.json \(Expecting value: line 1 column 12"):
        loads_splits('{"train": [', where="s.json")


def test_a_config_only_holds_selectors():
    with pytest.raises(SplitConfigError, match=r"train\[0\]: expected a Selector, got \{'kind': 'all'\}"):
        DataSplitConfig(train=({"kind": "all"},))


def test_config_errors_are_value_errors():
    with pytest.raises(ValueError, match=r"train\[0\]"):
        loads_splits('{"train": [{"kind": "glob"}]}')


# -- splits.json: careless and hostile files (issue 10) ----------------------------------


@pytest.mark.parametrize(("value", "shown"), [(False, "false"), (0, "0"), ("", "''"), ({}, "{}"), (None, "null")])
@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_that_is_not_a_list_is_refused_not_read_as_empty(stage, value, shown):
    with pytest.raises(
        SplitConfigError,
        match=rf"^s\.json: '{stage}' must be a list of selectors \(use \[\] for an empty stage\), got "
              rf"{re.escape(shown)}$",
    ):
        loads_splits(json.dumps({stage: value}), where="s.json")


@given(st.one_of(st.text(max_size=5), st.none(), st.booleans(), st.integers(), st.dictionaries(st.text(max_size=3),
                                                                                            st.integers(), max_size=3),
                 st.lists(st.one_of(st.booleans(), st.integers(), st.text(max_size=3)), max_size=6)))
def test_typed_items_takes_exactly_the_lists_of_the_wanted_type(value):
    from kuration.splits._bounds import ItemsError, typed_items

    is_list = isinstance(value, list)
    wrong = tuple(i for i, item in enumerate(value) if type(item) is not int) if is_list else ()
    if is_list and not wrong:
        assert typed_items(value, (int,)) == tuple(value)
        return
    with pytest.raises(ItemsError) as caught:
        typed_items(value, (int,))
    assert caught.value.wrong == wrong


def test_a_selector_field_of_the_wrong_shape_is_shown_cut():
    with pytest.raises(SelectorError, match=r"^s: field 'of' must be a list, got \{'k': 'x{70}\.\.\.$"):
        Selector.from_dict({"kind": "union", "of": {"k": "x" * 500}}, where="s")
    with pytest.raises(SelectorError, match=r"^s: field 'pattern' must be a string, got \['x{75}\.\.\.$"):
        Selector.from_dict({"kind": "glob", "pattern": ["x" * 500]}, where="s")


def test_a_long_value_that_is_not_a_list_is_shown_as_cut_json_with_its_length():
    value = {"kind": "all", "note": "x" * 300}
    text = json.dumps(value)
    with pytest.raises(SplitConfigError) as caught:
        loads_splits(json.dumps({"train": value}), where="s.json")
    got = str(caught.value).split(", got ", 1)[1]
    assert got == f"{text[:77]}... ({len(text)} characters)"


@pytest.mark.parametrize("value", [False, 0, "", {}, "all", 5])
def test_a_stage_that_is_not_a_list_is_refused_in_python_too(value):
    with pytest.raises(SplitConfigError, match=r"^'val' must be a list of selectors, got "):
        DataSplitConfig(val=value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"train": [], "train": [{"kind": "all"}]}', r"duplicate key 'train' in one object"),
        ('{"train": [{"kind": "files", "paths": ["a"], "paths": ["b"]}]}', r"duplicate key 'paths' in one object"),
        ('{"constraints": [{"kind": "no_split_overlap", "kind": "no_source_overlap"}]}', r"duplicate key 'kind'"),
        ('{"leakage_check": "off", "leakage_check": "error"}', r"duplicate key 'leakage_check'"),
        ('{"train": [{"kind": "dir_indices", "ids": [NaN]}]}', r"non-finite number NaN is not allowed"),
        ('{"train": [{"kind": "dir_indices", "ids": [1e999]}]}', r"number 1e999 is beyond the float range"),
        ('{"train": ' + "[" * 70 + "]" * 70 + "}", r"nested deeper than 64 levels"),
    ],
)
def test_strict_json_refusals_name_the_file(text, message):
    with pytest.raises(SplitConfigError, match=rf"^my/s\.json: not a valid splits\.json \({message}"):
        loads_splits(text, where="my/s.json")


def test_load_splits_refuses_duplicate_keys_naming_the_path(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"universe_hash": "aa", "universe_hash": "bb"}')
    with pytest.raises(SplitConfigError,
                       match=rf"^{re.escape(str(path))}: not a valid splits\.json \(duplicate key 'universe_hash'"):
        load_splits(path)


def test_deep_json_nesting_is_refused_before_any_recursion():
    text = '{"train": [' + '{"kind": "union", "of": [' * 3000 + '{"kind": "all"}' + "]}" * 3000 + "]}"
    with pytest.raises(SplitConfigError, match=r"^s\.json: not a valid splits\.json \(nested deeper than 64 levels\)$"):
        loads_splits(text, where="s.json")


# -- the leakage policy: one behaviour for the constructor and from_dict ------------------


POLICY_CASES = [
    ({}, "error"),
    ({"leakage_check": "warn"}, "warn"),
    ({"leakage_check": "off"}, "off"),
    ({"constraints": []}, "off"),
    ({"constraints": [{"kind": "no_split_overlap", "severity": "warn"}], "leakage_check": "warn"}, "warn"),
    ({"constraints": [{"kind": "no_source_overlap"}], "leakage_check": "off"}, "off"),
]


@pytest.mark.parametrize(("doc", "mode"), POLICY_CASES)
def test_the_constructor_takes_leakage_check_exactly_as_from_dict_does(doc, mode):
    kwargs = {}
    if "leakage_check" in doc:
        kwargs["leakage_check"] = doc["leakage_check"]
    if "constraints" in doc:
        kwargs["constraints"] = tuple(Constraint(c["kind"], c.get("severity", "error")) for c in doc["constraints"])
    built = DataSplitConfig(train=(Selector(kind="all"),), **kwargs)
    read = DataSplitConfig.from_dict({"train": [ALL], **doc})
    assert built == read
    assert built.leakage_check == read.leakage_check == mode


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"leakage_check": "strict"}, r"^leakage_check must be one of \['error', 'warn', 'off'\], got 'strict'$"),
        ({"leakage_check": 1}, r"^leakage_check must be one of \['error', 'warn', 'off'\], got 1$"),
        (
            {"leakage_check": "warn", "constraints": (Constraint("no_split_overlap"),)},
            r"^'leakage_check': 'warn' contradicts 'constraints', whose no_split_overlap implies 'error'; keep one "
            r"spelling$",
        ),
        ({"constraints": ("no_split_overlap",)}, r"^constraints\[0\]: expected a Constraint, got 'no_split_overlap'$"),
        ({"constraints": 5}, r"^'constraints' must be a list of constraints, got 5$"),
        ({"universe_hash": 12}, r"^'universe_hash' must be a string or null, got 12$"),
    ],
)
def test_the_constructor_refuses_what_from_dict_refuses(kwargs, message):
    with pytest.raises(SplitConfigError, match=message):
        DataSplitConfig(**kwargs)


def test_replace_and_with_leakage_check_still_work_on_the_custom_constructor():
    from dataclasses import replace

    cfg = DataSplitConfig(leakage_check="warn", universe_hash="ab")
    assert replace(cfg, universe_hash="cd").constraints == cfg.constraints
    assert cfg.with_leakage_check("off").constraints == ()
    assert DataSplitConfig.from_dict(cfg.to_dict()) == cfg


# -- ids: expand and compress ----------------------------------------------------------


def test_expand_ids_examples():
    assert expand_ids([0, "2-4", "10-20:5", " 7-8 ", 3]) == [0, 2, 3, 4, 10, 15, 20, 7, 8, 3]
    # a bare decimal string is refused, as the Cuvis.AI resolver refuses it
    with pytest.raises(SelectorError, match=r"got '7'; write the number 7 without quotes"):
        expand_ids(["7"])
    assert expand_ids(["0-5:2"]) == [0, 2, 4]
    assert expand_ids([]) == []


@pytest.mark.parametrize("item", ["\u0661-\u0663", "0-\u0663", "0-3:\u0661", "\uff11-\uff13", "\u0663"])
def test_ids_are_ascii_digits_only(item):
    # "\u0661" (Arabic-Indic one) and "\uff11" (fullwidth one) are decimals to Python; as in
    # universe.csv and media references, they are no index here
    with pytest.raises(SelectorError, match=rf"^ids: ids must be ints or 'a-b' ranges \(optionally 'a-b:step'\), got "
                                            rf"{re.escape(repr(item))}$"):
        expand_ids([0, item])
    with pytest.raises(SelectorError,
                       match=rf"^selector kind 'dir_indices': ids must be ints .*{re.escape(repr(item))}$"):
        Selector(kind="dir_indices", ids=[item])


@pytest.mark.parametrize("ids", [5, None, "0-3", {"0-3": 1}])
def test_expand_ids_needs_a_list(ids):
    with pytest.raises(SelectorError, match=r"^ids: ids must be a list of ints or 'a-b' ranges, got "):
        expand_ids(ids)


def test_compress_ids_examples():
    assert compress_ids([8, 0, 1, 2, 5, 7, 2]) == ["0-2", 5, "7-8"]
    assert compress_ids([4]) == [4]
    assert compress_ids([]) == []


@settings(deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=5_000), max_size=300))
def test_compress_then_expand_is_the_sorted_set(values):
    assert expand_ids(compress_ids(values)) == sorted(values)


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=300), max_size=200))
def test_compress_ids_is_canonical_and_order_independent(values):
    out = compress_ids(values)
    assert out == compress_ids(sorted(set(values), reverse=True))
    spans = []
    for item in out:
        if isinstance(item, str):
            a, b = (int(x) for x in item.split("-"))
            assert a < b  # a run of one is written as a plain int
        else:
            a = b = item
        spans.append((a, b))
    # runs are increasing and never adjacent (adjacent runs would have merged)
    for (_, prev_end), (start, _) in itertools.pairwise(spans):
        assert start > prev_end + 1
    if out:
        Selector(kind=SelectorKind.FILE_INDICES, source="s", ids=tuple(out))


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1_000), st.integers(0, 50), st.integers(1, 7)),
        max_size=20,
    )
)
def test_expand_ids_follows_python_ranges_in_order(spans):
    ids: list[int | str] = []
    expected: list[int] = []
    for start, length, step in spans:
        stop = start + length
        ids.append(f"{start}-{stop}" if step == 1 else f"{start}-{stop}:{step}")
        expected.extend(range(start, stop + 1, step))
        ids.append(start)
        expected.append(start)
    assert expand_ids(ids) == expected


# -- limits: ids, ranges and nesting (issue 10) ------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (2**63, r"index 9223372036854775808 is above the largest index 9223372036854775807"),
        (10**5000, r"index <int too large to show> is above the largest index"),
        ("0-9223372036854775808", r"range '0-9223372036854775808' has a number above the largest index"),
        ("1-2:" + "9" * 30, r"range '1-2:9{30}' has a number above the largest index"),
        ("9" * 5000 + "-1", r"range '9+\.\.\. \(5002 characters\) has a number above the largest index"),
    ],
    ids=["2**63", "10**5000", "range-stop", "range-step", "range-5000-digits"],
)
@pytest.mark.parametrize("kind", ["file_indices", "dir_indices"])
def test_ids_beyond_int64_are_refused_in_python_and_from_json(kind, bad, message):
    fields = {"ids": [0, bad]} if kind == "dir_indices" else {"source": "a.cu3s", "ids": [0, bad]}
    with pytest.raises(SelectorError, match=rf"^selector kind '{kind}': {message}"):
        Selector(kind=kind, **fields)
    if isinstance(bad, int):  # the strict JSON reader refuses a number past int64 first
        message = r"not a valid splits\.json \(integer [0-9]+(\.\.\.)? is outside the signed 64-bit range\)"
    else:
        message = rf"train\[0\]: selector kind '{kind}': {message}"
    huge = isinstance(bad, int) and bad > 10**100
    text = '{"train": [{"ids": [' + "9" * 5000 + "]}]}" if huge else json.dumps({"train": [fields | {"kind": kind}]})
    with pytest.raises(SplitConfigError, match=rf"^s\.json: {message}"):
        loads_splits(text, where="s.json")


@pytest.mark.parametrize("ids", [["0-99999999999"], ["0-9999999", "0-9999999"], ["0-10000000"]])
def test_a_huge_id_range_is_refused_before_expanding(ids):
    from kuration.splits.selectors import MAX_IDS

    with pytest.raises(
        SelectorError,
        match=rf"^selector kind 'file_indices': ids expand to more than {MAX_IDS} indices \(at '0-[0-9]+'\); "
        r"select whole sources with a 'files' selector instead$",
    ):
        Selector(kind="file_indices", source="a.cu3s", ids=ids)
    with pytest.raises(SelectorError, match=rf"ids expand to more than {MAX_IDS} indices"):
        expand_ids(ids)


def test_the_largest_ids_are_accepted_and_resolve():
    from kuration.splits import Universe, resolve_positions

    top = 2**63 - 1
    universe = Universe.from_columns(["a", "a", "a"], [0, top - 1, top])
    sel = Selector(kind="file_indices", source="a", ids=[f"{top - 2}-{top}", top])
    assert universe.uids(resolve_positions([sel], universe)) == [f"a#{top - 1}", f"a#{top}"]
    assert expand_ids([f"{top - 1}-{top}"]) == [top - 1, top]


def nested(depth: int) -> dict:
    doc: dict = {"kind": "all"}
    for _ in range(depth - 1):
        doc = {"kind": "union", "of": [doc]}
    return doc


def test_deep_nesting_is_refused_when_built_in_python():
    from kuration.splits.selectors import MAX_SELECTOR_DEPTH

    sel = Selector(kind="all")
    for _ in range(MAX_SELECTOR_DEPTH - 1):
        sel = Selector(kind="except", of=[sel, Selector(kind="all")])
    assert sel.depth == MAX_SELECTOR_DEPTH
    assert len(list(sel.walk())) == 2 * MAX_SELECTOR_DEPTH - 1 and sel.to_dict()["kind"] == "except"
    with pytest.raises(
        SelectorError,
        match=rf"^selector kind 'union': union/except/intersect selectors nest deeper than {MAX_SELECTOR_DEPTH} "
              r"levels; "
        "flatten the expression",
    ):
        Selector(kind="union", of=[sel])


@pytest.mark.parametrize("depth", [33, 5_000])
def test_deep_nesting_from_a_dict_is_refused_without_recursing_to_the_limit(depth):
    from kuration.splits.selectors import MAX_SELECTOR_DEPTH

    location = "train[0]" + ".of[0]" * MAX_SELECTOR_DEPTH
    with pytest.raises(SplitConfigError,
                       match=rf"^s\.json: {re.escape(location)}: union/except/intersect selectors nest deeper"):
        DataSplitConfig.from_dict({"train": [nested(depth)]}, where="s.json")


def test_nesting_at_the_limit_is_accepted():
    from kuration.splits.selectors import MAX_SELECTOR_DEPTH

    cfg = DataSplitConfig.from_dict({"train": [nested(MAX_SELECTOR_DEPTH)]})
    assert cfg.train[0].depth == MAX_SELECTOR_DEPTH


@pytest.mark.parametrize(("field", "value"), [("source", 3), ("pattern", ["a*"]), ("source", b"a")])
def test_scalar_fields_must_be_strings_when_built_in_python(field, value):
    kind = "glob" if field == "pattern" else "file_indices"
    extra = {} if kind == "glob" else {"ids": [0]}
    with pytest.raises(SelectorError, match=rf"^selector kind '{kind}': field '{field}' must be a string, got "):
        Selector(kind=kind, **{field: value}, **extra)


# -- constraints and the leakage policy --------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("error", (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),)),
        ("warn", (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.WARN),)),
        ("off", ()),
    ],
)
def test_seed_leakage_check_becomes_constraints(mode, expected):
    cfg = loads_splits(json.dumps({"leakage_check": mode, "train": [ALL]}))
    assert cfg.constraints == expected
    assert cfg.leakage_check == mode


def test_neither_spelling_means_the_error_policy():
    cfg = loads_splits(json.dumps({"train": [ALL]}))
    assert cfg.constraints == (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),)
    assert cfg.leakage_check == "error"
    assert DataSplitConfig().leakage_check == "error"


def test_explicit_empty_constraints_means_no_checks():
    cfg = loads_splits(json.dumps({"constraints": []}))
    assert cfg.constraints == ()
    assert cfg.leakage_check == "off"


def test_constraints_form_is_read_with_default_severity():
    cfg = loads_splits(json.dumps({
        "constraints": [
            {"kind": "no_source_overlap", "severity": "warn"},
            {"kind": "no_train_anomalous"},
            {"kind": "no_split_overlap", "severity": "error"},
        ]
    }))
    assert cfg.constraints == (
        Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),
        Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS, ConstraintSeverity.ERROR),
        Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
    )
    assert cfg.constraint(ConstraintKind.NO_TRAIN_ANOMALOUS).severity is ConstraintSeverity.ERROR
    assert cfg.leakage_check == "error"


def test_constraints_without_split_overlap_mean_leakage_off():
    cfg = loads_splits(json.dumps({"constraints": [{"kind": "no_source_overlap", "severity": "error"}]}))
    assert cfg.leakage_check == "off"
    assert cfg.constraint(ConstraintKind.NO_SPLIT_OVERLAP) is None


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        (
            [{"kind": "no_split_overlap"}, {"kind": "no_source_overlap"},
             {"kind": "no_split_overlap", "severity": "warn"}],
            r"^s\.json: duplicate constraint kind\(s\): no_split_overlap$",
        ),
        (
            [{"kind": "no_split_overlap"}, {"kind": "no_source_overlap", "severity": "fatal"}],
            r"^s\.json: constraints\[1\]: constraint 'no_source_overlap': unknown severity 'fatal'; valid: \['error', "
            r"'warn'\]$",
        ),
        (
            [{"kind": "no_leaks"}],
            r"^s\.json: constraints\[0\]: unknown constraint kind 'no_leaks'; valid kinds: \['no_split_overlap', "
            r"'no_source_overlap', 'no_train_anomalous'\]$",
        ),
        (
            [{"kind": "no_split_overlap", "severity": "error", "note": "x"}],
            r"^s\.json: constraints\[0\]: unknown key\(s\) \['note'\]; valid keys: \['kind', 'severity'\]$",
        ),
        ([{"severity": "warn"}], r"^s\.json: constraints\[0\] must be an object with 'kind'"),
        ({"kind": "no_split_overlap"}, r"^s\.json: 'constraints' must be a list"),
    ],
)
def test_bad_constraints_are_rejected(constraints, message):
    with pytest.raises(SplitConfigError, match=message):
        loads_splits(json.dumps({"constraints": constraints}), where="s.json")


@pytest.mark.parametrize("value", ["strict", "ERROR", 1, True])
def test_a_bad_leakage_check_is_rejected(value):
    with pytest.raises(SplitConfigError,
                       match=r"^s\.json: '?leakage_check'? must be one of \['error', 'warn', 'off'\]"):
        loads_splits(json.dumps({"leakage_check": value}), where="s.json")


@pytest.mark.parametrize(
    ("legacy", "constraints", "implied"),
    [
        ("warn", [{"kind": "no_split_overlap", "severity": "error"}], "error"),
        ("error", [], "off"),
        ("off", [{"kind": "no_split_overlap", "severity": "warn"}], "warn"),
        ("error", [{"kind": "no_source_overlap", "severity": "error"}], "off"),
    ],
)
def test_contradicting_spellings_are_rejected(legacy, constraints, implied):
    with pytest.raises(
        SplitConfigError,
        match=rf"^s\.json: 'leakage_check': '{legacy}' contradicts 'constraints', whose no_split_overlap implies "
        rf"'{implied}'; keep one spelling$",
    ):
        loads_splits(json.dumps({"leakage_check": legacy, "constraints": constraints}), where="s.json")


@pytest.mark.parametrize(
    ("legacy", "constraints"),
    [
        ("warn", [{"kind": "no_split_overlap", "severity": "warn"}]),
        ("off", [{"kind": "no_source_overlap", "severity": "error"}]),
        ("error", [{"kind": "no_split_overlap"}, {"kind": "no_train_anomalous", "severity": "warn"}]),
    ],
)
def test_agreeing_spellings_are_accepted(legacy, constraints):
    cfg = loads_splits(json.dumps({"leakage_check": legacy, "constraints": constraints}))
    assert cfg.leakage_check == legacy
    assert len(cfg.constraints) == len(constraints)


def test_save_writes_only_the_constraints_form(tmp_path):
    cfg = loads_splits(json.dumps({"leakage_check": "warn", "train": [ALL]}))
    path = tmp_path / "splits.json"
    save_splits(cfg, path)
    data = json.loads(path.read_text())
    assert "leakage_check" not in data
    assert data["constraints"] == [{"kind": "no_split_overlap", "severity": "warn"}]
    off = loads_splits(json.dumps({"leakage_check": "off"}))
    assert json.loads(dumps_splits(off))["constraints"] == []
    assert "leakage_check" not in dumps_splits(off)
    # an "off" file stays off when read back, rather than becoming the default "error"
    assert loads_splits(dumps_splits(off)).leakage_check == "off"


def test_with_leakage_check_keeps_the_other_constraints():
    cfg = DataSplitConfig(constraints=(
        Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),
        Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
    ))
    warned = cfg.with_leakage_check("warn")
    assert warned.leakage_check == "warn"
    assert warned.constraint(ConstraintKind.NO_SOURCE_OVERLAP).severity is ConstraintSeverity.WARN
    off = cfg.with_leakage_check("off")
    assert off.constraints == (Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),)
    with pytest.raises(SplitConfigError, match=r"leakage_check must be one of \['error', 'warn', 'off'\], got 'loud'"):
        cfg.with_leakage_check("loud")


# -- save / load ---------------------------------------------------------------------------


def sample_config() -> DataSplitConfig:
    return DataSplitConfig(
        universe_hash="abc123",
        train=(Selector(kind=SelectorKind.FILE_INDICES, source="rec/a.cu3s", ids=(0, "2-4")),),
        val=(Selector(kind=SelectorKind.GLOB, pattern="day2/*"),),
        test=(
            Selector(
                kind=SelectorKind.EXCEPT,
                of=(Selector(kind=SelectorKind.ALL), Selector(kind=SelectorKind.STEMS, stems=("x",))),
            ),
        ),
        constraints=(
            Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
            Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),
        ),
    )


#: Written by hand: Cuvis.AI ``json.dumps(cfg.model_dump(mode="json"), indent=2)``.
GOLDEN = """{
  "splits_path": null,
  "universe_hash": "abc123",
  "train": [
    {
      "kind": "file_indices",
      "paths": [],
      "source": "rec/a.cu3s",
      "ids": [
        0,
        "2-4"
      ],
      "stems": [],
      "pattern": null,
      "any_of": [],
      "of": []
    }
  ],
  "val": [
    {
      "kind": "glob",
      "paths": [],
      "source": null,
      "ids": [],
      "stems": [],
      "pattern": "day2/*",
      "any_of": [],
      "of": []
    }
  ],
  "test": [
    {
      "kind": "except",
      "paths": [],
      "source": null,
      "ids": [],
      "stems": [],
      "pattern": null,
      "any_of": [],
      "of": [
        {
          "kind": "all",
          "paths": [],
          "source": null,
          "ids": [],
          "stems": [],
          "pattern": null,
          "any_of": [],
          "of": []
        },
        {
          "kind": "stems",
          "paths": [],
          "source": null,
          "ids": [],
          "stems": [
            "x"
          ],
          "pattern": null,
          "any_of": [],
          "of": []
        }
      ]
    }
  ],
  "predict": [],
  "constraints": [
    {
      "kind": "no_split_overlap",
      "severity": "error"
    },
    {
      "kind": "no_source_overlap",
      "severity": "warn"
    }
  ]
}"""


def test_dumps_splits_matches_the_cuvis_golden_text():
    assert dumps_splits(sample_config()) == GOLDEN


def test_key_order_is_the_cuvis_field_order():
    data = json.loads(dumps_splits(sample_config()))
    assert list(data) == ["splits_path", "universe_hash", "train", "val", "test", "predict", "constraints"]
    assert all(list(sel) == SELECTOR_KEYS for stage in STAGES for sel in data[stage])
    assert list(data["test"][0]["of"][1]) == SELECTOR_KEYS


def test_save_load_round_trip_is_stable(tmp_path):
    cfg = sample_config()
    path = tmp_path / "nested" / "dir" / "splits.json"
    written = save_splits(cfg, path)
    assert Path(written) == path
    first = path.read_bytes()
    assert first == GOLDEN.encode("utf-8")  # no trailing newline
    loaded = load_splits(path)
    assert loaded == cfg
    save_splits(loaded, path)
    assert path.read_bytes() == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["splits.json"]  # no temp file left


def test_splits_path_round_trips(tmp_path):
    cfg = loads_splits(json.dumps({"splits_path": "splits/dinomaly.json", "train": [ALL]}))
    assert cfg.splits_path == "splits/dinomaly.json"
    assert json.loads(dumps_splits(cfg))["splits_path"] == "splits/dinomaly.json"


def test_load_splits_reports_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"splits file not found: .*missing\.json"):
        load_splits(tmp_path / "missing.json")


def test_load_errors_name_the_file(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": [{"kind": "glob", "pattern": "*", "stems": ["a"]}]}))
    with pytest.raises(SplitConfigError,
                       match=rf"^{re.escape(str(path))}: train\[0\]: selector kind 'glob' must not set"):
        load_splits(path)


def test_save_and_load_through_an_fsspec_url():
    url = f"memory://kuration-test-{uuid.uuid4().hex}/splits.json"
    try:
        save_splits(sample_config(), url)
        with fsspec.open(url, "rb") as handle:
            assert handle.read() == GOLDEN.encode("utf-8")
        assert load_splits(url) == sample_config()
    finally:
        fs, path = fsspec.core.url_to_fs(url)
        fs.rm(path.rsplit("/", 1)[0], recursive=True)


# -- a Cuvis.AI-authored file ------------------------------------------------------------


@pytest.fixture
def cuvis_universe(tmp_path):
    """20 samples, in canonical order (the position of each is its dir_indices number):

    0-5 day1/a#0-5, 6-9 day1/b#0-3, 10-14 day2/c#0-4, 15-16 day2/d#0-1, 17-19 day3/e#0-2.
    """
    path = tmp_path / "universe.csv"
    path.write_text(
        "source,index\n"
        "day3\\e.cu3s,0-2\n"
        "day2/c.cu3s,0-4\n"
        "day1/b.cu3s,0-3\n"
        "day2/d.cu3s,1\n"
        "day1/a.cu3s,0-5\n"
        "day2/d.cu3s,0\n"
    )
    return read_universe_csv(path)


def test_the_cuvis_fixture_has_the_full_model_dump_shape():
    text = (DATA / "cuvis_authored_splits.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert list(data) == ["splits_path", "universe_hash", "train", "val", "test", "predict", "constraints"]
    assert data["splits_path"] is None

    def walk(sel):
        yield sel
        for child in sel["of"]:
            yield from walk(child)

    kinds = set()
    for stage in STAGES:
        for top in data[stage]:
            for sel in walk(top):
                assert list(sel) == SELECTOR_KEYS
                kinds.add(sel["kind"])
    assert {"union", "except", "intersect", "files", "file_indices", "stems", "glob", "dir_indices", "all"} <= kinds
    # our writer reproduces the Cuvis.AI text byte for byte
    assert dumps_splits(loads_splits(text)) == text


def test_the_cuvis_fixture_resolves_to_the_hand_worked_stages(cuvis_universe):
    cfg = load_splits(DATA / "cuvis_authored_splits.json")
    assert cfg.constraints == (
        Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity.ERROR),
        Constraint(ConstraintKind.NO_SOURCE_OVERLAP, ConstraintSeverity.WARN),
    )
    assert cfg.universe_hash == cuvis_universe.hash
    assert not cfg.is_baked  # live selectors remain
    resolution = plan_splits(cfg, cuvis_universe)
    assert resolution.drift.status == "match"
    stages = {stage: cuvis_universe.uids(resolution.positions[stage]) for stage in STAGES}

    # train[0] union: a#0,2,3,4 then stems ["c"]; train[1] except: glob day1/* (a then b,
    # in universe order) minus files [a] minus b#3
    assert stages["train"] == [
        "day1/a.cu3s#0", "day1/a.cu3s#2", "day1/a.cu3s#3", "day1/a.cu3s#4",
        "day2/c.cu3s#0", "day2/c.cu3s#1", "day2/c.cu3s#2", "day2/c.cu3s#3", "day2/c.cu3s#4",
        "day1/b.cu3s#0", "day1/b.cu3s#1", "day1/b.cu3s#2",
    ]
    # intersect keeps the left operand's order: dir_indices 19, 15, 16, 17, 5 -> e#2, d#0, d#1,
    # e#0, a#5; the right operand (glob *d | e#1-2 | a#5) drops e#0
    assert stages["val"] == ["day3/e.cu3s#2", "day2/d.cu3s#0", "day2/d.cu3s#1", "day1/a.cu3s#5"]
    # b#3; then all minus (day1/* | day2/*) minus e#2 -> e#0, e#1; then dir_indices "1-1" -> a#1
    assert stages["test"] == ["day1/b.cu3s#3", "day3/e.cu3s#0", "day3/e.cu3s#1", "day1/a.cu3s#1"]
    # empty predict is the whole universe, in canonical order
    assert stages["predict"] == cuvis_universe.uids()
    assert len(stages["predict"]) == 20

    # train / val / test share no sample; three recordings span stages (a warn-level finding)
    exclusive = [set(stages[s]) for s in ("train", "val", "test")]
    assert not (exclusive[0] & exclusive[1]) and not (exclusive[0] & exclusive[2]) and not (exclusive[1] & exclusive[2])
    by_kind = {r.kind: r for r in resolution.leakage.results}
    # no sample is shared, but by group (the source, by default) the three recordings leak:
    # every sample of theirs in train/val/test is an offender (Cuvis.AI, group-blind, sees none)
    spanning = {"day1/a.cu3s", "day1/b.cu3s", "day3/e.cu3s"}
    leaking = sorted(u for s in ("train", "val", "test") for u in stages[s] if u.split("#")[0] in spanning)
    assert by_kind["no_split_overlap"].status == "violated" and by_kind["no_split_overlap"].group_count == 3
    assert list(by_kind["no_split_overlap"].offending) == leaking and by_kind["no_split_overlap"].count == 13
    assert by_kind["no_source_overlap"].status == "violated"
    assert by_kind["no_source_overlap"].severity == "warn"
    assert list(by_kind["no_source_overlap"].offending) == ["day1/a.cu3s", "day1/b.cu3s", "day3/e.cu3s"]


def test_the_cuvis_fixture_refuses_a_changed_universe(tmp_path):
    # the fixture pins a hash and still holds dir_indices: one more sample shifts positions
    path = tmp_path / "universe.csv"
    path.write_text("source,index\nday1/a.cu3s,0-6\nday1/b.cu3s,0-3\nday2/c.cu3s,0-4\nday2/d.cu3s,0-1\nday3/e.cu3s,0-2\n")
    cfg = load_splits(DATA / "cuvis_authored_splits.json")
    with pytest.raises(UniverseDriftError,
                       match=r"universe changed since splits\.json was committed \(expected 5683753ca883\.\.\."):
        plan_splits(cfg, read_universe_csv(path))


def test_null_constraints_are_rejected_not_read_as_the_default():
    with pytest.raises(SplitConfigError,
                       match=r"'constraints' must be a list \(use \[\] to declare no checks\), got null"):
        DataSplitConfig.from_dict({"constraints": None})


def test_empty_strings_are_accepted_and_match_nothing_as_in_cuvis():
    # Cuvis.AI loads these; refusing them would make a file it accepts fail here
    sel = Selector.from_dict({"kind": "except", "of": [{"kind": "all"}, {"kind": "files", "paths": [""]}]})
    assert sel.of[1].paths == ("",)
    assert Selector(kind="stems", stems=("",)).stems == ("",)
