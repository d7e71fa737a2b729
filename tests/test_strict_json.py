"""The strict JSON reader every Kuration input file goes through."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.canonical.strict_json import MAX_DEPTH, parse_strict_json


class FileError(ValueError):
    pass


def parse(data: bytes | str):
    return parse_strict_json(data, where="in.json", what="test file", error=FileError)


@pytest.mark.parametrize(("text", "reason"), [
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"x": {"b": [], "b": []}}', "duplicate key 'b'"),
    ("[NaN]", "non-finite number NaN"),
    ('{"w": Infinity}', "non-finite number Infinity"),
    ("[-Infinity]", "non-finite number -Infinity"),
    ("1e999", "beyond the float range"),
    ("-1e400", "beyond the float range"),
    ("9223372036854775808", "outside the signed 64-bit range"),
    ("-9223372036854775809", "outside the signed 64-bit range"),
    ("1" * 400, "outside the signed 64-bit range"),
    ("1" * 5000, "outside the signed 64-bit range"),
    ("[" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ("{", "Expecting property name"),
    ("", "Expecting value"),
])
def test_refusals_name_the_file_and_the_reason(text: str, reason: str) -> None:
    with pytest.raises(FileError, match=r"^in\.json: not a valid test file \(.*") as info:
        parse(text)
    assert reason in str(info.value)


def test_invalid_utf8_is_refused_with_the_byte_offset() -> None:
    with pytest.raises(FileError, match="not UTF-8 text: .* at byte 2"):
        parse(b'{"\xff": 1}')


def test_ordinary_documents_parse_as_plain_json_does() -> None:
    text = '{"b": [1, 2.5, -0.0, null, true, "x"], "a": {"é": 9223372036854775807, "n": -9223372036854775808}}'
    assert parse(text) == json.loads(text)
    assert parse(text.encode()) == json.loads(text)
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse(nested) == json.loads(nested)


def test_a_byte_order_mark_is_not_content() -> None:
    assert parse(b"\xef\xbb\xbf" + b'{"a": 1}') == {"a": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_round_trip_of_valid_values(value) -> None:
    assert parse(json.dumps(value)) == value


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200) | st.text(alphabet='{}[]",:0123456789.eE+-aNIfinty \\u', max_size=80))
def test_arbitrary_input_raises_only_the_callers_error(data) -> None:
    try:
        parse(data)
    except FileError as exc:
        assert str(exc).startswith("in.json: not a valid test file (")


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _ints(value):
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ints(v)]
    if isinstance(value, list):
        return [i for v in value for i in _ints(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


#: Records and lists nested near the depth limit, with integers near and past the int64 range
#: and digit runs inside strings: the shapes the reader's fast paths (records of scalars,
#: integers converted in C unless a long literal may be present) must not change.
edge_values = st.recursive(
    st.integers(-(2**64), 2**64) | st.sampled_from([2**63 - 1, -(2**63), 2**63, 10**30, 0])
    | st.text(alphabet="0123456789ab: ,[", max_size=25) | st.none(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(edge_values, st.integers(0, MAX_DEPTH + 2), st.booleans())
def test_refused_exactly_for_a_long_integer_or_a_depth_past_the_limit(value, wrap, records) -> None:
    for _ in range(wrap):  # wrapped in lists, or in lists of records, to reach the limit
        value = [{"k": value}, {"j": 1}] if records else [value]
    expected_ok = _depth(value) <= MAX_DEPTH and all(-(2**63) <= i < 2**63 for i in _ints(value))
    try:
        parsed = parse(json.dumps(value))
    except FileError as exc:
        assert not expected_ok, exc
    else:
        assert expected_ok and parsed == value


def test_long_digit_runs_inside_strings_are_text() -> None:
    text = '{"sha": "1234567890123456789012345", "id": "-99999999999999999999", "n": [1, 22]}'
    assert parse(text) == json.loads(text)
    records = [{"a": i, "b": "x"} for i in range(3)]
    assert parse(json.dumps([records])) == [records]
    with pytest.raises(FileError, match="outside the signed 64-bit range"):
        parse(json.dumps([{"a": 1}, {"b": 2**63}]))


def test_a_long_integer_after_a_byte_order_mark_is_refused() -> None:
    with pytest.raises(FileError, match="outside the signed 64-bit range"):
        parse(b"\xef\xbb\xbf" + b"12345678901234567890")
