"""The "Auto-materialize on / off" badge of the UI's job pages, made to say what runs.

Dagster 1.13 evaluates automation conditions in automation condition sensors (the instance's
``auto_materialize: use_sensors`` is true by default): Kuration's ``default_automation_condition_sensor``
runs from the start and is switched on and off on the Automation page. The badge on a job page
whose assets carry a condition reads something else: the instance-wide switch of the older,
sensorless asset daemon, which is paused until someone unpauses it, and which nothing shows or
toggles once sensors are used. So on a fresh instance the badge says "Auto-materialize off"
while the automation sensor ticks.

:func:`show_automation_as_it_runs` sets that switch to the automation sensor's state (its
stored state, or its default when it was never toggled). ``kuration run`` (and so the demo)
calls it on the instance it fills, and ``scripts/ui.sh`` calls it
(``python -m kuration_assets.automation_badge``) on the instance it serves. What it does not
do: follow a later toggle of the sensor in the UI (the badge then keeps the state from the
last call until the next one), or change what runs: with sensors, the daemon ignores the switch.
"""

from __future__ import annotations

import sys

from dagster import DagsterInstance

#: The sensor that evaluates the assets' automation conditions (kuration_definitions declares it).
AUTOMATION_SENSOR_NAME = "default_automation_condition_sensor"
#: Whether it runs before anyone switches it: yes (kuration_definitions declares it so).
AUTOMATION_SENSOR_RUNS_BY_DEFAULT = True


def automation_sensor_running(instance: DagsterInstance) -> bool:
    """Whether the automation sensor runs on ``instance``: its stored state (a toggle in the UI
    or the CLI, or the daemon's record of the declared default), else its default."""
    from dagster._core.scheduler.instigation import InstigatorType

    states = [state for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
              if state.name == AUTOMATION_SENSOR_NAME]
    if not states:
        return AUTOMATION_SENSOR_RUNS_BY_DEFAULT
    return any(state.is_running for state in states)


def show_automation_as_it_runs(instance: DagsterInstance) -> bool:
    """Set the instance switch the badge reads to the automation sensor's state; returns that state."""
    # The function behind the UI's own setAutoMaterializePaused mutation.
    from dagster._daemon.asset_daemon import set_auto_materialize_paused

    running = automation_sensor_running(instance)
    set_auto_materialize_paused(instance, not running)
    return running


def main() -> int:
    """For ``scripts/ui.sh``: the instance in ``$DAGSTER_HOME``."""
    with DagsterInstance.get() as instance:
        running = show_automation_as_it_runs(instance)
    state = "on: budget_plan and what follows run when their upstreams change" if running else \
        "off (switch it on under Automation)"
    print(f"automation: {AUTOMATION_SENSOR_NAME} is {state}", file=sys.stderr)
    return 0


__all__ = ["AUTOMATION_SENSOR_NAME", "AUTOMATION_SENSOR_RUNS_BY_DEFAULT", "automation_sensor_running",
           "show_automation_as_it_runs"]


if __name__ == "__main__":
    sys.exit(main())
