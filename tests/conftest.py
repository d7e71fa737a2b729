"""Session-wide fixtures: states too slow to build for every test that reads them.

``demo``: ``kuration-demo`` run once per session on a private instance (the whole asset
graph on the bundled demo corpus, every job's run); each test that uses it takes a fresh
copy at the place it was built (:meth:`tests.built_once.BuiltOnce.fresh`) and finds it as
``kuration-demo`` left it.
"""

from __future__ import annotations

import pytest

from tests.built_once import BuiltOnce, build_once
from tests.ui.dagster_dev import DemoRun, run_demo


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> BuiltOnce[DemoRun]:
    """The demo, built once (about 30 s on two quiet cores); its folders are
    :class:`tests.ui.dagster_dev.DemoFolders` of what :meth:`~tests.built_once.BuiltOnce.fresh` returns."""
    return build_once(tmp_path_factory.mktemp("demo"), run_demo)
