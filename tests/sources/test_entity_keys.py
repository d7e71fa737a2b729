"""parse_entity_key: the inverse of entity_key on every key the encoder writes, and a clear
EntityIdError on anything else."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kuration
from kuration.sources.entities import MAX_KEY_DEPTH, EntityIdError, entity_key, parse_entity_key

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text() | st.binary())
IDS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4).map(tuple) | st.frozensets(inner, max_size=4),
                   max_leaves=12)
NUMPY = (st.integers(-2**63, 2**63 - 1).map(np.int64) | st.integers(0, 255).map(np.uint8) | st.booleans().map(np.bool_)
         | st.floats(allow_nan=False, allow_infinity=False, width=32).map(np.float32))


def same(a, b) -> bool:
    """Equal and of the same type all the way down (1, True and 1.0 differ). A float zero is
    one entity whatever its sign (see kuration.sources.entities), so it comes back as 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == (1.0 if b == 0.0 else math.copysign(1.0, b))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, frozenset):
        return sorted(entity_key(x) for x in a) == sorted(entity_key(y) for y in b)
    return a == b


@settings(max_examples=400, deadline=None)
@given(IDS)
def test_parse_inverts_entity_key(entity):
    key = entity_key(entity)
    value = parse_entity_key(key)
    assert same(value, entity) and entity_key(value) == key


@settings(max_examples=100, deadline=None)
@given(NUMPY)
def test_numpy_scalars_come_back_as_the_python_value_they_held(entity):
    value = parse_entity_key(entity_key(entity))
    assert same(value, entity.item())


@settings(max_examples=400, deadline=None)
@given(IDS, st.data())
def test_a_mangled_key_parses_to_exactly_itself_or_raises_entity_id_error(entity, data):
    key = entity_key(entity)
    at = data.draw(st.integers(0, len(key)))
    mangled = data.draw(st.sampled_from([key[:at] + key[at + 1:], key[:at] + data.draw(st.characters()) + key[at:],
                                         key[:at]]))
    try:
        value = parse_entity_key(mangled)
    except EntityIdError as exc:
        assert repr(mangled)[:20] in str(exc)
    else:
        assert entity_key(value) == mangled


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_parses_to_exactly_itself_or_raises_entity_id_error(text):
    try:
        value = parse_entity_key(text)
    except EntityIdError:
        return
    assert entity_key(value) == text


@pytest.mark.parametrize("key, message", [
    ("5", r"entity key '5', character 0: expected '<type>:<value>'; an entity key is what kuration.entity_key writes"),
    ("car:5", r"character 0: unknown type 'car'; one of \['bool', 'bytes', 'float', 'frozenset', 'int'"),
    ("int:", r"character 4: expected an integer"),
    ("int:5 ", r"character 5: unexpected text after the key"),
    ("int:05", r"not in canonical form; the same id is written 'int:5'"),
    ("int:1_000", r"character 5: unexpected text after the key"),
    ("float:nan", r"character 6: expected a finite float"),
    ("float:1e999", r"character 6: 1e999 is out of float range"),
    ("int:" + "9" * 5000, r"character 4: not an integer \(Exceeds the limit"),
    ("bool:true", r"character 5: bool must be True or False"),
    ("str:'a", r"character 4: unterminated str literal"),
    ("str:a", r"character 4: expected a quoted str literal"),
    ("bytes:'a'", r"character 6: expected a bytes literal"),
    ("str:'\\x'", r"character 4: not a valid str literal"),
    ("str:'\\c'", r"character 4: not a valid str literal \(invalid escape sequence"),
    ("tuple:(int:1,)", r"character 13: expected '<type>:<value>'"),
    ("tuple:(int:1;int:2)", r"character 12: expected ',' or '\)'"),
    ("frozenset:{int:2,int:1}", r"not in canonical form; the same id is written 'frozenset:\{int:1,int:2\}'"),
    ("tuple:(" * (MAX_KEY_DEPTH + 2) + "int:1" + ")" * (MAX_KEY_DEPTH + 2), r"nested more than 64 levels deep"),
])
def test_malformed_keys_are_refused_saying_what_and_where(key, message):
    with pytest.raises(EntityIdError, match=message):
        parse_entity_key(key)


def test_a_non_string_is_refused():
    with pytest.raises(EntityIdError, match=r"entity key 5: must be a str .* got int"):
        parse_entity_key(5)


def test_the_parser_is_public():
    assert kuration.parse_entity_key is parse_entity_key and "parse_entity_key" in kuration.__all__
    assert kuration.parse_entity_key("tuple:(str:'veh',int:3)") == ("veh", 3)
