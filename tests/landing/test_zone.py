"""``open_landing_zone``: one frozen object from one read of each settings file, the settings
by one precedence rule, every part built once, and a fingerprint that follows the settings."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.landing import LandingLayout, LandingZone, LandingZoneChangedError, open_landing_zone
from kuration.landing.curation_config import (
    DEFAULTS, CurationConfigError, CurationFile, resolve_curation_config,
)
from kuration.landing.settings import load_output_spec, load_schema
from kuration.scoring.strategy import Strategy
from kuration.sources.parquet import ParquetTickAdapter
from tests.landing.small_zone import SETTINGS
from tests.landing.reads import counted_reads


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return counted_reads(monkeypatch)


def test_opening_reads_each_settings_file_once_and_holds_every_part(zone: Path, reads):
    (zone / "quality.json").write_text(json.dumps({"min_shards": 1, "required_modalities": ["pos"]}))
    opened = open_landing_zone(zone, environ={})
    assert dict(reads) == {"curation.json": 1, "schema.json": 1, "strategy.json": 1, "output_spec.json": 1,
                           "quality.json": 1}
    assert opened.url == str(zone) and opened.layout == LandingLayout()
    assert opened.config.origin == (str(zone / "curation.json"),) and opened.config.budget.span_seconds == 30
    assert opened.schema == load_schema(zone / "schema.json")
    assert opened.strategy == Strategy.from_dict(json.loads((zone / "strategy.json").read_text()))
    assert opened.spec == load_output_spec(zone / "output_spec.json", opened.schema)
    assert (opened.segmenter.window, opened.segmenter.stride, opened.segmenter.sample_hz) == (
        10, 5, opened.schema.sample_hz)
    assert isinstance(opened.adapter, ParquetTickAdapter)
    assert opened.adapter.root_url == str(zone / "recordings") == opened.recordings_url
    assert opened.adapter.media_root == opened.media_root == str(zone / "recordings")
    assert opened.quality_policy is not None and opened.quality_policy.required_modalities == ("pos",)
    assert opened.plugins == () and opened.rollouts.status == "build" and opened.findings == ()
    assert len(opened.fingerprint) == 64
    with pytest.raises(dataclasses.FrozenInstanceError):
        opened.config = DEFAULTS  # type: ignore[misc]


def test_the_parts_a_run_needs_come_from_the_one_object(zone: Path):
    opened = open_landing_zone(zone, environ={})
    listed = opened.list_recordings()
    assert sorted(listed) == sorted(p.relative_to(zone / "recordings").as_posix()
                                    for p in (zone / "recordings").rglob("*.parquet")) and len(listed) == 3
    assert opened.universe_csv_url == str(zone / "universe.csv") and opened.universe_token()
    assert len(opened.universe().source_names) == 3
    request = opened.split_request()
    assert (request.strategy, request.seed, request.val_ratio) == ("random", 2, 0.34)
    assert opened.split_request(from_split_column=True).strategy is None
    budget = opened.budget_options()
    assert (budget.train_hours, budget.span_seconds, budget.chunking) == (0.02, 30, opened.spec.chunking)
    assert opened.settings.segmenter is opened.segmenter


def test_a_reformatted_file_keeps_the_fingerprint_and_a_changed_setting_changes_it(zone: Path):
    first = open_landing_zone(zone, environ={})
    assert open_landing_zone(zone, environ={}).fingerprint == first.fingerprint
    strategy = json.loads((zone / "strategy.json").read_text())
    (zone / "strategy.json").write_text(json.dumps(strategy, indent=7))  # same settings, other bytes
    assert open_landing_zone(zone, environ={}).fingerprint == first.fingerprint
    changed = {}
    for name, edit in (("curation.json", {**SETTINGS, "workers": 2}),
                       ("strategy.json", {**strategy, "priority": {**strategy["priority"], "wind.max": 0.25}})):
        original = (zone / name).read_text()
        (zone / name).write_text(json.dumps(edit))
        changed[name] = open_landing_zone(zone, environ={}).fingerprint
        (zone / name).write_text(original)
    assert first.fingerprint not in changed.values() and len(set(changed.values())) == 2
    assert open_landing_zone(zone, environ={"KURATION_WORKERS": "3"}).fingerprint != first.fingerprint


def test_overrides_win_without_reading_anything_again(zone: Path, reads):
    opened = open_landing_zone(zone, environ={"KURATION_WORKERS": "3"})
    reads.clear()
    overridden = opened.with_overrides("run config", {"workers": 4, "budget": {"train_hours": 0.01}})
    assert dict(reads) == {}  # re-resolved from what opening read
    assert (overridden.config.workers, overridden.config.budget.train_hours) == (4, 0.01)
    assert overridden.config.budget.val_hours == 0.005  # the file's, where the override says nothing
    assert overridden.config.origin == (str(zone / "curation.json"), "KURATION_WORKERS", "run config")
    assert overridden.fingerprint != opened.fingerprint
    # the same overrides given when opening: the same settings, the same fingerprint
    again = open_landing_zone(zone, environ={"KURATION_WORKERS": "3"},
                              overrides={"workers": 4, "budget": {"train_hours": 0.01}})
    assert again.config.workers == 4 and again.fingerprint == overridden.fingerprint
    assert opened.with_overrides("run config", {}) is opened


def test_a_bad_override_names_its_label(zone: Path):
    opened = open_landing_zone(zone, environ={})
    with pytest.raises(CurationConfigError, match=r"run config of budget_plan: budget.train_hours must be >= 0"):
        opened.with_overrides("run config of budget_plan", {"budget": {"train_hours": -1}})


_LAYERS = st.one_of(st.none(), st.integers(min_value=1, max_value=64))


@settings(max_examples=60, deadline=None)
@given(file=_LAYERS, env=_LAYERS, resource=_LAYERS, run=_LAYERS)
def test_the_precedence_is_defaults_file_environment_overrides(file, env, resource, run):
    """Whichever layers set ``workers``, the last one in the order wins; none: the default."""
    resolved = resolve_curation_config(
        None if file is None else CurationFile("curation.json", {"workers": file}),
        environ={} if env is None else {"KURATION_WORKERS": str(env)},
        overrides=[(label, {} if value is None else {"workers": value})
                   for label, value in (("resource config", resource), ("run config", run))])
    expected = next((v for v in (run, resource, env, file) if v is not None), DEFAULTS.workers)
    assert resolved.workers == expected
    assert len(resolved.origin) == 1 + sum(v is not None for v in (env, resource, run))


def test_a_step_that_opens_another_version_refuses_to_mix(zone: Path):
    first = open_landing_zone(zone, environ={})
    (zone / "curation.json").write_text(json.dumps({**SETTINGS, "write_workers": 2}))
    now = open_landing_zone(zone, environ={})
    assert now.require_fingerprint(now.fingerprint, pinned_by="run r1") is now
    with pytest.raises(LandingZoneChangedError, match=(
            rf"the landing zone {zone} changed while run r1 was using it: it was opened with settings fingerprint "
            rf"{first.fingerprint[:12]}\.\.\., and now reads as {now.fingerprint[:12]}.*Launch a new run")):
        now.require_fingerprint(first.fingerprint, pinned_by="run r1")


def test_missing_and_invalid_files_are_named(zone: Path):
    (zone / "output_spec.json").unlink()
    with pytest.raises(Exception, match=r"output spec not found: .*output_spec.json"):
        open_landing_zone(zone, environ={})
    (zone / "output_spec.json").write_text('{"shard_length": 0, "modalities": {}}')
    with pytest.raises(Exception, match=r"output_spec.json: output.shard_length: required, a positive whole number"):
        open_landing_zone(zone, environ={})


def test_a_named_settings_file_replaces_curation_json(zone: Path, tmp_path: Path):
    team = tmp_path / "team.json"
    team.write_text(json.dumps({"workers": 5}))
    opened = open_landing_zone(zone, config=team, environ={})
    assert opened.config.workers == 5 and opened.config.origin == (str(team),)
    with pytest.raises(CurationConfigError, match="curation settings not found"):
        open_landing_zone(zone, config=tmp_path / "absent.json", environ={})


def test_python_users_get_the_same_object_the_graph_does(zone: Path):
    """What the README's example does, step by step, on a small corpus."""
    from kuration import iter_shards

    opened = open_landing_zone(zone, environ={})
    assert isinstance(opened, LandingZone)
    scored = opened.score()
    assert len(scored.outcomes) == 3 and not scored.skipped
    plan = opened.plan(scored)
    assert plan.accounting["splits"]["train"]["admitted"] > 0
    written = opened.write(plan, zone.parent / "out" / "dataset")
    first = next(iter_shards(written.out, split="train"))
    assert set(opened.spec.modalities) <= set(first)


def test_a_landing_zone_write_applies_its_keep_versions_after_publishing(zone: Path):
    from kuration.output.versions import DatasetRoot

    opened = open_landing_zone(zone, overrides={"keep_versions": 2}, environ={})
    plan = opened.plan(opened.score())
    out = zone.parent / "out" / "dataset"
    removed = [opened.write(plan, out, force=index > 0).versions_removed for index in range(3)]
    assert removed == [(), (), ("v1",)] and DatasetRoot(out).versions() == ["v2", "v3"]
    assert opened.write(plan, out, force=True, keep_versions=None).versions_removed == ()  # a write's own option wins
    assert DatasetRoot(out).versions() == ["v2", "v3", "v4"]
