"""Which tests one pytest-xdist worker runs together: those that share a fixture built once.

scripts/test.sh runs the suite on parallel workers (``pytest -n N --dist loadgroup``). A
fixture wider than a function (a corpus scored once per module, the demo built once per
session) is built once in each worker that runs one of its users, so tests handed out one by
one would build it once per worker. The tests joined by such a fixture, directly or through
a chain of them (a module's tests share its corpus, one of them also uses the session's
demo, ...), form one group: one worker runs the whole group and builds each of its fixtures
once, as a run without workers does. A test that shares no such fixture is a group of its
own, handed to whichever worker is free. Tests marked ``xdist_group("name")`` are joined as
pytest-xdist documents.

A fixture a test's fixtures request by name (``request.getfixturevalue``) is not in its
closure: the test says so with ``@pytest.mark.requests_fixture("name")`` (or the module with
``pytestmark``), and it counts as used.

Only the suite's own fixtures count (those of a test module, a test class, such as a
:mod:`kuration.testing` kit's, or a conftest): a plugin's wide ones (``tmp_path_factory``,
``pytestconfig``) cost nothing and would join every test into one group. A fixture's instance is what is
shared, so a module-scoped fixture defined in a conftest joins the tests of one module only.

This module is a pytest plugin (``tests/conftest.py`` loads it): it registers the
``requests_fixture`` mark and, when pytest-xdist runs with ``--dist loadgroup``, the hooks below.

How the groups reach the scheduler: xdist's own ``loadgroup`` appends ``@group`` to each
marked test's node id on the worker, which pytest 9.2's structured node ids ignore
(pytest-xdist issue 1386), so the tests would be handed out one by one. Here the workers
write the groups they computed from their collection to a folder the controller named
(:data:`FOLDER_KEY` in their ``workerinput``), and :class:`SharedFixtureScheduling`, a
loadscope scheduler whose scope is the group, reads them once every worker has collected.
Node ids stay as pytest makes them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

#: the key of ``workerinput`` that names the folder the workers write their groups to
FOLDER_KEY = "kuration_worker_groups"

#: on the controller, the folder its workers write their groups to
_FOLDER = pytest.StashKey[Path]()

#: the scopes whose fixture one built instance serves several tests
_SHARED_SCOPES = ("class", "module", "package", "session")


def shared_instances(item: Any) -> list[str]:
    """The wide fixture instances of the project that test ``item`` uses (its fixture closure
    and what its ``requests_fixture`` marks name), each named ``<where the instance lives>::<fixture
    name>``, and its ``xdist_group`` marks as ``xdist_group::<name>``."""
    found = [f"xdist_group::{mark.args[0] if mark.args else mark.kwargs.get('name', 'default')}"
             for mark in item.iter_markers("xdist_group")]
    requested = [mark.args[0] for mark in item.iter_markers("requests_fixture")]
    for name in [*item.fixturenames, *requested]:
        definitions = (item._fixtureinfo.name2fixturedefs.get(name)
                       or item.session._fixturemanager.getfixturedefs(name, item))
        if not definitions:  # "request", or a name given by parametrize
            continue
        fixture = definitions[-1]  # the one in effect here (a closer definition overrides)
        if fixture.scope in _SHARED_SCOPES and _defined_in_the_suite(fixture):
            found.append(f"{_instance_home(item, fixture.scope, fixture.baseid)}::{name}")
    return found


def _defined_in_the_suite(fixture: Any) -> bool:
    """Whether a fixture is defined in a test module, a test class or a conftest, rather than by a
    plugin (pytest's own ``tmp_path_factory``, ...): a plugin's belongs to the session, as does
    one of a conftest in the root folder."""
    return not isinstance(fixture.node, (pytest.Session, type(None))) or \
        fixture.func.__module__.rpartition(".")[2] == "conftest"


def _instance_home(item: Any, scope: str, baseid: str) -> str:
    """The node one instance of a fixture of ``scope`` (defined at ``baseid``) serves."""
    if scope in ("session", "package"):
        return baseid
    module = item.nodeid.split("::", 1)[0]
    if scope == "module":
        return module
    owner = item.getparent(pytest.Class)
    return owner.nodeid if owner is not None else module


def worker_groups(instances_by_test: Sequence[tuple[str, Iterable[str]]]) -> dict[str, str]:
    """For each test (node id, the shared instances it uses) that uses one, its group's name:
    of the instances that join its group, the one the earliest test uses."""
    seen: dict[str, int] = {}  # instance -> the order it was first seen in
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    uses = [(test, list(instances)) for test, instances in instances_by_test]
    for _test, keys in uses:
        for key in keys:
            parent.setdefault(key, key)
            seen.setdefault(key, len(seen))
        for key in keys[1:]:
            # the earlier seen root stays the root: names do not depend on the order of the joins
            earlier, later = sorted((root(keys[0]), root(key)), key=seen.__getitem__)
            parent[later] = earlier
    return {test: root(keys[0]) for test, keys in uses if keys}


def write_groups(folder: Path, worker: str, items: Sequence[Any]) -> None:
    """A worker's groups of the tests it collected, for the controller's scheduler."""
    groups = worker_groups([(item.nodeid, shared_instances(item)) for item in items])
    (folder / f"{worker}.json").write_text(json.dumps(groups))


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's loadscope scheduling with the groups of :func:`worker_groups` as its scopes: a
    group goes to one worker whole, larger groups first, then the tests of no group one by one."""

    def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
        super().__init__(config, log)
        self.folder = folder
        self.groups: dict[str, str] = {}

    def schedule(self) -> None:
        if self.collection is None:  # every worker has collected, and written its groups
            # all workers collect the same tests (xdist checks), so their groups agree
            for written in sorted(self.folder.glob("*.json")):
                self.groups.update(json.loads(written.read_text()))
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        return self.groups.get(nodeid, nodeid)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requests_fixture(name): the test's fixtures call "
                                       "request.getfixturevalue(NAME); parallel workers run it where NAME is built")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hooks (on the controller) are there only with it
def pytest_configure_node(node: Any) -> None:
    if node.config.getvalue("dist") == "loadgroup":
        if _FOLDER not in node.config.stash:
            node.config.stash[_FOLDER] = Path(tempfile.mkdtemp(prefix="kuration-worker-groups-"))
        node.workerinput[FOLDER_KEY] = str(node.config.stash[_FOLDER])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> SharedFixtureScheduling | None:
    folder = config.stash.get(_FOLDER, None)
    return SharedFixtureScheduling(config, log, folder) if folder is not None else None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker tells the controller it has collected
def pytest_collection_finish(session: pytest.Session) -> None:
    if folder := getattr(session.config, "workerinput", {}).get(FOLDER_KEY):
        write_groups(Path(folder), session.config.workerinput["workerid"], session.items)


def pytest_unconfigure(config: pytest.Config) -> None:
    if (folder := config.stash.get(_FOLDER, None)) is not None:
        shutil.rmtree(folder, ignore_errors=True)
