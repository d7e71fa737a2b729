"""Where a feature pass gathers its scored sources until the pass ends: the segment pool.

One protocol, :class:`Pool`, two implementations; the run picks one (:func:`segment_pool`)
and never asks which it has:

- :class:`InMemoryPool` holds the tables in process memory, merged every few sources
  (thousands of small Arrow tables cost far more memory than their rows), and sorts the
  pool into canonical order (source, entity, segment) at the end;
- :class:`BudgetedPool` keeps ``memory_budget``: a source with a checkpoint is held as the
  memory-mapped checkpoint (file pages the OS can drop and re-read); any other counts
  against the budget while it stays in memory, and :class:`MemoryBudgetError` says how to
  provide a fingerprint when it passes. Its pool is the sources' tables chained in source
  order, each in canonical order already, so no step gathers it into one in-memory table.

A pool does not score, read sources or decide what is cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from kuration.errors import ScoringError
from kuration.numbers import format_bytes
from kuration.scoring.cache import ScoreCache
from kuration.sources.protocol import SourceIdentity

#: Within one source: the order of the pool (after ``source_id``), and of checkpoints.
IN_SOURCE_ORDER = [("entity_id", "ascending"), ("segment_index", "ascending")]


class MemoryBudgetError(ScoringError, RuntimeError):
    """``memory_budget`` cannot be kept: results that may not be checkpointed exceed it."""


def provide_fingerprint(adapter_name: str) -> str:
    """How to make a source checkpointable, for the errors that need it."""
    return (f"Provide a fingerprint: make {adapter_name}.identity() return a strong SourceIdentity (kind 'fingerprint' "
            "with a digest of the content, 'content_sha256', or an immutable 'version' or 'etag')")


@dataclass(frozen=True, eq=False)  # holds Arrow tables: compared by identity
class PooledSource:
    """One scored source for the pool. ``identity`` is None when the run has no cache (it
    asked for none); ``checkpointed``: ``table`` is the source's checkpoint as the cache
    holds it (memory-mapped under a local cache), not a table in process memory."""

    source_id: str
    identity: SourceIdentity | None
    table: pa.Table
    checkpointed: bool = False


class Pool(Protocol):
    """The segment pool of one feature pass."""

    def add(self, source: PooledSource) -> None:
        """Take one scored source (in any order; each source once)."""

    def add_batch(self, batch: pa.Table, sources: Sequence[PooledSource]) -> None:
        """Take the sources one task scored together: ``batch`` holds all their rows, as the
        task returned them; ``sources`` are the same rows source by source (in canonical
        order when the run checkpoints them). A pool keeps whichever suits it."""

    def table(self) -> pa.Table:
        """Every source's rows, in canonical order (source, entity, segment)."""

    def memory(self) -> dict[str, int] | None:
        """What the pool holds where, for a run under a memory budget; None otherwise."""


class InMemoryPool:
    """The pool in process memory (see the module docstring)."""

    EVERY = 8

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.merged: list[pa.Table] = []
        self.pending: list[pa.Table] = []

    def add(self, source: PooledSource) -> None:
        self._keep(source.table)

    def add_batch(self, batch: pa.Table, sources: Sequence[PooledSource]) -> None:
        self._keep(batch)  # one table for the batch: merging its sources one by one costs more than scoring them

    def _keep(self, table: pa.Table) -> None:
        self.pending.append(table)
        if len(self.pending) >= self.EVERY:
            self.merged.append(pa.concat_tables(self.pending).combine_chunks())
            self.pending = []

    def table(self) -> pa.Table:
        parts = self.merged + self.pending
        table = pa.concat_tables(parts).combine_chunks() if parts else self.schema.empty_table()
        return table.sort_by([("source_id", "ascending"), *IN_SOURCE_ORDER])

    def memory(self) -> None:
        return None


class BudgetedPool:
    """The pool under ``memory_budget`` (see the module docstring). ``cache`` is where the
    run checkpoints every source with a strong identity under ``fingerprint``."""

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

    def add(self, source: PooledSource) -> None:
        table, checkpointed, identity = source.table, source.checkpointed, source.identity
        if not checkpointed and identity is not None and identity.strong:
            mapped = self.cache.get(self.fingerprint, source.source_id, identity)
            if mapped is None:
                raise MemoryBudgetError(
                    f"source {source.source_id!r}: its checkpoint was written but cannot be read back from the cache "
                    f"({getattr(self.cache, 'root', self.cache)!r}); check that folder (space, permissions)")
            table, checkpointed = mapped.cast(self.schema), True
        if not _in_canonical_order(table):  # e.g. a checkpoint written by an older version
            table, checkpointed = table.sort_by(IN_SOURCE_ORDER), False
        if checkpointed:
            self.mapped += table.nbytes
            self.checkpointed += 1
        else:
            self.resident += table.nbytes
            if self.resident > self.budget:
                raise MemoryBudgetError(self._over_budget(source))
        self.pieces[source.source_id] = table

    def add_batch(self, batch: pa.Table, sources: Sequence[PooledSource]) -> None:
        for source in sources:  # one by one: each is held (mapped or in memory) and counted on its own
            self.add(source)

    def _over_budget(self, source: PooledSource) -> str:
        identity = source.identity
        kind, token = (identity.kind, identity.token()[:80]) if identity is not None else ("unknown", "")
        return (f"memory_budget={format_bytes(self.budget)}: scored results that cannot be checkpointed reached "
                f"{format_bytes(self.resident)} with source {source.source_id!r}, whose identity is only {kind!r} "
                f"({token}). A checkpoint keyed by a logical identity could be reused after the recording changed, so "
                f"none is written. {provide_fingerprint(self.adapter_name)}, or raise memory_budget")

    def table(self) -> pa.Table:
        if not self.pieces:
            return self.schema.empty_table()
        return pa.concat_tables([self.pieces[s] for s in sorted(self.pieces)])

    def memory(self) -> dict[str, int]:
        return {"budget_bytes": self.budget, "resident_bytes": self.resident, "mapped_bytes": self.mapped,
                "checkpointed_sources": self.checkpointed, "sources": len(self.pieces)}


def segment_pool(schema: pa.Schema, *, memory_budget: int | None, cache: ScoreCache | None, fingerprint: str,
                 adapter_name: str) -> Pool:
    """The pool of a run: budgeted when there is a ``memory_budget`` (which always comes
    with a cache: :func:`~kuration.scoring.score_sources` checks it), else in memory."""
    if memory_budget is not None and cache is not None:
        return BudgetedPool(schema, memory_budget, cache, fingerprint, adapter_name)
    return InMemoryPool(schema)


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


__all__ = ["BudgetedPool", "IN_SOURCE_ORDER", "InMemoryPool", "MemoryBudgetError", "Pool", "PooledSource",
           "provide_fingerprint", "segment_pool"]
