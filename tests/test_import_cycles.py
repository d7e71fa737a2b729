"""No import cycle inside ``kuration/``.

A cycle makes the import order decide whether a name exists yet, so a harmless reordering
breaks an import far away; it is also a sign that something lives above its users. The fix
is to move what the lower module needs below both, never to defer an import into a
function: a deferred import is still a dependency (it runs when the function is first
called), so here it is an edge like any other, and a cycle it closes is reported.

The graph is read from the source with :mod:`ast`, without importing anything. Its edges
are every ``import`` and ``from ... import`` of a ``kuration`` module, at module level, in
``if`` / ``try`` / ``with`` blocks and inside functions and classes; ``from package import
name`` is an edge to ``package.name`` when that is a module, and to ``package`` otherwise.

Packages: importing ``kuration.output.spec`` first runs ``kuration/output/__init__.py``, so
an import from outside a package is also an edge to that package's ``__init__`` (and to
every package between). An import from inside the same package is not: the package is
already in ``sys.modules`` while its ``__init__`` re-exports its modules, and Python
handles siblings importing each other's modules; counting it would put every package that
re-exports in a cycle with itself.

Imports under ``if TYPE_CHECKING:`` count too. They never run, but they say that one
module's meaning depends on the other's: two modules that name each other's types are one
concept split in two, and the next person to use a name at run time turns the hidden cycle
into a real one. Names a package loads on first attribute access
(:mod:`kuration.lazy_exports`) are strings, not imports, and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kuration

ROOT = Path(kuration.__file__).parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(node: ast.AST):
    """Every import statement under ``node``: module level, nested blocks (``if TYPE_CHECKING:``
    included), functions and classes."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        else:
            yield from _imports(child)


def _packages_entered(target: str, importer: str) -> list[str]:
    """``target`` and the packages above it whose ``__init__`` runs for an import from
    ``importer``: those that do not contain ``importer``."""
    parts = target.split(".")
    above = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [target, *(p for p in above if not importer.startswith(p + "."))]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: {modules under root it imports}}`` for every module under ``root``."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:  # relative: against this module's package
                    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    target = ".".join([*base[: len(base) - node.level + 1], *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target for a in node.names]
            for target in targets:
                edges |= {t for t in _packages_entered(target, name) if t in paths and t != name}
        graph[name] = edges
    return graph


def _cycle_from(node: str, graph: dict[str, set[str]], within: set[str]) -> list[str]:
    """The shortest cycle through ``node`` inside one strongly connected component (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [node]
    while frontier:
        following = []
        for current in frontier:
            for nxt in sorted(graph[current] & within):
                if nxt == node:
                    path = [current]
                    while path[-1] != node:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), node]
                if nxt not in came_from:
                    came_from[nxt] = current
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{node} is in no cycle")


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per group of modules that import each other, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(_cycle_from(min(group), graph, group) for group in groups)


def test_kuration_has_no_import_cycle():
    graph = import_graph()
    assert "kuration.output.commit_protocol" in graph and graph["kuration.splits.resolve"]  # the walk saw the tree
    cycles = find_cycles(graph)
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles) + (
        "\nmove what the lower module needs below both (a deferred import only hides a cycle)")


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_graph_finds_a_cycle_and_names_it(tmp_path):
    root = _tree(tmp_path, {
        "a.py": "from pkg import b\n",
        "b.py": "import pkg.c\n",
        "c.py": "try:\n    from pkg.a import thing\nexcept ImportError:\n    pass\n",
    })
    assert find_cycles(import_graph(root)) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_deferred_and_type_checking_imports_are_edges(tmp_path):
    root = _tree(tmp_path, {
        "a.py": "from pkg.b import x\n",
        "b.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import y\nelse:\n    import "
                 "pkg.d\ndef f():\n    from pkg.c import z\n"),
        "c.py": "import json\n",
        "d.py": "",
    })
    assert import_graph(root)["pkg.b"] == {"pkg.a", "pkg.c", "pkg.d"}
    assert find_cycles(import_graph(root)) == [["pkg.a", "pkg.b", "pkg.a"]]  # the annotation-only cycle counts
    deferred = _tree(tmp_path / "deferred", {
        "a.py": "from pkg.b import x\n",
        "b.py": "class B:\n    def f(self):\n        from pkg.a import y\n",
    })
    assert find_cycles(import_graph(deferred)) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_an_import_from_outside_a_package_enters_its_init(tmp_path):
    root = _tree(tmp_path, {
        "sub/__init__.py": "from .m import v\n",
        "sub/m.py": "from pkg.sub.n import w\nfrom pkg import other\n",  # a sibling: sub/__init__ is already running
        "sub/n.py": "",
        "other.py": "",
    })
    graph = import_graph(root)
    assert graph["pkg.sub"] == {"pkg.sub.m"} and graph["pkg.sub.m"] == {"pkg.sub.n", "pkg.other"}
    assert find_cycles(graph) == []
    (root / "other.py").write_text("from pkg.sub.n import w\n")  # from outside: runs sub/__init__ first
    assert find_cycles(import_graph(root)) == [["pkg.other", "pkg.sub", "pkg.sub.m", "pkg.other"]]
