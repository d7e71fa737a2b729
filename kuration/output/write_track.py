"""``write_track``: the low-level writer, one track (or one span of it) into shard files.

It chunks rows ``[start, stop)`` of the track into shards of ``spec.shard_length`` with the
short policy, assembles each shard (:mod:`.shard_assembly`), writes it atomically with its
SHA-256 computed on the way (:mod:`.shard_files`) and returns one manifest entry per shard.
It writes under ``<out>/<split>/`` and does not write a manifest or commit record: :func:`kuration.output.write_dataset` (the dataset writer) does that, and it alone
makes a dataset readable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kuration.budget.options import SPLITS
from kuration.entities import entity_key
from kuration.output.containers import get_container
from kuration.output.encoders import OutputEncoder, PassthroughEncoder
from kuration.output.shard_assembly import MediaDecoder, assemble_shard
from kuration.output.destinations import Destination, open_destination
from kuration.output.shard_files import shard_name, shard_stem
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.schema import Schema

SPLIT_NAMES = SPLITS


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


def shard_targets(spec: OutputSpec, *, split: str, source_id: str, entity_id: str, span_index: int | None,
                  start: int, stop: int) -> list[ShardTarget]:
    """The shards of track rows ``[start, stop)``: a pure plan, no data read."""
    stem = shard_stem(source_id, entity_id, span_index)
    extension = get_container(spec.container).extension
    return [ShardTarget(f"{split}/{shard_name(stem, k, extension)}", split, source_id, entity_id, span_index, k,
                        start + a, start + b)
            for k, (a, b) in enumerate(spec.shards_for(stop - start))]


def write_target(destination: Destination, target: ShardTarget, track: Any, spec: OutputSpec, *, schema: Schema,
                 encoder: OutputEncoder, adapter: MediaDecoder | None) -> dict[str, Any]:
    """Assemble and atomically write one shard; its manifest entry."""
    shard = assemble_shard(track, target.start, target.stop, spec, schema=schema, encoder=encoder, media=adapter)
    written = destination.write_shard(target.path, get_container(spec.container), shard)
    return {
        "path": target.path, "split": target.split, "source_id": target.source_id, "entity_id": target.entity_id,
        "span_index": target.span_index, "shard_index": target.shard_index, "start": target.start, "stop": target.stop,
        "n_steps": shard.n_steps, "rows": shard.rows, "padded": shard.rows > shard.n_steps,
        "container": spec.container, "bytes": written.bytes, "sha256": written.sha256,
    }


def write_track(
    out: str | os.PathLike[str],
    track: Any,
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
    ``<out>/<split>/`` (a local folder or an object-store URL) and return their manifest entries, in shard order. ``span_index``
    names the span in file names and entries (None: the whole track)."""
    if split not in SPLIT_NAMES:
        raise OutputSpecError(f"write_track: split must be one of {list(SPLIT_NAMES)}, got {split!r}")
    spec.validate_against(schema)
    stop = len(track) if stop is None else stop
    if not 0 <= start <= stop <= len(track):
        raise OutputSpecError(f"write_track: rows [{start}, {stop}) are outside the track's {len(track)} rows")
    encoder = encoder or PassthroughEncoder()
    targets = shard_targets(spec, split=split, source_id=str(track.source_id), entity_id=entity_key(track.entity_id),
                            span_index=span_index, start=start, stop=stop)
    destination = open_destination(out)
    return [write_target(destination, t, track, spec, schema=schema, encoder=encoder, adapter=adapter) for t in targets]


__all__ = ["SPLIT_NAMES", "ShardTarget", "shard_targets", "write_target", "write_track"]
