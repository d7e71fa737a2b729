"""``scripts/ui.sh`` for the UI tests: the demo on a private instance, the server (``dg dev``)
started in its own process group, waited for until the code location has loaded, and stopped by
its PID.

Not a test module: the UI tests import it (tests may not import each other).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UI_SCRIPT = REPO / "scripts" / "ui.sh"
#: The code location workspace.yaml loads, as the UI names it.
LOCATION = "kuration_definitions"
#: Telemetry off: the instance must not phone home, and the UI test watches that it does not.
INSTANCE_YAML = "telemetry:\n  enabled: false\n"

_LOCATION_QUERY = """{ workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } ... on PythonError { message } } }"""


class DagsterDevError(Exception):
    """The demo or the server did not come up; the message ends with the tail of its log."""


def write_private_home(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return home


def log_tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace") if log.exists() else "(no log written)"
    return "\n".join(text.splitlines()[-lines:])


def _environment(home: Path, landing: Path, storage: Path) -> dict[str, str]:
    environment = dict(os.environ)
    # the repository first: its packages (a worktree's too) are the ones the code location loads
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), environment.get("PYTHONPATH", "")) if p)
    environment.update({"DAGSTER_HOME": str(home), "KURATION_LANDING_ZONE": str(landing),
                        "KURATION_STORAGE_ROOT": str(storage)})
    return environment


@dataclass(frozen=True)
class DemoFolders:
    """Where :func:`run_demo` puts the demo: the private instance's home, and the landing zone
    and storage root ``kuration-demo --out`` writes."""

    home: Path
    landing: Path
    storage: Path

    @classmethod
    def under(cls, root: Path) -> DemoFolders:
        return cls(home=root / "dagster_home", landing=root / "demo" / "landing", storage=root / "demo" / "storage")


@dataclass(frozen=True)
class DemoRun:
    """What ``kuration-demo`` returned and printed on standard output."""

    code: int
    out: str


def run_demo(root: Path) -> DemoRun:
    """``kuration-demo --out ROOT/demo`` on a private instance in ``ROOT/dagster_home``
    (:class:`DemoFolders`): the demo landing zone, every job's run, the artifacts. It runs in
    this process, as ``main`` runs from the command line, with ``DAGSTER_HOME`` set for the
    call only."""
    from kuration_definitions.demo_job import main

    folders = DemoFolders.under(root)
    write_private_home(folders.home)
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(printed):
        env.setenv("DAGSTER_HOME", str(folders.home))
        code = main(["--out", str(folders.landing.parent)])
    return DemoRun(code=code, out=printed.getvalue())


def _restore_default_signals() -> None:
    # a parent that ignores SIGINT/SIGTERM (a CI runner, a background shell without `set -m`)
    # passes that on, and a server that ignores them can only be killed
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@dataclass
class DagsterDev:
    """A running ``dagster dev``: its process (the leader of its own process group) and where it answers."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def group(self) -> int:
        return self.process.pid

    def graphql(self, query: str, timeout: float = 10) -> dict:
        request = urllib.request.Request(f"{self.url}/graphql", data=json.dumps({"query": query}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)


def start_dagster_dev(home: Path, landing: Path, storage: Path, port: int, log: Path) -> DagsterDev:
    """``scripts/ui.sh`` itself, as a person starts it (it ends in ``dg dev``, which takes its
    process id), in a new session: its own process group, so :func:`stop_dagster_dev` reaches
    the webserver, the daemon, the code server and the runs they start."""
    sink = log.open("w")
    try:
        process = subprocess.Popen(
            ["bash", str(UI_SCRIPT), "--landing", str(landing), "--storage", str(storage), "--port", str(port)],
            cwd=REPO, env=_environment(home, landing, storage), stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_restore_default_signals)
    finally:
        sink.close()
    return DagsterDev(process=process, url=f"http://127.0.0.1:{port}", log=log)


def wait_until_loaded(server: DagsterDev, timeout: float = 120) -> float:
    """Seconds until the webserver answers GraphQL and the code location has loaded; a load
    error, an exited server or the timeout raise :class:`DagsterDevError` with the log's tail."""
    started = time.monotonic()
    last = "no answer yet"
    while time.monotonic() - started < timeout:
        if server.process.poll() is not None:
            raise DagsterDevError(f"dagster dev exited {server.process.returncode} before the code location "
                                  f"loaded; the end of {server.log}:\n{log_tail(server.log)}")
        try:
            answer = server.graphql(_LOCATION_QUERY, timeout=5)["data"]["workspaceOrError"]
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            last = f"webserver not answering: {exc}"
        else:
            entries = {entry["name"]: entry for entry in answer.get("locationEntries", [])}
            entry = entries.get(LOCATION)
            if entry is None:
                last = f"no {LOCATION} location yet (workspace: {sorted(entries) or answer})"
            elif entry["locationOrLoadError"] and entry["locationOrLoadError"]["__typename"] == "PythonError":
                raise DagsterDevError(f"the {LOCATION} code location failed to load: "
                                      f"{entry['locationOrLoadError']['message']}\n{log_tail(server.log)}")
            elif entry["loadStatus"] == "LOADED" and entry["locationOrLoadError"]:
                return time.monotonic() - started
            else:
                last = f"{LOCATION} is {entry['loadStatus']}"
        time.sleep(0.5)
    raise DagsterDevError(f"dagster dev at {server.url}: the {LOCATION} code location did not load in {timeout:.0f} s "
                          f"({last}); the end of {server.log}:\n{log_tail(server.log)}")


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes in process group ``group``, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # the command name is in parentheses and may hold spaces: the fields after it are fixed
        fields = stat[stat.rindex(")") + 2:].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


@dataclass
class Stopped:
    seconds: float
    #: whether SIGTERM was not enough and the group was killed
    killed: bool
    #: members of the group still alive at the end: none, unless one escaped SIGKILL
    left: list[int]


def stop_dagster_dev(server: DagsterDev, grace: float = 30) -> Stopped:
    """SIGTERM to ``dagster dev`` itself, which stops its webserver, daemon and code server;
    SIGKILL to the whole process group for whatever is left after ``grace`` seconds.

    Not SIGTERM to the group: the code server would exit before ``dagster dev`` asked it to,
    and ``dagster dev`` would start a new one that outlives it."""
    started = time.monotonic()
    try:
        os.kill(server.process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    while time.monotonic() - started < grace and group_members(server.group):
        server.process.poll()  # reap the leader as soon as it exits
        time.sleep(0.2)
    killed = bool(group_members(server.group))
    if killed:
        try:
            os.killpg(server.group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for _ in range(50):
            server.process.poll()
            if not group_members(server.group):
                break
            time.sleep(0.1)
    try:
        server.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return Stopped(seconds=time.monotonic() - started, killed=killed, left=group_members(server.group))
