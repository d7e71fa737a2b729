"""schema.json, strategy.json and output_spec.json from careless or hostile hands: every
refusal is the file's own error, names the file and the key, and nothing else escapes
(no OverflowError from a 400-digit number, no silent last-wins duplicate key, no
RecursionError from deep nesting)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.errors import KurationError
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.sources.schema import Schema, SchemaError
from kuration.scoring.segments import Segmenter, SegmenterError
from kuration.landing.settings import load_curation_settings, load_output_spec
from kuration.scoring.strategy import Strategy, StrategyError
from tests.hostile import FUZZ, json_texts, mutated

SCHEMA = {
    "sample_hz": 10, "time": "t", "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
    "globals": {"wind": {"dtype": "float32"}},
    "media": {"cam": {"dtype": "uint8", "shape": [4, 4, 3], "provider": "npy_index"}},
    "tags": "events",
}
STRATEGY = {
    "name": "fast", "method": "inclusion", "priority": {"speed.mean": 1.0, "tag.brake": 0.5},
    "predicates": [{"feature": "speed.max", "op": ">", "value": 2}], "tags": ["brake"],
    "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": 1.5},
}
SPEC = {
    "shard_length": 8, "short_policy": "pad", "container": "npz", "presence_mask": True,
    "modalities": {"pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                   "frame": {"dtype": "uint8", "shape": [4, 4, 3], "source": "media:cam"},
                   "label": {"dtype": "int64", "shape": [], "source": "segment:speed.mean"}},
}
SEGMENTER = {"window": 2.0, "stride": 1.0, "unit": "seconds", "sample_hz": 10}


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


@pytest.fixture
def files(tmp_path):
    return (write(tmp_path / "schema.json", json.dumps(SCHEMA)),
            write(tmp_path / "strategy.json", json.dumps(STRATEGY)),
            write(tmp_path / "output_spec.json", json.dumps(SPEC)))


def load_all(schema: Path, strategy: Path, spec: Path) -> OutputSpec:
    settings = load_curation_settings(schema, strategy, window=2, stride=1)
    return load_output_spec(spec, settings.schema)


def test_valid_files_load(files):
    assert load_all(*files).shard_length == 8


# -- regressions: each of these raised OverflowError, was taken last-wins, or hit the recursion limit

FILE_CASES = [
    # (which file, its text, the error class, what the message must say)
    ("schema", json.dumps(SCHEMA).replace('"sample_hz": 10', '"sample_hz": ' + "9" * 400), SchemaError,
     r"schema\.json: not a valid schema: not valid JSON \(integer 9{24}\.\.\. is outside the signed 64-bit range\)"),
    ("schema", json.dumps(SCHEMA).replace('"sample_hz": 10', '"sample_hz": 1e999'), SchemaError,
     r"schema\.json: .*number 1e999 is beyond the float range"),
    ("schema", json.dumps(SCHEMA).replace('"sample_hz": 10', '"sample_hz": 10, "sample_hz": 20'), SchemaError,
     r"schema\.json: .*duplicate key 'sample_hz'"),
    ("schema", json.dumps(SCHEMA)[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}", SchemaError,
     r"schema\.json: .*nested deeper than 64 levels"),
    ("schema", json.dumps(SCHEMA).replace('"sample_hz": 10', '"sample_hz": 5e300'), SchemaError,
     r"schema\.json: schema\.sample_hz: 5e\+300 Hz is outside the supported range"),
    ("schema", json.dumps(SCHEMA).replace('"shape": [3]', '"shape": [65536, 65536]', 1), SchemaError,
     r"schema\.json: schema\.fields\.pos\.shape: \[65536, 65536\] holds more than 2147483647 values per row"),
    ("schema", "[1, 2]", SchemaError, r"schema\.json: schema must be a JSON object, found list"),
    ("strategy", json.dumps(STRATEGY).replace('"speed.mean": 1.0', '"speed.mean": ' + "1" * 400), StrategyError,
     r"strategy\.json: .*outside the signed 64-bit range"),
    ("strategy", json.dumps(STRATEGY).replace('"speed.mean": 1.0', '"speed.mean": 1e400'), StrategyError,
     r"strategy\.json: .*beyond the float range"),
    ("strategy", json.dumps(STRATEGY).replace('"method": "inclusion"', '"method": "inclusion", "method": "filter"'),
     StrategyError, r"strategy\.json: .*duplicate key 'method'"),
    ("strategy", json.dumps(STRATEGY).replace('"speed.mean": 1.0', '"speed.mean": "1"'), StrategyError,
     r"strategy\.json: strategy\.priority\['speed\.mean'\]: weight must be a finite number, got '1'"),
    ("spec", json.dumps(SPEC).replace('"shard_length": 8', '"shard_length": 8, "shard_length": 64'), OutputSpecError,
     r"output_spec\.json: .*duplicate key 'shard_length'"),
    ("spec", json.dumps(SPEC).replace('"shard_length": 8', '"shard_length": 1e999'), OutputSpecError,
     r"output_spec\.json: .*beyond the float range"),
    ("spec", json.dumps(SPEC).replace('"shard_length": 8', '"shard_length": 1000000000000'), OutputSpecError,
     r"output_spec\.json: output\.shard_length: 1000000000000 timesteps; a shard holds at most 16777216"),
    ("spec", "[" * 100_000, OutputSpecError, r"output_spec\.json: .*nested deeper than 64 levels"),
]


@pytest.mark.parametrize(("which", "text", "error", "message"), FILE_CASES,
                         ids=[f"{w}-{m[:40]}" for w, _, _, m in FILE_CASES])
def test_a_hostile_settings_file_is_refused_naming_the_file(files, which, text, error, message):
    schema, strategy, spec = files
    write({"schema": schema, "strategy": strategy, "spec": spec}[which], text)
    with pytest.raises(error, match=message):
        load_all(schema, strategy, spec)


def test_an_unreadable_settings_file_is_the_files_error(files, tmp_path):
    schema, strategy, spec = files
    with pytest.raises(StrategyError, match=r"strategy not found: .*nowhere\.json"):
        load_curation_settings(schema, tmp_path / "nowhere.json", window=2, stride=1)
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(SchemaError, match=r"folder\.json: cannot read the schema: .*Is a directory"):
        load_curation_settings(tmp_path / "folder.json", strategy, window=2, stride=1)


DICT_CASES = [
    # dicts built in Python reach from_dict without the strict reader
    (Schema.from_dict, {**SCHEMA, "sample_hz": 10**400}, SchemaError,
     r"^schema\.sample_hz: must be a positive number \(ticks per second\), got 1000"),
    (Schema.from_dict, {**SCHEMA, "sample_hz": 10**5000}, SchemaError, r"got <int too large to show>"),
    (Schema.from_dict, {**SCHEMA, "sample_hz": 0.5e-6}, SchemaError, r"^schema\.sample_hz: 5e-07 Hz is outside"),
    (Schema.from_dict, {**SCHEMA, 1: 2, None: 3}, SchemaError, r"^schema: unknown key\(s\) \[1, None\]"),
    (Schema.from_dict, {**SCHEMA, "fields": {"pos": {"dtype": "float32", "shape": [1] * 33}}}, SchemaError,
     r"^schema\.fields\.pos\.shape: 33 dimensions; at most 32 are allowed"),
    (Schema.from_dict, {**SCHEMA, "fields": {10**5000: {"dtype": "float32"}}}, SchemaError,
     r"^schema\.fields: key <int too large to show>: must name a column"),
    (Strategy.from_dict, {**STRATEGY, "priority": {"speed.mean": 10**400}}, StrategyError,
     r"^strategy\.priority\['speed\.mean'\]: weight must be a finite number"),
    (Strategy.from_dict, {**STRATEGY, "predicates": [{"feature": "speed.max", "op": ">", "value": -(10**400)}]},
     StrategyError, r"^strategy\.predicates\[0\]\.value: must be a finite number"),
    (Strategy.from_dict, {**STRATEGY, "selection": {"max_group_overshoot": 10**400}}, StrategyError,
     r"^strategy\.selection\.max_group_overshoot: must be a number >= 1 or null"),
    (Strategy.from_dict, {**STRATEGY, "priority": {"speed[" + "1" * 5000 + "].mean": 1}}, StrategyError,
     r"^strategy\.priority\['speed\[1111.*feature key .*component index in .* is too large \(at most 9 digits\)"),
    (OutputSpec.from_dict, {**SPEC, "shard_length": 10**30}, OutputSpecError,
     r"^output\.shard_length: 1000.*timesteps; a shard holds at most 16777216"),
    (OutputSpec.from_dict, {**SPEC, 1: 2, "x": 3}, OutputSpecError, r"^output: unknown key\(s\) \['x', 1\]"),
    (OutputSpec.from_dict, {**SPEC, "short_policy": ["keep"]}, OutputSpecError,
     r"^output\.short_policy: must be one of"),
    (OutputSpec.from_dict, {**SPEC, "modalities": {"pos": {"dtype": __import__("numpy").dtype("float32"), "shape": [3],
                                                           "source": "field:pos"}}}, OutputSpecError,
     r"^output\.modalities\.pos\.dtype: must be one of .*got dtype\('float32'\)"),
    (OutputSpec.from_dict,
     {**SPEC, "modalities": {"pos": {"dtype": "float32", "shape": [2**31], "source": "field:pos"}}},
     OutputSpecError, r"^output\.modalities\.pos\.shape: \[2147483648\] holds more than 2147483647 values per row"),
    (Segmenter.from_dict, {**SEGMENTER, "window": 10**400}, SegmenterError,
     r"^Segmenter\.window: must be a positive number of seconds"),
    (Segmenter.from_dict, {"window": 1e300, "stride": 1, "sample_hz": 1e6}, SegmenterError,
     r"^Segmenter\.window: 1e\+300 s at 1e\+06 Hz is more than 2147483647 steps"),
    (Segmenter.from_dict, {"window": 1e300, "stride": 1, "unit": "steps"}, SegmenterError,
     r"^Segmenter\.window: 1e\+300 steps; at most 2147483647 are allowed"),
]


@pytest.mark.parametrize(("build", "data", "error", "message"), DICT_CASES,
                         ids=[f"{b.__qualname__}-{m[:40]}" for b, _, _, m in DICT_CASES])
def test_a_hostile_dict_is_refused_naming_the_key(build, data, error, message):
    with pytest.raises(error, match=message):
        build(data)


# -- fuzz: only the documented error of each parser escapes


PARSERS = [(Schema.from_dict, SCHEMA, SchemaError), (Strategy.from_dict, STRATEGY, StrategyError),
           (OutputSpec.from_dict, SPEC, OutputSpecError), (Segmenter.from_dict, SEGMENTER, SegmenterError)]


@pytest.mark.parametrize(("build", "base", "error"), PARSERS, ids=[b.__qualname__ for b, _, _ in PARSERS])
@FUZZ
@given(data=st.data())
def test_from_dict_raises_only_its_own_error(build, base, error, data):
    value = data.draw(mutated(base, python=True))
    try:
        build(value)
    except error as exc:
        assert str(exc)


@pytest.mark.parametrize(("which", "base"), [("schema", SCHEMA), ("strategy", STRATEGY), ("spec", SPEC)])
@FUZZ
@given(data=st.data())
def test_settings_files_raise_only_documented_errors(tmp_path_factory, which, base, data):
    root = tmp_path_factory.mktemp("settings")
    paths = {"schema": write(root / "schema.json", json.dumps(SCHEMA)),
             "strategy": write(root / "strategy.json", json.dumps(STRATEGY)),
             "spec": write(root / "output_spec.json", json.dumps(SPEC))}
    write(paths[which], data.draw(json_texts(base)))
    try:
        load_all(paths["schema"], paths["strategy"], paths["spec"])
    except KurationError as exc:
        # the file's own error names it; a valid but different schema may make the others fail
        # against it, and then they name themselves
        assert re.search(r"(schema|strategy|output_spec)\.json", str(exc)) or isinstance(exc, SegmenterError), exc
