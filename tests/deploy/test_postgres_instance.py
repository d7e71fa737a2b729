"""deploy/dagster.yaml against a real PostgreSQL server (started by scripts/test.sh with
scripts/postgres.sh) and an S3 endpoint: the instance it describes loads, keeps its runs,
events and check evaluations in PostgreSQL and its compute logs in S3, and the whole graph
materializes on it. deploy/dagster.k8s.yaml's run launcher is not exercised here (no
cluster); only its agreement with deploy/dagster.yaml is."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from tests.dagster.small_landing import write_small_landing_zone
from tests.deploy.instance import DEPLOY_YAML, K8S_YAML, env_variables, query

def test_the_deploy_instance_keeps_its_history_in_postgres_and_its_compute_logs_in_s3(deployment):
    from dagster import DagsterInstance
    from dagster._core.storage.compute_log_manager import ComputeIOType

    with DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 8
        assert queue.tag_concurrency_limits == [{"key": "kuration/lease", "value": "dataset", "limit": 1}]
        logs = instance.compute_log_manager
        assert type(logs).__name__ == "S3ComputeLogManager"
        # a step's output reaches the bucket, and the webserver's read path finds it there
        run_id = str(uuid.uuid4())
        log_key = [run_id, "compute_logs", "score_step"]
        try:
            with logs.open_log_stream(log_key, ComputeIOType.STDOUT) as stream:
                stream.write("scored 6 recordings\n")
                stream.flush()  # staged in the instance's folder until the upload
                assert (deployment.home / run_id / "compute_logs" / "score_step.out").read_text() == (
                    "scored 6 recordings\n")
            keys = [o["Key"] for o in deployment.s3.list_objects_v2(Bucket=deployment.bucket).get("Contents", [])]
            assert f"kuration/compute-logs/storage/{run_id}/compute_logs/score_step.out" in keys
            assert not logs.has_local_file(log_key, ComputeIOType.STDOUT)  # only the S3 copy is left
            data, _ = logs.get_log_data_for_type(log_key, ComputeIOType.STDOUT, offset=0, max_bytes=None)
            assert data == b"scored 6 recordings\n"
        finally:
            logs.delete_logs(log_key=log_key)
    tables = {name for (name,) in query(deployment.postgres_url,
                                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"runs", "run_tags", "event_logs", "asset_keys", "asset_check_executions", "jobs"} <= tables


@pytest.mark.parametrize("variable, part", [("KURATION_COMPUTE_LOG_BUCKET", "compute_log_manager"),
                                             ("KURATION_POSTGRES_URL", "run_storage")])
def test_a_missing_deployment_variable_is_named_when_the_instance_loads(deployment, monkeypatch, variable, part):
    from dagster import DagsterInstance
    from dagster._core.errors import DagsterInvalidConfigError

    monkeypatch.delenv(variable)
    with pytest.raises(DagsterInvalidConfigError, match=variable):
        with DagsterInstance.get() as instance:
            getattr(instance, part)


def test_the_dataset_lease_limit_names_the_tag_build_dataset_runs_carry():
    from kuration_definitions import DATASET_LEASE_TAG, build_dataset

    limits = yaml.safe_load(DEPLOY_YAML.read_text())["run_coordinator"]["config"]["tag_concurrency_limits"]
    key, value = DATASET_LEASE_TAG
    assert {"key": key, "value": value, "limit": 1} in limits
    assert build_dataset.tags[key] == value


def test_the_k8s_variant_is_deploy_yaml_plus_a_run_launcher_that_passes_on_its_variables():
    base = yaml.safe_load(DEPLOY_YAML.read_text())
    k8s = yaml.safe_load(K8S_YAML.read_text())
    launcher = k8s.pop("run_launcher")
    assert k8s == base, "deploy/dagster.k8s.yaml must differ from deploy/dagster.yaml only by its run_launcher"
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    # a run pod loads the same instance config, so it needs every variable that config reads:
    # from the daemon's environment, from a Secret (the database URL, with its password), or
    # from the launcher itself (DAGSTER_HOME, where it mounts the instance ConfigMap)
    passed_on = set(launcher["config"]["env_vars"])
    assert env_variables(base) - passed_on == {"KURATION_POSTGRES_URL", "DAGSTER_HOME"}
    assert "kuration-postgres" in launcher["config"]["env_secrets"]
    assert launcher["config"]["dagster_home"].startswith("/")


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return write_small_landing_zone(tmp_path / "landing")


@pytest.mark.slow
def test_the_whole_graph_materializes_on_the_postgres_instance(deployment, landing, tmp_path):
    """``kuration run`` on a PostgreSQL instance, every job: 10 s to 40 s."""
    from dagster import DagsterInstance

    from kuration.read import load_committed, verify_dataset
    from kuration_cli.graph_run import JOB_ORDER, run_graph

    # kuration run executes its runs itself, each to the end, outside the run queue: the file
    # as it is, queue included, needs no daemon for it (tests/deploy/test_run_queue.py works the queue)
    lines: list[str] = []
    outcome = run_graph(str(landing), str(tmp_path / "storage"), out=lines.append)
    assert outcome.ok, "\n".join(lines)
    assert set(outcome.runs) == set(JOB_ORDER) and all(success for _, success in outcome.runs.values())

    with DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        runs = {run.run_id: run for run in instance.get_runs()}
        assert {run_id for run_id, _ in outcome.runs.values()} == set(runs)
        assert {run.job_name for run in runs.values()} == set(JOB_ORDER)
        assert all(run.is_success for run in runs.values())
        dataset_run = runs[outcome.runs["build_dataset"][0]]
        assert dataset_run.tags.get("kuration/lease") == "dataset"

    # the history is PostgreSQL's, as any other process of the deployment reads it
    url = deployment.postgres_url
    assert query(url, "SELECT pipeline_name, status FROM runs ORDER BY create_timestamp") == [
        (job, "SUCCESS") for job in JOB_ORDER]
    materialized = {tuple(json.loads(key)) for (key,) in query(
        url, "SELECT DISTINCT asset_key FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")}
    assert {("universe",), ("resolved_splits",), ("scored_segments",), ("budget_plan",), ("shards",),
            ("dataset_manifest",), ("published_dataset",), ("rollout_store",)} <= materialized, materialized
    # 6 recordings, each a scored_segments partition of the one scoring run
    assert query(url, "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
                      "AND asset_key LIKE %s", ('%"scored_segments"%',)) == [(6,)]
    checks = query(url, "SELECT check_name, execution_status FROM asset_check_executions")
    assert checks and all(status == "SUCCEEDED" for _, status in checks), checks
    assert {"universe_sources", "dataset_integrity"} <= {name for name, _ in checks}

    # every run's captured stdout/stderr is in the bucket, under the run's id
    logged = {obj["Key"].split("/")[3] for obj in deployment.s3.list_objects_v2(
        Bucket=deployment.bucket, Prefix="kuration/compute-logs/storage/").get("Contents", [])}
    assert {run_id for run_id, _ in outcome.runs.values()} <= logged

    dataset = tmp_path / "storage" / "dataset"
    assert load_committed(str(dataset)).entries and verify_dataset(str(dataset)).ok
