"""Every reference between a landing zone's files is checked when it opens, each problem named
(the strategy and the spec against the schema, the spec's segment features and media
providers, the quality policy's modalities, the rollout recipe's modalities); the rollout
store of a spec without the default modalities and without ``rollouts`` is "not configured"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.landing import LandingZoneError, open_landing_zone
from kuration.landing.check import check_landing_zone
from kuration.landing.curation_config import RolloutSettings
from kuration.landing.references import recipe_modalities
from kuration.rollouts import MotionDirectionRecipe
from kuration_cli import main
from tests.landing.small_zone import SETTINGS

#: The demo's modalities under a team's own names; ``frame`` dropped.
RENAMED = {"pos": "xyz", "vel": "velocity", "battery": "charge"}


def _edit(zone: Path, name: str, change) -> None:
    path = zone / name
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def _rename_modalities(zone: Path) -> None:
    _edit(zone, "output_spec.json", lambda spec: {**spec, "modalities": {
        RENAMED.get(k, k): v for k, v in spec["modalities"].items() if k != "frame"}})


def _settings(zone: Path, **extra) -> None:
    (zone / "curation.json").write_text(json.dumps({**SETTINGS, **extra}))


def test_every_broken_reference_is_named_at_once(zone: Path):
    _edit(zone, "strategy.json", lambda s: {**s, "priority": {**s["priority"], "nope.mean": 1.0, "gust.max": 0.5}})
    _edit(zone, "output_spec.json", lambda s: {**s, "modalities": {
        **s["modalities"], "spin": {"dtype": "float32", "shape": [], "source": "field:spin"},
        "gusts": {"dtype": "float32", "shape": [], "source": "segment:wind.min"}}})
    (zone / "quality.json").write_text(json.dumps({"required_modalities": ["pos", "thermal"]}))
    with pytest.raises(LandingZoneError) as raised:
        open_landing_zone(zone, environ={})
    message = str(raised.value)
    assert message.startswith(f"the files of the landing zone {zone} do not fit together (5 problems; "
                              f"`kuration check-landing {zone}` lists them")
    strategy, spec, quality = (str(zone / name) for name in ("strategy.json", "output_spec.json", "quality.json"))
    assert f"- {strategy}: strategy.priority['gust.max']: feature key 'gust.max'" in message
    assert f"- {strategy}: strategy.priority['nope.mean']: feature key 'nope.mean'" in message
    assert (f"- {spec}: output.modalities.spin.source: schema has no field or global 'spin'" in message)
    assert (f"- {spec}: output.modalities.gusts.source 'segment:wind.min' reads the span's feature 'wind.min', which "
            f"{strategy} does not compute") in message
    assert (f"- {quality}: required_modalities names ['thermal'], which {spec} does not declare (it declares "
            "['battery', 'frame', 'gusts', 'near_miss', 'pos', 'spin', 'vel', 'wind'])") in message
    # check-landing reports each one, under the codes of its settings step
    report = check_landing_zone(zone, environ={})
    assert [f.code for f in report.errors] == [
        "settings.strategy_invalid", "settings.strategy_invalid", "settings.output_spec_invalid",
        "references.segment_feature", "references.quality_modality"]


def test_a_segment_modality_may_read_the_span_priority(zone: Path):
    _edit(zone, "output_spec.json", lambda s: {**s, "modalities": {
        **s["modalities"], "rank": {"dtype": "float32", "shape": [], "source": "segment:priority"}}})
    assert "rank" in open_landing_zone(zone, environ={}).spec.modalities


def test_without_rollouts_a_spec_lacking_the_default_modalities_is_not_configured(zone: Path):
    _rename_modalities(zone)
    opened = open_landing_zone(zone, environ={})
    assert opened.rollouts.status == "not configured" and not opened.rollouts.builds
    assert "lacks the default rollout recipe's modalities ['pos', 'battery', 'vel']" in opened.rollouts.reason
    assert [f.code for f in opened.findings] == ["rollouts.not_configured"]
    skipped = opened.rollouts.skipped("its lineage")
    assert skipped is not None and skipped.passed
    assert skipped.verdict.startswith("rollout store not configured, so its lineage has nothing to check: ")
    report = check_landing_zone(zone, environ={})
    assert report.ok and "rollouts.not_configured" in report.codes()


def test_without_rollouts_a_spec_with_the_default_modalities_builds_with_the_defaults(zone: Path):
    opened = open_landing_zone(zone, environ={})
    assert opened.rollouts.builds and opened.rollouts.settings == RolloutSettings()
    assert opened.rollouts.skipped("the store") is None


def test_configured_rollouts_that_do_not_fit_the_spec_name_the_modality(zone: Path, capsys):
    _rename_modalities(zone)
    _settings(zone, rollouts={"position": "xyz", "battery": "charge"})  # the state is still pos, vel, battery
    with pytest.raises(LandingZoneError, match=r"rollouts.state_modalities names modality 'pos', which .* does not "
                                               r"declare \(it declares \['charge', 'near_miss', 'velocity', 'wind', "
                                               r"'xyz'\]\)"):
        open_landing_zone(zone, environ={})
    status = main(["check-landing", str(zone)])
    out = capsys.readouterr().out
    assert status == 2
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("ERROR")] == [
        "ERROR   rollouts.missing_modality"] * 3
    assert all(f"rollouts.state_modalities names modality {name!r}" in out for name in ("pos", "vel", "battery"))
    assert "fix the errors above before running" in out


def test_the_position_must_be_a_float_triple_and_the_battery_a_float_scalar(zone: Path):
    _settings(zone, rollouts={"position": "wind", "battery": "pos", "state_modalities": ["pos"],
                              "payload_modality": None})
    with pytest.raises(LandingZoneError) as raised:
        open_landing_zone(zone, environ={})
    assert "rollouts.position 'wind' must be a float [3] (x, y, z), but" in str(raised.value)
    assert "declares it float32[2]" in str(raised.value)
    assert "rollouts.battery 'pos' must be a float scalar, but" in str(raised.value)


def test_disabled_rollouts_are_a_note_and_a_missing_payload_a_warning(zone: Path):
    _settings(zone, rollouts={"enabled": False})
    opened = open_landing_zone(zone, environ={})
    assert opened.rollouts.status == "disabled" and [f.code for f in opened.findings] == ["rollouts.disabled"]
    _settings(zone, rollouts={"payload_modality": "thermal"})
    opened = open_landing_zone(zone, environ={})
    assert opened.rollouts.builds and [(f.level, f.code) for f in opened.findings] == [
        ("warning", "rollouts.payload_modality")]
    # an environment override configures them too: enabled with the defaults, which this spec lacks
    _rename_modalities(zone)
    _settings(zone)
    with pytest.raises(LandingZoneError, match="rollouts.position names modality 'pos'"):
        open_landing_zone(zone, environ={"KURATION_ROLLOUTS_ENABLED": "true"})


_NAMES = st.sampled_from(["pos", "vel", "battery", "xyz", "charge", "speed"])


@given(position=_NAMES, battery=st.one_of(st.none(), _NAMES),
       state=st.lists(_NAMES, min_size=1, max_size=4, unique=True))
def test_the_modalities_checked_are_the_ones_the_recipe_reads(position, battery, state):
    settings = RolloutSettings(position=position, battery=battery, state_modalities=tuple(state))
    recipe = MotionDirectionRecipe(position=position, battery=battery, state_modalities=tuple(state))
    assert recipe_modalities(settings) == recipe.required_modalities
