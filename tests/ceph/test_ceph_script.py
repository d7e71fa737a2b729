"""scripts/ceph_rgw.sh's start, retry and stop, run on stand-in daemons: small scripts first on
PATH that answer as the Ceph commands do and record the PIDs they leave running, so the
retry from a clean state is exercised without a real cluster (tests/ceph/test_ceph_rgw.py
runs on the real one). The OSD stand-in fails its first boots as the real OSD did after the
Debian install, logging 'wrong fsid' and exiting; the gateway stand-in is a real HTTP server
on the port asked for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ceph_rgw.sh"

#: The stand-ins, by command name. Each daemon starts a process of its own in the
#: background (its output and stdin detached, as a daemonizing server's are), writes its
#: PID where ceph.conf says (run/<name>.pid under the cluster folder, the script's working
#: directory) and appends "<name> <pid>" to $FAKE_CEPH_STATE/daemons.
STAND_INS = {
    "uuidgen": f"exec {sys.executable} -c 'import uuid; print(uuid.uuid4())'",
    "monmaptool": "exit 0",
    "ceph-mon": """
        case " $* " in *" --mkfs "*) echo "mkfs" > mon.a/store; exit 0 ;; esac
        daemon mon.a sleep 300
    """,
    "ceph": """
        case "$3 $4" in
          "osd dump") echo "osd.0 up   in  weight 1" ;;
          "osd stat") echo "1 osds: 1 up (since 1s), 1 in (since 1s)" ;;
        esac
        exit 0
    """,
    "ceph-osd": """
        case " $* " in *" --mkfs "*) exit 0 ;; esac
        boots=$(($(cat "$FAKE_CEPH_STATE/osd_boots" 2>/dev/null || echo 0) + 1))
        echo "$boots" > "$FAKE_CEPH_STATE/osd_boots"
        if [ "$boots" -le "$FAKE_CEPH_OSD_FAILURES" ]; then
          # as the real OSD: it daemonizes, writes its pid file, and exits on the refused command
          sh -c 'exit 0' & gone=$!; wait "$gone"; echo "$gone" > run/osd.0.pid
          echo "osd.0 boot $boots: mon_cmd_maybe_osd_create fail: 'wrong fsid'" >> log/osd.0.log
          touch osd.0/left-by-boot-$boots
          exit 1
        fi
        daemon osd.0 sleep 300
    """,
    "radosgw": f"daemon client.rgw.a {sys.executable} -m http.server --bind 127.0.0.1 \"$KURATION_CEPH_RGW_PORT\"",
    "radosgw-admin": "exit 0",
}
PRELUDE = """#!/usr/bin/env bash
set -eu
daemon() {
  local name=$1; shift
  nohup "$@" >/dev/null 2>&1 </dev/null &
  echo $! > "run/$name.pid"
  echo "$name $!" >> "$FAKE_CEPH_STATE/daemons"
}
"""


@dataclass(frozen=True)
class StandIns:
    bin: Path
    state: Path
    cluster: Path

    def run(self, command: str, port: int, *, osd_failures: int = 0, attempts: int = 3,
            ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "FAKE_CEPH_STATE": str(self.state),
               "FAKE_CEPH_OSD_FAILURES": str(osd_failures), "KURATION_CEPH_RGW_PORT": str(port),
               "KURATION_CEPH_MON_PORT": str(free_port()), "KURATION_CEPH_ATTEMPTS": str(attempts),
               "KURATION_CEPH_WAIT": "20"}
        return subprocess.run(["bash", str(SCRIPT), command, str(self.cluster)], capture_output=True, text=True,
                              timeout=120, env=env)

    def daemons(self) -> list[tuple[str, int]]:
        """Every daemon a stand-in started, in order: (name, pid)."""
        listed = self.state / "daemons"
        if not listed.exists():
            return []
        return [(name, int(pid)) for name, pid in (line.split() for line in listed.read_text().splitlines())]


@pytest.fixture
def stand_ins(tmp_path: Path) -> Iterator[StandIns]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STAND_INS.items():
        path = bin_dir / name
        path.write_text(PRELUDE + "\n".join(line.strip() for line in body.strip().splitlines()) + "\n")
        path.chmod(0o755)
    (tmp_path / "state").mkdir()
    fakes = StandIns(bin_dir, tmp_path / "state", tmp_path / "cluster")
    try:
        yield fakes
    finally:
        for _, pid in fakes.daemons():  # whatever a failing test left running
            if alive(pid):
                os.kill(pid, 9)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a stand-in this test started and the script stopped stays a zombie only if nobody reaps it;
    # nohup'd children are reparented to init, which does
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[-1].startswith("Z"))


def answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=5):
            return True
    except OSError:
        return False


def test_an_osd_that_exits_on_wrong_fsid_is_retried_from_a_clean_cluster(stand_ins):
    port = free_port()
    started = stand_ins.run("start", port, osd_failures=1)
    endpoint = f"http://127.0.0.1:{port}"
    assert started.returncode == 0, started.stderr
    assert started.stdout == f"{endpoint}\n"  # the endpoint alone: test.sh exports it
    assert "attempt 1 of 3 failed at: osd.0 exited while booting" in started.stderr
    assert "osd.0 boot 1: mon_cmd_maybe_osd_create fail: 'wrong fsid'" in started.stderr  # the log's tail
    assert f"rgw ready at {endpoint} (attempt 2 of 3;" in started.stderr
    first_mon, *second = stand_ins.daemons()
    assert first_mon[0] == "mon.a" and [name for name, _ in second] == ["mon.a", "osd.0", "client.rgw.a"]
    assert not alive(first_mon[1])  # the failed attempt's monitor was stopped by its PID
    assert not (stand_ins.cluster / "osd.0" / "left-by-boot-1").exists()  # the retry began from an empty folder
    assert answers(endpoint)

    stopped = stand_ins.run("stop", port)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(alive(pid) for _, pid in stand_ins.daemons())
    assert not stand_ins.cluster.exists() and not answers(endpoint)


def test_a_start_that_fails_every_attempt_says_where_and_leaves_nothing_running(stand_ins):
    result = stand_ins.run("start", free_port(), osd_failures=99, attempts=2)
    assert result.returncode == 1 and result.stdout == ""
    assert "attempt 1 of 2 failed at: osd.0 exited while booting" in result.stderr
    assert "osd.0 boot 2: mon_cmd_maybe_osd_create fail: 'wrong fsid'" in result.stderr
    assert ("could not start Ceph radosgw in 2 attempts (the last failed at: osd.0 exited while booting)"
            in result.stderr)
    assert [name for name, _ in stand_ins.daemons()] == ["mon.a", "mon.a"]
    assert not any(alive(pid) for _, pid in stand_ins.daemons())


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the handler's name is http.server's)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_gateway_that_already_answers_is_reused_and_nothing_is_started(stand_ins):
    server = HTTPServer(("127.0.0.1", 0), _Answer)
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        port = server.server_address[1]
        result = stand_ins.run("start", port)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0 and result.stdout == f"http://127.0.0.1:{port}\n"
    assert "already answers" in result.stderr and "reusing it" in result.stderr
    assert stand_ins.daemons() == [] and not (stand_ins.cluster / "run").exists()


def test_a_port_that_is_not_a_number_exits_2_naming_it(stand_ins):
    result = subprocess.run(["bash", str(SCRIPT), "start", str(stand_ins.cluster)], capture_output=True, text=True,
                            env={**os.environ, "KURATION_CEPH_RGW_PORT": "74a0"}, timeout=30)
    assert result.returncode == 2 and "ports must be numbers, got '74a0'" in result.stderr
