"""Plugins: modules of your own code (features, media providers, encoders) that Kuration
imports wherever it runs, so what they register exists in the Dagster code location, in the
runs it launches and in the scoring workers.

A plugin is a plain importable module that registers at import time::

    # my_plugins/drones.py
    from kuration.scoring.features import register_feature
    from kuration.sources.media import NpyIndexProvider, register_media_provider

    @register_feature("climb_rate")
    def climb_rate(track, segment) -> float: ...

    register_media_provider("thermal_npz", NpyIndexProvider)

It is declared in one of three ways, gathered in this order (a module declared twice is
imported once, under its first declaration):

1. a list passed to :func:`load_plugins` (the ``plugins`` key of the landing zone's
   ``curation.json``);
2. the ``KURATION_PLUGINS`` environment variable: module names separated by commas
   (whitespace around a name and empty items are ignored);
3. entry points of installed packages in the group ``kuration.landing.plugins``
   (``[project.entry-points."kuration.plugins"] drones = "my_plugins.drones"``), sorted by
   distribution and entry-point name. An entry point's value is ``module`` or
   ``module:attr``. The module is imported; an ``attr`` is looked up, so a typo fails, but
   it is never called, even when callable: registration happens at import because worker
   processes rebuild plugins by importing the module by name, and an import is all they
   repeat.

:func:`load_plugins` checks every name, imports the modules once per process (a second call
imports nothing again) in that order, and raises :class:`PluginError` naming the module,
where it was declared and what went wrong (not found: is it installed in this environment
or on ``PYTHONPATH``; a dependency missing; or the exception the module raised at import).
The modules it loaded are kept for the process (:func:`loaded_plugin_modules`):
:func:`kuration.scoring.score_sources` imports them in every local worker (forkserver or
spawn) and every Ray task, so a plugin must be importable there too. A forkserver worker
gets this process's ``sys.path``; a Ray worker gets the environment Ray was started with
(``PYTHONPATH`` set before ``ray.init``, or the package installed on every node).

What this module does not do: install anything, reload a module that changed (restart the
process), or undo a registration.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import keyword
import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kuration.errors import InputError, shown

#: The environment variable listing plugin modules, comma-separated.
PLUGINS_ENV = "KURATION_PLUGINS"
#: The entry-point group installed packages declare plugins in.
ENTRY_POINT_GROUP = "kuration.plugins"

# ``module`` or ``module:attr``, with optional extras in brackets (which are ignored), as
# importlib.metadata spells an entry point's value.
_ENTRY_VALUE = re.compile(r"^\s*(?P<module>[^:\[\]\s]+)\s*(?::\s*(?P<attr>[^\[\]\s]+)\s*)?(?:\[[^\]]*\]\s*)?$")


class PluginError(InputError):
    """A plugin module is wrongly named, cannot be found, or failed at import. The message
    names the module, where it was declared and how to fix it."""


@dataclass(frozen=True)
class PluginDeclaration:
    """One plugin module to import: its name, the ``attr`` an entry point names (or
    ``None``), and where it was declared (for messages)."""

    module: str
    declared_in: str
    attr: str | None = None


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin module this process imported: its name, where it was declared and the file
    it came from (``None`` for a namespace package)."""

    module: str
    declared_in: str
    file: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "declared_in": self.declared_in, "file": self.file}


_LOADED: dict[str, LoadedPlugin] = {}
_LOCK = threading.RLock()


def parse_plugin_list(text: str) -> list[str]:
    """The module names in a ``KURATION_PLUGINS`` value: split on commas, stripped, empty
    items dropped. Names are checked when they are loaded."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _is_dotted_name(name: str) -> bool:
    parts = name.split(".")
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in parts)


def check_module_name(name: Any, *, declared_in: str) -> str:
    """``name`` if it is a dotted Python module name (``pkg.module``); else
    :class:`PluginError` naming it and where it was declared."""
    if not isinstance(name, str):
        raise PluginError(f"plugin {shown(name)} (declared in {declared_in}): a plugin is a module name (a string "
                          f"like 'my_plugins.features'), got {type(name).__name__}")
    if not _is_dotted_name(name):
        raise PluginError(f"plugin module {shown(name)} (declared in {declared_in}): not a Python module name; write a "
                          "dotted name like 'my_plugins.features' whose parts are identifiers (no empty part, no "
                          "spaces, no keyword, no file path or '.py')")
    return name


def _configured(configured: Sequence[str], declared_in: str) -> list[PluginDeclaration]:
    if isinstance(configured, (str, bytes)) or not isinstance(configured, Sequence):
        raise PluginError(f"plugins (declared in {declared_in}): must be a list of module names, e.g. "
                          f"[\"my_plugins.features\"], got {shown(configured)}")
    return [PluginDeclaration(check_module_name(name, declared_in=f"{declared_in}, item {i}"), declared_in)
            for i, name in enumerate(configured)]


def _from_env(environ: Mapping[str, str]) -> list[PluginDeclaration]:
    return [PluginDeclaration(check_module_name(name, declared_in=PLUGINS_ENV), PLUGINS_ENV)
            for name in parse_plugin_list(environ.get(PLUGINS_ENV, ""))]


def _from_entry_points() -> list[PluginDeclaration]:
    found = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
        where = f"entry point {ep.name!r} of {dist} (group {ENTRY_POINT_GROUP})"
        match = _ENTRY_VALUE.match(ep.value)
        attr = match["attr"] if match else None
        if match is None or (attr is not None and not _is_dotted_name(attr)):
            raise PluginError(f"plugin {shown(ep.value)} ({where}): an entry point's value must be 'module' or "
                              "'module:attr'; fix the package's entry_points and reinstall it")
        found.append((dist, ep.name, PluginDeclaration(check_module_name(match["module"], declared_in=where), where,
                                                       attr)))
    return [declaration for *_, declaration in sorted(found, key=lambda item: (item[0], item[1]))]


def declared_plugins(configured: Sequence[str] = (), *, declared_in: str = "curation.json",
                     environ: Mapping[str, str] | None = None,
                     entry_points: bool = True) -> list[PluginDeclaration]:
    """Every plugin declared, in load order, each module once (its first declaration),
    names checked, nothing imported. ``configured`` first (labelled ``declared_in``), then
    ``KURATION_PLUGINS`` in ``environ`` (default ``os.environ``), then the installed
    packages' ``kuration.landing.plugins`` entry points unless ``entry_points=False``."""
    declarations = _configured(configured, declared_in)
    declarations += _from_env(os.environ if environ is None else environ)
    if entry_points:
        declarations += _from_entry_points()
    first: dict[str, PluginDeclaration] = {}
    for declaration in declarations:
        first.setdefault(declaration.module, declaration)
    return list(first.values())


def _import_failure(name: str, declared_in: str, environment: str, exc: BaseException) -> PluginError:
    where = f"plugin module {name!r} (declared in {declared_in})"
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        missing = exc.name
        if name == missing or name.startswith(missing + "."):
            searched = shown([p for p in sys.path if p][:6], 300)
            return PluginError(f"{where} cannot be imported: {exc}. Install the package that provides it in "
                               f"{environment}, or add the folder holding it to PYTHONPATH (searched {searched})")
        return PluginError(f"{where} failed to import: it imports {missing!r}, which is not installed in "
                           f"{environment} ({exc}); install it there")
    return PluginError(f"{where} raised at import: {type(exc).__name__}: {exc}. Fix the module (the traceback of "
                       "the cause shows the line), or stop declaring it")


def import_plugin(name: str, *, declared_in: str, attr: str | None = None,
                  environment: str = "this Python environment") -> ModuleType:
    """Import module ``name`` (once per process, as any import) and, when given, check
    that it has ``attr`` (an entry point's ``module:attr``; looked up, never called).
    Failures raise :class:`PluginError` naming the module, ``declared_in`` and how to fix it
    in ``environment``."""
    check_module_name(name, declared_in=declared_in)
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # anything a plugin raises at import becomes one error naming it
        raise _import_failure(name, declared_in, environment, exc) from exc
    if attr is not None:
        target: Any = module
        for part in attr.split("."):
            if not hasattr(target, part):
                raise PluginError(f"plugin module {name!r} (declared in {declared_in}) has no attribute {attr!r}; "
                                  "fix the entry point's value ('module' or 'module:attr')")
            target = getattr(target, part)
    return module


def load_plugins(configured: Sequence[str] = (), *, declared_in: str = "curation.json",
                 environ: Mapping[str, str] | None = None, entry_points: bool = True,
                 environment: str = "this Python environment") -> tuple[LoadedPlugin, ...]:
    """Import every declared plugin (see :func:`declared_plugins` for the order and the
    arguments) and return them, in load order: the ones loaded by an earlier call too,
    under their first declaration. Idempotent: a module is imported once per process.
    Raises :class:`PluginError` at the first name that is invalid or fails to import
    (nothing after it is imported). ``environment`` names where a missing module should
    be installed, for the message (e.g. "the Dagster code location's environment")."""
    declarations = declared_plugins(configured, declared_in=declared_in, environ=environ, entry_points=entry_points)
    loaded = []
    with _LOCK:
        for declaration in declarations:
            known = _LOADED.get(declaration.module)
            if known is None:
                module = import_plugin(declaration.module, declared_in=declaration.declared_in,
                                       attr=declaration.attr, environment=environment)
                known = LoadedPlugin(declaration.module, declaration.declared_in, getattr(module, "__file__", None))
                _LOADED[declaration.module] = known
            loaded.append(known)
    return tuple(loaded)


def loaded_plugins() -> tuple[LoadedPlugin, ...]:
    """Every plugin this process loaded through :func:`load_plugins`, in load order."""
    with _LOCK:
        return tuple(_LOADED.values())


def loaded_plugin_modules() -> tuple[str, ...]:
    """The module names of :func:`loaded_plugins`: what every worker process imports."""
    with _LOCK:
        return tuple(_LOADED)


def forget_loaded_plugins() -> None:
    """Forget which plugins were loaded (their modules stay imported and what they
    registered stays registered). For tests that load different plugins in turn."""
    with _LOCK:
        _LOADED.clear()


__all__ = [
    "ENTRY_POINT_GROUP", "PLUGINS_ENV", "LoadedPlugin", "PluginDeclaration", "PluginError", "check_module_name",
    "declared_plugins", "forget_loaded_plugins", "import_plugin", "load_plugins", "loaded_plugin_modules",
    "loaded_plugins", "parse_plugin_list",
]
