"""Session-wide fixtures, and the end-of-run list of slow tests that do not say why.

``demo``: ``kuration-demo`` run once per session on a private instance (the whole asset
graph on the bundled demo corpus, every job's run); each test that uses it takes a fresh
copy at the place it was built (:meth:`tests.built_once.BuiltOnce.fresh`) and finds it as
``kuration-demo`` left it.

After the run, the tests over :data:`tests.slow_tests.SLOW_TEST_SECONDS` without a docstring
are listed (:mod:`tests.slow_tests`).
"""

from __future__ import annotations

import pytest

from tests.built_once import BuiltOnce, build_once
from tests.slow_tests import SLOW_TEST_SECONDS, documented, undocumented_slow_tests
from tests.ui.dagster_dev import DemoRun, run_demo

_documented: dict[str, bool] = {}
_seconds: dict[str, float] = {}


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> BuiltOnce[DemoRun]:
    """The demo, built once (about 30 s on two quiet cores); its folders are
    :class:`tests.ui.dagster_dev.DemoFolders` of what :meth:`~tests.built_once.BuiltOnce.fresh` returns."""
    return build_once(tmp_path_factory.mktemp("demo"), run_demo)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _documented.update((item.nodeid, documented(getattr(item, "function", None))) for item in items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if slow := undocumented_slow_tests(_seconds, _documented):
        terminalreporter.write_sep("=", f"tests over {SLOW_TEST_SECONDS:.0f} s without a docstring saying why")
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")
