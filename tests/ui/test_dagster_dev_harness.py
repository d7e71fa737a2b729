"""The ``dagster dev`` harness the UI tests rely on, on stand-ins that take a second: stopping
a process group (politely, then by force), and the ways waiting for the code location fails."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.ui.dagster_dev import DagsterDev, DagsterDevError, group_members, stop_dagster_dev, wait_until_loaded


def _group(script: str, log: Path) -> DagsterDev:
    with log.open("w") as sink:
        process = subprocess.Popen(["bash", "-c", script], start_new_session=True, stdout=sink,
                                   stderr=subprocess.STDOUT)
    return DagsterDev(process=process, url="http://127.0.0.1:9", log=log)


def _wait_for_members(server: DagsterDev, count: int) -> list[int]:
    for _ in range(100):
        members = group_members(server.group)
        if len(members) >= count:
            return members
        subprocess.run(["sleep", "0.05"])
    raise AssertionError(f"the stand-in group never had {count} members: {group_members(server.group)}")


def test_a_group_that_stops_on_sigterm_is_not_killed(tmp_path):
    # like dagster dev: the leader takes SIGTERM and stops its children itself
    server = _group("trap 'kill $(jobs -p); exit 0' TERM; sleep 300 & sleep 300 & wait", tmp_path / "log")
    members = _wait_for_members(server, 3)
    stopped = stop_dagster_dev(server, grace=10)
    assert not stopped.killed and stopped.left == [] and server.process.returncode == 0
    assert not set(members) & set(group_members(server.group))


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    server = _group("trap '' TERM; sleep 300 & sleep 300 & wait", tmp_path / "log")
    _wait_for_members(server, 3)
    stopped = stop_dagster_dev(server, grace=0.5)
    assert stopped.killed and stopped.left == [] and 0.5 <= stopped.seconds < 10


def test_a_server_that_exits_before_loading_fails_with_its_log(tmp_path):
    server = _group("echo 'dagster: workspace.yaml not found'; exit 3", tmp_path / "log")
    with pytest.raises(DagsterDevError, match=r"(?s)exited 3 before the code location loaded.*workspace.yaml not"):
        wait_until_loaded(server, timeout=20)


@contextmanager
def _graphql_answering(workspace: dict) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"data": {"workspaceOrError": workspace}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _entry(status: str, error: str | None = None) -> dict:
    return {"__typename": "Workspace", "locationEntries": [{
        "name": "kuration_definitions", "loadStatus": status,
        "locationOrLoadError": {"__typename": "PythonError", "message": error} if error else
        {"__typename": "RepositoryLocation"} if status == "LOADED" else None}]}


def test_a_code_location_that_fails_to_load_names_the_error(tmp_path):
    server = _group("sleep 300", tmp_path / "log")
    try:
        with _graphql_answering(_entry("LOADED", "curation.json: unknown key 'budjet'")) as url:
            server.url = url
            with pytest.raises(DagsterDevError, match="failed to load: curation.json: unknown key 'budjet'"):
                wait_until_loaded(server, timeout=20)
    finally:
        assert stop_dagster_dev(server, grace=5).left == []


def test_a_code_location_still_loading_at_the_timeout_says_so(tmp_path):
    server = _group("sleep 300", tmp_path / "log")
    try:
        with _graphql_answering(_entry("LOADING")) as url:
            server.url = url
            with pytest.raises(DagsterDevError, match=r"did not load in 1 s \(kuration_definitions is LOADING\)"):
                wait_until_loaded(server, timeout=1)
            with _graphql_answering(_entry("LOADED")) as loaded:
                server.url = loaded
                assert wait_until_loaded(server, timeout=20) < 20
    finally:
        assert stop_dagster_dev(server, grace=5).left == []
