"""Running a feature pass's per-source tasks: in this process, in local worker processes, or
on Ray.

A task scores a batch of sources (:func:`score_one_source` each) and returns ONE table of
their rows plus ``(source_id, rows, error, elapsed seconds)`` per source, in the table's
order: a worker round trip, and unpickling a table, per source cost more than a small
source's scoring. A source's failure is recorded in its item, never raised by the task:
the run decides (``on_error``). Every worker imports the user code the run needs, by
module name, before its first task (:func:`modules_for_workers`).

:class:`PassRunner` is what a run holds: ``runner.batches(sources, strategy)`` yields each
batch as it finishes (in any order). This module does not cache, pool or report anything.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from kuration.errors import KurationError
from kuration.scoring.features import get_feature, parse_feature_key
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.scoring.track import score_track, segment_table_schema
from kuration.sources.media import media_provider_module
from kuration.sources.protocol import SourceAdapter
from kuration.sources.tracks import tracks_from_ticks
from kuration.worker_processes import import_worker_modules, process_pool, worker_modules

EXECUTORS = ("local", "ray")


def score_one_source(adapter: SourceAdapter, source_id: str, *, segmenter: Segmenter, strategy: Strategy) -> pa.Table:
    """All segments of one source, scored (raises on any failure)."""
    ticks = adapter.read_ticks(source_id)
    tables = [score_track(track, segmenter=segmenter, strategy=strategy)
              for track in tracks_from_ticks(adapter.schema, ticks, source_id)]
    schema = segment_table_schema(strategy)
    return pa.concat_tables(tables) if tables else schema.empty_table()  # score_track writes this schema


#: What one task returns: one table of its sources' rows, and per source ``(source_id, rows,
#: error, elapsed seconds)`` in the table's order.
BatchItem = tuple[str, int, str | None, float]
Batch = tuple[pa.Table, list[BatchItem]]


def _task_batch(adapter: SourceAdapter, source_ids: Sequence[str], segmenter: Segmenter,
                strategy: Strategy) -> Batch:
    """Several sources in one task, returned as ONE table plus ``(source_id, rows, error,
    elapsed)`` per source: a worker round trip, and unpickling a table, per source cost
    more than a small source's scoring."""
    items: list[BatchItem] = []
    tables: list[pa.Table] = []
    for source_id in source_ids:
        _, table, error, elapsed = _task(adapter, source_id, segmenter, strategy)
        items.append((source_id, 0 if table is None else table.num_rows, error, elapsed))
        if table is not None:
            tables.append(table)
    schema = segment_table_schema(strategy)
    return (pa.concat_tables(tables).combine_chunks() if tables else schema.empty_table()), items


def _batches(tasks: list[str], workers: int) -> list[list[str]]:
    """About four batches per worker (so a slow batch cannot idle the others), at most 32
    sources each (so progress and memory stay granular)."""
    size = max(1, min(16, math.ceil(len(tasks) / (4 * workers))))
    return [tasks[i: i + size] for i in range(0, len(tasks), size)]


def _task(adapter: SourceAdapter, source_id: str, segmenter: Segmenter,
          strategy: Strategy) -> tuple[str, pa.Table | None, str | None, float]:
    started = time.perf_counter()
    try:
        table = score_one_source(adapter, source_id, segmenter=segmenter, strategy=strategy)
        return source_id, table, None, time.perf_counter() - started
    except Exception as exc:  # recorded per source; the caller's on_error decides
        return source_id, None, f"{type(exc).__name__}: {exc}", time.perf_counter() - started


#: Where a module the workers import must be importable, for the message when it is not.
_WORKER_ENVIRONMENT = ("the scoring workers' environment (a forkserver worker gets this process's sys.path, a Ray "
                       "worker the environment Ray was started with)")


def _import_modules(modules: Sequence[str]) -> None:
    """In a worker, before its first task: the user code the parent loaded
    (:func:`kuration.worker_processes.import_worker_modules`)."""
    import_worker_modules(modules, declared_in="the scoring run's parent process, whose plugins and user code every "
                          "worker imports", environment=_WORKER_ENVIRONMENT)


def modules_for_workers(adapter: SourceAdapter, strategy: Strategy, extra: Iterable[str]) -> list[str]:
    """What every worker imports (:func:`kuration.worker_processes.worker_modules`): the
    loaded plugins, then ``extra`` and the modules defining the strategy's ``fn.`` features
    and the schema's media provider factories. Importing a factory's module registers it
    only when that module does the registering; a provider registered elsewhere (a built-in
    class under a new name) reaches workers through the plugin that registers it."""
    modules = set(extra)
    for key in strategy.feature_keys():
        parsed = parse_feature_key(key)
        if getattr(parsed, "kind", None) == "fn":
            modules.add(getattr(get_feature(parsed.name), "__module__", None) or "__main__")
    for spec in adapter.schema.media.values():
        modules.add(media_provider_module(spec.provider) or "__main__")
    return worker_modules(modules)


def _run_local(tasks: list[str], call: Callable[[Sequence[str]], Batch], workers: int,
               modules: Sequence[str]) -> Iterator[Batch]:
    """Yields ``(batch table, items)`` per batch (see :func:`_task_batch`)."""
    if workers <= 1:
        for source_id in tasks:
            yield call([source_id])
        return
    pool = process_pool(workers, modules=modules)
    finished = False
    try:
        pending: set[cf.Future] = set()
        # keep at most two batches per worker in flight: results, not inputs, pile up
        for batch in _batches(tasks, workers):
            pending.add(pool.submit(call, batch))
            if len(pending) >= 2 * workers:
                done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        for future in cf.as_completed(pending):
            yield future.result()
        finished = True
    finally:
        # Every result is in hand once finished: let idle workers exit on their own instead
        # of waiting for them. On failure, drop the queued batches too.
        pool.shutdown(wait=not finished, cancel_futures=not finished)


def _run_ray(tasks: list[str], adapter: SourceAdapter, segmenter: Segmenter, strategy: Strategy, workers: int,
             modules: Sequence[str]) -> Iterator[Batch]:
    try:
        import ray
    except ImportError:
        raise KurationError('executor="ray" needs Ray: pip install "kuration[ray]"') from None
    if not ray.is_initialized():
        ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)

    @ray.remote
    def remote_batch(source_ids: list[str]) -> Batch:
        _import_modules(modules)
        return _task_batch(adapter, source_ids, segmenter, strategy)

    pending = [remote_batch.remote(batch) for batch in _batches(tasks, workers)]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


@dataclass(frozen=True)
class _Call:
    """The per-batch task with its fixed arguments, picklable for worker processes."""

    adapter: SourceAdapter
    segmenter: Segmenter
    strategy: Strategy
    modules: tuple[str, ...] = ()

    def __call__(self, source_ids: Sequence[str]) -> Batch:
        _import_modules(self.modules)
        return _task_batch(self.adapter, source_ids, self.segmenter, self.strategy)


@dataclass(frozen=True)
class PassRunner:
    """Where a run's tasks run: ``executor`` (``"local"``: this process with one worker,
    else ``workers`` local processes; ``"ray"``: Ray tasks) and the ``modules`` every
    worker imports first."""

    adapter: SourceAdapter
    segmenter: Segmenter
    executor: str = "local"
    workers: int = 1
    modules: tuple[str, ...] = ()

    def batches(self, sources: list[str], strategy: Strategy) -> Iterator[Batch]:
        """Score ``sources`` with ``strategy``: each batch as it finishes (see the module docstring)."""
        if self.executor == "ray":
            return _run_ray(sources, self.adapter, self.segmenter, strategy, self.workers, self.modules)
        return _run_local(sources, _Call(self.adapter, self.segmenter, strategy, self.modules), self.workers,
                          self.modules)


__all__ = ["Batch", "BatchItem", "EXECUTORS", "PassRunner", "modules_for_workers", "score_one_source"]
