"""Preflight: what a dataset write reads to be sure its modalities can be made, before the
destination's lease is taken and before anything at the destination changes.

:func:`~kuration.output.write_plan.plan_shards` checks what the plan, the spec and the schema
decide without reading anything: the spec's field and media dtypes and shapes against the
schema's declarations (the media providers' declared outputs), and every span's
``segment:`` value against its modality (:func:`~kuration.output.shard_assembly.cast_whole`).
:func:`preflight` then reads, and only reads:

- the adapter's source list: every source the plan admits must be one of them (a plan made
  over other recordings, or a split that names sources by other ids, fails here rather
  than at the first shard of a missing source);
- the recordings, in writing order, until each ``media:`` modality has decoded one present
  reference and each ``encoder:`` modality has encoded one present record, through the
  path the shards take (:func:`~kuration.output.shard_assembly.decode_media_rows`,
  :func:`~kuration.output.shard_assembly.encoded_rows`), so a provider that is missing,
  misconfigured or cannot read these references, and an encoder whose output its modality
  cannot hold, fail with the destination untouched. Usually the first source answers all.

It checks one reference per column, not every one: decoding every reference would decode
the data twice. A reference that fails later still fails the write, with publication
begun (readers reject the folder; resume finishes it once the reference is fixed). The
tracks it read are handed to the writer (:attr:`Preflight.tracks`), which does not read
those sources again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kuration.output.shard_assembly import decode_media_rows, encoded_rows
from kuration.output.spec import Modality
from kuration.output.write_errors import DatasetWriteError
from kuration.output.write_plan import ShardPlan
from kuration.output.write_workers import read_tracks, span_track
from kuration.sources.entities import entity_key
from kuration.sources.tracks import Track


@dataclass(frozen=True, eq=False)  # holds tracks: compared by identity
class Preflight:
    """What :func:`preflight` read of ``shards``: ``tracks``, source -> its tracks by entity
    key, for every source it read (the writer reuses them); ``probed``, modality -> where
    its one value was decoded or encoded (a modality with no present row anywhere is
    absent: the shards hold only zeros for it)."""

    shards: ShardPlan
    tracks: Mapping[str, Mapping[str, Track]]
    probed: Mapping[str, str]


def preflight(shards: ShardPlan) -> Preflight:
    """Read what shows that ``shards`` can be written (see the module docstring); raises the
    first problem, as the writer would have raised it at that shard."""
    _check_sources(shards)
    unchecked = {**shards.spec.of_kind("media"), **shards.spec.of_kind("encoder")}
    tracks: dict[str, Mapping[str, Track]] = {}
    probed: dict[str, str] = {}
    for source, planned in shards.by_source().items():
        if not unchecked:
            break
        if not planned:
            continue
        tracks[source] = read_tracks(shards.schema, shards.adapter, source)
        for target, row in planned:
            track = span_track(tracks[source], target, row, shards.features)
            present = target.start + np.flatnonzero(track.present[target.start:target.stop])
            probed.update(_probe(shards, track, present, unchecked))
            for name in probed:
                unchecked.pop(name, None)
            if not unchecked:
                break
    return Preflight(shards, tracks, probed)


def _probe(shards: ShardPlan, track: Track, present: np.ndarray, modalities: Mapping[str, Modality]) -> dict[str, str]:
    """Decode, for each media modality of ``modalities``, the first row of ``present`` (track
    rows where the entity is) that holds a reference, and encode the first present record
    once for all its encoder modalities; returns where, by modality name."""
    def where(row: int) -> str:
        return f"source {track.source_id!r}, entity {entity_key(track.entity_id)}, row {row}"

    probed: dict[str, str] = {}
    for name, m in modalities.items():
        if m.kind != "media":
            continue
        # A present row without a reference is the shard assembly's error to report.
        row = next((int(r) for r in present if track.media[m.key][int(r)] is not None), None)
        if row is not None:
            decode_media_rows(track, np.array([row]), name, m, shards.adapter, shards.schema)
            probed[name] = where(row)
    hooks = {name: m for name, m in modalities.items() if m.kind == "encoder"}
    if hooks and len(present):
        encoded_rows(track, present[:1], hooks, shards.encoder, shards.schema)
        probed.update(dict.fromkeys(hooks, where(int(present[0]))))
    return probed


def _check_sources(shards: ShardPlan) -> None:
    """Every source the plan admits is one the adapter lists."""
    if not shards.sources:
        return
    listed = set(shards.adapter.list_sources())
    unknown = [source for source in shards.sources if source not in listed]
    if unknown:
        raise DatasetWriteError(
            f"the budget plan admits {len(unknown)} source(s) the adapter {type(shards.adapter).__name__} does not "
            f"list (e.g. {unknown[:3]}; it lists e.g. {sorted(listed)[:3]}): the plan was made over other recordings, "
            "or over a split (universe) that names the recordings by other ids. Plan again over this adapter's "
            "sources")


__all__ = ["Preflight", "preflight"]
