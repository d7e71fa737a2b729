"""``write_dataset``: score, fill the budget, write the shards, commit. And
``write_planned_dataset``, the part after the budget plan (what the Dagster asset calls).

The order is the commit protocol's (:mod:`.commit_protocol`): the argument checks (the output
spec against the schema, the plan against the spec) run first, then the lease is taken
and everything else that can fail without touching the destination runs under it (the
destination's state, the sources' identities); only then does publication begin. A failure before it leaves every
published byte as it was.

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
the plan, and ``hours_selection_review(out)`` explains the selection without the job.

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

import datetime as _dt
import functools
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kuration import _version, storage
from kuration.budget import BudgetOptions, BudgetPlan, plan_budget
from kuration.budget.plan_store import BUDGET_DIR, BUDGET_FILE, budget_plan_files
from kuration.budget.spans import feature_columns
from kuration.budget.split_pools import GroupOf, split_assignments_identity
from kuration.errors import BudgetError, CommitError, InputError
from kuration.canonical.hashing import (
    canonical_digest, canonical_json, code_fingerprint, readable_json, sha256_hex, stable_repr,
)
from kuration.numbers import parse_bytes
from kuration.sources.media import media_cache
from kuration.output.commit_protocol import (
    CHECKPOINT_DIR, RESUME_DIR, CommitRecord, is_writer_leftover, publish_committed, publish_writing, read_commit,
)
from kuration.output.destinations import Destination, open_destination
from kuration.output.encoders import OutputEncoder, PassthroughEncoder
from kuration.output.shard_assembly import decode_media_rows
from kuration.output.shard_reuse import (
    ADOPTED_RECORD, ReuseCandidates, content_key, content_key_basis, resume_folder, reuse_candidates, verified_reuse,
)
from kuration.output.spec import OutputSpec
from kuration.output.write_errors import DatasetWriteError, DifferentRunError, EmptyPlanError, WriteWorkerError
from kuration.output.write_track import ShardTarget, ShardWriter, shard_targets
from kuration.output.write_workers import (
    PlannedShard, WorkerState, check_write_workers, pickled_state, read_tracks, run_shard_tasks, shard_tasks, span_meta,
    span_track, write_task_shards,
)
from kuration.sources.schema import Schema
from kuration.scoring import FsspecScoreCache, ScoreCache, Segmenter, Strategy, score_sources
from kuration.sources.protocol import SourceAdapter
from kuration.sources.tracks import Track
from kuration.splits.stages import EXCLUSIVE_STAGES

MANIFEST_FORMAT = 1
#: What a resuming ``write_planned_dataset`` does with another run's dataset at the destination.
ON_OTHER_RUN = ("refuse", "replace")


@dataclass(frozen=True)
class DatasetWriteResult:
    """What a write produced. ``result["results"]["budget"]`` reads the config, as in the seed."""

    out: str
    record: CommitRecord
    manifest: dict[str, Any]
    config: dict[str, Any]
    budget_plan: BudgetPlan
    written: int
    reused: int
    #: Why ``on_other_run="replace"`` replaced the destination's dataset ("" when it did not).
    replaced: str = ""

    def __getitem__(self, key: str) -> Any:
        return self.config[key]

    @property
    def manifest_sha256(self) -> str:
        """The committed manifest's SHA-256: what identifies this dataset's content."""
        if self.record.manifest_sha256 is None:  # a committed record always has it
            raise DatasetWriteError(f"{self.out}: the commit record holds no manifest digest")
        return self.record.manifest_sha256


def _plan_digest(admitted: pa.Table) -> str:
    """What the writer will emit, by value: ids, rows, splits and the span features."""
    # The Arrow IPC bytes of the table: deterministic for one table, NaN features are data,
    # and no row becomes a Python object. fill_rank only orders the fill, it is not emitted.
    table = admitted.drop_columns(["fill_rank"]).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema.remove_metadata()) as writer:
        writer.write_table(table.replace_schema_metadata(None))
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _record_name(run_fingerprint: str, shard_path: str) -> str:
    return f"{resume_folder(run_fingerprint)}/{hashlib.sha256(shard_path.encode()).hexdigest()[:24]}.json"


def _targets(admitted: pa.Table, spec: OutputSpec, plan: BudgetPlan) -> list[tuple[ShardTarget, dict[str, Any]]]:
    """Every shard the plan implies, from the plan alone. Whole-track spans are named
    without ``_spanNNN``; sub-track spans and counted segments with their index."""
    options = plan.options
    whole_tracks = options.unit == "seconds" and options.span_steps is None and options.span_seconds is None
    out = []
    for row in admitted.to_pylist():
        span = None if whole_tracks else int(row[plan.index_column])
        for target in shard_targets(spec, split=row["split"], source_id=row["source_id"], entity_id=row["entity_id"],
                                    span_index=span, start=int(row["start"]), stop=int(row["stop"])):
            out.append((target, row))
    return out


def _check_not_empty(plan: BudgetPlan, spec: OutputSpec, allow_empty: bool) -> None:
    """Refuse a plan that gives the writer no shard (:class:`EmptyPlanError`), unless allowed."""
    if not allow_empty and not _targets(plan.admitted(), spec, plan):
        raise EmptyPlanError(_empty_plan_message(plan, spec))


def _empty_plan_message(plan: BudgetPlan, spec: OutputSpec) -> str:
    """Why the plan gives no shard, in the plan's own figures, and what to do about it."""
    accounting = plan.accounting
    admitted = plan.admitted().num_rows
    if admitted:
        what = (f"the budget plan admits {admitted} item(s), but each is shorter than one shard of "
                f"{spec.shard_length} steps and short_policy 'drop' drops it")
        fix = "Plan longer spans (span_seconds / span_steps), or write with short_policy 'pad' or 'keep'"
    else:
        unit = accounting["unit"]
        splits = "; ".join(f"{name} requested {block['requested']:g} {unit}, pool {block['pool']:g}, admitted 0"
                           for name, block in accounting["splits"].items())
        what = f"the budget plan admits nothing ({splits})"
        outside = accounting["not_in_split"]
        if outside["sources"]:
            what += (f"; {outside['sources']} scored source(s) are in no split (not_in_split, e.g. "
                     f"{outside['examples'][:3]}), so their ids are not among the split's sources")
        fix = ("Check that the split's (universe's) source ids are the recordings' ids and that the budget requests "
               "time in a split that has sources, then plan again")
    return (f"{what}: the dataset would be empty. {fix}; or pass allow_empty=True to commit an empty dataset on "
            "purpose")


def _check_intents(resume: bool, force: bool) -> None:
    if resume and force:
        raise DatasetWriteError("resume=True and force=True: resume keeps a run's finished shards, force replaces the "
                                "destination; choose one")


def _check_plan_fits(plan: BudgetPlan, spec: OutputSpec) -> None:
    chunking = plan.options.chunking
    if chunking is not None and chunking != spec.chunking:
        raise DatasetWriteError(
            f"the budget plan priced shards of {chunking.shard_length} steps ({chunking.short_policy}), the output "
            f"spec writes {spec.shard_length} ({spec.short_policy}); plan again with the spec's shard_length and "
            "short_policy"
        )


def _existing(destination: Destination) -> list[str]:
    """What the destination holds, checkpoints (they belong to no dataset) and a killed
    writer's temp files (the next write removes them) aside."""
    return [name for name in destination.top_level() if name != CHECKPOINT_DIR and not is_writer_leftover(name)]


def _check_destination(destination: Destination, resume: bool, force: bool, *,
                       replace: bool = False) -> tuple[CommitRecord | None, str]:
    """The destination's commit record, once it is clear this write may go on; and, when
    ``replace`` lets a torn or edited record be replaced as ``force`` does, why it was."""
    existing = _existing(destination)
    torn = ""
    try:
        record = read_commit(destination)
    except CommitError as exc:
        if not (force or replace):
            raise
        record, torn = None, str(exc)
    if existing and not (resume or force):
        raise DatasetWriteError(
            f"{destination.url}: already holds {existing[:5]}{'...' if len(existing) > 5 else ''}; pass resume=True to "
            "finish or reuse the same run, or force=True to replace it"
        )
    return record, torn


def _refuse_the_dataset_being_read(destination: Destination, adapter: SourceAdapter) -> None:
    """Re-curating a dataset onto itself would replace the shards the adapter is reading
    (``CuratedDatasetAdapter``, and any adapter exposing ``dataset_url``)."""
    reads = getattr(adapter, "dataset_url", None)
    if not isinstance(reads, str):
        return
    if storage.is_remote(reads) or storage.is_remote(destination.url):
        same = reads.rstrip("/") == destination.url.rstrip("/")
    else:
        same = os.path.realpath(storage.local_path(reads)) == os.path.realpath(destination.url)
    if same:
        raise DatasetWriteError(
            f"{destination.url}: is the dataset {adapter!r} reads; writing onto it would replace its shards while "
            "they are read. Write to another folder or URL, then move it into place")


def write_planned_dataset(
    out: str | os.PathLike[str],
    plan: BudgetPlan,
    *,
    adapter: SourceAdapter,
    schema: Schema,
    spec: OutputSpec,
    encoder: OutputEncoder | None = None,
    resume: bool = False,
    force: bool = False,
    job: Mapping[str, Any] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    on_other_run: str = "refuse",
    split: Mapping[str, Any] | None = None,
    reuse_shards: bool = True,
    allow_empty: bool = False,
    write_workers: int = 1,
) -> DatasetWriteResult:
    """Write the spans ``plan`` admitted as a committed dataset at ``out`` (a local folder or
    an object-store URL).

    ``split`` is the identity of the resolved split the plan was made over
    (:func:`kuration.budget.plan_store.stored_split_identity` of the storage root the plan
    came from). It is fingerprinted into the run and recorded in ``config.json``'s
    provenance as ``split``, as ``write_dataset(split_assignments=...)`` records its split,
    so a consumer (a rollout store) can prove which ``splits.json`` the dataset's splits
    came from.

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
    write_workers = check_write_workers(write_workers)
    _check_intents(resume, force)
    if on_other_run not in ON_OTHER_RUN:
        raise DatasetWriteError(f"on_other_run must be one of {list(ON_OTHER_RUN)}, got {on_other_run!r}")
    if on_other_run == "replace" and not resume:
        raise DatasetWriteError("on_other_run='replace' goes with resume=True (it decides what a resume does with "
                                "another run's dataset); force=True replaces whatever is there")
    replace = on_other_run == "replace"
    destination = open_destination(out)
    _refuse_the_dataset_being_read(destination, adapter)
    spec.validate_against(schema)
    _check_plan_fits(plan, spec)
    _check_not_empty(plan, spec, allow_empty)
    if split is not None and not isinstance(split, Mapping):
        raise DatasetWriteError(f"split: expected the split identity mapping of stored_split_identity(root), got "
                                f"{type(split).__name__}")
    with destination.lease():
        record, torn = _check_destination(destination, resume, force, replace=replace)
        return _publish(destination, plan, record, adapter=adapter, schema=schema, spec=spec, encoder=encoder,
                        resume=resume and not torn, job=job, progress=progress,
                        started=_dt.datetime.now(_dt.timezone.utc), replace_other_run=replace, replaced=torn,
                        inputs=None if split is None else {"split": dict(split)}, reuse_shards=reuse_shards,
                        write_workers=write_workers)


def _publish(destination: Destination, plan: BudgetPlan, record: CommitRecord | None, *, adapter: SourceAdapter,
             schema: Schema, spec: OutputSpec, encoder: OutputEncoder | None, resume: bool,
             job: Mapping[str, Any] | None, progress: Callable[[int, int, str], None] | None, started: _dt.datetime,
             results: Mapping[str, Any] | None = None, callbacks: Mapping[str, Any] | None = None,
             inputs: Mapping[str, Any] | None = None, replace_other_run: bool = False,
             replaced: str = "", reuse_shards: bool = True, write_workers: int = 1) -> DatasetWriteResult:
    """Everything after the plan, under the caller's lease, once the plan fits the spec
    (:func:`_check_plan_fits`) and :func:`_check_destination` gave the destination's
    ``record``: the checks that touch nothing, then publication (see the module docstring).
    ``inputs`` are further identities the run depends on (the baked split's), fingerprinted
    into the run and recorded in the provenance. ``replace_other_run``: a resume that finds
    another run's dataset replaces it instead of raising; ``replaced`` is why an earlier step
    already chose to. Whatever the intent, a shard whose content key matches a verified
    shard the destination's records hold is kept (:mod:`.shard_reuse`), unless
    ``reuse_shards`` is False. ``write_workers`` > 1 writes the other shards in that many
    worker processes (:mod:`.write_workers`)."""
    encoder = encoder or PassthroughEncoder()
    admitted = plan.admitted()
    targets = _targets(admitted, spec, plan)
    sources = sorted(set(admitted.column("source_id").to_pylist()))
    identities = {s: adapter.identity(s) for s in sources}
    strong = {s: bool(identity.strong) for s, identity in identities.items()}
    fingerprints = {
        "output_spec": spec.fingerprint(), "schema": schema.fingerprint(), "plan": _plan_digest(admitted),
        "encoder": code_fingerprint(encoder), "adapter": code_fingerprint(adapter, state=stable_repr(adapter)),
        "callbacks": {name: code_fingerprint(fn) for name, fn in sorted((callbacks or {}).items())},
        "sources": {s: identities[s].token() for s in sources}, "kuration": _version.__version__,
        **(dict(inputs) if inputs else {}),
    }
    run_fingerprint = canonical_digest(fingerprints)
    marker = readable_json({"format": 1, "output": spec.to_dict(), "run_fingerprint": run_fingerprint})
    if resume and record is not None and record.run_fingerprint != run_fingerprint:
        other = (f"{destination.url}: holds a {record.state} dataset of another run (run "
                 f"{record.run_fingerprint[:12]}..., this one {run_fingerprint[:12]}...: the spec, plan, sources or "
                 "code changed)")
        if not replace_other_run:
            raise DifferentRunError(f"{other}; resume=True only finishes or re-checks the same run. Pass force=True to "
                                    "replace it")
        resume, replaced = False, other  # replaced as force=True would; shards whose content matches are kept
    features = feature_columns(admitted)
    basis = content_key_basis(spec=spec, schema=schema, encoder=fingerprints["encoder"],
                              adapter=fingerprints["adapter"], kuration=fingerprints["kuration"])
    keys = {target.path: content_key(basis, identities[target.source_id], target, span_meta(row, features))
            for target, row in targets}
    by_source: dict[str, list[tuple[ShardTarget, dict[str, Any]]]] = {}
    for target, row in targets:
        by_source.setdefault(target.source_id, []).append((target, row))
    # a split (or plan) folder that is a link would have shards reused from, or written to, wherever it leads
    destination.check_folders({*EXCLUSIVE_STAGES, BUDGET_DIR})
    candidates = (reuse_candidates(destination, record) if reuse_shards
                  else ReuseCandidates({}, None, "reuse_shards=False"))
    # Hashed now, before publication: a shard that fails is written anew, with every check below done first.
    kept = verified_reuse(destination, candidates, spec, [(target, keys[target.path]) for target, _ in targets])
    entries: list[dict[str, Any]] = []
    written = reused = 0

    def record_finished(entry: dict[str, Any]) -> None:
        entry = {**entry, "content_key": keys[entry["path"]]}
        entries.append(entry)
        # Not made durable: a record lost to a power cut only costs a rebuild.
        destination.write_metadata(_record_name(run_fingerprint, entry["path"]), canonical_json(
            {"run": run_fingerprint, "entry": entry}), durable=False)

    pending: dict[str, list[PlannedShard]] = {}
    for source in sources:
        pending[source] = []
        for target, row in by_source.get(source, []):
            entry = kept.get(target.path)
            if entry is not None:
                entries.append(entry)
                reused += 1
            else:
                pending[source].append((target, row))
    to_write = sum(len(shards) for shards in pending.values())
    in_workers = write_workers > 1 and to_write > 0
    # Before publication: what the workers are sent must reach them.
    state = WorkerState(destination, spec, schema, encoder, adapter, tuple(features))
    shared = pickled_state(state) if in_workers else b""

    # One media cache for the check and the shards: each media file is read once, within the
    # cache's bound (a cache the caller opened is used, with its bound).
    with media_cache():
        read_ahead = _check_media(adapter, schema, spec, sources, by_source, features, kept)

        # -- publication starts: readers reject the directory until the final commit ------
        publish_writing(destination, run_fingerprint=run_fingerprint, marker=marker)
        if kept:
            # The old manifest stops counting once the record says writing: a resume after a
            # crash finds the kept shards here instead (not durable either, like every record).
            destination.write_metadata(f"{resume_folder(run_fingerprint)}/{ADOPTED_RECORD}", canonical_json(
                {"run": run_fingerprint, "entries": sorted(kept.values(), key=lambda e: e["path"])}), durable=False)
        if in_workers:
            read_ahead.clear()  # each worker reads its own sources
            tasks = shard_tasks(pending, write_workers)
            report = _InSourceOrder(sources, tasks, progress)
            report.finished(None)  # the sources before the first one with shards to write
            for task, task_entries in run_shard_tasks(tasks, workers=write_workers, state=state, shared=shared):
                for entry in task_entries:
                    record_finished(entry)
                written += len(task_entries)
                report.finished(task.index)
            report.finished(None)
        else:
            with ShardWriter(destination, spec, schema=schema, encoder=encoder, adapter=adapter,
                             on_entry=record_finished) as shards:
                for done, source in enumerate(sources, start=1):
                    write_task_shards(shards, schema, adapter, source, pending[source], features,
                                      read_ahead.pop(source, None))
                    written += len(pending[source])
                    if progress:
                        shards.after(functools.partial(progress, done, len(sources), source))
    entries.sort(key=lambda e: (e["source_id"], e["entity_id"], -1 if e["span_index"] is None else e["span_index"],
                                e["shard_index"]))
    manifest = _manifest(entries, spec, plan, run_fingerprint)
    plan_pin = _publish_plan(destination, plan)
    finished = _dt.datetime.now(_dt.timezone.utc)
    refused = "" if reused or (record is None and not resume) else candidates.refused or (
        "no recorded shard has this write's content key with its recorded size and SHA-256 (the sources, span "
        "values, output spec or code changed, or the files did)")
    config = {
        "format": 1,
        "job": {"output": spec.to_dict(), "schema": schema.to_dict(), "budget": plan.options.to_dict(),
                "strategy": plan.strategy, "strategy_fingerprint": canonical_digest(plan.strategy),
                **(dict(job) if job else {})},
        "results": {"budget": plan.accounting, "splits": manifest["splits"], "shards": len(entries),
                    "written_shards": written, "reused_shards": reused,
                    "resume": {"requested": resume, "reuse_refused": refused,
                               "reused_from_run": candidates.run if reused else None},
                    "budget_plan": plan_pin, **(dict(results) if results else {})},
        "timestamps": {"started": started.isoformat(timespec="seconds"),
                       "finished": finished.isoformat(timespec="seconds")},
        "provenance": {"run_fingerprint": run_fingerprint, **fingerprints,
                       "sources_strong_identity": strong},
    }
    manifest_bytes = readable_json(manifest)
    config_bytes = readable_json(config)
    # Still unreadable (state=writing): the old run's shards and killed writes' temp files
    # go now, so the committed directory holds exactly what its commit covers.
    _remove_leftovers(destination, {e["path"] for e in entries})
    committed = publish_committed(destination, run_fingerprint=run_fingerprint, marker=marker,
                                  manifest=manifest_bytes, config=config_bytes)
    for name in destination.files_under(RESUME_DIR):  # the manifest now records every shard
        destination.remove(name)
    return DatasetWriteResult(destination.url, committed, manifest, config, plan, written, reused, replaced)


class _InSourceOrder:
    """Calls ``progress(done, total, source)`` once per source, in source order, once every
    task of that source and of the sources before it has finished: the calls one worker
    makes, whatever order the write workers finish in."""

    def __init__(self, sources: Sequence[str], tasks: Sequence[Any],
                 progress: Callable[[int, int, str], None] | None) -> None:
        self._sources = list(sources)
        self._progress = progress
        self._left = {source: 0 for source in sources}
        self._source_of = {task.index: task.source_id for task in tasks}
        for task in tasks:
            self._left[task.source_id] += 1
        self._next = 0

    def finished(self, task_index: int | None) -> None:
        """Task ``task_index`` finished (None: none, only report what is due)."""
        if task_index is not None:
            self._left[self._source_of[task_index]] -= 1
        while self._next < len(self._sources) and self._left[self._sources[self._next]] == 0:
            self._next += 1
            if self._progress is not None:
                self._progress(self._next, len(self._sources), self._sources[self._next - 1])


def _publish_plan(destination: Destination, plan: BudgetPlan) -> dict[str, Any]:
    """Store the plan in the dataset's ``budget/`` folder, laid out as under a storage root
    (:mod:`kuration.budget.plan_store`), so ``hours_selection_review(out)`` explains the
    selection from the dataset alone; returns the pin of ``budget/budget.json`` (which pins
    the two tables) that ``config.json`` records, so the commit covers the plan too."""
    files = budget_plan_files(plan)
    for name, data in files.items():  # budget.json, which pins the tables, last
        destination.write_metadata(f"{BUDGET_DIR}/{name}", data)
    record = files[BUDGET_FILE]
    return {"path": f"{BUDGET_DIR}/{BUDGET_FILE}", "sha256": sha256_hex(record), "bytes": len(record)}


def _check_media(adapter: SourceAdapter, schema: Schema, spec: OutputSpec, sources: Sequence[str],
                 by_source: Mapping[str, list[tuple[ShardTarget, dict[str, Any]]]], features: Sequence[str],
                 kept: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Track]]:
    """Before publication: decode the first present reference of every media modality,
    through the path the shards take, so a provider that is missing, misconfigured or
    cannot read these references fails while every published byte is as it was.

    Only shards still to be written count: a shard in ``kept`` (verified already,
    :func:`kuration.output.shard_reuse.verified_reuse`) is passed over, and a source with
    nothing else to write is not read. Sources are read in writing order until each media
    modality has decoded one reference (the first source to write, as a rule); the tracks
    of every source read are returned so the writer does not read it again. Decoding every
    reference would mean decoding the data twice: a reference that fails
    later still fails the write, with publication begun (readers reject the folder; resume
    finishes it once the reference is fixed)."""
    unchecked = dict(spec.of_kind("media"))
    if not unchecked or not sources:
        return {}
    if not callable(getattr(adapter, "decode_media", None)):
        raise DatasetWriteError(f"the output spec has media modalities {sorted(unchecked)}, but the adapter "
                                f"{type(adapter).__name__} has no decode_media(column, refs, source_id=...)")
    read_ahead: dict[str, dict[str, Track]] = {}
    for source in sources:
        to_write = [(target, row) for target, row in by_source.get(source, []) if target.path not in kept]
        if not to_write:
            continue
        tracks = read_tracks(schema, adapter, source)
        read_ahead[source] = tracks
        for target, row in to_write:
            track = span_track(tracks, target, row, features)
            present = target.start + np.flatnonzero(track.present[target.start:target.stop])
            for name, m in list(unchecked.items()):
                # A present row without a reference is the shard assembly's error to report.
                first = next((int(r) for r in present if track.media[m.key][int(r)] is not None), None)
                if first is not None:
                    decode_media_rows(track, np.array([first]), name, m, adapter, schema)
                    del unchecked[name]
            if not unchecked:
                return read_ahead
    return read_ahead


def _manifest(entries: list[dict[str, Any]], spec: OutputSpec, plan: BudgetPlan,
              run_fingerprint: str) -> dict[str, Any]:
    splits = {}
    for name in EXCLUSIVE_STAGES:
        mine = [e for e in entries if e["split"] == name]
        splits[name] = {"shards": len(mine), "steps": int(sum(e["n_steps"] for e in mine)),
                        "bytes": int(sum(e["bytes"] for e in mine))}
    return {"format": MANIFEST_FORMAT, "output": spec.to_dict(), "entries": entries, "splits": splits,
            "budget": plan.accounting, "run_fingerprint": run_fingerprint}


def _remove_leftovers(destination: Destination, keep: set[str]) -> None:
    """Files the new commit does not cover: in the split folders every file the new manifest
    does not list (an earlier run's shards, killed writes' temp files and attempt objects);
    at the top level, in ``budget/`` and among the checkpoints, the temp files of killed writes."""
    for split in EXCLUSIVE_STAGES:
        for name in destination.files_under(split):
            if name not in keep:
                destination.remove(name)
    for name in destination.top_level():
        if is_writer_leftover(name):
            destination.remove(name)
    for folder in (BUDGET_DIR, CHECKPOINT_DIR):
        for name in destination.files_under(folder):
            if is_writer_leftover(name.rsplit("/", 1)[-1]):
                destination.remove(name)


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
    dataset at ``out``. Everything that can be checked is checked before scoring, and the
    destination's lease is held from then until the commit.

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
    write_workers = check_write_workers(write_workers)
    _check_intents(resume, force)
    if sample_hz is not None and not np.isclose(sample_hz, schema.sample_hz):
        raise DatasetWriteError(f"sample_hz={sample_hz:g} but the schema says {schema.sample_hz:g} Hz; leave sample_hz "
                                "unset (it defaults to the schema's)")
    try:
        budget = None if memory_budget is None else parse_bytes(memory_budget, name="memory_budget")
    except InputError as exc:  # parse_bytes: the option is named in the message
        raise DatasetWriteError(str(exc)) from None
    spec.validate_against(schema)
    strategy.validate_against(schema)
    split = _split_identity(split_assignments, group_of)
    options = BudgetOptions(train_hours=train_hours, val_hours=val_hours, test_hours=test_hours, span_steps=span_steps,
                            span_seconds=span_seconds, clip_aggregate=clip_aggregate, seed=seed, chunking=spec.chunking)
    destination = open_destination(out)
    _refuse_the_dataset_being_read(destination, adapter)
    if budget is not None and cache is None:
        if storage.is_remote(destination.url):
            raise DatasetWriteError(
                f"memory_budget with a remote destination ({destination.url}): checkpoints must be local files to be "
                "memory-mapped; pass cache=FsspecScoreCache('<a local folder>')")
        cache = FsspecScoreCache(destination.where(CHECKPOINT_DIR))
    started = _dt.datetime.now(_dt.timezone.utc)
    with destination.lease():
        record, _ = _check_destination(destination, resume, force)  # before scoring: a refused write costs nothing
        scored = score_sources(adapter, segmenter=segmenter, strategy=strategy, sources=sources, workers=workers,
                               executor=executor, on_error=on_error, cache=cache, memory_budget=budget,
                               progress=None if progress is None else (
                                   lambda outcome, done, total: progress("score", done, total, outcome.source_id)))
        if split_assignments is not None:
            _check_split_names_sources(split_assignments, scored.segments.column("source_id").unique().to_pylist())
        plan = plan_budget(scored.segments, options, strategy=strategy, group_of=group_of,
                           split_assignments=split_assignments)
        _check_plan_fits(plan, spec)
        _check_not_empty(plan, spec, allow_empty)
        job = {"segmenter": segmenter.to_dict(), "scoring_run": scored.run_fingerprint, "workers": workers,
               "executor": executor, "on_error": on_error, "memory_budget_bytes": budget,
               "skipped_sources": {o.source_id: o.error for o in scored.skipped}}
        results = {"scoring": {"scored": scored.count("scored"), "cached": scored.count("cached"),
                               "skipped": scored.count("skipped"), "memory": scored.memory}}
        written = _publish(destination, plan, record, adapter=adapter, schema=schema, spec=spec, encoder=encoder,
                           resume=resume, job=job, started=started, results=results,
                           progress=None if progress is None else (
                               lambda done, total, source: progress("write", done, total, source)),
                           callbacks={"group_of": group_of}, inputs=None if split is None else {"split": split},
                           reuse_shards=reuse_shards, write_workers=write_workers)
        if CHECKPOINT_DIR in destination.top_level():
            FsspecScoreCache(destination.where(CHECKPOINT_DIR)).prune(*scored.cache_fingerprints)
    return written


__all__ = ["DatasetWriteError", "DatasetWriteResult", "DifferentRunError", "EmptyPlanError", "WriteWorkerError",
           "write_dataset", "write_planned_dataset"]
