"""OutputSpec: validation names the key, the schema check, and shard chunking per short policy."""

import pytest

from kuration.budget import ShardChunking
from kuration.output import OutputSpec, OutputSpecError
from tests.output.drone_track import SCHEMA

GOOD = {
    "shard_length": 8, "short_policy": "pad", "container": "npz",
    "modalities": {
        "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
        "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
        "frame": {"dtype": "uint8", "shape": [4, 5, 3], "source": "media:frame"},
        "label": {"dtype": "int64", "shape": [], "source": "segment:label"},
        "act": {"dtype": "int64", "shape": [2], "source": "encoder:act"},
    },
}


def test_a_valid_spec_round_trips_and_sorts_its_modalities():
    spec = OutputSpec.from_dict(GOOD)
    assert list(spec.modalities) == ["act", "battery", "frame", "label", "pos"]
    assert spec.modalities["frame"].shape == (4, 5, 3) and spec.modalities["label"].kind == "segment"
    assert OutputSpec.from_dict(spec.to_dict()) == spec
    assert spec.presence_mask is True and spec.chunking == ShardChunking(8, "pad")
    assert spec.validate_against(SCHEMA) is spec
    assert len(spec.fingerprint()) == 64 and spec.fingerprint() == OutputSpec.from_dict(GOOD).fingerprint()


def _with(**changes):
    data = {**GOOD, "modalities": dict(GOOD["modalities"])}
    for key, value in changes.items():
        if key.startswith("m_"):
            name, field = key[2:].split("__")
            data["modalities"][name] = {**data["modalities"][name], field: value}
        else:
            data[key] = value
    return data


@pytest.mark.parametrize("data, message", [
    (_with(shard_length=0), "output.shard_length: required, a positive whole number"),
    (_with(shard_length=True), "output.shard_length"),
    (_with(short_policy="trim"), r"output.short_policy: must be one of \['keep', 'pad', 'drop'\]"),
    (_with(container="tar"), "output.container: must be one of"),
    (_with(presence_mask="yes"), "output.presence_mask: must be true or false"),
    (_with(modalities={}), "output.modalities: required"),
    (_with(m_pos__dtype="float128"), "output.modalities.pos.dtype: must be one of"),
    (_with(m_pos__shape=[0]), "output.modalities.pos.shape: must be a list of positive integers"),
    (_with(m_pos__source="pos"), "output.modalities.pos.source: must be '<kind>:<name>'"),
    (_with(m_pos__source="column:pos"), "output.modalities.pos.source: kind 'column' is not one of"),
    (_with(m_pos__source="field:"), "names nothing after 'field:'"),
    ({**GOOD, "shards": 3}, r"output: unknown key\(s\) \['shards'\]"),
    ({**GOOD, "modalities": {"_present": {"dtype": "bool", "shape": [], "source": "field:pos"}}}, "reserved"),
    ({**GOOD, "modalities": {"pos": {"dtype": "float32", "shape": [3]}}}, "output.modalities.pos.source: required"),
    ({**GOOD, "modalities": {"pos": {"dtype": "float32", "shape": [3], "source": "field:pos", "x": 1}}},
     r"output.modalities.pos: unknown key\(s\) \['x'\]; valid keys: \['dtype', 'shape', 'source'\]$"),
])
def test_invalid_specs_name_the_key(data, message):
    with pytest.raises(OutputSpecError, match=message):
        OutputSpec.from_dict(data)


@pytest.mark.parametrize("change, message", [
    ({"m_pos__source": "field:speed"},
     r"schema has no field or global 'speed'; it has \['battery', 'gear', 'pos', 'wind'\]"),
    ({"m_frame__source": "media:depth"}, "schema has no media column 'depth'"),
    ({"m_pos__shape": [2]}, r"output.modalities.pos.shape: \[2\], but field:pos is \[3\] in the schema"),
    ({"m_battery__dtype": "int32"}, "output.modalities.battery.dtype: int32 cannot hold field:battery \\(float64\\)"),
])
def test_the_schema_check_names_the_modality(change, message):
    with pytest.raises(OutputSpecError, match=message):
        OutputSpec.from_dict(_with(**change)).validate_against(SCHEMA)


def test_same_kind_casts_are_allowed():
    spec = OutputSpec.from_dict(_with(m_battery__dtype="float16", m_pos__dtype="float64"))
    spec.validate_against(SCHEMA)
    gear = OutputSpec.from_dict({"shard_length": 4,
                                 "modalities": {"g": {"dtype": "float32", "shape": [], "source": "field:gear"}}})
    gear.validate_against(SCHEMA)  # int into float is the same kind family (safe widening)


@pytest.mark.parametrize("policy, steps, expected", [
    ("keep", 20, [(0, 8), (8, 16), (16, 20)]),
    ("pad", 20, [(0, 8), (8, 16), (16, 20)]),
    ("drop", 20, [(0, 8), (8, 16)]),
    ("drop", 7, []),
    ("keep", 16, [(0, 8), (8, 16)]),
    ("keep", 0, []),
])
def test_shards_follow_the_short_policy(policy, steps, expected):
    spec = OutputSpec.from_dict(_with(short_policy=policy))
    assert spec.shards_for(steps) == expected
    assert spec.shard_rows(4) == (8 if policy == "pad" else 4)
