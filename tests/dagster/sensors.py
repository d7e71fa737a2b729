"""Evaluating a sensor in a test the way the daemon does: inside the context's scope, so
resources with setup and teardown (the storage root's S3 settings) are set up and restored."""

from dagster import build_sensor_context


def run_sensor(sensor, *, instance, resources, cursor=None):
    with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
        return sensor(context)
