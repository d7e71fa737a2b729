"""Session-wide fixtures, and the end-of-run list of slow tests that do not say why.

``demo``: ``kuration-demo`` run once per session on a private instance (the whole asset
graph on the bundled demo corpus, every job's run); each test that uses it takes a fresh
copy at the place it was built (:meth:`tests.built_once.BuiltOnce.fresh`) and finds it as
``kuration-demo`` left it.

After the run, the tests over :data:`tests.slow_tests.SLOW_TEST_SECONDS` without a docstring
are listed (:mod:`tests.slow_tests`). Each test's report says whether it has one, so the list
is the same when pytest-xdist workers ran the tests and only their reports reach this process.

On pytest-xdist workers (``-n N --dist loadgroup``, as scripts/test.sh runs the suite), the
tests that share a fixture built once go to one worker together (:mod:`tests.worker_groups`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.built_once import BuiltOnce, build_once
from tests.slow_tests import SLOW_TEST_SECONDS, documented, undocumented_slow_tests
from tests.ui.dagster_dev import DemoRun, run_demo

#: the plugin that sends the tests sharing a fixture built once to one pytest-xdist worker
pytest_plugins = ["tests.worker_groups"]

_documented: dict[str, bool] = {}
_seconds: dict[str, float] = {}


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> BuiltOnce[DemoRun]:
    """The demo, built once (about 30 s on two quiet cores); its folders are
    :class:`tests.ui.dagster_dev.DemoFolders` of what :meth:`~tests.built_once.BuiltOnce.fresh` returns."""
    return build_once(tmp_path_factory.mktemp("demo"), run_demo)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[pytest.TestReport]:
    report = yield
    report.documented = documented(getattr(item, "function", None))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    _documented[report.nodeid] = getattr(report, "documented", True)


def pytest_terminal_summary(terminalreporter) -> None:
    if slow := undocumented_slow_tests(_seconds, _documented):
        terminalreporter.write_sep("=", f"tests over {SLOW_TEST_SECONDS:.0f} s without a docstring saying why")
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")
