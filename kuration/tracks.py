"""Tracks: one entity's timestep sequence, the unit everything downstream works on.

``tracks_from_ticks`` gives one track per entity. A track spans the source's real ticks
from the entity's first appearance to its last; at a tick where the source has rows but
not for this entity, the entity is recorded as *not present* (``present`` is False and
its fields are zero-filled but masked), never as a row of zeros. Globals are the tick's
values, known whether or not the entity was there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.schema import Schema
from kuration.sources.ticks import Ticks

SINGLE_ENTITY = None


@dataclass(frozen=True)
class Track:
    source_id: str
    entity_id: Any
    ticks: np.ndarray
    present: np.ndarray
    values: Mapping[str, np.ndarray]
    media: Mapping[str, np.ndarray]
    tags: list[tuple[str, ...]]
    sample_hz: float
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ticks)

    @property
    def duration_seconds(self) -> float:
        return len(self.ticks) / self.sample_hz

    def records(self) -> Iterator[dict[str, Any]]:
        """Per-timestep dicts: every field and global, media references, tags, ``_present``."""
        for i in range(len(self)):
            record: dict[str, Any] = {name: arr[i] for name, arr in self.values.items()}
            record.update({name: refs[i] for name, refs in self.media.items()})
            record["_tags"] = self.tags[i]
            record["_tick"] = int(self.ticks[i])
            record["_present"] = bool(self.present[i])
            yield record


def _entity_sort_key(entity: Any) -> tuple[str, str]:
    # Canonical, type-tagged, so 1 and "1" never collide and order is total.
    return (type(entity).__name__, repr(entity))


def tracks_from_ticks(schema: Schema, ticks: Ticks, source_id: str | None = None) -> list[Track]:
    """One :class:`Track` per entity, in canonical entity order."""
    source_id = source_id or ticks.source_id
    if not len(ticks):
        return []
    all_ticks, tick_index = np.unique(ticks.tick, return_inverse=True)
    global_values = {}
    for name in schema.globals:
        column = ticks.columns[name]
        first_row = np.unique(tick_index, return_index=True)[1]
        global_values[name] = column[first_row]
    entities = [SINGLE_ENTITY] if ticks.entity is None else sorted(set(ticks.entity.tolist()), key=_entity_sort_key)
    tracks = []
    for entity in entities:
        rows = np.arange(len(ticks)) if ticks.entity is None else np.flatnonzero(ticks.entity == entity)
        slots = tick_index[rows]
        lo, hi = int(slots.min()), int(slots.max()) + 1
        length = hi - lo
        present = np.zeros(length, dtype=bool)
        present[slots - lo] = True
        values: dict[str, np.ndarray] = {}
        for name, spec in schema.fields.items():
            arr = np.zeros((length, *spec.shape), dtype=spec.numpy_dtype)
            arr[slots - lo] = ticks.columns[name][rows]
            values[name] = arr
        for name in schema.globals:
            values[name] = global_values[name][lo:hi]
        media = {}
        for name, refs in ticks.media.items():
            col = np.full(length, None, dtype=object)
            col[slots - lo] = refs[rows]
            media[name] = col
        tags: list[tuple[str, ...]] = [()] * length
        if ticks.tags is not None:
            for row, slot in zip(rows.tolist(), (slots - lo).tolist()):
                tags[slot] = ticks.tags[row]
        tracks.append(Track(source_id, entity, all_ticks[lo:hi], present, values, media, tags, schema.sample_hz))
    return tracks
