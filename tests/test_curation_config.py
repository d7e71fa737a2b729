"""curation.json: every key, its defaults, its refusals, and the environment overrides that win over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.landing.curation_config import (
    DEFAULTS, CurationConfig, CurationConfigError, apply_env_overrides, curation_config_from_dict,
    curation_config_to_dict, load_curation_config, resolve_in_landing,
)
from kuration.errors import InputError
from tests.hostile import FUZZ, json_texts, mutated

FULL = {
    "plugins": ["team.features", "team.media"],
    "recordings": ".", "media_root": "frames_root", "source_pattern": "*.pq",
    "segment_window": 4, "segment_stride": 2.5, "segment_unit": "seconds", "workers": 3,
    "write_workers": 2, "keep_versions": 5,
    "budget": {"train_hours": 0.25, "val_hours": 0, "test_hours": 0.1, "span_seconds": None},
    "split": {"strategy": "random", "seed": 9, "val_ratio": 0.1, "test_ratio": 0.3, "group_by": "source"},
}


def _write(landing: Path, data) -> Path:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / "curation.json").write_text(json.dumps(data))
    return landing


def test_a_missing_file_means_the_documented_defaults(tmp_path):
    config = load_curation_config(str(tmp_path), environ={})
    assert config == DEFAULTS
    assert (config.budget.train_hours, config.budget.val_hours, config.budget.test_hours) == (4.0, 1.0, 0.5)
    assert config.recordings_url(str(tmp_path)) == str(tmp_path / "recordings")
    assert config.media_root_url(str(tmp_path)) == str(tmp_path / "recordings")  # default: the recordings root


def test_every_key_is_read(tmp_path):
    landing = _write(tmp_path / "lz", FULL)
    config = load_curation_config(str(landing), environ={})
    assert config.plugins == ("team.features", "team.media")
    assert config.recordings_url(str(landing)) == str(landing)  # "." is the landing zone itself
    assert config.media_root_url(str(landing)) == str(landing / "frames_root")
    assert (config.source_pattern, config.segment_window, config.segment_stride, config.workers) == ("*.pq", 4, 2.5, 3)
    assert config.write_workers == 2 and DEFAULTS.write_workers == 1
    assert config.keep_versions == 5 and DEFAULTS.keep_versions == 3
    assert config.budget.span_seconds is None and config.budget.val_hours == 0
    assert (config.split.strategy, config.split.seed, config.split.group_by) == ("random", 9, "source")
    assert config.origin == (str(landing / "curation.json"),)
    # the dict form reads back to the same settings
    assert curation_config_from_dict(curation_config_to_dict(config)) == CurationConfig(**{
        **config.__dict__, "origin": DEFAULTS.origin})


@pytest.mark.parametrize("data, fragment", [
    ({"recordigns": "x"}, "unknown key(s) ['recordigns']"),
    ({"budget": {"train_hour": 1}}, "budget: unknown key(s) ['train_hour']"),
    ({"split": {"sede": 1}}, "split: unknown key(s) ['sede']"),
    ({"workers": 0}, "workers must be between 1 and 4096"),
    ({"workers": 10**6}, "workers must be between 1 and 4096"),
    ({"workers": True}, "workers must be an integer"),
    ({"workers": 2.0}, "workers must be an integer"),
    ({"write_workers": 0}, "write_workers must be between 1 and 4096"),
    ({"write_workers": -1}, "write_workers must be between 1 and 4096"),
    ({"write_workers": False}, "write_workers must be an integer"),
    ({"write_workers": "2"}, "write_workers must be an integer"),
    ({"keep_versions": 0}, "keep_versions must be between 1 and 100000, got 0"),
    ({"keep_versions": 2.5}, "keep_versions must be an integer, got 2.5"),
    ({"keep_versions": None}, "keep_versions must be an integer, got None"),
    ({"segment_window": 0}, "segment_window must be > 0"),
    ({"segment_window": "10"}, "segment_window must be a finite number"),
    ({"segment_unit": "minutes"}, "segment_unit must be one of ['seconds', 'steps']"),
    ({"budget": {"train_hours": -1}}, "budget.train_hours must be >= 0"),
    ({"budget": {"span_seconds": 0}}, "budget.span_seconds must be > 0"),
    ({"budget": []}, "budget must be a JSON object"),
    ({"split": {"strategy": "alphabetical"}}, "split.strategy must be one of"),
    ({"split": {"val_ratio": 0.6, "test_ratio": 0.5}}, "must be < 1 (train gets the rest)"),
    ({"split": {"seed": -1}}, "split.seed must be between 0 and"),
    ({"split": {"strategy": "random", "splits_json": "s.json"}}, "exactly one of strategy or splits_json"),
    ({"plugins": "team.features"}, "plugins must be a list of module names"),
    ({"plugins": ["ok", ""]}, "plugins[1] must be a non-empty string"),
    ({"recordings": ""}, "recordings must be a non-empty string"),
    ({"media_root": 3}, "media_root must be a non-empty string"),
])
def test_a_bad_value_names_the_file_and_the_key(tmp_path, data, fragment):
    landing = _write(tmp_path / "lz", data)
    with pytest.raises(CurationConfigError) as caught:
        load_curation_config(str(landing), environ={})
    assert fragment in str(caught.value)
    assert str(landing / "curation.json") in str(caught.value)
    assert isinstance(caught.value, InputError)


def test_an_int_past_the_float_range_from_python_is_the_settings_error():
    with pytest.raises(CurationConfigError, match="segment_window must be a finite number"):
        curation_config_from_dict({"segment_window": 10**400})


@pytest.mark.parametrize("text, fragment", [
    ('{"workers": 1, "workers": 2}', "duplicate key"),
    ('{"segment_window": NaN}', "non-finite"),
    ("[1, 2]", "must be a JSON object"),
    ("{not json", "not valid JSON"),
])
def test_malformed_files_are_refused_with_the_file_named(tmp_path, text, fragment):
    (tmp_path / "curation.json").write_text(text)
    with pytest.raises(CurationConfigError, match=fragment) as caught:
        load_curation_config(str(tmp_path), environ={})
    assert "curation.json" in str(caught.value)


@FUZZ
@given(json_texts(FULL))
def test_hostile_text_is_refused_or_read_never_a_raw_exception(text):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "curation.json").write_bytes(text)
        try:
            config = load_curation_config(folder, environ={})
        except CurationConfigError:
            return
        assert isinstance(config, CurationConfig)


@FUZZ
@given(st.data())
def test_hostile_dicts_from_python_are_refused_with_the_settings_error(data):
    value = data.draw(mutated(FULL, python=True))
    try:
        config = curation_config_from_dict(value) if isinstance(value, dict) else None
    except CurationConfigError:
        return
    assert config is None or isinstance(config, CurationConfig)


def test_environment_overrides_win_over_the_file_and_are_recorded(tmp_path):
    landing = _write(tmp_path / "lz", FULL)
    environ = {"KURATION_WORKERS": "5", "KURATION_BUDGET_TRAIN_HOURS": "1.5", "KURATION_BUDGET_SPAN_SECONDS": "none",
               "KURATION_SPLIT_SEED": "11", "KURATION_RECORDINGS": "data/recs", "KURATION_UNRELATED": "x",
               "KURATION_WRITE_WORKERS": "3"}
    config = load_curation_config(str(landing), environ=environ)
    assert (config.workers, config.budget.train_hours, config.split.seed) == (5, 1.5, 11)
    assert config.write_workers == 3
    assert config.budget.span_seconds is None
    assert config.recordings_url(str(landing)) == str(landing / "data" / "recs")
    assert config.segment_window == 4  # not overridden: the file's value
    assert config.origin[0] == str(landing / "curation.json")
    assert set(config.origin[1:]) == {"KURATION_WORKERS", "KURATION_BUDGET_TRAIN_HOURS",
                                      "KURATION_BUDGET_SPAN_SECONDS", "KURATION_SPLIT_SEED", "KURATION_RECORDINGS",
                                      "KURATION_WRITE_WORKERS"}


@pytest.mark.parametrize("variable, value, fragment", [
    ("KURATION_WORKERS", "many", "KURATION_WORKERS='many': workers must be a number"),
    ("KURATION_WORKERS", "0", "environment variable KURATION_WORKERS: workers must be between 1 and 4096"),
    ("KURATION_WRITE_WORKERS", "0", "environment variable KURATION_WRITE_WORKERS: write_workers must be between 1"),
    ("KURATION_WRITE_WORKERS", "1.5", "environment variable KURATION_WRITE_WORKERS: write_workers must be an integer"),
    ("KURATION_KEEP_VERSIONS", "0", "environment variable KURATION_KEEP_VERSIONS: keep_versions must be between 1"),
    ("KURATION_BUDGET_VAL_HOURS", "-2", "environment variable KURATION_BUDGET_VAL_HOURS: budget.val_hours"),
    ("KURATION_SPLIT_STRATEGY", "alphabetical", "KURATION_SPLIT_STRATEGY: split.strategy must be one of"),
])
def test_a_bad_override_names_the_variable(variable, value, fragment):
    with pytest.raises(CurationConfigError, match=None) as caught:
        apply_env_overrides(DEFAULTS, {variable: value})
    assert fragment in str(caught.value)


def test_kuration_config_names_another_file_which_must_exist(tmp_path):
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({"workers": 2}))
    _write(tmp_path / "lz", {"workers": 7})
    assert load_curation_config(str(tmp_path / "lz"), environ={"KURATION_CONFIG": str(other)}).workers == 2
    assert load_curation_config(str(tmp_path / "lz"), config_url=str(other), environ={}).workers == 2
    with pytest.raises(CurationConfigError, match="curation settings not found: .*missing.json"):
        load_curation_config(str(tmp_path / "lz"), environ={"KURATION_CONFIG": str(tmp_path / "missing.json")})


def test_a_splits_json_rule_replaces_the_default_computed_split():
    config = curation_config_from_dict({"split": {"splits_json": "rules/split.json"}})
    assert config.split.strategy is None and config.split.splits_json == "rules/split.json"


@pytest.mark.parametrize("value, expected", [
    (".", "/lz"), ("./", "/lz"), ("recordings", "/lz/recordings"), ("a/./b", "/lz/a/b"),
    ("/abs/recs", "/abs/recs"), ("s3://bucket/recs", "s3://bucket/recs"),
])
def test_relative_references_resolve_against_the_landing_zone(value, expected):
    assert resolve_in_landing("/lz", value) == expected


def test_the_rollouts_section_maps_modalities_or_turns_the_store_off():
    config = curation_config_from_dict({"rollouts": {"position": "xyz", "battery": None,
                                                     "state_modalities": ["xyz", "velocity"], "ground_level_m": -5}})
    assert (config.rollouts.position, config.rollouts.battery, config.rollouts.state_modalities) == (
        "xyz", None, ("xyz", "velocity"))
    assert config.rollouts.enabled and config.rollouts.ground_level_m == -5.0
    assert not apply_env_overrides(config, {"KURATION_ROLLOUTS_ENABLED": "false"}).rollouts.enabled
    for bad, fragment in (({"enabled": "no"}, "rollouts.enabled must be true or false"),
                          ({"state_modalities": []}, "rollouts.state_modalities must be a non-empty list"),
                          ({"positon": "x"}, "rollouts: unknown key(s) ['positon']"),
                          ({"site_half_extent_m": 0}, "rollouts.site_half_extent_m must be > 0")):
        with pytest.raises(CurationConfigError) as caught:
            curation_config_from_dict({"rollouts": bad})
        assert fragment in str(caught.value)
    with pytest.raises(CurationConfigError, match="KURATION_ROLLOUTS_ENABLED='maybe': enabled must be true or false"):
        apply_env_overrides(DEFAULTS, {"KURATION_ROLLOUTS_ENABLED": "maybe"})
