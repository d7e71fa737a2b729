"""Planning a dataset write: everything the write will do, decided before the destination changes.

Two steps, each returning a frozen plan:

1. :func:`plan_shards` (pure): the shards a budget plan implies for an output spec, and
   every check knowable from the plan, the spec, the schema and the segment table's
   columns: the spec against the schema, the plan's shard pricing against the spec, an
   empty plan (:class:`EmptyPlanError`), every ``segment:`` modality's value in every
   span the shards are cut from, ``encoder:`` modalities without an encoder, and media
   modalities with an adapter that cannot decode them. It reads nothing.
2. :func:`plan_write`: the :class:`WritePlan` for one destination. It reads what it must:
   the sources' identities, and the destination's records (its commit record, the
   entries its manifest and resume records hold, and the files of the shards it keeps,
   hashed). It holds the run fingerprint and the output-spec marker, each shard's content
   key, the shards kept (verified) and those still to write, the budget plan's files and
   the body of ``config.json``. It refuses, before anything is written, a destination the
   intent does not allow, another run's dataset on resume (unless told to replace it), a
   destination whose shard folders are links, and state that cannot reach a write worker.

Call :func:`plan_write` under the destination's lease and publish the plan
(:func:`kuration.output.publish.publish`) under the same one: a plan's reuse decisions hold
only while no other writer can change the destination. What planning does not do: write
anything, take the lease, or read the recordings (:func:`kuration.output.preflight.preflight`
does, between the two steps and before the lease: one reference per media column decoded,
one record encoded).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from kuration import _version, storage
from kuration.budget import BudgetPlan
from kuration.budget.plan_store import BUDGET_DIR, BUDGET_FILE, budget_plan_files
from kuration.budget.spans import feature_columns
from kuration.canonical.hashing import canonical_digest, code_fingerprint, readable_json, sha256_hex, stable_repr
from kuration.output.commit_protocol import CHECKPOINT_DIR, is_writer_leftover
from kuration.output.destinations import Destination
from kuration.output.encoders import EncoderError, OutputEncoder, PassthroughEncoder
from kuration.output.shard_assembly import segment_value
from kuration.output.containers import get_container
from kuration.output.shard_pool import POOL_DIR, is_pooled, pool_name
from kuration.output.shard_reuse import (
    ReuseCandidates, content_key, content_key_basis, reuse_candidates, verified_reuse,
)
from kuration.output.spec import OutputSpec
from kuration.output.version_gc import check_keep
from kuration.output.versions import VERSIONS_DIR, DatasetRoot
from kuration.output.write_errors import DatasetWriteError, EmptyPlanError
from kuration.output.write_target import WriteTarget, write_target
from kuration.output.write_track import shard_targets
from kuration.output.write_workers import PlannedShard, WorkerState, check_write_workers, pickled_state, span_meta
from kuration.sources.protocol import SourceAdapter, SourceIdentity
from kuration.sources.schema import Schema
from kuration.splits.stages import EXCLUSIVE_STAGES

#: What a resuming write does with another run's dataset at the destination.
ON_OTHER_RUN = ("refuse", "replace")


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """How a planned dataset is written (:func:`kuration.output.write_dataset.write_planned_dataset`),
    checked when made: before anything is read.

    ``resume``/``force``: the intent (see :mod:`kuration.output.write_dataset`); one at
    most. ``on_other_run`` (with ``resume``): ``"refuse"`` another run's dataset or a torn
    commit record, or ``"replace"`` it as ``force`` would. ``reuse_shards``: keep shards
    whose content key matches a verified shard at the destination. ``allow_empty``: commit
    a plan that gives no shard instead of raising :class:`EmptyPlanError`.
    ``write_workers``: processes that write and hash the shards (an int >= 1).
    ``progress(done, total, source)``: after each source's shards are written.
    ``publish``: make the committed version current (True), or leave it staged for an audit
    and a later :meth:`~kuration.output.versions.DatasetRoot.publish` (False).
    ``keep_versions``: after publishing, remove the versions retention no longer keeps
    (:mod:`kuration.output.version_gc`, under the same lease); None keeps every version."""

    resume: bool = False
    force: bool = False
    on_other_run: str = "refuse"
    reuse_shards: bool = True
    allow_empty: bool = False
    write_workers: int = 1
    progress: Callable[[int, int, str], None] | None = None
    publish: bool = True
    keep_versions: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "write_workers", check_write_workers(self.write_workers))
        if self.keep_versions is not None:
            check_keep(self.keep_versions)
        if self.resume and self.force:
            raise DatasetWriteError("resume=True and force=True: resume keeps a run's finished shards, force replaces "
                                    "the destination; choose one")
        if self.on_other_run not in ON_OTHER_RUN:
            raise DatasetWriteError(f"on_other_run must be one of {list(ON_OTHER_RUN)}, got {self.on_other_run!r}")
        if self.on_other_run == "replace" and not self.resume:
            raise DatasetWriteError("on_other_run='replace' goes with resume=True (it decides what a resume does with "
                                    "another run's dataset); force=True replaces whatever is there")


@dataclass(frozen=True, kw_only=True)
class WriteContext:
    """What the caller knows of the run beyond the budget plan and what the shards are made
    of. ``job`` and ``results`` are merged into ``config.json``'s ``job`` and ``results``;
    ``callbacks`` (name -> the function the plan was made with, e.g. ``group_of``) and
    ``inputs`` (further identities, e.g. the baked split's) are fingerprinted into the run
    and recorded in its provenance; ``started`` is when the run began (default: when it
    was planned)."""

    job: Mapping[str, Any] | None = None
    results: Mapping[str, Any] | None = None
    callbacks: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None
    started: _dt.datetime | None = None


@dataclass(frozen=True, eq=False)  # holds Arrow tables: compared by identity
class ShardPlan:
    """The shards a budget plan implies for ``spec`` (:func:`plan_shards`), and what they are
    made of. ``targets``: every shard with the admitted plan row it is cut from, in plan
    order; ``sources``: the admitted sources, sorted (the writing order); ``features``:
    the span features the writer puts in each span's track meta."""

    budget_plan: BudgetPlan
    adapter: SourceAdapter
    schema: Schema
    spec: OutputSpec
    encoder: OutputEncoder
    targets: tuple[PlannedShard, ...]
    sources: tuple[str, ...]
    features: tuple[str, ...]

    def by_source(self) -> dict[str, list[PlannedShard]]:
        """Every source's shards in writing order (a source whose spans give none has none)."""
        out: dict[str, list[PlannedShard]] = {source: [] for source in self.sources}
        for target, row in self.targets:
            out[target.source_id].append((target, row))
        return out


@dataclass(frozen=True, eq=False)  # holds Arrow tables: compared by identity
class WritePlan:
    """One write of ``shards`` to the destination at ``destination`` (:func:`plan_write`).

    ``fingerprints`` are what the run fingerprint digests (recorded as the provenance);
    ``marker`` is the bytes of ``.kuration_output_spec.json``; ``content_keys`` each
    shard's key by path (None: its source's identity is weak); ``kept`` the entries of the
    verified shards kept at the destination, by path; ``pending`` every source's shards
    still to write, in writing order. ``budget_files`` are the ``budget/`` files in the
    order they are written; ``config`` is ``config.json`` but for ``results.splits`` and
    ``timestamps.finished``, which only the written shards give. ``replaced`` says why the
    destination's dataset is replaced ("" when it is not), ``worker_state`` is what the
    write workers are sent (b"" when the shards are written in this process).

    Versions (:mod:`.versions`): the write commits ``version`` of the dataset root ``root``,
    in the folder ``destination``. ``adopt`` maps each kept shard that lies in another
    version to its path inside the root (it is shared into this version, not rewritten);
    ``unchanged`` says the version is this run's, committed, and every shard verified, so
    nothing is written; ``make_current`` says the committed version is published.
    ``pooled``: the root cannot share files by a link (an object store), so every shard with
    a content key is stored in the root's shard pool (:mod:`.shard_pool`) and a kept one is
    named by the new manifest, not shared into the version folder."""

    shards: ShardPlan
    root: str
    version: str
    destination: str
    run_fingerprint: str
    fingerprints: Mapping[str, Any]
    marker: bytes
    content_keys: Mapping[str, str | None]
    kept: Mapping[str, Mapping[str, Any]]
    pending: Mapping[str, tuple[PlannedShard, ...]]
    budget_files: Mapping[str, bytes]
    config: Mapping[str, Any]
    replaced: str
    write_workers: int
    worker_state: bytes
    adopt: Mapping[str, str]
    unchanged: bool
    make_current: bool
    pooled: bool = False

    @property
    def to_write(self) -> int:
        return sum(len(shards) for shards in self.pending.values())

    @property
    def in_workers(self) -> bool:
        """Whether worker processes write the pending shards."""
        return bool(self.worker_state)


def plan_digest(admitted: pa.Table) -> str:
    """What the writer will emit, by value: ids, rows, splits and the span features."""
    # The Arrow IPC bytes of the table: deterministic for one table, NaN features are data,
    # and no row becomes a Python object. fill_rank only orders the fill, it is not emitted.
    table = admitted.drop_columns(["fill_rank"]).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema.remove_metadata()) as writer:
        writer.write_table(table.replace_schema_metadata(None))
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _targets(admitted: pa.Table, spec: OutputSpec, plan: BudgetPlan) -> list[PlannedShard]:
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


def _check_plan_fits(plan: BudgetPlan, spec: OutputSpec) -> None:
    chunking = plan.options.chunking
    if chunking is not None and chunking != spec.chunking:
        raise DatasetWriteError(
            f"the budget plan priced shards of {chunking.shard_length} steps ({chunking.short_policy}), the output "
            f"spec writes {spec.shard_length} ({spec.short_policy}); plan again with the spec's shard_length and "
            "short_policy"
        )


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


def _check_span_values(spec: OutputSpec, targets: Sequence[PlannedShard], features: Sequence[str]) -> None:
    """Every ``segment:`` modality's value in every span a shard is cut from, cast as the
    shard assembly casts it (:func:`~kuration.output.shard_assembly.segment_value`): a
    feature the strategy does not compute, a null, a value of another kind, or one an
    integer or bool modality cannot hold exactly (not whole, not finite, out of its range)
    fails here, naming the first span in plan order that has it."""
    segment = spec.of_kind("segment")
    if not segment:
        return
    seen: set[int] = set()
    for target, row in targets:
        if id(row) in seen:  # the shards of one span share its row
            continue
        seen.add(id(row))
        meta = span_meta(row, features)
        for name, modality in segment.items():
            segment_value(meta, name, modality, source_id=target.source_id, entity=target.entity_id)


def _check_makers(spec: OutputSpec, adapter: SourceAdapter, encoder: OutputEncoder, *, shards: bool,
                  sources: bool) -> None:
    """What makes the shards can make every modality: an encoder for ``encoder:`` ones (when
    there are shards), a ``decode_media`` for media ones (when any source is admitted)."""
    hooks = spec.of_kind("encoder")
    if hooks and shards and type(encoder) is PassthroughEncoder:
        raise EncoderError(f"the output spec's modalities {sorted(hooks)} come from an encoder (encoder:<hook>), but "
                           "no encoder was given and the default PassthroughEncoder serves none; pass encoder=")
    media = spec.of_kind("media")
    if media and sources and not callable(getattr(adapter, "decode_media", None)):
        raise DatasetWriteError(f"the output spec has media modalities {sorted(media)}, but the adapter "
                                f"{type(adapter).__name__} has no decode_media(column, refs, source_id=...)")


def plan_shards(budget_plan: BudgetPlan, *, adapter: SourceAdapter, schema: Schema, spec: OutputSpec,
                encoder: OutputEncoder | None = None, allow_empty: bool = False) -> ShardPlan:
    """The shards ``budget_plan`` implies for ``spec``, after every static check (see the
    module docstring). Reads nothing: the adapter is only looked at."""
    spec.validate_against(schema)
    _check_plan_fits(budget_plan, spec)
    admitted = budget_plan.admitted()
    targets = _targets(admitted, spec, budget_plan)
    if not allow_empty and not targets:
        raise EmptyPlanError(_empty_plan_message(budget_plan, spec))
    sources = tuple(sorted(set(admitted.column("source_id").to_pylist())))
    features = tuple(feature_columns(admitted))
    encoder = encoder or PassthroughEncoder()
    _check_span_values(spec, targets, features)
    _check_makers(spec, adapter, encoder, shards=bool(targets), sources=bool(sources))
    return ShardPlan(budget_plan, adapter, schema, spec, encoder, tuple(targets), sources, features)


# -- the destination ------------------------------------------------------------------------------


def _existing(destination: Destination) -> list[str]:
    """What the destination holds, checkpoints (they belong to no dataset) and a killed
    writer's temp files (the next write removes them) aside."""
    return [name for name in destination.top_level() if name != CHECKPOINT_DIR and not is_writer_leftover(name)]


def check_destination(destination: Destination, resume: bool, force: bool) -> None:
    """Refuse a dataset root that holds something when the write says neither ``resume``
    nor ``force`` (the seed's rule); which version the write goes into is
    :func:`~kuration.output.write_target.write_target`'s."""
    existing = _existing(destination)
    if existing and not (resume or force):
        raise DatasetWriteError(
            f"{destination.url}: already holds {existing[:5]}{'...' if len(existing) > 5 else ''}; pass resume=True to "
            "finish or reuse the same run, or force=True to write a new version beside it"
        )


def refuse_the_dataset_being_read(destination: Destination, adapter: SourceAdapter) -> None:
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


def _run_fingerprints(shards: ShardPlan, identities: Mapping[str, SourceIdentity],
                      context: WriteContext) -> dict[str, Any]:
    """Everything the run's shards and records depend on: the run fingerprint is their digest."""
    return {
        "output_spec": shards.spec.fingerprint(), "schema": shards.schema.fingerprint(),
        "plan": plan_digest(shards.budget_plan.admitted()), "encoder": code_fingerprint(shards.encoder),
        "adapter": code_fingerprint(shards.adapter, state=stable_repr(shards.adapter)),
        "callbacks": {name: code_fingerprint(fn) for name, fn in sorted((context.callbacks or {}).items())},
        "sources": {s: identities[s].token() for s in shards.sources}, "kuration": _version.__version__,
        **(dict(context.inputs) if context.inputs else {}),
    }


def _content_keys(shards: ShardPlan, identities: Mapping[str, SourceIdentity],
                  fingerprints: Mapping[str, Any]) -> dict[str, str | None]:
    basis = content_key_basis(spec=shards.spec, schema=shards.schema, encoder=fingerprints["encoder"],
                              adapter=fingerprints["adapter"], kuration=fingerprints["kuration"])
    return {target.path: content_key(basis, identities[target.source_id], target, span_meta(row, shards.features))
            for target, row in shards.targets}


def _placed(shards: ShardPlan, keys: Mapping[str, str | None], pooled: bool) -> list[PlannedShard]:
    """The plan's shards, each with the pool object it is stored as when the root pools
    shards and the shard has a content key (the others go into the version folder)."""
    if not pooled:
        return list(shards.targets)
    extension = get_container(shards.spec.container).extension
    return [(replace(target, stored_at=pool_name(key, extension)) if (key := keys[target.path]) else target, row)
            for target, row in shards.targets]


def _worker_state(destination: Destination, shards: ShardPlan, to_write: int, write_workers: int,
                  pool: Destination | None) -> bytes:
    """What every write worker is sent, pickled now so anything that cannot reach a worker
    fails before publication; b"" when the shards are written in this process."""
    if write_workers <= 1 or not to_write:
        return b""
    return pickled_state(WorkerState(destination, shards.spec, shards.schema, shards.encoder, shards.adapter,
                                     shards.features, pool))


def _config(shards: ShardPlan, context: WriteContext, *, results: Mapping[str, Any],
            provenance: Mapping[str, Any], started: _dt.datetime) -> dict[str, Any]:
    """``config.json`` but for ``results.splits`` and ``timestamps.finished``; a value JSON
    cannot hold (in ``job=``, say) fails here, before publication."""
    plan = shards.budget_plan
    config = {
        "format": 1,
        "job": {"output": shards.spec.to_dict(), "schema": shards.schema.to_dict(), "budget": plan.options.to_dict(),
                "strategy": plan.strategy, "strategy_fingerprint": canonical_digest(plan.strategy),
                **(dict(context.job) if context.job else {})},
        "results": {"budget": plan.accounting, "shards": len(shards.targets), **results,
                    **(dict(context.results) if context.results else {})},
        "timestamps": {"started": started.isoformat(timespec="seconds")},
        "provenance": dict(provenance),
    }
    try:
        readable_json(config)
    except (TypeError, ValueError) as exc:
        raise DatasetWriteError(f"config.json cannot hold this run's record ({exc}): every value of job=, results= "
                                "and the budget accounting must be JSON (no NaN or infinity)") from None
    return config


@dataclass(frozen=True)
class _Reuse:
    """The shards a write keeps: ``kept`` (path -> entry), ``adopt`` (path -> its path in the
    root, for those in another version) and the candidates they were chosen from."""

    kept: dict[str, dict[str, Any]]
    adopt: dict[str, str]
    candidates: ReuseCandidates


def _reuse(target: WriteTarget, shards: ShardPlan, placed: Sequence[PlannedShard], keys: Mapping[str, str | None],
           *, reuse_shards: bool) -> _Reuse:
    """What the target's and the previous version's records offer, and the shards kept of
    them: every target whose recorded entry is the one this write would record and whose
    file still has its size and SHA-256 (hashed now, before publication: a shard that fails
    is written anew). The target's own shards are looked at first (a resume)."""
    # a split (or plan) folder that is a link would have shards reused from, or written to, wherever it leads
    target.destination.check_folders({*EXCLUSIVE_STAGES, BUDGET_DIR})
    if not reuse_shards or not target.sources:
        why = "reuse_shards=False" if not reuse_shards else f"no committed dataset at {target.root.url}"
        return _Reuse({}, {}, ReuseCandidates({}, None, why))
    here = f"{VERSIONS_DIR}/{target.version}"
    kept: dict[str, dict[str, Any]] = {}
    adopt: dict[str, str] = {}
    first: ReuseCandidates | None = None
    for source in target.sources:
        source.destination.check_folders({*EXCLUSIVE_STAGES, BUDGET_DIR})
        candidates = reuse_candidates(source.destination, source.record)
        wanted = [(t, keys[t.path]) for t, _ in placed if t.path not in kept]
        found = verified_reuse(source.destination, candidates, shards.spec, wanted,
                               dataset_root=target.root.destination)
        if first is None or (found and not kept):
            first = candidates
        kept.update(found)
        if source.prefix != here:
            adopt.update(_adoptable(source.prefix, found))
    return _Reuse(kept, adopt, first or ReuseCandidates({}, None, "no candidates"))


def _results(budget_files: Mapping[str, bytes], candidates: ReuseCandidates, kept: Mapping[str, Any], to_write: int,
             *, resume: bool, fresh: bool) -> dict[str, Any]:
    """``config.json``'s results of the write itself: the shards written and kept, why none
    was kept when none was (not asked of a ``fresh`` root), and the pin of
    ``budget/budget.json`` (which pins the plan's tables, so the commit covers the plan)."""
    refused = "" if kept or fresh else candidates.refused or (
        "no recorded shard has this write's content key with its recorded size and SHA-256 (the sources, span "
        "values, output spec or code changed, or the files did)")
    pin = budget_files[BUDGET_FILE]
    return {"written_shards": to_write, "reused_shards": len(kept),
            "resume": {"requested": resume, "reuse_refused": refused,
                       "reused_from_run": candidates.run if kept else None},
            "budget_plan": {"path": f"{BUDGET_DIR}/{BUDGET_FILE}", "sha256": sha256_hex(pin), "bytes": len(pin)}}


def _adoptable(prefix: str, kept: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Path -> path in the root of the kept shards that lie in the folder at ``prefix`` (a
    pooled one lies in the pool, which every version shares: nothing to adopt)."""
    return {path: f"{prefix}/{path}".lstrip("/") for path, entry in kept.items() if not is_pooled(entry)}


def _settled(target: WriteTarget, reuse: _Reuse, shards: ShardPlan) -> tuple[WriteTarget, _Reuse, bool]:
    """A resume onto this run's committed version: unchanged when every shard verified,
    else a new version that keeps (adopts) the shards that did."""
    if target.record is None or target.record.state != "committed":
        return target, reuse, False
    if len(reuse.kept) == len(shards.targets):
        return target, reuse, True
    root = target.root
    renewed = replace(target, version=root.next_version(), destination=root.version_destination(root.next_version()),
                      record=None, resumed=False)
    adopt = _adoptable(f"{VERSIONS_DIR}/{target.version}", reuse.kept)
    return renewed, replace(reuse, adopt=adopt), False


def plan_write(destination: Destination, shards: ShardPlan, *, options: WriteOptions | None = None,
               context: WriteContext | None = None) -> WritePlan:
    """The :class:`WritePlan` of writing ``shards`` to the dataset root at ``destination``
    (see the module docstring and :mod:`.write_target`); call it under the root's lease."""
    options, context = options or WriteOptions(), context or WriteContext()
    refuse_the_dataset_being_read(destination, shards.adapter)
    started = context.started or _dt.datetime.now(_dt.timezone.utc)
    check_destination(destination, options.resume, options.force)
    identities = {s: shards.adapter.identity(s) for s in shards.sources}
    fingerprints = _run_fingerprints(shards, identities, context)
    run_fingerprint = canonical_digest(fingerprints)
    target = write_target(DatasetRoot(destination.url), run_fingerprint, resume=options.resume, force=options.force,
                          replace=options.on_other_run == "replace")
    keys = _content_keys(shards, identities, fingerprints)
    pooled = not destination.shares_by_link
    if pooled:  # a pool folder that is a link would take (and give) shards from wherever it leads
        destination.check_folders({POOL_DIR})
    placed = _placed(shards, keys, pooled)
    target, reuse, unchanged = _settled(
        target, _reuse(target, shards, placed, keys, reuse_shards=options.reuse_shards), shards)
    pending: dict[str, tuple[PlannedShard, ...]] = {source: () for source in shards.sources}
    for planned in placed:
        if planned[0].path not in reuse.kept:
            pending[planned[0].source_id] += (planned,)
    to_write = sum(len(planned) for planned in pending.values())
    budget_files = budget_plan_files(shards.budget_plan)
    results = _results(budget_files, reuse.candidates, reuse.kept, to_write, resume=target.resumed,
                       fresh=not target.sources and not options.resume)
    provenance = {"run_fingerprint": run_fingerprint, **fingerprints,
                  "sources_strong_identity": {s: bool(identity.strong) for s, identity in identities.items()}}
    return WritePlan(
        shards=shards, root=destination.url, version=target.version, destination=target.destination.url,
        run_fingerprint=run_fingerprint, fingerprints=fingerprints,
        marker=readable_json({"format": 1, "output": shards.spec.to_dict(), "run_fingerprint": run_fingerprint}),
        content_keys=keys, kept=reuse.kept, pending=pending, budget_files=budget_files,
        config=_config(shards, context, results=results, provenance=provenance, started=started),
        replaced=target.replaced, write_workers=options.write_workers,
        worker_state=_worker_state(target.destination, shards, to_write, options.write_workers,
                                   destination if pooled else None),
        adopt=reuse.adopt, unchanged=unchanged, make_current=options.publish, pooled=pooled)


__all__ = ["ON_OTHER_RUN", "ShardPlan", "WriteContext", "WriteOptions", "WritePlan", "check_destination",
           "plan_digest", "plan_shards", "plan_write", "refuse_the_dataset_being_read"]
