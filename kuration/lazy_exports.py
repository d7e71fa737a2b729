"""Package attributes imported on first use, for names whose modules are heavy (pandas,
pyarrow, h5py, zarr, the dataset writer) and that most processes importing the package never
touch: a training node that only reads shards must not pay for the scoring stack.

Two ways to declare them:

- :func:`lazy_getattr` with a ``{name: module}`` map (names type checkers see as ``Any``);
- :func:`type_checking_exports`: the package's ``__init__`` imports the names under ``if
  TYPE_CHECKING:``, so type checkers see their real types, and at run time each is imported
  from the module that block names on first access. The block is the one list of names
  (plus, in ``also``, names whose module sits above the package, as ``Any``).

A name that is also the name of one of the package's submodules (``write_track`` in
``kuration.output``) cannot be deferred: importing that submodule sets the package attribute
to the module, and ``__getattr__`` is never asked. Such names stay eager imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def lazy_getattr(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving each name in ``modules`` from its module."""
    return type_checking_exports(package, None, also=modules)


def type_checking_names(init_file: str | Path) -> dict[str, tuple[str, str]]:
    """``{exported name: (module, name in that module)}`` for every ``from M import N [as A]``
    under an ``if TYPE_CHECKING:`` at the top level of ``init_file``."""
    import ast  # here: every process imports this module, few ask for a deferred name

    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), str(init_file))
    names: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                    for alias in statement.names:
                        names[alias.asname or alias.name] = (statement.module, alias.name)
    return names


def type_checking_exports(package: str, init_file: str | None,
                          also: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A package ``__getattr__`` serving the names its ``__init__`` (``init_file``, or None)
    imports under ``if TYPE_CHECKING:``, and the names of ``also`` (``{name: module}``: names
    whose module the package must not import even for type checkers, since that would close
    an import cycle); each resolved name is then set on the package, so it is looked up once."""
    names: dict[str, tuple[str, str]] = {alias: (module, alias) for alias, module in (also or {}).items()}
    parsed = init_file is None

    def __getattr__(name: str) -> Any:
        nonlocal parsed
        if not parsed and init_file is not None:
            names.update(type_checking_names(init_file))
            parsed = True
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, original = names[name]
        value = getattr(importlib.import_module(module), original)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
