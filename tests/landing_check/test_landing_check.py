"""``check_landing_zone``: a clean landing zone passes with notes only, and each way a
landing zone goes wrong is one error finding naming the file, row or field and the fix,
with the steps that depend on it skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kuration.landing.check as landing_check
from kuration.landing.check import LandingFinding, LandingReport, check_landing_zone
from tests.landing_check.landing_factory import (
    RECORDINGS, rewrite_recording, rewrite_universe, write_curation,
)


def check(zone: Path, **options) -> LandingReport:
    options.setdefault("environ", {})
    return check_landing_zone(zone, **options)


def only(report: LandingReport, code: str) -> LandingFinding:
    matches = [f for f in report.findings if f.code == code]
    assert len(matches) == 1, f"expected one {code}, got {report.render()}"
    return matches[0]


def error_codes(report: LandingReport) -> list[str]:
    return [f.code for f in report.errors]


def test_the_demo_landing_zone_is_ready_with_notes_only(zone: Path):
    report = check(zone)
    assert report.ok and not report.warnings, report.render()
    assert report.codes() == [
        "config.defaults", "config.settings", "plugins.none", "settings.schema", "settings.strategy",
        "settings.output_spec", "recordings.found", "sample.read", "sample.read", "media.decoded", "media.decoded",
        "universe.sources",
    ]
    assert "settings from defaults" in only(report, "config.settings").message
    assert "2 recordings under" in only(report, "recordings.found").message
    assert "4 references decode as uint8[12, 16, 3]" in report.findings[9].message
    assert report.render().splitlines()[-1].endswith("0 errors, 0 warnings, 12 notes; ready to run")
    data = report.to_dict()
    assert data["ok"] is True and data["findings"][0] == {
        "level": "info", "code": "config.defaults", "step": "config", "message": report.findings[0].message}


def test_a_missing_landing_zone_is_one_error(tmp_path: Path):
    report = check(tmp_path / "nowhere")
    assert report.codes() == ["landing.missing"] and not report.ok
    assert "does not exist" in report.errors[0].message


def test_an_unknown_curation_json_key_fails_and_skips_what_needs_the_settings(zone: Path):
    write_curation(zone, {"recording": "data"})
    report = check(zone)
    finding = only(report, "config.invalid")
    assert finding.level == "error"
    assert "curation.json" in finding.message and "'recording'" in finding.message
    assert "unknown key(s) ['recording']; valid keys: ['plugins', 'recordings'" in finding.message
    assert [f.code for f in report.findings if f.code.endswith(".skipped")] == [
        "plugins.skipped", "settings.skipped", "recordings.skipped", "sample.skipped", "media.skipped",
        "universe.skipped"]
    assert "curation settings are invalid" in only(report, "plugins.skipped").message
    assert error_codes(report) == ["config.invalid"]


def test_a_wrong_type_in_an_environment_override_names_the_variable(zone: Path):
    report = check(zone, environ={"KURATION_WORKERS": "many"})
    assert "KURATION_WORKERS" in only(report, "config.invalid").message


def test_the_settings_origin_lists_the_file_and_the_overrides(zone: Path):
    path = write_curation(zone, {"segment_window": 8})
    report = check(zone, environ={"KURATION_SEGMENT_STRIDE": "4"})
    settings = only(report, "config.settings").message
    assert f"settings from {path} + KURATION_SEGMENT_STRIDE" in settings and "segments 8/4 seconds" in settings
    assert "config.defaults" not in report.codes()


def test_a_named_config_file_must_exist(zone: Path, tmp_path: Path):
    report = check(zone, config_url=str(tmp_path / "team.json"))
    assert "not found" in only(report, "config.invalid").message


def test_a_plugin_that_is_not_installed_fails_and_skips_the_settings(zone: Path, plugin_kit):
    path = write_curation(zone, {"plugins": [f"{plugin_kit.prefix}_absent"]})
    report = check(zone)
    finding = only(report, "plugins.failed")
    assert f"'{plugin_kit.prefix}_absent'" in finding.message and f"declared in {path}" in finding.message
    assert "PYTHONPATH" in finding.message
    assert "a plugin failed to import" in only(report, "settings.skipped").message
    assert "sample.skipped" in report.codes()  # no schema to read the recordings against


def test_a_plugin_that_raises_at_import_is_named_with_its_error(zone: Path, plugin_kit):
    module = plugin_kit.write("broken", "raise RuntimeError('no frames folder configured')\n")
    write_curation(zone, {"plugins": [module]})
    message = only(check(zone), "plugins.failed").message
    assert module in message and "RuntimeError: no frames folder configured" in message


def test_loaded_plugins_are_listed_and_their_provider_serves_the_schema(zone: Path, plugin_kit):
    module = plugin_kit.write_media_plugin()
    write_curation(zone, {"plugins": [module]})
    schema = json.loads((zone / "schema.json").read_text())
    schema["media"]["frame"]["provider"] = plugin_kit.provider
    (zone / "schema.json").write_text(json.dumps(schema))
    report = check(zone, environ={})
    assert report.ok, report.render()
    assert f"plugin {module} imported" in only(report, "plugins.loaded").message
    assert report.codes().count("media.decoded") == 2


def test_a_broken_schema_json_names_the_file_and_skips_the_sample(zone: Path):
    (zone / "schema.json").write_text('{"sample_hz": 10, "fields": ')
    report = check(zone)
    finding = only(report, "settings.schema_invalid")
    assert str(zone / "schema.json") in finding.message and "not valid JSON" in finding.message
    assert error_codes(report) == ["settings.schema_invalid"]
    assert "checked against the schema" in only(report, "settings.skipped").message
    assert "schema.json was not loaded" in only(report, "sample.skipped").message
    assert "universe.sources" in report.codes()  # the universe does not need the schema


def test_a_broken_strategy_and_output_spec_are_each_named_and_the_sample_still_runs(zone: Path):
    (zone / "strategy.json").write_text(json.dumps({"name": "x", "priority": {"nope.mean": 1.0}}))
    (zone / "output_spec.json").write_text("[]")
    report = check(zone)
    assert error_codes(report) == ["settings.strategy_invalid", "settings.output_spec_invalid"]
    assert str(zone / "strategy.json") in only(report, "settings.strategy_invalid").message
    assert str(zone / "output_spec.json") in only(report, "settings.output_spec_invalid").message
    assert report.codes().count("sample.read") == 2


def test_a_window_the_schema_cannot_segment_points_at_curation_json(zone: Path):
    write_curation(zone, {"segment_window": 0.01})  # 0.1 ticks at 10 Hz
    finding = only(check(zone), "settings.segmenter_invalid")
    assert "segment_window" in finding.message and "curation.json" in finding.message


def test_no_recordings_folder_is_an_error_naming_the_setting(zone: Path):
    shutil.rmtree(zone / "recordings")
    report = check(zone)
    finding = only(report, "recordings.none")
    assert f"{zone / 'recordings'} does not exist" in finding.message and "'recordings' setting" in finding.message
    assert "no recordings were found" in only(report, "sample.skipped").message
    assert "could not be listed" in only(report, "universe.skipped").message
    assert error_codes(report) == ["recordings.none"]


def test_recordings_in_another_folder_get_a_hint_to_point_there(zone: Path):
    (zone / "recordings").rename(zone / "flights")
    message = only(check(zone), "recordings.none").message
    assert "holds 2 files matching '*.parquet'" in message and "set \"recordings\": 'flights'" in message


def test_a_folder_without_matching_files_names_the_pattern(zone: Path):
    write_curation(zone, {"source_pattern": "*.arrow"})
    message = only(check(zone), "recordings.none").message
    assert "holds no file matching '*.arrow'" in message


def test_a_recording_missing_a_declared_column_is_named(zone: Path):
    rewrite_recording(zone, RECORDINGS[1], drop="battery")
    report = check(zone)
    finding = only(report, "sample.unreadable")
    assert f"recording '{RECORDINGS[1]}' does not match schema.json" in finding.message
    assert "'battery'" in finding.message
    assert error_codes(report) == ["sample.unreadable"]
    assert report.codes().count("media.decoded") == 1  # the readable one is still checked


def test_a_media_reference_to_a_missing_file_names_recording_column_and_reference(zone: Path):
    (zone / "recordings" / RECORDINGS[0].replace(".parquet", ".frames.npy")).unlink()
    report = check(zone)
    finding = only(report, "media.unresolved")
    assert f"recording '{RECORDINGS[0]}', media column 'frame', reference '" in finding.message
    assert "not found" in finding.message and "media_root" in finding.message
    assert "Hint" not in finding.message  # the file is nowhere: no folder to suggest
    assert error_codes(report) == ["media.unresolved"]


def test_references_relative_to_the_landing_zone_suggest_media_root_dot(zone: Path):
    for source in RECORDINGS:
        rewrite_recording(zone, source, ref_prefix="recordings/")
    report = check(zone)
    assert error_codes(report) == ["media.unresolved", "media.unresolved"]
    message = report.errors[0].message
    assert f"resolve against {zone}: set \"media_root\": '.' in curation.json" in message
    write_curation(zone, {"media_root": "."})
    assert check(zone).ok


def test_references_relative_to_the_corpus_folder_suggest_that_folder(zone: Path):
    (zone / "corpus").mkdir()
    (zone / "recordings").rename(zone / "corpus" / "recordings")
    write_curation(zone, {"recordings": "corpus/recordings"})
    for source in RECORDINGS:
        rewrite_recording(zone, source, ref_prefix="recordings/", recordings="corpus/recordings")
    report = check(zone)
    assert "set \"media_root\": 'corpus' in curation.json" in report.errors[0].message
    assert error_codes(report) == ["media.unresolved", "media.unresolved"]


def test_universe_ids_relative_to_the_landing_zone_fail_with_the_hint(zone: Path):
    rewrite_universe(zone, source_prefix="recordings/")
    report = check(zone)
    finding = only(report, "universe.unmatched_sources")
    assert "2 of the 2 universe sources name no recording" in finding.message
    assert "'recordings/airfield_north/flight_001.parquet'" in finding.message
    assert "once the prefix 'recordings/' is removed" in finding.message
    assert only(report, "universe.unlisted_recordings").level == "warning"
    assert error_codes(report) == ["universe.unmatched_sources"]


def test_a_recording_no_universe_row_names_is_a_warning_only(zone: Path):
    (zone / "recordings" / "extra").mkdir()
    shutil.copy(zone / "recordings" / RECORDINGS[0], zone / "recordings" / "extra" / "late.parquet")
    report = check(zone)
    assert report.ok and "'extra/late.parquet'" in only(report, "universe.unlisted_recordings").message


def test_a_bad_universe_row_names_the_file_and_line(zone: Path):
    rewrite_universe(zone, index="three")
    finding = only(check(zone), "universe.invalid")
    assert "universe.csv" in finding.message and "line 2" in finding.message and "'three'" in finding.message


def test_without_a_universe_csv_the_universe_is_the_recordings(zone: Path):
    (zone / "universe.csv").unlink()
    report = check(zone)
    assert report.ok and "enumerated from the recordings root" in only(report, "universe.enumerated").message
    assert "no universe.csv named" in only(check(zone, universe_csv=None), "universe.enumerated").message


def test_sampling_is_bounded(zone: Path):
    report = check(zone, sample_limit=1, media_refs=1)
    assert report.codes().count("sample.read") == 1
    assert "1 reference decode" in only(report, "media.decoded").message
    with pytest.raises(ValueError, match="sample_limit"):
        check(zone, sample_limit=0)


def test_an_unexpected_failure_is_an_error_naming_its_step(zone: Path, monkeypatch: pytest.MonkeyPatch):
    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(landing_check, "list_recordings", explode)
    report = check(zone)
    finding = only(report, "recordings.crashed")
    assert "the recordings step failed unexpectedly: RuntimeError: disk on fire" in finding.message
    assert "universe.skipped" in report.codes()


def test_an_interrupt_is_not_swallowed(zone: Path, monkeypatch: pytest.MonkeyPatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(landing_check, "load_schema", interrupt)
    with pytest.raises(KeyboardInterrupt):
        check(zone)


def test_a_finding_refuses_an_unknown_level():
    with pytest.raises(ValueError, match="level"):
        LandingFinding("fatal", "x.y", "z")  # type: ignore[arg-type]
    assert LandingFinding("warning", "a.b", "two\n  lines").render() == "WARNING a.b: two lines"


@given(st.lists(st.text(max_size=3), unique=True, max_size=30), st.integers(1, 8))
def test_spread_keeps_the_ends_and_the_order(items: list[str], limit: int):
    picked = landing_check._spread(items, limit)
    assert len(picked) == min(limit, len(items))  # evenly spread picks never round onto each other
    assert picked == [item for item in items if item in picked]  # a subsequence, in order
    if items:
        assert picked[0] == items[0]
        if limit > 1:
            assert picked[-1] == items[-1]
