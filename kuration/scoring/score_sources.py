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
  (:func:`~kuration.scoring.fingerprints.feature_fingerprints`). After a strategy change,
  a source whose every feature is cached under its definition is not read again: its
  priorities are recomputed from the cached values (``cached`` with ``reused_features``).
  A feature whose definition changed (a ``fn.`` feature's code) or that no earlier run
  computed has a new fingerprint and misses: the source is read and only the missing
  features are computed (``scored`` with ``reused_features`` naming the others). A changed
  segmenter, schema or code version misses every part.
- ``memory_budget=N`` (bytes) is a hard bound on the scored results held in process memory.
  Results are checkpointed in ``cache`` (which must be a local :class:`FsspecScoreCache`) and
  held as memory-mapped checkpoints: file pages the OS can drop and re-read. Only results of
  sources with a weak identity cannot be checkpointed (a checkpoint must never be reused
  after its recording changed); they stay in memory, and if they pass the budget the run
  fails with :class:`MemoryBudgetError`, which says how to provide a fingerprint.
- If no source yields a single segment, :class:`EmptySegmentPoolError` says what to check.

Plan, then act: :func:`~kuration.scoring.scoring_plan.plan_scoring` decides which sources
are cached, partly cached or to compute (reading identities and the cache only); the run
here scores what the plan left (:mod:`.executors`), keeps the cache, gathers the results in
one :class:`~kuration.scoring.pools.Pool` and reports each source once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kuration.errors import InputError, ScoringError
from kuration.numbers import format_bytes
from kuration.scoring.cache import ScoreCache
from kuration.scoring.executors import EXECUTORS, BatchItem, PassRunner, modules_for_workers, score_one_source
from kuration.scoring.feature_cache import assembled, computing_only, put_feature_entries, segment_columns
from kuration.scoring.fingerprints import (
    SCORING_CODE_VERSION, FeatureFingerprints, feature_fingerprints, run_fingerprint,
)
from kuration.scoring.pools import (
    IN_SOURCE_ORDER, MemoryBudgetError, Pool, PooledSource, provide_fingerprint, segment_pool,
)
from kuration.scoring.scoring_plan import ScoringPlan, plan_scoring
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.scoring.track import segment_table_schema
from kuration.sources.protocol import SourceAdapter, SourceIdentity

logger = logging.getLogger(__name__)

ON_ERROR = ("skip", "raise")


class EmptySegmentPoolError(ScoringError, ValueError):
    """No source produced a single segment."""


class SourceScoringError(ScoringError, RuntimeError):
    """A source failed and ``on_error="raise"`` was asked for."""


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


def _check_options(executor: str, on_error: str, workers: int, memory_budget: int | None,
                   cache: ScoreCache | None) -> None:
    """Every option of :func:`score_sources`, before anything is read."""
    if executor not in EXECUTORS:
        raise InputError(f"executor must be one of {list(EXECUTORS)}, got {executor!r}")
    if on_error not in ON_ERROR:
        raise InputError(f"on_error must be one of {list(ON_ERROR)}, got {on_error!r}")
    if not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive int, got {workers!r}")
    if memory_budget is None:
        return
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, int) or memory_budget <= 0:
        raise InputError(f"memory_budget must be a positive number of bytes, got {memory_budget!r}")
    if cache is None or not getattr(cache, "maps_locally", False):
        raise InputError(
            f"memory_budget={format_bytes(memory_budget)} holds scored results as memory-mapped checkpoints; pass "
            "cache=FsspecScoreCache(<a local folder>) to keep them in (an object store or an in-memory cache "
            "cannot be mapped)"
        )


class _ScoringRun:
    """The act half of a feature pass: what the plan settled is reported and pooled, the rest
    is scored pass by pass. Every source is reported once; every source scored is kept in
    the cache (when the run has one: then every source it scores has an identity) and
    added to the pool."""

    def __init__(self, plan: ScoringPlan, strategy: Strategy, cache: ScoreCache | None, pool: Pool, *,
                 on_error: str, progress: Callable[[SourceOutcome, int, int], None] | None) -> None:
        self.plan = plan
        self.strategy = strategy
        self.schema = segment_table_schema(strategy)
        self.cache = cache
        self.pool = pool
        self.on_error = on_error
        self.progress = progress
        self.outcomes: dict[str, SourceOutcome] = {}
        self.reported = 0

    def report(self, outcome: SourceOutcome) -> None:
        self.reported += 1
        self.outcomes[outcome.source_id] = outcome
        if self.progress is not None:
            self.progress(outcome, self.reported, len(self.plan.source_ids))

    def settle(self) -> None:
        """The sources the plan settled, in source order: those without an identity (skipped,
        or raised), and the cached ones (assembled from their cached features if need be)."""
        plan = self.plan
        for source_id in plan.source_ids:
            if source_id in plan.unidentified:
                self._unidentified(source_id, plan.unidentified[source_id])
            elif source_id in plan.cached:
                self._cached(source_id, plan.cached[source_id], reused=())
            elif source_id in plan.features_cached:
                found = plan.features_cached[source_id]
                table = assembled(self.schema, self.strategy, found.segments, found.features)
                self._put(source_id, table)  # this strategy's checkpoint: the next run (and a budget) maps it whole
                self._cached(source_id, table, reused=tuple(plan.parts.features))

    def partial_pass(self, runner: PassRunner, computing: tuple[str, ...], sources: list[str]) -> list[str]:
        """Score only the features ``computing`` of ``sources`` (the others are cached).
        Returns the sources whose scored segment rows disagree with their cached ones (a
        foreign entry): the whole pass scores them again, every feature."""
        rejected: list[str] = []
        for batch, items in runner.batches(sources, computing_only(computing)):
            for source_id, table, rows, elapsed in self._succeeded(batch, items, skipped=self.report):
                found = self.plan.partly_cached[source_id]
                table = table.sort_by(IN_SOURCE_ORDER)
                if not table.select(segment_columns(table.schema, computing)).equals(found.segments):
                    logger.warning("source %s: its cached segment rows disagree with the recording's; scoring every "
                                   "feature again", source_id)
                    rejected.append(source_id)
                    continue
                table = assembled(self.schema, self.strategy, found.segments,
                                  {**found.features, **{key: table.column(key) for key in computing}})
                self._put(source_id, table)
                self._put_parts(source_id, table, computing, segments=False)
                self.pool.add(PooledSource(source_id, self.plan.identities.get(source_id), table))
                kept = tuple(key for key in self.plan.parts.features if key in found.features)
                self.report(SourceOutcome(source_id, "scored", self.plan.identities.get(source_id), rows,
                                          elapsed=elapsed, reused_features=kept))
        return rejected

    def whole_pass(self, runner: PassRunner, sources: list[str]) -> None:
        """Score ``sources`` with the whole strategy. A batch goes to the pool whole (its
        sources' outcomes are reported after it): one table per batch, not per source."""
        for batch, items in runner.batches(sources, self.strategy):
            outcomes: list[SourceOutcome] = []
            pooled: list[PooledSource] = []
            for source_id, table, rows, elapsed in self._succeeded(batch, items, skipped=outcomes.append):
                identity = self.plan.identities.get(source_id)
                if identity is not None:  # a run with a cache: keep the source in it
                    # Checkpoints are stored in canonical order, so a budgeted pool can chain
                    # them as they are, without a sort that would bring them all into memory.
                    table = table.sort_by(IN_SOURCE_ORDER)
                    self._put(source_id, table)
                    self._put_parts(source_id, table, list(self.plan.parts.features), segments=True)
                pooled.append(PooledSource(source_id, identity, table))
                outcomes.append(SourceOutcome(source_id, "scored", identity, rows, elapsed=elapsed))
            self.pool.add_batch(batch, pooled)
            for outcome in outcomes:
                self.report(outcome)

    def _succeeded(self, batch: pa.Table, items: list[BatchItem], *,
                   skipped: Callable[[SourceOutcome], None]) -> Iterator[tuple[str, pa.Table, int, float]]:
        """The batch's sources that scored, each with its rows (a zero-copy slice of
        ``batch``), rows count and elapsed seconds. A failed one is raised, or handed to
        ``skipped``, as ``on_error`` says."""
        offset = 0
        for source_id, rows, error, elapsed in items:
            if error is not None:
                if self.on_error == "raise":
                    raise SourceScoringError(f"{source_id}: {error}")
                logger.warning("skipping source %s: %s", source_id, error)
                skipped(SourceOutcome(source_id, "skipped", self.plan.identities.get(source_id), error=error,
                                      elapsed=elapsed))
                continue
            table = batch.slice(offset, rows)  # this source's rows: contiguous, zero-copy
            offset += rows
            yield source_id, table, rows, elapsed

    def _unidentified(self, source_id: str, exc: Exception) -> None:
        if self.on_error == "raise":
            raise SourceScoringError(f"{source_id}: cannot establish identity: {exc}") from exc
        logger.warning("skipping source %s: cannot establish identity: %s", source_id, exc)
        self.report(SourceOutcome(source_id, "skipped", None, error=f"{type(exc).__name__}: {exc}"))

    def _cached(self, source_id: str, table: pa.Table, *, reused: tuple[str, ...]) -> None:
        """A source settled from the cache; ``reused``: the features its table was
        assembled from (then the pool maps the checkpoint just written)."""
        identity = self.plan.identities[source_id]
        self.pool.add(PooledSource(source_id, identity, table.cast(self.schema), checkpointed=not reused))
        self.report(SourceOutcome(source_id, "cached", identity, table.num_rows, reused_features=reused))

    def _put(self, source_id: str, table: pa.Table) -> None:
        if self.cache is not None:
            self.cache.put(self.plan.run_fingerprint, source_id, self.plan.identities[source_id], table)

    def _put_parts(self, source_id: str, table: pa.Table, keys: Sequence[str], *, segments: bool) -> None:
        """The parts of a scored source that outlive a strategy change: the features
        ``keys`` and, when ``segments``, the segment rows."""
        if self.cache is not None:
            put_feature_entries(self.cache, self.plan.parts, source_id, self.plan.identities[source_id], table,
                                keys, segments=segments)


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
    _check_options(executor, on_error, workers, memory_budget, cache)
    strategy.validate_against(adapter.schema)
    plan = plan_scoring(adapter, segmenter=segmenter, strategy=strategy, sources=sources, cache=cache)
    pool = segment_pool(segment_table_schema(strategy), memory_budget=memory_budget, cache=cache,
                        fingerprint=plan.run_fingerprint, adapter_name=type(adapter).__name__)
    run = _ScoringRun(plan, strategy, cache, pool, on_error=on_error, progress=progress)
    run.settle()
    runner = PassRunner(adapter, segmenter, executor, workers,
                        tuple(modules_for_workers(adapter, strategy, feature_modules)))
    rejected: list[str] = []
    for computing, partly in plan.partial_passes().items():  # first: a rejected source joins the whole pass
        rejected += run.partial_pass(runner, computing, partly)
    run.whole_pass(runner, [*plan.to_compute, *rejected])
    segments = pool.table()
    result = ScoringResult(segments, tuple(run.outcomes[s] for s in plan.source_ids), plan.run_fingerprint, workers,
                           executor, pool.memory(), cache_fingerprints=plan.cache_fingerprints)
    if segments.num_rows == 0 and not allow_empty:
        raise EmptySegmentPoolError(_empty_pool_hint(result, segmenter))
    return result


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


__all__ = [
    "EXECUTORS", "ON_ERROR", "SCORING_CODE_VERSION", "EmptySegmentPoolError", "FeatureFingerprints",
    "MemoryBudgetError", "ScoringPlan", "ScoringResult", "SourceOutcome", "SourceScoringError",
    "feature_fingerprints", "plan_scoring", "provide_fingerprint", "run_fingerprint", "score_one_source",
    "score_sources",
]
