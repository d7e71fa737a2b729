"""Local worker processes: the one pool the feature pass (``score_sources(workers=N)``) and
the dataset writer (``write_dataset(write_workers=N)``) both run their tasks in.

Workers fork from a forkserver, a fresh single-threaded process that imported Kuration's
scoring and writing code once (:data:`PRELOAD`, and the main script when there is one), so
each worker starts in milliseconds
and never inherits the parent's threads (Arrow's pools make a plain fork unsafe). Where
forkserver is not available, spawn, which re-imports in every worker. A worker gets:

- the parent's ``sys.path`` (through the forkserver) and the parent's environment
  variables as they are when the pool starts (the forkserver itself keeps the environment
  of its first use, so a variable set later, such as an object store's credentials, would
  otherwise be missing);
- one Arrow thread (N workers already use N cores);
- the user code the run needs, imported by module name before its first task
  (:func:`import_worker_modules`): every plugin this process loaded
  (:func:`kuration.landing.plugins.loaded_plugin_modules`), then the modules the caller names.
  Importing happens in the task, not in the pool's initializer, so a module that fails
  reaches the caller as the :class:`~kuration.landing.plugins.PluginError` naming it (an
  initializer's error only breaks the pool);
- optionally, one pickled object shared by all its tasks (``shared=``), sent once per worker
  instead of once per task and unpickled after the modules are imported
  (:func:`shared_state`).

What this module does not do: decide what a task is, order results, or retry anything.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pickle
import sys
from multiprocessing import forkserver
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from kuration.landing.plugins import import_plugin, loaded_plugin_modules

#: What the forkserver imports once, before it forks any worker. The forkserver is one per
#: process and takes its preload list only when it first starts, so the list is the same
#: whichever pool starts it. pandas: pyarrow imports it on a worker's first to_numpy
#: (150 ms each); importing starts no threads, so the server can hold it.
PRELOAD = ("kuration.scoring", "kuration.output.write_workers", "kuration.sources.parquet", "pandas")

_SHARED: dict[str, Any] = {}


def worker_modules(extra: Iterable[str]) -> list[str]:
    """What every worker imports, in order: the loaded plugins (in their load order), then
    ``extra`` sorted. Code defined in ``__main__`` cannot be found by name in a worker and is
    left out (the worker then says the name is unregistered, or cannot unpickle it)."""
    plugins = loaded_plugin_modules()
    modules = {name for name in extra if name} - {"__main__", *plugins}
    return [*plugins, *sorted(modules)]


def worker_context(modules: Sequence[str] = ()) -> multiprocessing.context.BaseContext:
    """The forkserver context (spawn where there is none), with :data:`PRELOAD` and
    ``modules`` preloaded when the server has not started yet; each task imports the
    modules again (a no-op where they are loaded)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, *modules])
    _start_forkserver_on_this_sys_path()
    return context


def _start_forkserver_on_this_sys_path() -> None:
    """Start the forkserver (a no-op once it runs) with this process's extra ``sys.path``
    folders (a script's own folder, a plugin folder added at run time) on its
    ``PYTHONPATH``: Python 3.11's server is handed this process's ``sys.path`` but does not
    use it, so a module found only through it would be imported by every worker of every
    pool (for a script's classes, a second or more per pool) instead of once, by the server.
    Folders of the interpreter itself (the standard library, site-packages) are left out, so
    their order on the server's path stays as it is."""
    interpreter = {os.path.realpath(prefix) for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    extra = [os.path.abspath(p or os.curdir) for p in sys.path
             if not any(os.path.realpath(p or os.curdir).startswith(prefix + os.sep) for prefix in interpreter)]
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([*extra, *([saved] if saved else [])])
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _init_worker(environment: dict[str, str], shared: bytes | None) -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    os.environ.clear()
    os.environ.update(environment)
    _SHARED.clear()
    if shared is not None:
        _SHARED["pickled"] = shared


def process_pool(workers: int, *, modules: Sequence[str] = (), shared: bytes | None = None) -> cf.ProcessPoolExecutor:
    """A pool of ``workers`` worker processes (see the module docstring); ``shared`` is a
    pickle every worker can read back with :func:`shared_state`."""
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=worker_context(modules), initializer=_init_worker,
                                  initargs=(dict(os.environ), shared))


def import_worker_modules(modules: Sequence[str], *, declared_in: str, environment: str) -> None:
    """In a worker, before its task: the user code the parent loaded; a module that fails
    raises the PluginError naming it, ``declared_in`` and ``environment``."""
    for name in modules:
        import_plugin(name, declared_in=declared_in, environment=environment)


def shared_state() -> Any:
    """In a worker: the ``shared`` object its pool was made with, unpickled on first use."""
    if "value" not in _SHARED:
        if "pickled" not in _SHARED:
            raise RuntimeError("shared_state() outside a worker of a pool made with shared=")
        _SHARED["value"] = pickle.loads(_SHARED.pop("pickled"))
    return _SHARED["value"]


__all__ = ["PRELOAD", "import_worker_modules", "process_pool", "shared_state", "worker_context", "worker_modules"]
