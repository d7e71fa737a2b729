"""``write_dataset``: score, fill the budget, write the shards, commit. And
``write_planned_dataset``, the part after the budget plan (what the Dagster asset calls).

Plan, then act. Both gather their arguments once into an options object
(:class:`DatasetWriteOptions`; :class:`~.write_plan.WriteOptions` for ``write_planned_dataset``),
checked when made. Then :func:`~.write_plan.plan_shards` runs every static check (the output
spec against the schema, the plan against the spec, an empty plan, the span values the
``segment:`` modalities read, ...), and :func:`~.preflight.preflight` reads what shows the
modalities can be made (the adapter lists every admitted source, one reference of each
media column decodes, the encoder's output on one record fits its modalities), both before
the lease is taken: a write they refuse leaves the destination as it was, a new one not
even created. Under the lease :func:`~.write_plan.plan_write` reads the destination's state
and the sources' identities into a :class:`~.write_plan.WritePlan` (the run fingerprint,
content keys, kept and pending shards, the records' bodies), and :func:`~.publish.publish`
carries it out in the commit protocol's order (:mod:`.commit_protocol`). A failure before
publication begins leaves every published byte as it was.

Resume and reuse. ``resume=True`` is for the same run (same spec, plan, sources and code:
one run fingerprint); on a destination another run wrote it raises :class:`DifferentRunError`
and touches nothing. ``force=True`` replaces the destination; the two together are an
error, and without either an existing destination is refused. ``write_planned_dataset``
takes a third intent for a pipeline that rematerializes: ``resume=True,
on_other_run="replace"`` resumes the same run and replaces another run's dataset (or one
whose commit record is torn) under the same lease, instead of raising.

Whichever intent, the write keeps every shard whose content key (recorded in each manifest
entry as ``content_key``: the source's strong identity, the shard's place and rows, the
span's values, the output spec, schema, encoder, adapter, media-provider and Kuration code)
matches a shard the destination's intact records describe, once its file still has the
recorded size and SHA-256 (:mod:`.shard_reuse`). So the same run resumed keeps its
finished shards, and a new plan after one new recording rewrites only the shards that
changed: the rest stay in place, untouched, byte-identical to what a fresh write would
produce. A source with a weak identity is always written anew, and ``reuse_shards=False``
writes every shard anew. Kept shards are hashed before publication begins and listed in
the new run's resume records right after it begins, so a resume after a crash keeps them
too. The result's ``written`` and ``reused`` count both kinds, and ``config.json``'s
``results.resume.reused_from_run`` names the run whose shards were kept.

An empty plan. A plan that gives no shard to write (it admits nothing: typically every
source ``not_in_split``; or only spans the short policy drops) raises
:class:`EmptyPlanError` before anything is touched, unless ``allow_empty=True``.

The plan. The dataset carries the budget plan it was written from, in ``budget/``
(``plan_items.parquet``, ``admitted.parquet``, ``budget.json``: the storage-root layout of
:mod:`kuration.budget.plan_store`), and ``config.json`` pins ``budget/budget.json`` under
``results.budget_plan`` (path, SHA-256, bytes), which pins the two tables: the commit covers
the plan, and ``hours_selection_review(read_dataset_budget_plan(out))``
(:mod:`kuration.read.dataset_plan`) explains the selection without the job.

Write workers. ``write_workers=N`` (both functions) writes and hashes the shards still to
write in N worker processes (:mod:`.write_workers`); everything above, the lease, the resume
records, progress and the commit stay here, and the files are byte-identical to one worker.
``write_workers`` is not part of the run fingerprint or ``config.json``.

Checkpoints. ``write_dataset`` keeps the scored segments of sources with a strong identity
as checkpoints when asked to bound memory (``memory_budget``): under
``.kuration_checkpoints/<scoring run fingerprint>/`` at a local destination. They are not
part of the dataset (the commit does not cover them; readers ignore them), a failed run
never removes them, and a committed run removes every namespace but its own.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kuration import storage
from kuration.budget import BudgetOptions, BudgetPlan, plan_budget
from kuration.budget.split_pools import GroupOf, split_assignments_identity
from kuration.errors import BudgetError, InputError
from kuration.numbers import parse_bytes
from kuration.output.commit_protocol import CHECKPOINT_DIR
from kuration.output.destinations import Destination, open_destination
from kuration.output.encoders import OutputEncoder
from kuration.output.preflight import preflight
from kuration.output.publish import DatasetWriteResult, publish
from kuration.output.spec import OutputSpec
from kuration.output.write_errors import DatasetWriteError, DifferentRunError, EmptyPlanError, WriteWorkerError
from kuration.output.write_plan import (
    ON_OTHER_RUN, ShardPlan, WriteContext, WriteOptions, WritePlan, check_destination, plan_shards, plan_write,
    refuse_the_dataset_being_read,
)
from kuration.scoring import FsspecScoreCache, ScoreCache, ScoringResult, Segmenter, Strategy, score_sources
from kuration.sources.media import media_cache
from kuration.sources.protocol import SourceAdapter
from kuration.sources.schema import Schema


def write_planned_dataset(
    out: str | os.PathLike[str],
    plan: BudgetPlan,
    *,
    adapter: SourceAdapter,
    schema: Schema,
    spec: OutputSpec,
    encoder: OutputEncoder | None = None,
    job: Mapping[str, Any] | None = None,
    split: Mapping[str, Any] | None = None,
    options: WriteOptions | None = None,
) -> DatasetWriteResult:
    """Write the spans ``plan`` admitted as a committed dataset at ``out`` (a local folder or
    an object-store URL).

    ``split`` is the identity of the resolved split the plan was made over
    (:func:`kuration.budget.plan_store.stored_split_identity` of the storage root the plan
    came from). It is fingerprinted into the run and recorded in ``config.json``'s
    provenance as ``split``, as ``write_dataset(split_assignments=...)`` records its split,
    so a consumer (a rollout store) can prove which ``splits.json`` the dataset's splits
    came from.

    ``options`` (a :class:`~kuration.output.write_plan.WriteOptions`) holds the intent
    (``resume``, ``force``, ``on_other_run``), ``reuse_shards``, ``allow_empty``,
    ``write_workers``, ``progress(done, total, source)``, ``publish`` and ``keep_versions``
    (retention after the publish, under the same lease). ``job`` is merged into
    ``config.json``'s ``job``.

    ``on_other_run`` (with ``resume=True``) says what to do when the destination holds
    another run's dataset (the spec, plan, sources or code changed) or a torn commit record:
    ``"refuse"`` raises (:class:`DifferentRunError`, or ``CommitError``) and keeps it;
    ``"replace"`` replaces it as ``force=True`` would, under the same lease, and the result's
    ``replaced`` says why. The same run is resumed either way (verified shards are kept).

    ``reuse_shards`` (default True): keep every shard whose content key matches a verified
    shard of the dataset at ``out`` (see the module docstring), whatever the intent; False
    writes every shard anew. ``allow_empty`` (default False): a plan that gives no shard to
    write raises :class:`EmptyPlanError` before the destination is touched; True commits
    an empty dataset.

    ``write_workers`` (default 1): how many worker processes write and hash the shards
    (:mod:`kuration.output.write_workers`); 1 writes them in this process. The dataset is
    byte-identical whatever the count, and so are the commit protocol, the lease (held
    here throughout), resume and shard reuse. A worker's failure fails the write with
    nothing committed (its Kuration error as it is, anything else and a dead worker as
    :class:`WriteWorkerError`); ``resume=True`` finishes it. Not an int >= 1: an
    :class:`~kuration.errors.InputError` naming it."""
    options = options or WriteOptions()
    destination = open_destination(out)
    refuse_the_dataset_being_read(destination, adapter)
    shards = plan_shards(plan, adapter=adapter, schema=schema, spec=spec, encoder=encoder,
                         allow_empty=options.allow_empty)
    if split is not None and not isinstance(split, Mapping):
        raise DatasetWriteError(f"split: expected the split identity mapping of stored_split_identity(root), got "
                                f"{type(split).__name__}")
    context = WriteContext(job=job, inputs=None if split is None else {"split": dict(split)})
    # before the preflight reads the recordings: a refused intent costs nothing (checked again under the lease)
    check_destination(destination, options.resume, options.force)
    with media_cache():  # the media files the preflight decoded are not read again for the shards
        checked = preflight(shards)
        with destination.lease():
            return publish(destination, plan_write(destination, shards, options=options, context=context),
                           progress=options.progress, preflight=checked, keep_versions=options.keep_versions)


def _split_identity(split_assignments: pa.Table | None, group_of: GroupOf) -> dict[str, Any] | None:
    """The baked split's identity for the provenance
    (:func:`~kuration.budget.split_pools.split_assignments_identity`), after checking the
    argument (before anything is scored)."""
    if split_assignments is None:
        return None
    if group_of is not None:
        raise DatasetWriteError("group_of and split_assignments: a resolved split carries its own groups (its 'group' "
                                "column), so pass one of them, not both")
    try:
        return split_assignments_identity(split_assignments)
    except BudgetError as exc:
        raise DatasetWriteError(str(exc)) from None


def _check_split_names_sources(split_assignments: pa.Table, scored_sources: Sequence[str]) -> None:
    """A split naming none of the scored sources would admit nothing: refuse it before
    publication (a split naming some is fine: the rest are reported as not in the split)."""
    named = set(split_assignments.column("source").unique().to_pylist())
    if scored_sources and not named & set(scored_sources):
        raise DatasetWriteError(
            f"split_assignments names none of the {len(scored_sources)} scored sources (the split has e.g. "
            f"{sorted(map(str, named))[:3]}, the adapter {sorted(scored_sources)[:3]}); its 'source' column must hold "
            "the adapter's source ids. Resolve the split over a universe whose sources are those ids")



def _memory_budget_bytes(memory_budget: int | str | None) -> int | None:
    try:
        return None if memory_budget is None else parse_bytes(memory_budget, name="memory_budget")
    except InputError as exc:  # parse_bytes: the option is named in the message
        raise DatasetWriteError(str(exc)) from None


@dataclass(frozen=True, kw_only=True, eq=False)
class DatasetWriteOptions:
    """:func:`write_dataset`'s keyword arguments (seed 000's names), gathered once and
    checked when made, before anything is read or scored: the write options
    (:class:`~kuration.output.write_plan.WriteOptions`), ``sample_hz`` against the schema,
    ``memory_budget``, the spec and the strategy against the schema, and the split. What
    the checks derive is kept beside them: ``write``, ``memory_budget_bytes``, ``split``
    (the baked split's identity) and ``budget`` (the :class:`BudgetOptions`)."""

    schema: Schema
    adapter: SourceAdapter
    strategy: Strategy
    segmenter: Segmenter
    spec: OutputSpec
    sources: Sequence[str] | None = None
    encoder: OutputEncoder | None = None
    train_hours: float | None = None
    val_hours: float | None = None
    test_hours: float | None = None
    sample_hz: float | None = None
    seed: int = 0
    group_of: GroupOf = None
    split_assignments: pa.Table | None = None
    clip_aggregate: str | None = None
    span_steps: int | None = None
    span_seconds: float | None = None
    workers: int = 1
    executor: str = "local"
    on_error: str = "skip"
    resume: bool = False
    force: bool = False
    cache: ScoreCache | None = None
    memory_budget: int | str | None = None
    progress: Callable[[str, int, int, str], None] | None = None
    reuse_shards: bool = True
    allow_empty: bool = False
    write_workers: int = 1
    write: WriteOptions = field(init=False)
    memory_budget_bytes: int | None = field(init=False)
    split: dict[str, Any] | None = field(init=False)
    budget: BudgetOptions = field(init=False)

    def __post_init__(self) -> None:
        derive = functools.partial(object.__setattr__, self)
        progress = self.progress
        derive("write", WriteOptions(resume=self.resume, force=self.force, reuse_shards=self.reuse_shards,
                                     allow_empty=self.allow_empty, write_workers=self.write_workers,
                                     progress=None if progress is None else (
                                         lambda done, total, source: progress("write", done, total, source))))
        if self.sample_hz is not None and not np.isclose(self.sample_hz, self.schema.sample_hz):
            raise DatasetWriteError(f"sample_hz={self.sample_hz:g} but the schema says {self.schema.sample_hz:g} Hz; "
                                    "leave sample_hz unset (it defaults to the schema's)")
        derive("memory_budget_bytes", _memory_budget_bytes(self.memory_budget))
        self.spec.validate_against(self.schema)
        self.strategy.validate_against(self.schema)
        derive("split", _split_identity(self.split_assignments, self.group_of))
        derive("budget", BudgetOptions(
            train_hours=self.train_hours, val_hours=self.val_hours, test_hours=self.test_hours,
            span_steps=self.span_steps, span_seconds=self.span_seconds, clip_aggregate=self.clip_aggregate,
            seed=self.seed, chunking=self.spec.chunking))


def write_dataset(
    out: str | os.PathLike[str],
    *,
    schema: Schema,
    adapter: SourceAdapter,
    strategy: Strategy,
    segmenter: Segmenter,
    spec: OutputSpec,
    sources: Sequence[str] | None = None,
    encoder: OutputEncoder | None = None,
    train_hours: float | None = None,
    val_hours: float | None = None,
    test_hours: float | None = None,
    sample_hz: float | None = None,
    seed: int = 0,
    group_of: GroupOf = None,
    split_assignments: pa.Table | None = None,
    clip_aggregate: str | None = None,
    span_steps: int | None = None,
    span_seconds: float | None = None,
    workers: int = 1,
    executor: str = "local",
    on_error: str = "skip",
    resume: bool = False,
    force: bool = False,
    cache: ScoreCache | None = None,
    memory_budget: int | str | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    reuse_shards: bool = True,
    allow_empty: bool = False,
    write_workers: int = 1,
) -> DatasetWriteResult:
    """Score ``sources`` (default: all), fill the hour budgets, write and commit the
    dataset at ``out``. Everything that can be checked is checked before scoring; the
    preflight (see the module docstring) runs after the budget fill, before the
    destination's lease is taken, and the lease is held from then until the commit (and
    while scoring, when checkpoints go into the destination).

    ``memory_budget`` (bytes, or a string such as ``"512MiB"``) is a hard bound on the
    scored results held in memory between scoring and the fill: they are checkpointed
    and held memory-mapped (see :func:`kuration.scoring.score_sources`). Checkpoints go to
    ``cache`` if given (a local :class:`~kuration.scoring.cache.FsspecScoreCache`), else to
    ``<out>/.kuration_checkpoints/<scoring run>/`` (a local ``out`` only). Sources without
    a strong identity cannot be checkpointed; if their results pass the budget the write
    fails before publication, saying how to provide a fingerprint. After a successful
    commit, checkpoint namespaces of other scoring runs at the destination are removed.

    ``split_assignments`` (a resolved split: ``read_split_assignments(root)[0]``, or
    ``plan_splits(cfg, universe).stage_table()`` for a baked ``splits.json``) puts each
    source in the split its samples were resolved to, with the split's groups, as
    :func:`kuration.budget.plan_budget` does; without it, sources are partitioned by
    ``group_of`` with ``seed``. The split's identity (:func:`_split_identity`) is part of
    the run fingerprint and recorded in ``config.json``'s provenance, so resuming with
    another split is refused.

    ``progress(stage, done, total, source_id)`` is called after each source of each stage:
    ``"score"`` (the feature pass), then ``"write"`` (its shards are written and hashed).

    ``reuse_shards`` and ``allow_empty`` are :func:`write_planned_dataset`'s: shards whose
    content key matches a verified shard at ``out`` are kept (False writes every one
    anew), and a plan with nothing to write raises :class:`EmptyPlanError` (after scoring,
    before publication) unless ``allow_empty=True``. ``write_workers`` is
    :func:`write_planned_dataset`'s: the shards are written and hashed in that many worker
    processes, byte-identical to one (``workers`` is the feature pass's count)."""
    options = DatasetWriteOptions(
        schema=schema, adapter=adapter, strategy=strategy, segmenter=segmenter, spec=spec, sources=sources,
        encoder=encoder, train_hours=train_hours, val_hours=val_hours, test_hours=test_hours, sample_hz=sample_hz,
        seed=seed, group_of=group_of, split_assignments=split_assignments, clip_aggregate=clip_aggregate,
        span_steps=span_steps, span_seconds=span_seconds, workers=workers, executor=executor, on_error=on_error,
        resume=resume, force=force, cache=cache, memory_budget=memory_budget, progress=progress,
        reuse_shards=reuse_shards, allow_empty=allow_empty, write_workers=write_workers)
    return _score_plan_and_write(out, options)


def _score_plan_and_write(out: str | os.PathLike[str], options: DatasetWriteOptions) -> DatasetWriteResult:
    """:func:`write_dataset` with its arguments gathered: score, plan the budget, plan the
    write, preflight it, publish it."""
    destination = open_destination(out)
    refuse_the_dataset_being_read(destination, options.adapter)
    cache = _checkpoint_cache(destination, options)
    started = _dt.datetime.now(_dt.timezone.utc)
    check_destination(destination, options.resume, options.force)  # before scoring: a refused write costs nothing
    # Checkpoints written into the destination are written under its lease: another writer's
    # commit removes other runs' checkpoints. Once scored they are memory-mapped local files,
    # readable while mapped even when removed, so another writer's commit between this lease
    # and the write's only costs a later resume the re-scoring.
    checkpoints_at_destination = cache is not options.cache  # _checkpoint_cache chose the destination's folder
    with destination.lease() if checkpoints_at_destination else contextlib.nullcontext():
        scored = _score(options, cache)
    shards = plan_shards(_plan_budget(options, scored), adapter=options.adapter, schema=options.schema,
                         spec=options.spec, encoder=options.encoder, allow_empty=options.allow_empty)
    with media_cache():  # the media files the preflight decoded are not read again for the shards
        checked = preflight(shards)
        with destination.lease():
            plan = plan_write(destination, shards, options=options.write, context=_context(options, scored, started))
            written = publish(destination, plan, progress=options.write.progress, preflight=checked,
                              keep_versions=options.write.keep_versions)
            if CHECKPOINT_DIR in destination.top_level():
                FsspecScoreCache(destination.where(CHECKPOINT_DIR)).prune(*scored.cache_fingerprints)
    return written


def _checkpoint_cache(destination: Destination, options: DatasetWriteOptions) -> ScoreCache | None:
    """Where scored results are checkpointed: ``cache``, else, under a ``memory_budget``,
    the destination's checkpoint folder (a local destination only)."""
    if options.memory_budget_bytes is None or options.cache is not None:
        return options.cache
    if storage.is_remote(destination.url):
        raise DatasetWriteError(
            f"memory_budget with a remote destination ({destination.url}): checkpoints must be local files to be "
            "memory-mapped; pass cache=FsspecScoreCache('<a local folder>')")
    return FsspecScoreCache(destination.where(CHECKPOINT_DIR))


def _score(options: DatasetWriteOptions, cache: ScoreCache | None) -> ScoringResult:
    progress = options.progress
    return score_sources(options.adapter, segmenter=options.segmenter, strategy=options.strategy,
                         sources=options.sources, workers=options.workers, executor=options.executor,
                         on_error=options.on_error, cache=cache, memory_budget=options.memory_budget_bytes,
                         progress=None if progress is None else (
                             lambda outcome, done, total: progress("score", done, total, outcome.source_id)))


def _plan_budget(options: DatasetWriteOptions, scored: ScoringResult) -> BudgetPlan:
    if options.split_assignments is not None:
        _check_split_names_sources(options.split_assignments,
                                   scored.segments.column("source_id").unique().to_pylist())
    return plan_budget(scored.segments, options.budget, strategy=options.strategy, group_of=options.group_of,
                       split_assignments=options.split_assignments)


def _context(options: DatasetWriteOptions, scored: ScoringResult, started: _dt.datetime) -> WriteContext:
    """What config.json records of the scoring, and what the run is fingerprinted on
    besides the plan (the ``group_of`` callback, the baked split)."""
    job = {"segmenter": options.segmenter.to_dict(), "scoring_run": scored.run_fingerprint,
           "workers": options.workers, "executor": options.executor, "on_error": options.on_error,
           "memory_budget_bytes": options.memory_budget_bytes,
           "skipped_sources": {o.source_id: o.error for o in scored.skipped}}
    results = {"scoring": {"scored": scored.count("scored"), "cached": scored.count("cached"),
                           "skipped": scored.count("skipped"), "memory": scored.memory}}
    return WriteContext(job=job, results=results, callbacks={"group_of": options.group_of},
                        inputs=None if options.split is None else {"split": options.split}, started=started)


__all__ = ["DatasetWriteError", "DatasetWriteOptions", "DatasetWriteResult", "DifferentRunError", "EmptyPlanError",
           "ON_OTHER_RUN", "ShardPlan", "WriteContext", "WriteOptions", "WritePlan", "WriteWorkerError",
           "plan_shards", "plan_write", "publish", "write_dataset", "write_planned_dataset"]
