"""The job pages' "Auto-materialize" badge says what the automation sensor does: the instance
switch it reads follows the sensor's state (its default on a fresh instance, a stored toggle
otherwise); ``kuration run`` sets it on the instance it fills."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance, instance_for_test
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteInstigatorOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, InstigatorType
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._daemon.asset_daemon import get_auto_materialize_paused

from kuration_assets.automation_badge import (
    AUTOMATION_SENSOR_NAME,
    automation_sensor_running,
    main,
    show_automation_as_it_runs,
)
from kuration_definitions import defs


def _store_sensor_state(instance: DagsterInstance, name: str, status: InstigatorStatus) -> None:
    location = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="kuration_definitions"),
                                           location_name="kuration_definitions")
    origin = RemoteInstigatorOrigin(RemoteRepositoryOrigin(location, "__repository__"), name)
    state = InstigatorState(origin, InstigatorType.SENSOR, status)
    stored = instance.get_instigator_state(origin.get_id(), state.selector_id)
    (instance.update_instigator_state if stored else instance.add_instigator_state)(state)


def test_the_sensor_is_declared_with_the_name_and_default_the_badge_assumes():
    from dagster import DefaultSensorStatus

    sensor = defs.resolve_sensor_def(AUTOMATION_SENSOR_NAME)
    assert sensor.default_status == DefaultSensorStatus.RUNNING


def test_a_fresh_instance_shows_automation_on_as_the_sensor_runs():
    with instance_for_test() as instance:
        assert get_auto_materialize_paused(instance)  # Dagster's default: the badge would say "off"
        assert automation_sensor_running(instance)
        assert show_automation_as_it_runs(instance) is True
        assert not get_auto_materialize_paused(instance)


@pytest.mark.parametrize(("status", "running"), [(InstigatorStatus.STOPPED, False), (InstigatorStatus.RUNNING, True),
                                                 (InstigatorStatus.DECLARED_IN_CODE, True)])
def test_a_stored_toggle_of_the_sensor_is_what_the_badge_shows(status, running):
    with instance_for_test() as instance:
        _store_sensor_state(instance, AUTOMATION_SENSOR_NAME, status)
        _store_sensor_state(instance, "new_recordings_sensor", InstigatorStatus.STOPPED)  # another sensor: ignored
        assert show_automation_as_it_runs(instance) is running
        assert get_auto_materialize_paused(instance) is not running
        _store_sensor_state(instance, AUTOMATION_SENSOR_NAME, InstigatorStatus.RUNNING)  # switched on again
        assert show_automation_as_it_runs(instance) is True and not get_auto_materialize_paused(instance)


def test_the_script_entry_point_sets_the_instance_in_dagster_home(tmp_path, monkeypatch, capsys):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert main() == 0
    assert f"automation: {AUTOMATION_SENSOR_NAME} is on" in capsys.readouterr().err
    with DagsterInstance.get() as instance:
        assert not get_auto_materialize_paused(instance)
