"""Run by ``test_code_location`` in a fresh interpreter, as a Dagster run process would be:
nothing is loaded but what importing the code location loads (the plugins come from
``KURATION_PLUGINS``). Evaluates the new-recordings sensor, executes each run request it
makes the way the daemon would (its partition or partition range and asset selection),
then a manual ``score_recordings`` run over every partition with two workers into a second
storage root; prints what ran as JSON.

    python -m tests.plugins.code_location_runs <manual storage root>
"""

from __future__ import annotations

import json
import os
import sys


def main(manual_storage: str) -> None:
    from dagster import DagsterInstance, build_sensor_context

    import kuration_definitions
    from kuration.landing.plugins import loaded_plugins
    from tests.dagster.sensors import execute_requests

    defs = kuration_definitions.defs
    sensor = defs.resolve_sensor_def("new_recordings_sensor")
    report: dict = {"plugins": [p.to_dict() for p in loaded_plugins()], "sensor_runs": []}
    with DagsterInstance.ephemeral() as instance:
        with build_sensor_context(instance=instance, resources=defs.resources) as context:
            result = sensor(context)
        for run in execute_requests(defs, instance, result):
            partitions = sorted(e.step_materialization_data.materialization.partition
                                for e in run.get_asset_materialization_events()
                                if e.step_materialization_data.materialization.partition is not None)
            report["sensor_runs"].append({"partitions": partitions, "success": run.success})
        sources = sorted(instance.get_dynamic_partitions("sources"))
        manual = defs.resolve_job_def("score_recordings").execute_in_process(
            instance=instance, raise_on_error=False,
            tags={"dagster/asset_partition_range_start": sources[0], "dagster/asset_partition_range_end": sources[-1]},
            # a resource's run config is all of its config: the landing zone's url with the setting
            run_config={"resources": {"landing_zone": {"config": {"url": os.environ["KURATION_LANDING_ZONE"],
                                                                  "workers": 2}},
                                      "storage_root": {"config": {"url": manual_storage}}}},
        )
        report["manual_run"] = {"sources": sources, "success": manual.success}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
