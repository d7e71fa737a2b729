"""``write_track``: the low-level writer, one track (or one span of it) into shard files.

It chunks rows ``[start, stop)`` of the track into shards of ``spec.shard_length`` with the
short policy, assembles each shard (:mod:`.shard_assembly`), writes it atomically with its
SHA-256 (:mod:`.shard_files`) and returns one manifest entry per shard. :class:`ShardWriter`
does the writing: shard k is hashed and published on a helper thread while shard k+1 is
assembled and written, so on two cores the hash costs little beyond its own thread.
It writes under ``<out>/<split>/`` and does not write a manifest or commit record: :func:`kuration.output.write_dataset`
(the dataset writer) does that, and it alone makes a dataset readable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kuration.sources.entities import entity_key
from kuration.sources.media import media_cache
from kuration.output.containers import get_container
from kuration.output.encoders import OutputEncoder, PassthroughEncoder
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import Destination, Staged, open_destination
from kuration.output.shard_assembly import MediaDecoder, assemble_shard
from kuration.output.shard_files import WrittenShard, shard_name, shard_stem
from kuration.output.shard_pool import STORED_AT
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.output.write_errors import DatasetWriteError
from kuration.sources.schema import Schema
from kuration.splits.stages import EXCLUSIVE_STAGES

if TYPE_CHECKING:  # annotations only: a Track's module imports pyarrow, which a reader never needs
    from kuration.sources.tracks import Track


@dataclass(frozen=True)
class ShardTarget:
    """One shard to exist: where (``path``, relative to the dataset) and which track rows."""

    path: str
    split: str
    source_id: str
    entity_id: str
    span_index: int | None
    shard_index: int
    start: int
    stop: int
    #: The pool object the shard is stored as, relative to the dataset root (None: at
    #: ``path`` in the version folder); see :mod:`.shard_pool`.
    stored_at: str | None = None


def shard_targets(spec: OutputSpec, *, split: str, source_id: str, entity_id: str, span_index: int | None,
                  start: int, stop: int) -> list[ShardTarget]:
    """The shards of track rows ``[start, stop)``: a pure plan, no data read."""
    stem = shard_stem(source_id, entity_id, span_index)
    extension = get_container(spec.container).extension
    return [ShardTarget(f"{split}/{shard_name(stem, k, extension)}", split, source_id, entity_id, span_index, k,
                        start + a, start + b)
            for k, (a, b) in enumerate(spec.shards_for(stop - start))]


def manifest_entry(target: ShardTarget, n_steps: int, rows: int, container: str,
                   written: WrittenShard) -> dict[str, Any]:
    """The manifest entry of ``target``'s shard, once written: where it is (and the pool
    object it is stored as, when pooled), which rows it holds, and its size and SHA-256."""
    entry = {
        "path": target.path, "split": target.split, "source_id": target.source_id, "entity_id": target.entity_id,
        "span_index": target.span_index, "shard_index": target.shard_index, "start": target.start, "stop": target.stop,
        "n_steps": n_steps, "rows": rows, "padded": rows > n_steps,
        "container": container, "bytes": written.bytes, "sha256": written.sha256,
    }
    if target.stored_at is not None:
        entry[STORED_AT] = target.stored_at
    return entry


class ShardWriter:
    """Writes shards in the order given and hands each one's manifest entry to ``on_entry``
    (on the caller's thread, in the same order) once its file is hashed and in place: under
    ``destination``, or, for a pooled target (``stored_at``), in the dataset root ``pool``.

    Assembly and the container's write stay on the caller's thread, so the adapter and the
    encoder are never called concurrently; only sealing (the SHA-256 of the temp
    file, then the replace) runs on one helper thread, one shard behind. At most two shards
    are in flight: the one being sealed and the one being written. Use it as a context
    manager: leaving it waits for the helper (a failed shard's temp file is gone by then),
    so nothing is published after the caller's lease ends."""

    def __init__(self, destination: Destination, spec: OutputSpec, *, schema: Schema, encoder: OutputEncoder,
                 adapter: MediaDecoder | None, on_entry: Callable[[dict[str, Any]], None],
                 pool: Destination | None = None) -> None:
        self._destination = destination
        self._pool = pool
        self._spec = spec
        self._container = get_container(spec.container)
        self._schema = schema
        self._encoder = encoder
        self._adapter = adapter
        self._on_entry = on_entry
        self._helper: ThreadPoolExecutor | None = None
        self._pending: tuple[Future, Callable[[WrittenShard], dict[str, Any]], list[Callable[[], None]]] | None = None

    def __enter__(self) -> ShardWriter:
        # One thread per writer, not per module: a process forked while a module-level pool
        # has a thread would inherit a pool whose thread does not exist in the child.
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kuration-seal")
        return self

    def write(self, target: ShardTarget, track: Track) -> None:
        """Assemble and write ``target``'s shard; the previous shard's entry is delivered
        after this one's file is written."""
        if self._helper is None:
            raise RuntimeError("ShardWriter.write outside its with block")
        shard = assemble_shard(track, target.start, target.stop, self._spec, schema=self._schema, encoder=self._encoder,
                               media=self._adapter)
        staged = self._stage(target, shard)
        try:
            self._finish_pending()
        except BaseException:
            staged.discard()
            raise
        future = self._helper.submit(staged.seal)
        n_steps, rows, container = shard.n_steps, shard.rows, self._spec.container
        del shard  # the file holds the bytes: the arrays can go while the seal runs
        self._pending = (future, lambda written: manifest_entry(target, n_steps, rows, container, written), [])

    def _stage(self, target: ShardTarget, shard: ShardArrays) -> Staged:
        """A pooled target goes into the dataset root's pool (create-only), any other into the folder."""
        if target.stored_at is None:
            return self._destination.stage_shard(target.path, self._container, shard)
        if self._pool is None:
            raise DatasetWriteError(f"{target.path}: is to be stored in the shard pool ({target.stored_at}), but the "
                                  "writer was given no dataset root to hold the pool")
        return self._pool.put_pooled(target.stored_at, self._container, shard)

    def after(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every shard written so far has been delivered."""
        if self._pending is None:
            callback()
        else:
            self._pending[2].append(callback)

    def _finish_pending(self) -> None:
        if self._pending is None:
            return
        future, entry, callbacks = self._pending
        self._pending = None
        self._on_entry(entry(future.result()))
        for callback in callbacks:
            callback()

    def __exit__(self, kind, value, traceback) -> None:
        helper, self._helper = self._helper, None
        try:
            if kind is None:
                self._finish_pending()
            elif self._pending is not None:
                # Another error is on its way out: let the seal end (it cleans up after
                # itself), but deliver nothing; a shard sealed without its entry is rebuilt.
                self._pending[0].exception()
                self._pending = None
        finally:
            if helper is not None:
                helper.shutdown(wait=True)


@dataclass(frozen=True, kw_only=True)
class TrackWriteOptions:
    """:func:`write_track`'s keyword arguments (seed 000's names), gathered once."""

    schema: Schema
    split: str
    encoder: OutputEncoder | None = None
    adapter: MediaDecoder | None = None
    span_index: int | None = None
    start: int = 0
    stop: int | None = None


def plan_track(track: Track, spec: OutputSpec, options: TrackWriteOptions) -> list[ShardTarget]:
    """The shards :func:`write_track` writes, after checking the split, the spec against
    the schema and the rows: a pure plan, nothing read or written."""
    if options.split not in EXCLUSIVE_STAGES:
        raise OutputSpecError(f"write_track: split must be one of {list(EXCLUSIVE_STAGES)}, got {options.split!r}")
    spec.validate_against(options.schema)
    stop = len(track) if options.stop is None else options.stop
    if not 0 <= options.start <= stop <= len(track):
        raise OutputSpecError(f"write_track: rows [{options.start}, {stop}) are outside the track's {len(track)} rows")
    return shard_targets(spec, split=options.split, source_id=str(track.source_id),
                         entity_id=entity_key(track.entity_id), span_index=options.span_index, start=options.start,
                         stop=stop)


def write_track(
    out: str | os.PathLike[str],
    track: Track,
    spec: OutputSpec,
    *,
    schema: Schema,
    split: str,
    encoder: OutputEncoder | None = None,
    adapter: MediaDecoder | None = None,
    span_index: int | None = None,
    start: int = 0,
    stop: int | None = None,
) -> list[dict[str, Any]]:
    """Write the shards of ``track`` rows ``[start, stop)`` (default: all) under
    ``<out>/<split>/`` (a local folder or an object-store URL) and return their manifest entries, in shard order.
    ``span_index`` names the span in file names and entries (None: the whole track)."""
    options = TrackWriteOptions(schema=schema, split=split, encoder=encoder, adapter=adapter, span_index=span_index,
                                start=start, stop=stop)
    targets = plan_track(track, spec, options)
    destination = open_destination(out)
    entries: list[dict[str, Any]] = []
    # One media cache for the track's shards: a media file is read once, not once per shard.
    with media_cache(), ShardWriter(destination, spec, schema=schema, encoder=encoder or PassthroughEncoder(),
                                    adapter=adapter, on_entry=entries.append) as writer:
        for target in targets:
            writer.write(target, track)
    return entries


__all__ = ["ShardTarget", "ShardWriter", "TrackWriteOptions", "manifest_entry", "plan_track", "shard_targets",
           "write_track"]
