"""Every code block of README.md and docs/*.md runs, so the docs cannot drift from the code.

Each file's blocks run in order in one process (:mod:`tests.docs_blocks` says what each kind
of block must do), in a fresh working directory holding what a reader of the docs has:

- ``landing/``: a small landing zone (three recordings of the demo fleet, with
  ``tests/landing``'s ``curation.json``), standing for "your own data";
- ``demo_output/``: what ``bash scripts/demo.sh`` leaves there (the session's ``demo``,
  put back as it was built), for a file whose blocks name it;
- ``.venv``: this interpreter's environment, so ``.venv/bin/kuration`` is the one under test.

The blocks that cannot run inside a test are :data:`NOT_RUN`, each with why and what is
checked instead; nothing else is left out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs_blocks import REPO, Block, Step, blocks, doc_files, kind, readme_block, steps, write_steps
from tests.landing.small_zone import write_small_zone
from tests.landing_check.landing_factory import copy_zone

VENV_BIN = Path(sys.prefix) / "bin"


def _help_names(command: list[str], *flags: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    missing = [flag for flag in flags if flag not in done.stdout]
    assert not missing, f"{' '.join(command)} does not mention {missing}:\n{done.stdout}"


def _demo_script_runs_the_demo_verb(request: pytest.FixtureRequest, block: Block) -> None:
    script = (REPO / "scripts" / "demo.sh").read_text()
    assert script.rstrip().endswith('exec .venv/bin/kuration demo "$@"'), script
    _help_names([str(VENV_BIN / "kuration"), "demo", "--help"], "--out", "--seed", "--split-seed", "demo_output")
    assert request.getfixturevalue("demo").built.code == 0


def _ci_runs_the_test_block(request: pytest.FixtureRequest, block: Block) -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1] == f"exec {block.text.strip()}", ci


def _ui_script_help(request: pytest.FixtureRequest, block: Block) -> None:
    _help_names(["bash", "scripts/ui.sh", "--help"], "--landing", "--storage", "--plugins", "--port")


def _run_help(request: pytest.FixtureRequest, block: Block) -> None:
    _help_names([str(VENV_BIN / "kuration"), "run", "--help"], "--landing", "--storage", "--config")


def _kit_block_is_the_one_the_kit_test_runs(request: pytest.FixtureRequest, block: Block) -> None:
    assert readme_block(block.first_line) == block.text


def _sensor_and_schedule_exist(request: pytest.FixtureRequest, block: Block) -> None:
    from kuration_definitions import defs

    named = re.findall(r"dagster (sensor|schedule) start (\w+)", block.text)
    assert named, block.text
    for what, name in named:
        found = defs.get_sensor_def(name) if what == "sensor" else defs.get_schedule_def(name)
        assert found.name == name


@dataclass(frozen=True)
class NotRun:
    reason: str
    check: Callable[[pytest.FixtureRequest, Block], None]


#: The blocks no test runs as written, by (file, first line): why, and what is checked instead.
NOT_RUN: dict[tuple[str, str], NotRun] = {
    ("README.md", "bash scripts/demo.sh"): NotRun(
        "installs .venv and writes demo_output/ and the instance in the repository itself; the session's "
        "`demo` fixture runs the same `kuration demo`", _demo_script_runs_the_demo_verb),
    ("README.md", "bash scripts/test.sh"): NotRun(
        "the whole suite, this test included", _ci_runs_the_test_block),
    ("README.md", "bash scripts/ui.sh"): NotRun(
        "a server that runs until stopped; tests/ui starts it and drives the UI", _ui_script_help),
    ("README.md", ".venv/bin/kuration run --landing landing/ --storage out/"): NotRun(
        "the whole graph through Dagster, about a minute; the `demo` fixture runs the same graph runner",
        _run_help),
    ("README.md", "# tests/test_thermal.py                   pip install \"kuration[testing]\", then: pytest "
                  "tests/test_thermal.py"): NotRun(
        "a pytest run of its own (30+ kit tests); tests/kits/test_readme_example.py runs it with the README's plugin",
        _kit_block_is_the_one_the_kit_test_runs),
    ("docs/operations.md", "DAGSTER_HOME=$PWD .venv/bin/dagster sensor start new_recordings_sensor -w "
                           "workspace.yaml"): NotRun(
        "switches automation on in the repository's own instance; tests/automation switches the sensor on in "
        "a private one", _sensor_and_schedule_exist),
}


@pytest.fixture(scope="module")
def small_landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_zone(tmp_path_factory.mktemp("docs_landing") / "landing")


def _workdir(request: pytest.FixtureRequest, planned: list[Step], small_landing: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    copy_zone(small_landing, work / "landing")
    (work / ".venv").symlink_to(Path(sys.prefix))
    if any("demo_output" in step.block.text for step in planned):
        live = request.getfixturevalue("demo").fresh()
        (work / "demo_output").symlink_to(live / "demo")
    return work


@pytest.mark.requests_fixture("demo")  # for the files whose blocks read the demo's output
@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_block_runs(doc: Path, small_landing: Path, tmp_path: Path, request: pytest.FixtureRequest):
    """Runs every block of one file in order (the files that read the demo's output wait for
    the session's demo once; inspect.md's and rollouts.md's blocks read all of its 3,322
    shards and write a replay store, several seconds each)."""
    planned = steps(doc, set(NOT_RUN))
    if not planned:
        return
    work = _workdir(request, planned, small_landing, tmp_path)
    write_steps(planned, tmp_path / "steps.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")])}
    env.pop("DAGSTER_HOME", None)
    done = subprocess.run([sys.executable, "-m", "tests.docs_blocks", str(tmp_path / "steps.json")], cwd=work,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}"
    ran = [line for line in done.stderr.splitlines() if line.startswith("ran ")]
    assert len(ran) == len(planned), done.stderr


@pytest.mark.requests_fixture("demo")  # the README's demo block is checked on the demo's exit code
@pytest.mark.parametrize("key", list(NOT_RUN), ids=lambda key: f"{key[0]}:{key[1][:40]}")
def test_a_block_not_run_is_checked_another_way(key: tuple[str, str], request: pytest.FixtureRequest):
    doc, first_line = key
    found = [block for block in blocks(REPO / doc) if block.first_line == first_line]
    assert len(found) == 1, f"{doc} has {len(found)} blocks starting {first_line!r}; NOT_RUN names one"
    NOT_RUN[key].check(request, found[0])


def test_every_block_has_a_kind_and_docs_keep_few():
    """Every block is of a kind the runner runs (an unknown info string fails here, never
    skipped), and the docs prefer a few real examples to many fragments."""
    every = [block for doc in doc_files() for block in blocks(doc)]
    for block in every:
        kind(block)
    assert len(every) <= 60, [block.where for block in every]
