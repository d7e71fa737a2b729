"""scripts/postgres.sh: start, reuse, stop by PID and start again keeping the data; a
clean-state retry after a failed first start; and the refusals that name what to fix."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.instance import REPO, query

SCRIPT = REPO / "scripts" / "postgres.sh"


@pytest.fixture
def cluster_dir() -> Iterator[Path]:
    """A folder for a cluster, reachable by the postgres user (pytest's own tmp folders are 0700)."""
    if os.environ.get("KURATION_SKIP_POSTGRES") == "1":
        pytest.skip("KURATION_SKIP_POSTGRES=1: no PostgreSQL for the deployment tests")
    if not glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"):
        pytest.fail("no PostgreSQL server installed: run the tests through scripts/test.sh (scripts/postgres.sh "
                    "installs Debian's postgresql), or set KURATION_SKIP_POSTGRES=1 to skip them")
    parent = Path(tempfile.mkdtemp(prefix="kuration-pg-"))
    parent.chmod(0o755)
    try:
        yield parent / "cluster"
    finally:
        postgres(["stop", str(parent / "cluster")])
        shutil.rmtree(parent, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KURATION_POSTGRES_WAIT": "20"})


def postmaster_pid(cluster: Path) -> int:
    return int((cluster / "data" / "postmaster.pid").read_text().split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_cluster_starts_is_reused_stops_by_pid_and_keeps_its_data(cluster_dir):
    port = free_port()
    started = postgres(["start", str(cluster_dir), str(port)])
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    assert url == f"postgresql://dagster:dagster@127.0.0.1:{port}/dagster"
    query(url, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (7); SELECT 1")
    pid = postmaster_pid(cluster_dir)

    again = postgres(["start", str(cluster_dir), str(port)])
    assert again.returncode == 0 and again.stdout.strip() == url and "reusing it" in again.stderr
    assert postmaster_pid(cluster_dir) == pid

    assert postgres(["stop", str(cluster_dir)]).returncode == 0
    assert not alive(pid)

    # an existing cluster that cannot start is reported and left as it is, never wiped
    conf = cluster_dir / "data" / "postgresql.conf"
    original = conf.read_text()
    conf.write_text(original + "\nno_such_setting = 1\n")
    broken = postgres(["start", str(cluster_dir), str(port)])
    assert broken.returncode == 1 and broken.stdout == ""
    assert "held a cluster before this start, so it is not wiped" in broken.stderr
    assert 'unrecognized configuration parameter "no_such_setting"' in broken.stderr
    conf.write_text(original)

    restarted = postgres(["start", str(cluster_dir), str(port)])
    assert restarted.returncode == 0, restarted.stderr
    assert query(url, "SELECT n FROM kept") == [(7,)]


def test_a_failed_first_start_is_retried_from_a_clean_cluster(cluster_dir):
    cluster_dir.mkdir()
    (cluster_dir / "data").write_text("not a cluster")  # initdb fails on it
    result = postgres(["start", str(cluster_dir), str(free_port())])
    assert result.returncode == 0, result.stderr
    assert "attempt 1 of 2 failed at: initdb" in result.stderr and "Not a directory" in result.stderr
    assert "ready on 127.0.0.1" in result.stderr and "(attempt 2 of 2;" in result.stderr
    assert query(result.stdout.strip(), "SELECT current_user") == [("dagster",)]


def test_a_port_another_server_listens_on_is_refused_before_anything_starts(cluster_dir):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = postgres(["start", str(cluster_dir), str(port)])
    assert result.returncode == 1 and result.stdout == ""
    assert f"already listens on 127.0.0.1:{port}; stop it or choose another PORT" in result.stderr
    assert not (cluster_dir / "data").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the cluster is that user's; the postgres user is root's")
def test_as_root_a_folder_the_postgres_user_cannot_reach_is_refused(tmp_path):
    if os.environ.get("KURATION_SKIP_POSTGRES") == "1":
        pytest.skip("KURATION_SKIP_POSTGRES=1: no PostgreSQL for the deployment tests")
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    result = postgres(["start", str(hidden / "cluster"), str(free_port())])
    assert result.returncode == 1
    assert "the postgres user cannot write to" in result.stderr and "chmod o+x" in result.stderr


@pytest.mark.parametrize("args, message", [([], "usage:"), (["start"], "usage:"),
                                           (["restart", "/tmp/x"], "unknown command"),
                                           (["start", "/tmp/x", "54a"], "PORT must be a number")])
def test_bad_arguments_exit_2_saying_what_is_wrong(args, message):
    result = postgres(args)
    assert result.returncode == 2 and message in result.stderr
