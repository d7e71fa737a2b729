"""The feature pass: score every source's segments, in parallel, reusing what is cached.

``score_sources`` reads one source at a time (memory stays bounded by one source plus
the small per-segment results), cuts its tracks into segments, computes the strategy's
features and priorities (:func:`kuration.scoring.track.score_track`), and concatenates the
results in canonical order (source, entity, segment), so the outcome is identical
whatever the worker count or the order workers finish in.

- ``workers=N`` runs N local processes (forked from a preloaded forkserver); ``executor="ray"``
  sends the same per-source task to Ray (the ``[ray]`` extra). Every worker imports the
  user code the run needs, by module name: every plugin this process loaded
  (:func:`kuration.landing.plugins.loaded_plugin_modules`), the modules that registered the
  strategy's ``fn.`` features and the schema's media providers, and ``feature_modules``.
- ``on_error="skip"`` (the default) logs a source that fails reading, transforms or
  scoring, records its error, and goes on; ``"raise"`` stops at the first failure.
- Results are cached per source under a run fingerprint (schema, segmenter, strategy,
  code version, user feature code) plus the source's identity; a re-run scores only new
  or changed sources. Weak identities are scored every time.
- A source's segments and each feature's values are cached too, under fingerprints that
  leave the strategy's weights, predicates, method and selection out
  (:func:`feature_fingerprints`). After a strategy change, a source whose every feature is
  cached under its definition is not read again: its priorities are recomputed from the
  cached values (``cached`` with ``reused_features``). A feature whose definition changed
  (a ``fn.`` feature's code) or that no earlier run computed has a new fingerprint and
  misses: the source is read and only the missing features are computed (``scored`` with
  ``reused_features`` naming the others). A changed segmenter, schema or code version
  misses every part.
- ``memory_budget=N`` (bytes) is a hard bound on the scored results held in process memory.
  Results are checkpointed in ``cache`` (which must be a local :class:`FsspecScoreCache`) and
  held as memory-mapped checkpoints: file pages the OS can drop and re-read. Only results of
  sources with a weak identity cannot be checkpointed (a checkpoint must never be reused
  after its recording changed); they stay in memory, and if they pass the budget the run
  fails with :class:`MemoryBudgetError`, which says how to provide a fingerprint.
- If no source yields a single segment, :class:`EmptySegmentPoolError` says what to check.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration import _version
from kuration.errors import InputError, KurationError, ScoringError
from kuration.scoring.features import get_feature, parse_feature_key
from kuration.canonical.hashing import canonical_digest, code_fingerprint, module_source_sha256
from kuration.numbers import format_bytes
from kuration.scoring.cache import ScoreCache
from kuration.scoring.track import score_track, segment_table_schema
from kuration.scoring.segments import Segmenter
from kuration.sources.media import media_provider_module
from kuration.sources.protocol import SourceAdapter, SourceIdentity
from kuration.scoring.strategy import Strategy
from kuration.sources.tracks import tracks_from_ticks
from kuration.worker_processes import import_worker_modules, process_pool, worker_modules

logger = logging.getLogger(__name__)

#: Bump when feature or segment semantics change, so old cache entries stop matching.
# 2: track_steps, sample_hz; 3: canonical floats (no -0.0, one NaN); 4: end-aligned tail window
SCORING_CODE_VERSION = "4"
EXECUTORS = ("local", "ray")
ON_ERROR = ("skip", "raise")
#: Within one source: the order of the pool (after ``source_id``), and of checkpoints.
_IN_SOURCE_ORDER = [("entity_id", "ascending"), ("segment_index", "ascending")]


class EmptySegmentPoolError(ScoringError, ValueError):
    """No source produced a single segment."""


class SourceScoringError(ScoringError, RuntimeError):
    """A source failed and ``on_error="raise"`` was asked for."""


class MemoryBudgetError(ScoringError, RuntimeError):
    """``memory_budget`` cannot be kept: results that may not be checkpointed exceed it."""


def provide_fingerprint(adapter_name: str) -> str:
    """How to make a source checkpointable, for the errors that need it."""
    return (f"Provide a fingerprint: make {adapter_name}.identity() return a strong SourceIdentity (kind 'fingerprint' "
            "with a digest of the content, 'content_sha256', or an immutable 'version' or 'etag')")


@dataclass(frozen=True)
class SourceOutcome:
    """What happened to one source: ``scored``, ``cached`` or ``skipped`` (with ``error``).
    ``reused_features``: when the source's scored table was not cached (the strategy
    changed), the feature keys whose cached values its priorities were computed from: every
    key for a ``cached`` source, the unchanged ones for a ``scored`` one; empty otherwise."""

    source_id: str
    status: str
    identity: SourceIdentity | None
    segments: int = 0
    error: str | None = None
    elapsed: float = 0.0
    reused_features: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoringResult:
    segments: pa.Table
    outcomes: tuple[SourceOutcome, ...]
    run_fingerprint: str
    workers: int = 1
    executor: str = "local"
    #: With ``memory_budget``: the budget, ``resident_bytes`` (results in process memory),
    #: ``mapped_bytes`` (results held as memory-mapped checkpoints) and ``checkpointed_sources``.
    memory: dict | None = None
    #: Every cache namespace this run reads and writes: the run fingerprint, the segments'
    #: and each feature's (:func:`feature_fingerprints`); what a cache prune keeps.
    cache_fingerprints: tuple[str, ...] = ()

    @property
    def skipped(self) -> tuple[SourceOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "skipped")

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def for_source(self, source_id: str) -> pa.Table:
        """One source's rows: a zero-copy slice (the table is sorted by source)."""
        runs = self.__dict__.get("_source_runs")
        if runs is None:  # one pass over the sorted column, not one filter per source
            sources = self.segments.column("source_id").to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]]) if len(sources) else np.empty(0, int)
            ends = np.r_[starts[1:], len(sources)][: len(starts)]  # no rows: no runs, so no end either
            runs = {sources[a]: (int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)}
            object.__setattr__(self, "_source_runs", runs)
        start, length = runs.get(source_id, (0, 0))
        return self.segments.slice(start, length)


def _feature_code(strategy: Strategy) -> dict[str, Any]:
    """Fingerprints of the user feature functions the strategy reads, and of the modules
    that define them, so editing one (or a helper beside it in its plugin) misses the cache.

    Through :func:`kuration.canonical.hashing.code_fingerprint`, which is the same in every process:
    a feature holding a lambda or a generator expression once got a new digest per process
    (its nested code object's repr carries an address), so its cache never hit."""
    features: dict[str, Any] = {}
    for key in strategy.feature_keys():
        parsed = parse_feature_key(key)
        if getattr(parsed, "kind", None) == "fn":
            fn = get_feature(parsed.name)
            features[parsed.name] = {"function": code_fingerprint(fn), "module_sha256": module_source_sha256(fn)}
    return features


def run_fingerprint(adapter: SourceAdapter, segmenter: Segmenter, strategy: Strategy) -> str:
    """What scoring depends on besides the source itself."""
    doc = {
        "schema": adapter.schema.fingerprint(), "segmenter": segmenter.fingerprint(),
        "strategy": strategy.fingerprint(), "kuration": _version.__version__, "code": SCORING_CODE_VERSION,
        "features": _feature_code(strategy),
    }
    return canonical_digest(doc)


@dataclass(frozen=True)
class FeatureFingerprints:
    """Cache namespaces that outlive a strategy change: ``segments`` keys a source's segment
    rows without features or priorities (what the segmenter and schema give), ``features``
    each feature key's values. Neither depends on the strategy's weights, predicates,
    method, selection or name; both change with the schema, the segmenter, the kuration
    and scoring code versions, and a ``fn.`` feature's code."""

    segments: str
    features: dict[str, str]


def feature_fingerprints(adapter: SourceAdapter, segmenter: Segmenter, strategy: Strategy) -> FeatureFingerprints:
    """The per-feature cache namespaces of ``strategy``'s features (see :class:`FeatureFingerprints`)."""
    base = {"schema": adapter.schema.fingerprint(), "segmenter": segmenter.fingerprint(),
            "kuration": _version.__version__, "code": SCORING_CODE_VERSION}
    code = _feature_code(strategy)
    features = {}
    for key in strategy.feature_keys():
        parsed = parse_feature_key(key)
        features[key] = canonical_digest({**base, "part": "feature", "key": key, "fn": code.get(parsed.name)
                                          if getattr(parsed, "kind", None) == "fn" else None})
    return FeatureFingerprints(canonical_digest({**base, "part": "segments"}), features)


#: The segment rows' own columns, cached under :attr:`FeatureFingerprints.segments`: every
#: column of a scored table but the features, ``priority`` and ``passed``.
_SEGMENT_COLUMNS_EXCLUDED = ("priority", "passed")


def _put_feature_entries(cache: ScoreCache, parts: FeatureFingerprints, source_id: str, identity: SourceIdentity,
                         table: pa.Table, keys: Sequence[str], *, segments: bool) -> None:
    """A scored source's segment rows (``segments``) and the columns of ``keys``, in the
    table's (canonical) order."""
    if segments:
        cache.put(parts.segments, source_id, identity, table.select(_segment_columns(table.schema, keys)))
    for key in keys:
        cache.put(parts.features[key], source_id, identity, table.select([key]))


def _segment_columns(schema: pa.Schema, features: Iterable[str]) -> list[str]:
    excluded = {*features, *_SEGMENT_COLUMNS_EXCLUDED}
    return [name for name in schema.names if name not in excluded]


@dataclass(frozen=True)
class _CachedParts:
    """A source's cached segment rows and the features cached for them (each of their length)."""

    segments: pa.Table
    features: dict[str, pa.ChunkedArray]


def _cached_parts(cache: ScoreCache, parts: FeatureFingerprints, strategy: Strategy, schema: pa.Schema,
                  source_id: str, identity: SourceIdentity) -> _CachedParts | None:
    """What the cache holds of ``source_id`` under ``strategy``'s feature definitions; None
    without its segment rows (then nothing of it can be reused)."""
    segments = cache.get(parts.segments, source_id, identity)
    if segments is None or segments.schema.names != _segment_columns(schema, strategy.feature_keys()):
        return None
    features: dict[str, pa.ChunkedArray] = {}
    for key, fingerprint in parts.features.items():
        entry = cache.get(fingerprint, source_id, identity)
        if entry is not None and entry.schema.names == [key] and entry.num_rows == segments.num_rows:
            features[key] = entry.column(key)
    return _CachedParts(segments, features)


def _assembled(schema: pa.Schema, strategy: Strategy, segments: pa.Table,
               features: dict[str, pa.ChunkedArray]) -> pa.Table:
    """A source's scored table under ``strategy`` from its segment rows and every feature's
    values: the priorities and predicate verdicts computed here, as :func:`score_track` does."""
    scored = strategy.score({key: column.to_numpy(zero_copy_only=False) for key, column in features.items()})
    columns: dict[str, Any] = {name: segments.column(name) for name in segments.schema.names}
    columns.update(features)
    columns["priority"] = pa.chunked_array([pa.array(scored.priority, pa.float64())])
    columns["passed"] = pa.chunked_array([pa.array(scored.passed, pa.bool_())])
    return pa.Table.from_arrays([columns[field.name].cast(field.type) for field in schema], schema=schema)


def _computing_only(keys: Sequence[str]) -> Strategy:
    """A strategy whose scored table holds exactly ``keys`` (its priority is thrown away):
    what a worker computes for a source whose other features are cached."""
    return Strategy("inclusion", {key: 1.0 for key in keys})


def score_one_source(adapter: SourceAdapter, source_id: str, *, segmenter: Segmenter, strategy: Strategy) -> pa.Table:
    """All segments of one source, scored (raises on any failure)."""
    ticks = adapter.read_ticks(source_id)
    tables = [score_track(track, segmenter=segmenter, strategy=strategy)
              for track in tracks_from_ticks(adapter.schema, ticks, source_id)]
    schema = segment_table_schema(strategy)
    return pa.concat_tables(tables) if tables else schema.empty_table()  # score_track writes this schema


#: What one task returns: one table of its sources' rows, and per source ``(source_id, rows,
#: error, elapsed seconds)`` in the table's order.
_Batch = tuple[pa.Table, list[tuple[str, int, str | None, float]]]


def _task_batch(adapter: SourceAdapter, source_ids: Sequence[str], segmenter: Segmenter,
                strategy: Strategy) -> _Batch:
    """Several sources in one task, returned as ONE table plus ``(source_id, rows, error,
    elapsed)`` per source: a worker round trip, and unpickling a table, per source cost
    more than a small source's scoring."""
    items: list[tuple[str, int, str | None, float]] = []
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


def _modules_for_workers(adapter: SourceAdapter, strategy: Strategy, extra: Iterable[str]) -> list[str]:
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


def _run_local(tasks: list[str], call: Callable[[Sequence[str]], _Batch], workers: int,
               modules: Sequence[str]) -> Iterator[_Batch]:
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
             modules: Sequence[str]) -> Iterator[_Batch]:
    try:
        import ray
    except ImportError:
        raise KurationError('executor="ray" needs Ray: pip install "kuration[ray]"') from None
    if not ray.is_initialized():
        ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)

    @ray.remote
    def remote_batch(source_ids: list[str]) -> _Batch:
        _import_modules(modules)
        return _task_batch(adapter, source_ids, segmenter, strategy)

    pending = [remote_batch.remote(batch) for batch in _batches(tasks, workers)]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


class _Compactor:
    """Collects per-source tables, merging them every so often: thousands of small Arrow
    tables (each with its own buffers and schema) cost far more memory than their rows."""

    EVERY = 8

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.merged: list[pa.Table] = []
        self.pending: list[pa.Table] = []

    def add(self, table: pa.Table) -> None:
        self.pending.append(table)
        if len(self.pending) >= self.EVERY:
            self.merged.append(pa.concat_tables(self.pending).combine_chunks())
            self.pending = []

    def table(self) -> pa.Table:
        parts = self.merged + self.pending
        return pa.concat_tables(parts).combine_chunks() if parts else self.schema.empty_table()


def score_sources(
    adapter: SourceAdapter,
    *,
    segmenter: Segmenter,
    strategy: Strategy,
    sources: Sequence[str] | None = None,
    workers: int = 1,
    executor: str = "local",
    on_error: str = "skip",
    cache: ScoreCache | None = None,
    feature_modules: Sequence[str] = (),
    progress: Callable[[SourceOutcome, int, int], None] | None = None,
    allow_empty: bool = False,
    memory_budget: int | None = None,
) -> ScoringResult:
    """Score ``sources`` (default: all the adapter lists). See the module docstring.

    ``allow_empty`` is for callers scoring a slice of the pool (one Dagster partition),
    who check the whole pool elsewhere."""
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {list(EXECUTORS)}, got {executor!r}")
    if on_error not in ON_ERROR:
        raise InputError(f"on_error must be one of {list(ON_ERROR)}, got {on_error!r}")
    if not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive int, got {workers!r}")
    if memory_budget is not None:
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, int) or memory_budget <= 0:
            raise InputError(f"memory_budget must be a positive number of bytes, got {memory_budget!r}")
        if cache is None or not getattr(cache, "maps_locally", False):
            raise InputError(
                f"memory_budget={format_bytes(memory_budget)} holds scored results as memory-mapped checkpoints; pass "
                "cache=FsspecScoreCache(<a local folder>) to keep them in (an object store or an in-memory cache "
                "cannot be mapped)"
            )
    strategy.validate_against(adapter.schema)
    source_ids = sorted(set(adapter.list_sources() if sources is None else sources))
    fingerprint = run_fingerprint(adapter, segmenter, strategy)
    parts = feature_fingerprints(adapter, segmenter, strategy)
    outcomes: dict[str, SourceOutcome] = {}
    schema = segment_table_schema(strategy)
    collected: _Compactor | _BudgetedPool = _Compactor(schema)
    if memory_budget is not None and cache is not None:  # a budget always has a cache: checked above
        collected = _BudgetedPool(schema, memory_budget, cache, fingerprint, type(adapter).__name__)
    # Only with a cache: a source's identity only decides whether cached work is reused.
    identities: dict[str, SourceIdentity] = {}
    todo: list[str] = []
    #: Sources with some features cached: each pass computes one set of missing features.
    partial: dict[str, _CachedParts] = {}
    partial_passes: dict[tuple[str, ...], list[str]] = {}
    done_count = 0

    def report(outcome: SourceOutcome) -> None:
        nonlocal done_count
        done_count += 1
        outcomes[outcome.source_id] = outcome
        if progress is not None:
            progress(outcome, done_count, len(source_ids))

    for source_id in source_ids:
        if cache is None:  # without a cache, skip the hash
            todo.append(source_id)
            continue
        try:
            identity = adapter.identity(source_id)
        except Exception as exc:
            if on_error == "raise":
                raise SourceScoringError(f"{source_id}: cannot establish identity: {exc}") from exc
            logger.warning("skipping source %s: cannot establish identity: %s", source_id, exc)
            report(SourceOutcome(source_id, "skipped", None, error=f"{type(exc).__name__}: {exc}"))
            continue
        identities[source_id] = identity
        cached = cache.get(fingerprint, source_id, identity)
        reused: tuple[str, ...] = ()
        if cached is None and identity.strong:
            found = _cached_parts(cache, parts, strategy, schema, source_id, identity)
            missing = tuple(key for key in parts.features if found is None or key not in found.features)
            if found is not None and not missing:
                cached = _assembled(schema, strategy, found.segments, found.features)
                # this strategy's checkpoint: the next run (and a memory budget) maps it whole
                cache.put(fingerprint, source_id, identity, cached)
                reused = tuple(parts.features)
            elif found is not None and found.features:
                partial[source_id] = found
                partial_passes.setdefault(missing, []).append(source_id)
                continue
        if cached is not None:
            if isinstance(collected, _BudgetedPool):
                collected.add_source(cached.cast(schema), source_id, identity, checkpointed=not reused)
            else:
                collected.add(cached.cast(schema))
            report(SourceOutcome(source_id, "cached", identity, cached.num_rows, reused_features=reused))
        else:
            todo.append(source_id)

    modules = _modules_for_workers(adapter, strategy, feature_modules)

    def run(sources: list[str], computed: Strategy) -> Iterator[_Batch]:
        if executor == "ray":
            return _run_ray(sources, adapter, segmenter, computed, workers, modules)
        return _run_local(sources, _Call(adapter, segmenter, computed, tuple(modules)), workers, modules)

    # The partial passes first: a source whose scored segments disagree with its cached rows
    # (a foreign entry) joins the whole pass, which comes last.
    passes: list[tuple[tuple[str, ...] | None, list[str]]] = [*partial_passes.items(), (None, todo)]
    for computing, sources in passes:
        computed = strategy if computing is None else _computing_only(computing)
        for batch_table, items in run(sources, computed):
            offset = 0
            for source_id, rows, error, elapsed in items:
                known = identities.get(source_id)
                if error is not None:
                    if on_error == "raise":
                        raise SourceScoringError(f"{source_id}: {error}")
                    logger.warning("skipping source %s: %s", source_id, error)
                    report(SourceOutcome(source_id, "skipped", known, error=error, elapsed=elapsed))
                    continue
                table = batch_table.slice(offset, rows)  # this source's rows: contiguous, zero-copy
                offset += rows
                if cache is None:  # no identity was asked for, nothing to keep
                    report(SourceOutcome(source_id, "scored", known, rows, elapsed=elapsed))
                    continue
                identity = identities[source_id]
                # Checkpoints are stored in canonical order, so a budgeted pool can chain
                # them as they are, without a sort that would bring them all into memory.
                table = table.sort_by(_IN_SOURCE_ORDER)
                kept: tuple[str, ...] = ()
                if computing is not None:
                    found = partial[source_id]
                    fresh = table.select(_segment_columns(table.schema, computing))
                    if not fresh.equals(found.segments):
                        logger.warning("source %s: its cached segment rows disagree with the recording's; scoring "
                                       "every feature again", source_id)
                        todo.append(source_id)
                        continue
                    table = _assembled(schema, strategy, found.segments,
                                       {**found.features, **{key: table.column(key) for key in computing}})
                    kept = tuple(key for key in parts.features if key in found.features)
                cache.put(fingerprint, source_id, identity, table)
                whole = computing is None
                _put_feature_entries(cache, parts, source_id, identity, table,
                                     list(parts.features) if computing is None else computing, segments=whole)
                if isinstance(collected, _BudgetedPool):
                    collected.add_source(table, source_id, identity, checkpointed=False)
                elif computing is not None:
                    collected.add(table)
                report(SourceOutcome(source_id, "scored", known, rows, elapsed=elapsed, reused_features=kept))
            if computing is None and isinstance(collected, _Compactor):
                collected.add(batch_table)

    segments = collected.table()
    if isinstance(collected, _Compactor):  # a budgeted pool is already in this order
        segments = segments.sort_by([("source_id", "ascending"), *_IN_SOURCE_ORDER])
    memory = collected.report() if isinstance(collected, _BudgetedPool) else None
    result = ScoringResult(segments, tuple(outcomes[s] for s in source_ids), fingerprint, workers, executor, memory,
                           cache_fingerprints=(fingerprint, parts.segments, *parts.features.values()))
    if segments.num_rows == 0 and not allow_empty:
        raise EmptySegmentPoolError(_empty_pool_hint(result, segmenter))
    return result


@dataclass(frozen=True)
class _Call:
    """The per-batch task with its fixed arguments, picklable for worker processes."""

    adapter: SourceAdapter
    segmenter: Segmenter
    strategy: Strategy
    modules: tuple[str, ...] = ()

    def __call__(self, source_ids: Sequence[str]) -> _Batch:
        _import_modules(self.modules)
        return _task_batch(self.adapter, source_ids, self.segmenter, self.strategy)


def _empty_pool_hint(result: ScoringResult, segmenter: Segmenter) -> str:
    n = len(result.outcomes)
    if n == 0:
        return "no sources to score: the adapter listed none. Check the root URL and the file pattern."
    skipped = result.skipped
    lines = [f"no segments from {n} source(s); the segment pool is empty."]
    if skipped:
        lines.append(f"{len(skipped)} source(s) failed, e.g. {skipped[0].source_id}: {skipped[0].error}")
    if len(skipped) < n:
        lines.append(f"the other sources produced no segments: are their tracks empty, or shorter than the "
                     f"segment window ({segmenter.to_dict()})?")
    lines.append("Check the schema against the files, the segmenter window, and the skipped-source errors.")
    return " ".join(lines)


class _BudgetedPool:
    """The scored pool under ``memory_budget``: a source with a checkpoint is held as the
    memory-mapped checkpoint; any other counts against the budget while it stays in memory.

    The pool is the sources' tables chained in source order (each is in canonical order
    already), so no step ever gathers it into one in-memory table."""

    def __init__(self, schema: pa.Schema, budget: int, cache: ScoreCache, fingerprint: str, adapter_name: str) -> None:
        self.schema = schema
        self.budget = budget
        self.cache = cache
        self.fingerprint = fingerprint
        self.adapter_name = adapter_name
        self.pieces: dict[str, pa.Table] = {}
        self.resident = 0
        self.mapped = 0
        self.checkpointed = 0

    def add_source(self, table: pa.Table, source_id: str, identity: SourceIdentity, *, checkpointed: bool) -> None:
        if not checkpointed and identity.strong:
            mapped = self.cache.get(self.fingerprint, source_id, identity)
            if mapped is None:
                raise MemoryBudgetError(
                    f"source {source_id!r}: its checkpoint was written but cannot be read back from the cache "
                    f"({getattr(self.cache, 'root', self.cache)!r}); check that folder (space, permissions)")
            table, checkpointed = mapped.cast(self.schema), True
        if not _in_canonical_order(table):  # e.g. a checkpoint written by an older version
            table, checkpointed = table.sort_by(_IN_SOURCE_ORDER), False
        if checkpointed:
            self.mapped += table.nbytes
            self.checkpointed += 1
        else:
            self.resident += table.nbytes
            if self.resident > self.budget:
                raise MemoryBudgetError(
                    f"memory_budget={format_bytes(self.budget)}: scored results that cannot be checkpointed reached "
                    f"{format_bytes(self.resident)} with source {source_id!r}, whose identity is only "
                    f"{identity.kind!r} ({identity.token()[:80]}). A checkpoint keyed by a logical identity could be "
                    "reused after the recording changed, so none is written. "
                    f"{provide_fingerprint(self.adapter_name)}, or raise memory_budget")
        self.pieces[source_id] = table

    def table(self) -> pa.Table:
        if not self.pieces:
            return self.schema.empty_table()
        return pa.concat_tables([self.pieces[s] for s in sorted(self.pieces)])

    def report(self) -> dict:
        return {"budget_bytes": self.budget, "resident_bytes": self.resident, "mapped_bytes": self.mapped,
                "checkpointed_sources": self.checkpointed, "sources": len(self.pieces)}


def _in_canonical_order(table: pa.Table) -> bool:
    """Whether rows are in (entity_id, segment_index) order: one pass over neighbours, not
    a sort (this runs on every checkpoint a budgeted pool maps)."""
    n = table.num_rows
    if n < 2:
        return True
    entity, index = table.column("entity_id"), table.column("segment_index")
    first, second = entity.slice(0, n - 1), entity.slice(1)
    before = pc.or_(pc.less(first, second),
                    pc.and_(pc.equal(first, second), pc.less_equal(index.slice(0, n - 1), index.slice(1))))
    return bool(pc.all(before).as_py())
