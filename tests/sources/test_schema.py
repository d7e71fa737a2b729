"""Schema.from_dict: a valid declaration round-trips; every invalid one names its key."""

from __future__ import annotations

import copy
import re

import pytest

from kuration.sources.schema import Schema, SchemaError

VALID = {
    "sample_hz": 10,
    "time": "t",
    "time_unit": "ticks",
    "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
    "globals": {"light": {"dtype": "int8"}},
    "media": {"cam": {"dtype": "uint8", "shape": [4, 4, 3], "provider": "npy_index"}},
    "tags": "events",
}


def with_(path: str, value, base=VALID) -> dict:
    """A copy of ``base`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    data = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return data


def test_valid_schema_builds_and_round_trips():
    schema = Schema.from_dict(VALID)
    assert schema.sample_hz == 10.0 and schema.entity == "agent" and schema.tags == "events"
    assert schema.fields["pos"].shape == (3,) and schema.fields["speed"].shape == ()
    assert list(schema.all_fields()) == ["pos", "speed", "light"]
    assert schema.media["cam"].provider == "npy_index"
    again = Schema.from_dict(schema.to_dict())
    assert again == schema and again.fingerprint() == schema.fingerprint()


def test_minimal_schema_is_single_entity_in_ticks():
    schema = Schema.from_dict({"sample_hz": 2.5, "time": "t", "fields": {"x": {"dtype": "bool", "shape": 2}}})
    assert (schema.entity, schema.time_unit, schema.globals, schema.media, schema.tags) == (None, "ticks", {}, {}, None)
    assert schema.fields["x"].shape == (2,)  # an int is shorthand for a 1-D shape
    assert Schema.from_dict(schema.to_dict()) == schema


def test_fingerprint_changes_with_any_declaration():
    base = Schema.from_dict(VALID).fingerprint()
    assert Schema.from_dict(with_("fields.pos.dtype", "float64")).fingerprint() != base
    assert Schema.from_dict(with_("sample_hz", 20)).fingerprint() != base
    assert Schema.from_dict(with_("media.cam.provider", "zarr_rows")).fingerprint() != base


BAD = [
    # (dotted path, value (... deletes), the key the message must name, a hint of what is wrong)
    ("smaple_hz", 10, "schema", r"unknown key\(s\) \['smaple_hz'\]"),
    ("sample_hz", ..., "schema.sample_hz", "positive number"),
    ("sample_hz", 0, "schema.sample_hz", "got 0"),
    ("sample_hz", -5, "schema.sample_hz", "got -5"),
    ("sample_hz", float("nan"), "schema.sample_hz", "got nan"),
    ("sample_hz", True, "schema.sample_hz", "got True"),
    ("sample_hz", "10", "schema.sample_hz", "got '10'"),
    ("time", ..., "schema.time", "must name the time column"),
    ("time", "", "schema.time", "non-empty string"),
    ("time_unit", "ms", "schema.time_unit", r"\['ticks', 'seconds'\], got 'ms'"),
    ("entity", 3, "schema.entity", "got 3"),
    ("tags", "", "schema.tags", "non-empty string"),
    ("fields", ..., "schema.fields", "at least one field"),
    ("fields", {}, "schema.fields", "non-empty mapping"),
    ("fields", ["pos"], "schema.fields", "non-empty mapping"),
    ("fields.pos", "float32", "schema.fields.pos", "must be a mapping"),
    ("fields.pos.units", "m", "schema.fields.pos", r"unknown key\(s\) \['units'\]; valid keys: \['dtype', 'shape'\]"),
    ("fields.pos.dtype", "float", "schema.fields.pos.dtype", "got 'float'"),
    ("fields.pos.dtype", ["float32"], "schema.fields.pos.dtype", r"got \['float32'\]"),
    ("fields.pos.dtype", ..., "schema.fields.pos.dtype", "got None"),
    ("fields.pos.shape", [0], "schema.fields.pos.shape", "positive ints"),
    ("fields.pos.shape", [3, -1], "schema.fields.pos.shape", "positive ints"),
    ("fields.pos.shape", "3", "schema.fields.pos.shape", "got '3'"),
    ("fields.pos.shape", [1.5], "schema.fields.pos.shape", "positive ints"),
    ("fields.pos.shape", [True], "schema.fields.pos.shape", "positive ints"),
    ("globals", 5, "schema.globals", "mapping"),
    ("globals.light.dtype", "str", "schema.globals.light.dtype", "got 'str'"),
    ("media", [], "schema.media", "mapping"),
    ("media.cam", "frames", "schema.media.cam", "must be a mapping"),
    ("media.cam.provider", ..., "schema.media.cam.provider", "registered media provider"),
    ("media.cam.provider", "", "schema.media.cam.provider", "registered media provider"),
    ("media.cam.shape", ..., "schema.media.cam.shape", "media must have a shape"),
    ("media.cam.shape", [], "schema.media.cam.shape", "media must have a shape"),
    ("media.cam.dtype", "object", "schema.media.cam.dtype", "got 'object'"),
    ("media.cam.codec", "png", "schema.media.cam",
     r"unknown key\(s\) \['codec'\]; valid keys: \['dtype', 'shape', 'provider'\]"),
]


@pytest.mark.parametrize(("path", "value", "key", "hint"), BAD, ids=[f"{p}={v!r}" for p, v, _, _ in BAD])
def test_every_error_names_its_key(path, value, key, hint):
    with pytest.raises(SchemaError, match=rf"^{re.escape(key)}: .*{hint}"):
        Schema.from_dict(with_(path, value))


def test_not_a_mapping():
    with pytest.raises(SchemaError, match=r"^schema: expected a mapping, got list"):
        Schema.from_dict([("sample_hz", 10)])


def test_field_names_must_be_strings():
    with pytest.raises(SchemaError, match=r"^schema\.fields: key 5: must name a column"):
        Schema.from_dict(with_("fields", {5: {"dtype": "float32"}}))
    with pytest.raises(SchemaError, match=r"^schema\.media: key '': must name a column"):
        Schema.from_dict(with_("media", {"": {"dtype": "uint8", "shape": [1], "provider": "npy_index"}}))


@pytest.mark.parametrize(
    ("path", "value", "keys"),
    [
        ("globals.pos", {"dtype": "float32"}, "'pos' at schema.fields.pos and schema.globals.pos"),
        ("media.speed", {"dtype": "uint8", "shape": [1], "provider": "npy_index"},
         "'speed' at schema.fields.speed and schema.media.speed"),
        ("time", "agent", "'agent' at schema.time and schema.entity"),
        ("tags", "light", "'light' at schema.globals.light and schema.tags"),
        ("entity", "pos", "'pos' at schema.entity and schema.fields.pos"),
    ],
)
def test_duplicate_column_names_across_sections_name_both_keys(path, value, keys):
    with pytest.raises(SchemaError, match=re.escape(keys)):
        Schema.from_dict(with_(path, value))
