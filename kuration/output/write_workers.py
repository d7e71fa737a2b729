"""Writing a dataset's shards in worker processes: ``write_dataset(..., write_workers=N)``.

The dataset writer (:mod:`kuration.output.write_dataset`) plans, checks, takes the lease,
publishes ``state=writing`` and commits (:mod:`kuration.output.publish`), always in the
parent process. With
``write_workers=N > 1`` only the shards themselves (read the source, assemble, encode,
write, SHA-256, move into place) are written in N local worker processes
(:mod:`kuration.worker_processes`: forked from the forkserver the scoring workers use,
with the same plugin imports). What a worker writes is what the parent would have written:
the same code (:func:`write_task_shards` through a :class:`~.write_track.ShardWriter`),
the same bytes, under the same names. So the dataset is byte-identical to
``write_workers=1``; the manifest is sorted after the last shard, whatever order workers
finish in.

- A task is one source's shards still to write (a source with many shards is cut into a
  few tasks, each reading the source once), so a source is read once per task, not once
  per shard. At most N tasks are in flight.
- Every worker gets the destination (a local folder, or an fsspec filesystem the worker
  rebuilds for itself from the pickle), the spec, schema, encoder and adapter once, pickled
  when the pool starts; the parent refuses, before publication, anything that cannot reach
  a worker: an object that does not pickle, or a class defined in a notebook's or REPL's
  ``__main__`` (a worker imports classes by module name; a script's ``__main__`` it imports,
  as multiprocessing does, so a script's work must sit under ``if __name__ == "__main__":``).
- The parent holds the lease throughout, writes each shard's resume record as soon as a
  worker's result is in and checked (:func:`run_shard_tasks`: one entry per shard asked
  for, the entry the parent would record for it, with an integer size and a SHA-256), and
  commits only after every task's result was. Progress stays in the parent.
- A failure fails the write, with nothing committed (the commit record stays
  ``writing``; ``resume=True`` keeps every shard recorded so far). A Kuration error
  (``MediaError``, ``EncoderError``, ``MissingValueError``, a ``PluginError``, ...) or an
  ``OSError`` from a worker is raised in the parent as it is, as with one worker; any
  other exception becomes a :class:`~.write_errors.WriteWorkerError` naming the source and shard and the
  original type and message (with the worker's traceback as its cause). A worker process
  that dies (killed, out of memory, ``os._exit``) is a ``WriteWorkerError`` naming the
  sources in flight. Either way the tasks not started are dropped and the parent waits for
  the running ones before it returns, so nothing is written after the lease is released.

What it does not do: write metadata, commit, take the lease, or pick shards to reuse.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import io
import math
import pickle
import re
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kuration.errors import InputError, KurationError, shown
from kuration.output.destinations import Destination
from kuration.output.encoders import OutputEncoder
from kuration.output.shard_files import WrittenShard
from kuration.output.spec import OutputSpec
from kuration.output.write_errors import DatasetWriteError, WriteWorkerError
from kuration.output.write_track import ShardTarget, ShardWriter, manifest_entry
from kuration.sources.entities import entity_key
from kuration.sources.media import media_cache, media_provider_module
from kuration.sources.protocol import SourceAdapter
from kuration.sources.schema import Schema
from kuration.sources.tracks import Track, tracks_from_ticks
from kuration.worker_processes import import_worker_modules, process_pool, shared_state, worker_modules

#: More write workers than any machine has cores is a typo, not a setting.
MAX_WRITE_WORKERS = 4096
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
#: Where a module the workers import must be importable, for the message when it is not.
_WORKER_ENVIRONMENT = "the write workers' environment (a forkserver worker gets this process's sys.path)"
_DECLARED_IN = "the dataset write's parent process, whose plugins and user code every write worker imports"
#: A shard row of the plan: where the shard goes, and the admitted plan row it comes from.
PlannedShard = tuple[ShardTarget, dict[str, Any]]


def check_write_workers(value: Any) -> int:
    """``value`` as a worker count, or the :class:`~kuration.errors.InputError` naming
    ``write_workers``: a positive int (not a bool), at most :data:`MAX_WRITE_WORKERS`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"write_workers must be a positive integer (1 writes in this process), got {shown(value)}")
    if not 1 <= int(value) <= MAX_WRITE_WORKERS:
        raise InputError(f"write_workers must be between 1 and {MAX_WRITE_WORKERS} (1 writes in this process), got "
                         f"{shown(value)}")
    return int(value)


# -- the shard writing both the parent (one worker) and a worker process run -----------------------


def span_meta(row: Mapping[str, Any], features: Sequence[str]) -> dict[str, Any]:
    """What the writer adds to a span's track meta (``segment:`` modalities and encoders
    read it), so what a shard's content key covers besides the recording."""
    return {**{key: row[key] for key in features}, "span_index": row.get("span_index"), "priority": row.get("priority")}


def read_tracks(schema: Schema, adapter: SourceAdapter, source: str) -> dict[str, Track]:
    """The source's tracks by entity key."""
    return {entity_key(t.entity_id): t for t in tracks_from_ticks(schema, adapter.read_ticks(source), source)}


def span_track(tracks: Mapping[str, Track], target: ShardTarget, row: Mapping[str, Any],
               features: Sequence[str]) -> Track:
    """The track ``target`` is cut from, with the span's meta (:func:`span_meta`); a
    :class:`DatasetWriteError` when the recording no longer has the planned entity or rows."""
    track = tracks.get(target.entity_id)
    if track is None:
        raise DatasetWriteError(
            f"source {target.source_id!r} has no entity {target.entity_id} any more, but the budget plan admitted its "
            f"span {target.span_index}; the recording changed after scoring. Re-score and plan again"
        )
    if int(row["stop"]) > len(track):
        raise DatasetWriteError(
            f"source {target.source_id!r}, entity {target.entity_id}: the plan's span [{row['start']}, {row['stop']}) "
            f"is past the track's {len(track)} rows; the recording changed after scoring. Re-score and plan again"
        )
    return dataclasses.replace(track, meta={**track.meta, **span_meta(row, features)})


def write_task_shards(writer: ShardWriter, schema: Schema, adapter: SourceAdapter, source: str,
                      shards: Sequence[PlannedShard], features: Sequence[str],
                      tracks: Mapping[str, Track] | None = None,
                      at: list[ShardTarget | None] | None = None) -> None:
    """Write ``shards`` (all of source ``source``) through ``writer``, reading the source
    first unless its ``tracks`` are given: what one process and a write worker both run.
    ``at[0]`` follows the shard being written (for a worker's error message)."""
    if not shards:
        return
    if tracks is None:
        tracks = read_tracks(schema, adapter, source)
    for target, row in shards:
        if at is not None:
            at[0] = target
        writer.write(target, span_track(tracks, target, row, features))


# -- tasks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardTask:
    """Shards of one source to write in one worker: ``index`` orders the tasks (source order)."""

    index: int
    source_id: str
    shards: tuple[PlannedShard, ...]


def shard_tasks(pending: Mapping[str, Sequence[PlannedShard]], workers: int) -> list[ShardTask]:
    """The tasks of ``pending`` (source -> its shards to write, in writing order): one per
    source, a source with more than its share of shards (a half of the total over
    ``workers``) cut into runs of that length so no worker is left idle by one large
    source. Each task reads its source once."""
    total = sum(len(shards) for shards in pending.values())
    longest = max(1, math.ceil(total / (2 * workers)))
    tasks: list[ShardTask] = []
    for source, shards in pending.items():
        for start in range(0, len(shards), longest):
            tasks.append(ShardTask(len(tasks), source, tuple(shards[start: start + longest])))
    return tasks


@dataclass(frozen=True)
class WorkerState:
    """What every write worker needs, sent once per worker (``pool``: the dataset root whose
    shard pool takes the pooled shards, None when none is pooled)."""

    destination: Destination
    spec: OutputSpec
    schema: Schema
    encoder: OutputEncoder
    adapter: SourceAdapter
    features: tuple[str, ...]
    pool: Destination | None = None


@dataclass(frozen=True)
class _Failure:
    """An exception from a worker that cannot travel back as it is (not a Kuration error or
    an OSError, or it does not survive pickling): what the parent raises instead, and the
    worker's traceback."""

    message: str
    traceback: str


class _WorkerTraceback(Exception):
    """The cause of a :class:`WriteWorkerError` for a worker's exception: its traceback, as text."""

    def __str__(self) -> str:
        return f"\n\"\"\"\n{self.args[0]}\"\"\""


_PASSES_AS_IS = (KurationError, OSError, MemoryError)


def _portable(exc: BaseException, task: ShardTask, target: ShardTarget | None) -> BaseException | _Failure:
    if isinstance(exc, _PASSES_AS_IS):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # its class cannot be rebuilt from its args: report it by message
            pass
    shard = f", shard {target.path}" if target is not None else ""
    return _Failure(f"source {task.source_id!r}{shard}: {type(exc).__name__}: {exc}",
                    "".join(traceback.format_exception(exc)))


@dataclass(frozen=True)
class _WriteTask:
    """The task a write worker runs (picklable: the modules it imports first)."""

    modules: tuple[str, ...]

    def __call__(self, task: ShardTask) -> list[dict[str, Any]] | _Failure:
        entries: list[dict[str, Any]] = []
        at: list[ShardTarget | None] = [None]
        try:
            import_worker_modules(self.modules, declared_in=_DECLARED_IN, environment=_WORKER_ENVIRONMENT)
            state: WorkerState = shared_state()
            with media_cache(), ShardWriter(state.destination, state.spec, schema=state.schema,
                                            encoder=state.encoder, adapter=state.adapter,
                                            on_entry=entries.append, pool=state.pool) as writer:
                write_task_shards(writer, state.schema, state.adapter, task.source_id, task.shards, state.features,
                                  at=at)
        except Exception as exc:
            failure = _portable(exc, task, at[0])
            if isinstance(failure, _Failure):
                return failure
            raise failure from None
        return entries


# -- the parent ----------------------------------------------------------------------------------


class _MainChecker(pickle.Pickler):
    """Pickles as usual and notes every class or function defined in ``__main__``. A worker
    finds those only when ``__main__`` is a script (it imports the script, as
    multiprocessing does; its work must sit under ``if __name__ == "__main__":``), not in
    a notebook or a REPL."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.in_main: list[str] = []

    def persistent_id(self, obj: Any) -> None:
        defined = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
        if getattr(defined, "__module__", None) == "__main__":
            self.in_main.append(f"__main__.{getattr(defined, '__qualname__', defined)}")
        return None


def pickled_state(state: WorkerState) -> bytes:
    """``state`` pickled for the workers, or the :class:`~kuration.errors.InputError` naming
    ``write_workers`` and what cannot reach a worker; run before publication."""
    buffer = io.BytesIO()
    pickler = _MainChecker(buffer)
    try:
        pickler.dump(state)
    except Exception as exc:
        raise InputError(
            f"write_workers > 1 sends the adapter ({type(state.adapter).__name__}), the encoder "
            f"({type(state.encoder).__name__}), the schema, the output spec and the destination to worker processes, "
            f"and one of them cannot be pickled ({type(exc).__name__}: {exc}). Make it picklable (no lambdas, open "
            "files or locks in its attributes), or write with write_workers=1") from None
    if pickler.in_main and getattr(sys.modules.get("__main__"), "__file__", None) is None:
        raise InputError(
            f"write_workers > 1 sends the adapter and the encoder to worker processes, which import classes by module "
            f"name, and {sorted(set(pickler.in_main))[:3]} are defined in the interactive session's __main__ (a "
            "notebook or a REPL, which a worker cannot import). Move them into an importable module, or write with "
            "write_workers=1")
    return buffer.getvalue()


def modules_for_workers(state: WorkerState) -> list[str]:
    """What every write worker imports: the loaded plugins, then the modules of the adapter's
    and encoder's classes and of the spec's media providers."""
    modules = {type(state.adapter).__module__, type(state.encoder).__module__}
    for modality in state.spec.of_kind("media").values():
        modules.add(media_provider_module(state.schema.media[modality.key].provider) or "__main__")
    return worker_modules(modules)


def _checked_entries(task: ShardTask, result: Any, spec: OutputSpec) -> list[dict[str, Any]]:
    """The entries a worker returned for ``task``, once each is exactly the entry the
    parent would record for its shard (only the size and SHA-256 come from the worker)."""
    if not isinstance(result, list) or len(result) != len(task.shards):
        got = f"{len(result)} entries" if isinstance(result, list) else type(result).__name__
        raise WriteWorkerError(f"source {task.source_id!r}: a write worker returned {got} for {len(task.shards)} "
                               "shards; nothing was committed. Run again with resume=True")
    for (target, _), entry in zip(task.shards, result, strict=True):
        size, digest = (entry.get("bytes"), entry.get("sha256")) if isinstance(entry, dict) else (None, None)
        n_steps = target.stop - target.start
        if not (isinstance(size, int) and not isinstance(size, bool) and size > 0 and isinstance(digest, str)
                and _SHA256_HEX.fullmatch(digest) is not None
                and entry == manifest_entry(target, n_steps, spec.shard_rows(n_steps), spec.container,
                                            WrittenShard(Path(target.path), size, digest))):
            raise WriteWorkerError(f"source {task.source_id!r}, shard {target.path}: a write worker returned an entry "
                                   f"that is not this shard's ({shown(entry)}); nothing was committed. Run again with "
                                   "resume=True")
    return result


def run_shard_tasks(tasks: Sequence[ShardTask], *, workers: int, state: WorkerState,
                    shared: bytes) -> Iterator[tuple[ShardTask, list[dict[str, Any]]]]:
    """Run ``tasks`` in ``workers`` worker processes, at most ``workers`` at a time; yield
    each task with its checked manifest entries (in the order of its shards) as it
    finishes. ``shared`` is :func:`pickled_state` of ``state``. On the first failure the
    tasks not started are dropped, the running ones waited for, and the error raised (see
    the module docstring)."""
    if not tasks:
        return
    call = _WriteTask(tuple(modules_for_workers(state)))
    pool = process_pool(min(workers, len(tasks)), modules=call.modules, shared=shared)
    finished = False
    try:
        queue = iter(tasks)
        running: dict[cf.Future, ShardTask] = {}
        for task in queue:
            running[pool.submit(call, task)] = task
            if len(running) >= workers:
                break
        while running:
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f].index):
                task = running[future]
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    sources = sorted({t.source_id for t in running.values()})
                    raise WriteWorkerError(
                        f"a write worker process died while the workers were writing source(s) {sources} ({exc}); "
                        "nothing was committed. Find why (the machine's memory, a signal, a native crash in the "
                        "adapter, encoder or media decoder), then run again with resume=True to keep the shards "
                        "finished so far") from None
                if isinstance(result, _Failure):
                    raise WriteWorkerError(f"{result.message}; nothing was committed. Fix the cause, then run again "
                                           "with resume=True to keep the shards finished so far"
                                           ) from _WorkerTraceback(result.traceback)
                del running[future]
                yield task, _checked_entries(task, result, state.spec)
                next_task = next(queue, None)
                if next_task is not None:
                    running[pool.submit(call, next_task)] = next_task
        finished = True
    finally:
        # Every result is in hand once finished: idle workers exit on their own. On failure
        # the queued tasks go and the running ones end before the caller's lease does.
        pool.shutdown(wait=not finished, cancel_futures=not finished)


__all__ = ["MAX_WRITE_WORKERS", "PlannedShard", "ShardTask", "WorkerState", "check_write_workers",
           "modules_for_workers", "pickled_state", "read_tracks", "run_shard_tasks", "shard_tasks", "span_meta",
           "span_track", "write_task_shards"]
