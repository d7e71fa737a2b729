"""Helpers for the deployment tests: the PostgreSQL server scripts/test.sh started, a fresh
database on it per test, and a ``DAGSTER_HOME`` holding ``deploy/dagster.yaml``."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY_YAML = REPO / "deploy" / "dagster.yaml"
K8S_YAML = REPO / "deploy" / "dagster.k8s.yaml"


def postgres_server_url() -> str:
    """The server's URL from ``KURATION_POSTGRES_URL``; a skip only when the run said so."""
    if os.environ.get("KURATION_SKIP_POSTGRES") == "1":
        pytest.skip("KURATION_SKIP_POSTGRES=1: no PostgreSQL server for the deployment tests")
    url = os.environ.get("KURATION_POSTGRES_URL")
    if not url:
        pytest.fail("KURATION_POSTGRES_URL is not set: run the tests through scripts/test.sh (it starts PostgreSQL "
                    "with scripts/postgres.sh), or export KURATION_POSTGRES_URL=$(scripts/postgres.sh start DIR), "
                    "or set KURATION_SKIP_POSTGRES=1 to skip them")
    return url


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server for one test (dropped afterwards), as a URL."""
    import psycopg2

    name = f"kuration_test_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(server_url)
    admin.autocommit = True  # CREATE / DROP DATABASE refuse to run inside a transaction
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        try:
            yield with_database(server_url, name)
        finally:
            _drop_database(admin, name)
    finally:
        admin.close()


def _drop_database(admin: Any, name: str) -> None:
    import psycopg2.errors

    with admin.cursor() as cursor:
        # an engine the test left open (an instance that failed to load) must not keep the
        # database alive; DROP ... WITH (FORCE) is no help, since it also needs the right to
        # end the server's own autovacuum worker there, which only DROP's waiting handles
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                       "AND usename = current_user AND pid <> pg_backend_pid()", (name,))
        deadline = time.monotonic() + 10
        while True:
            try:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of the last statement in ``sql``; what the statements changed is committed."""
    import psycopg2

    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        connection.commit()
        return rows
    finally:
        connection.close()


def deploy_home(folder: Path) -> Path:
    """``folder`` as a ``DAGSTER_HOME`` whose ``dagster.yaml`` is ``deploy/dagster.yaml``, as it is."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DEPLOY_YAML, folder / "dagster.yaml")
    return folder


def env_variables(config: Any) -> set[str]:
    """Every ``{env: NAME}`` the instance config reads."""
    if isinstance(config, dict):
        if set(config) == {"env"}:
            return {config["env"]}
        return set().union(*(env_variables(value) for value in config.values()))
    if isinstance(config, list):
        return set().union(*(env_variables(value) for value in config))
    return set()
