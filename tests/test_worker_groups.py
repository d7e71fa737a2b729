"""The groups of tests one pytest-xdist worker runs together (tests/worker_groups.py): the pure
grouping, and a small suite run on two workers that builds each shared fixture once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.worker_groups import worker_groups

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]


def test_tests_joined_by_a_chain_of_shared_instances_are_one_group_named_by_the_first_instance():
    uses = [
        ("a.py::one", ["a.py::corpus"]),
        ("a.py::two", ["a.py::corpus", "tests::demo"]),
        ("b.py::three", ["tests::demo"]),
        ("c.py::alone", []),
        ("d.py::four", ["d.py::store"]),
        ("e.py::five", ["e.py::other", "tests::demo"]),
        ("d.py::six", ["d.py::store"]),
    ]
    assert worker_groups(uses) == {"a.py::one": "a.py::corpus", "a.py::two": "a.py::corpus",
                                   "b.py::three": "a.py::corpus", "e.py::five": "a.py::corpus",
                                   "d.py::four": "d.py::store", "d.py::six": "d.py::store"}
    # the name does not depend on the order the instances join in
    assert set(worker_groups(list(reversed(uses))).values()) == {"e.py::other", "d.py::store"}


SUITE = {
    "conftest.py": '''
import json, os, pytest
from pathlib import Path

def record(what):
    with open(os.environ["GROUPS_LOG"], "a") as log:
        log.write(json.dumps([what, os.environ.get("PYTEST_XDIST_WORKER", "main")]) + "\\n")

@pytest.fixture(scope="session")
def expensive():
    record("built expensive")

@pytest.fixture(scope="module")
def corpus():
    record("built corpus")
''',
    "test_a.py": '''
import pytest
from conftest import record

@pytest.mark.parametrize("i", range(4))
def test_uses_the_corpus(corpus, i):
    record("a corpus")

def test_uses_both(corpus, expensive):
    record("a both")
''',
    "test_b.py": '''
import pytest
from conftest import record

@pytest.fixture
def late(request):
    return request.getfixturevalue("expensive")

@pytest.mark.requests_fixture("expensive")
def test_takes_it_by_name(late):
    record("b by name")

@pytest.mark.parametrize("i", range(12))
def test_shares_nothing(i):
    record("b alone")
''',
}


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, log: Path, *args: str) -> list[list[str]]:
    """SUITE run by a pytest of its own with this plugin and ``args``; what it recorded, in order."""
    pytester.makepyfile(**SUITE)
    monkeypatch.setenv("GROUPS_LOG", str(log))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # set when this test itself runs on a worker
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "tests.worker_groups", "-p", "no:cacheprovider",
                          "--strict-markers", "-q", *args)
    result.assert_outcomes(passed=18)
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_two_workers_build_each_shared_fixture_once_and_run_its_users_together(pytester, monkeypatch, tmp_path):
    """Two worker processes start and collect (a few seconds)."""
    events = _run(pytester, monkeypatch, tmp_path / "log.jsonl", "-n", "2", "--dist", "loadgroup")
    assert sorted(what for what, _worker in events if what.startswith("built")) == ["built corpus", "built expensive"]
    shared = {worker for what, worker in events if what != "b alone"}
    assert len(shared) == 1 and shared != {"main"}  # every user of the corpus or the expensive fixture, on one worker
    assert [what for what, _worker in events].count("b alone") == 12


def test_without_workers_the_mark_is_known_and_the_suite_runs_in_one_process(pytester, monkeypatch, tmp_path):
    events = _run(pytester, monkeypatch, tmp_path / "log.jsonl", "-p", "no:xdist")
    assert {worker for _what, worker in events} == {"main"}
