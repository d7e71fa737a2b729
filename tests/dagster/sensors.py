"""Evaluating a sensor in a test the way the daemon does: inside the context's scope, so
resources with setup and teardown (the storage root's S3 settings) are set up and restored;
and running what a tick asks for the way the daemon would."""

from dagster import AddDynamicPartitionsRequest, DeleteDynamicPartitionsRequest, build_sensor_context


def run_sensor(sensor, *, instance, resources, cursor=None):
    with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
        return sensor(context)


def apply_partition_requests(instance, tick) -> None:
    """A tick's dynamic partition requests, in order (deletions before the additions they make room for)."""
    for request in tick.dynamic_partitions_requests:
        if isinstance(request, DeleteDynamicPartitionsRequest):
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        else:
            assert isinstance(request, AddDynamicPartitionsRequest)
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def execute_requests(defs, instance, tick) -> list:
    """Run a sensor tick's requests the way the daemon would: its dynamic partition requests
    applied, then each run request (its partition or partition range tags, and its asset
    selection) on the instance; the results."""
    apply_partition_requests(instance, tick)
    job = defs.resolve_implicit_global_asset_job_def()
    return [job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                   asset_selection=request.asset_selection, tags=request.tags, raise_on_error=False)
            for request in tick.run_requests]


def scoring_requests(tick) -> list[tuple[list[str] | str, str]]:
    """Each scored_segments request of a tick: its partition key, or its range as ``[start, end]``, with its change."""
    out = []
    for request in tick.run_requests:
        if request.partition_key is not None:
            out.append((request.partition_key, request.tags["kuration/change"]))
        elif "dagster/asset_partition_range_start" in request.tags:
            out.append(([request.tags["dagster/asset_partition_range_start"],
                         request.tags["dagster/asset_partition_range_end"]], request.tags["kuration/change"]))
    return out
