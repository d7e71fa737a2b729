"""Publishing a planned dataset write: the commit protocol's steps 2 to 5, in order.

:func:`publish` acts on a :class:`~kuration.output.write_plan.WritePlan` and decides
nothing the plan did not: which shards to keep, which to write, the run fingerprint and
the records' bodies are the plan's. It begins publication at once (the preflight,
:mod:`.preflight`, decoded one reference of each media modality and encoded one record
before the lease was taken, and its tracks are reused here): ``dataset.commit.json``
says ``writing``; the kept shards are listed in the run's resume records; the pending
shards are written (here through a :class:`~kuration.output.write_track.ShardWriter`, or in
write workers, :mod:`.write_workers`), each recorded for resume as it lands; then the
manifest, the ``budget/`` files and ``config.json``, the sweep of what the commit does not
cover, and the committed record, last (:mod:`.commit_protocol`).

What it does not do: take the lease (the caller holds it, from planning to the end), check
anything static (planning did), probe the recordings (the preflight did), or decide to
reuse a shard.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuration.budget import BudgetPlan
from kuration.budget.plan_store import BUDGET_DIR
from kuration.canonical.hashing import canonical_json, readable_json
from kuration.output.commit_protocol import (
    CHECKPOINT_DIR, RESUME_DIR, CommitRecord, is_writer_leftover, publish_committed, publish_writing,
)
from kuration.output.destinations import Destination, open_destination
from kuration.output.preflight import Preflight
from kuration.output.version_gc import collect_under_lease
from kuration.output.versions import PUBLISHED_DIR, VERSIONS_DIR, DatasetRoot
from kuration.output.shard_pool import POOL_DIR, is_pooled
from kuration.output.shard_reuse import ADOPTED_RECORD, resume_folder
from kuration.output.write_errors import DatasetWriteError
from kuration.read.committed import load_committed
from kuration.output.write_plan import WritePlan
from kuration.output.write_track import ShardWriter
from kuration.output.write_workers import ShardTask, WorkerState, run_shard_tasks, shard_tasks, write_task_shards
from kuration.sources.media import media_cache
from kuration.sources.tracks import Track
from kuration.splits.stages import EXCLUSIVE_STAGES

MANIFEST_FORMAT = 1


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
    #: Why the destination's dataset was replaced ("" when it was not).
    replaced: str = ""
    #: The version this write committed (:mod:`.versions`), its folder, and whether it is
    #: current now (False: staged, for an audit and a later publish).
    version: str = ""
    version_url: str = ""
    published: bool = False
    #: The versions retention removed after the publish (``keep_versions``), oldest first.
    versions_removed: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        return self.config[key]

    @property
    def reference(self) -> str:
        """What opens this version with every reader: ``ROOT@vN`` (a pooled version's shards
        lie in the root's pool, so its folder alone does not load)."""
        return f"{self.out}@{self.version}" if self.version else self.out

    @property
    def manifest_sha256(self) -> str:
        """The committed manifest's SHA-256: what identifies this dataset's content."""
        if self.record.manifest_sha256 is None:  # a committed record always has it
            raise DatasetWriteError(f"{self.out}: the commit record holds no manifest digest")
        return self.record.manifest_sha256


class _InSourceOrder:
    """Calls ``progress(done, total, source)`` once per source, in source order, once every
    task of that source and of the sources before it has finished: the calls one worker
    makes, whatever order the write workers finish in."""

    def __init__(self, sources: Sequence[str], tasks: Sequence[ShardTask],
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


class _Journal:
    """The manifest entries of the shards in the dataset so far: the kept ones, then each
    written one as it lands, recorded for resume at once."""

    def __init__(self, destination: Destination, plan: WritePlan) -> None:
        self._destination = destination
        self._plan = plan
        self.entries: list[dict[str, Any]] = [dict(entry) for entry in plan.kept.values()]

    def finished(self, entry: dict[str, Any]) -> None:
        entry = {**entry, "content_key": self._plan.content_keys[entry["path"]]}
        self.entries.append(entry)
        run = self._plan.run_fingerprint
        name = f"{resume_folder(run)}/{hashlib.sha256(entry['path'].encode()).hexdigest()[:24]}.json"
        # Not made durable: a record lost to a power cut only costs a rebuild.
        self._destination.write_metadata(name, canonical_json({"run": run, "entry": entry}), durable=False)


def _write_here(destination: Destination, plan: WritePlan, journal: _Journal,
                read_ahead: dict[str, Mapping[str, Track]], progress: Callable[[int, int, str], None] | None,
                pool: Destination | None) -> None:
    """The pending shards, in this process, source by source (``read_ahead``: tracks the
    preflight read already; ``pool``: the dataset root, for the pooled shards)."""
    shards = plan.shards
    with ShardWriter(destination, shards.spec, schema=shards.schema, encoder=shards.encoder, adapter=shards.adapter,
                     on_entry=journal.finished, pool=pool) as writer:
        for done, source in enumerate(shards.sources, start=1):
            write_task_shards(writer, shards.schema, shards.adapter, source, plan.pending[source], shards.features,
                              read_ahead.pop(source, None))
            if progress:
                writer.after(functools.partial(progress, done, len(shards.sources), source))


def _write_in_workers(destination: Destination, plan: WritePlan, journal: _Journal,
                      progress: Callable[[int, int, str], None] | None, pool: Destination | None) -> None:
    """The pending shards, in ``plan.write_workers`` worker processes (each reads its own sources)."""
    shards = plan.shards
    state = WorkerState(destination, shards.spec, shards.schema, shards.encoder, shards.adapter, shards.features,
                        pool)
    tasks = shard_tasks(plan.pending, plan.write_workers)
    report = _InSourceOrder(shards.sources, tasks, progress)
    report.finished(None)  # the sources before the first one with shards to write
    for task, entries in run_shard_tasks(tasks, workers=plan.write_workers, state=state, shared=plan.worker_state):
        for entry in entries:
            journal.finished(entry)
        report.finished(task.index)
    report.finished(None)


def _manifest(entries: list[dict[str, Any]], plan: WritePlan) -> dict[str, Any]:
    splits = {}
    for name in EXCLUSIVE_STAGES:
        mine = [e for e in entries if e["split"] == name]
        splits[name] = {"shards": len(mine), "steps": int(sum(e["n_steps"] for e in mine)),
                        "bytes": int(sum(e["bytes"] for e in mine))}
    return {"format": MANIFEST_FORMAT, "output": plan.shards.spec.to_dict(), "entries": entries, "splits": splits,
            "budget": plan.shards.budget_plan.accounting, "run_fingerprint": plan.run_fingerprint}


def _final_config(plan: WritePlan, splits: Mapping[str, Any], finished: _dt.datetime) -> dict[str, Any]:
    """The plan's ``config.json`` body with what only the written shards give."""
    body = plan.config
    return {**body, "results": {"splits": splits, **body["results"]},
            "timestamps": {**body["timestamps"], "finished": finished.isoformat(timespec="seconds")}}


def _in_folder(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    """The paths of the entries whose bytes lie in the version folder (not in the pool)."""
    return {e["path"] for e in entries if not is_pooled(e)}


def _remove_leftovers(destination: Destination, keep: set[str]) -> None:
    """Files the new commit does not cover: in the split folders every file the new manifest
    does not list there (an earlier run's shards, killed writes' temp files and attempt
    objects; a pooled shard lies in the root's pool); at the top level and in ``budget/``,
    the temp files of killed writes."""
    for split in EXCLUSIVE_STAGES:
        for name in destination.files_under(split):
            if name not in keep:
                destination.remove(name)
    for name in destination.top_level():
        if is_writer_leftover(name):
            destination.remove(name)
    for folder in (BUDGET_DIR,):
        for name in destination.files_under(folder):
            if is_writer_leftover(name.rsplit("/", 1)[-1]):
                destination.remove(name)


def _sweep_root(root: Destination) -> None:
    """The temp files killed writers and publishers left at the root, in the publish log,
    among the checkpoints and in the shard pool (a version folder is swept before it commits)."""
    for name in root.top_level():
        if is_writer_leftover(name):
            root.remove(name)
    for folder in (PUBLISHED_DIR, CHECKPOINT_DIR, POOL_DIR):
        for name in root.files_under(folder):
            if is_writer_leftover(name.rsplit("/", 1)[-1]):
                root.remove(name)


def _share_adopted(root: Destination, plan: WritePlan) -> None:
    """Every kept shard that lies in another version's folder becomes this version's too: a
    hard link (or a server-side copy), so a rebuild adds only the bytes of the shards it
    writes. A kept pooled shard needs nothing: the new manifest names its pool object."""
    here = f"{VERSIONS_DIR}/{plan.version}"
    for path, source in sorted(plan.adopt.items()):
        root.share_file(source, f"{here}/{path}")


def commit_version(root: Destination, plan: WritePlan, *, progress: Callable[[int, int, str], None] | None = None,
                   preflight: Preflight | None = None) -> DatasetWriteResult:
    """Carry out ``plan`` in its version folder (under the root's lease) and commit that
    version; publishing it is :func:`publish`'s last step."""
    if root.url != plan.root:
        raise DatasetWriteError(f"{root.url}: the write plan is for {plan.root}; plan again for this dataset root")
    if preflight is not None and preflight.shards is not plan.shards:
        raise DatasetWriteError("the preflight given is of other shards than the write plan's; pass "
                                "preflight(plan.shards)")
    destination = open_destination(plan.destination)
    if plan.unchanged:
        return _unchanged(destination, plan)
    journal = _Journal(destination, plan)
    # One media cache for the shards: each media file is read once, within the cache's bound
    # (a cache the caller opened is used, with its bound: the preflight's, when it opened one).
    with media_cache():
        read_ahead = dict(preflight.tracks) if preflight is not None else {}

        # -- publication of the version starts: readers reject its folder until it commits --
        publish_writing(destination, run_fingerprint=plan.run_fingerprint, marker=plan.marker)
        if plan.kept:
            _share_adopted(root, plan)
            # A resume after a crash finds the kept shards here (not durable, like every record).
            destination.write_metadata(f"{resume_folder(plan.run_fingerprint)}/{ADOPTED_RECORD}", canonical_json(
                {"run": plan.run_fingerprint, "entries": sorted(plan.kept.values(), key=lambda e: e["path"])}),
                durable=False)
        pool = root if plan.pooled else None
        if plan.in_workers:
            read_ahead.clear()  # each worker reads its own sources
            _write_in_workers(destination, plan, journal, progress, pool)
        else:
            _write_here(destination, plan, journal, read_ahead, progress, pool)
    return _commit(destination, plan, journal.entries)


def _commit(destination: Destination, plan: WritePlan, entries: list[dict[str, Any]]) -> DatasetWriteResult:
    """The manifest, the budget plan, config.json, the sweep, the committed record: the version's last steps."""
    entries = sorted(entries, key=lambda e: (e["source_id"], e["entity_id"], -1 if e["span_index"] is None
                                             else e["span_index"], e["shard_index"]))
    manifest = _manifest(entries, plan)
    for name, data in plan.budget_files.items():  # budget.json, which pins the tables, last
        destination.write_metadata(f"{BUDGET_DIR}/{name}", data)
    config = _final_config(plan, manifest["splits"], _dt.datetime.now(_dt.timezone.utc))
    manifest_bytes, config_bytes = readable_json(manifest), readable_json(config)
    # Still unreadable (state=writing): killed writes' temp files go now, so the committed
    # folder holds exactly what its commit covers.
    _remove_leftovers(destination, _in_folder(entries))
    committed = publish_committed(destination, run_fingerprint=plan.run_fingerprint, marker=plan.marker,
                                  manifest=manifest_bytes, config=config_bytes)
    for name in destination.files_under(RESUME_DIR):  # the manifest now records every shard
        destination.remove(name)
    return DatasetWriteResult(plan.root, committed, manifest, config, plan.shards.budget_plan, plan.to_write,
                              len(plan.kept), plan.replaced, plan.version, plan.destination)


def _unchanged(destination: Destination, plan: WritePlan) -> DatasetWriteResult:
    """This run's committed version, every shard verified: what is on disk is the result."""
    dataset = load_committed(f"{plan.root}@{plan.version}")
    # debris only (killed writers' temp files, stale resume records): never a file the commit covers
    _remove_leftovers(destination, _in_folder(dataset.entries))
    for name in destination.files_under(RESUME_DIR):
        destination.remove(name)
    return DatasetWriteResult(plan.root, dataset.record, dict(dataset.manifest), dict(dataset.config),
                              plan.shards.budget_plan, 0, len(plan.kept), plan.replaced, plan.version,
                              plan.destination)


def publish(destination: Destination, plan: WritePlan, *,
            progress: Callable[[int, int, str], None] | None = None,
            preflight: Preflight | None = None, keep_versions: int | None = None) -> DatasetWriteResult:
    """Carry out ``plan`` at the dataset root ``destination`` (the one it was planned for,
    under the same lease): commit the version (:func:`commit_version`), sweep the root of
    killed publishers' temp files, and, when the plan says so, make the version current in
    one atomic step (:meth:`~kuration.output.versions.DatasetRoot.publish`).
    ``progress(done, total, source)`` is called once per source, in source order, after
    its shards are written. ``preflight``: what :func:`~kuration.output.preflight.preflight`
    read of ``plan.shards``, whose tracks are written from instead of reading those sources
    again. ``keep_versions``: once the version is current, remove the versions retention no
    longer keeps (:func:`~kuration.output.version_gc.collect_under_lease`, under this same
    lease); None keeps them all."""
    result = commit_version(destination, plan, progress=progress, preflight=preflight)
    root = DatasetRoot(destination.url)
    _sweep_root(destination)
    if not plan.make_current:
        return result
    current = root.current()
    if current is None or current.version != plan.version:
        root.publish(plan.version)
    removed = () if keep_versions is None else collect_under_lease(destination, keep_versions).removed
    return dataclasses.replace(result, published=True, versions_removed=removed)


__all__ = ["DatasetWriteResult", "MANIFEST_FORMAT", "commit_version", "publish"]
