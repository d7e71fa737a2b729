"""``write_track``: the low-level writer, one track (or one span of it) into shard files.

It chunks rows ``[start, stop)`` of the track into shards of ``spec.shard_length`` with the
short policy, assembles each shard (:mod:`.shard_assembly`), writes it atomically with its
SHA-256 computed on the way (:mod:`.shard_files`) and returns one manifest entry per shard.
It writes under ``<out>/<split>/`` on local disk and does not write a manifest or commit
record: :func:`kuration.output.write_dataset` (the dataset writer) does that, and it alone
makes a dataset readable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kuration.entities import entity_key
from kuration.output.containers import get_container
from kuration.output.encoders import OutputEncoder, PassthroughEncoder
from kuration.output.shard_assembly import MediaDecoder, assemble_shard
from kuration.output.shard_files import shard_name, shard_stem, write_shard_local
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.schema import Schema

SPLIT_NAMES = ("train", "val", "test")


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
    ``<out>/<split>/`` and return their manifest entries, in shard order. ``span_index``
    names the span in file names and entries (None: the whole track)."""
    if split not in SPLIT_NAMES:
        raise OutputSpecError(f"write_track: split must be one of {list(SPLIT_NAMES)}, got {split!r}")
    spec.validate_against(schema)
    stop = len(track) if stop is None else stop
    if not 0 <= start <= stop <= len(track):
        raise OutputSpecError(f"write_track: rows [{start}, {stop}) are outside the track's {len(track)} rows")
    container = get_container(spec.container)
    encoder = encoder or PassthroughEncoder()
    entity = entity_key(track.entity_id)
    stem = shard_stem(str(track.source_id), entity, span_index)
    folder = Path(out) / split
    entries = []
    for index, (a, b) in enumerate(spec.shards_for(stop - start)):
        shard = assemble_shard(track, start + a, start + b, spec, schema=schema, encoder=encoder, media=adapter)
        name = shard_name(stem, index, container.extension)
        written = write_shard_local(folder / name, container, shard)
        entries.append({
            "path": f"{split}/{name}", "split": split, "source_id": str(track.source_id), "entity_id": entity,
            "span_index": span_index, "shard_index": index, "start": start + a, "stop": start + b,
            "n_steps": shard.n_steps, "rows": shard.rows, "padded": shard.rows > shard.n_steps,
            "container": spec.container, "bytes": written.bytes, "sha256": written.sha256,
        })
    return entries


__all__ = ["SPLIT_NAMES", "write_track"]
