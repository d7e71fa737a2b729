"""Tracks: one entity's timestep sequence, the unit everything downstream works on.

``tracks_from_ticks`` gives one track per entity. A track spans the source's real ticks
from the entity's first appearance to its last; at a tick where the source has rows but
not for this entity, the entity is recorded as *not present* (``present`` is False and
its fields are zero-filled but masked), never as a row of zeros. Globals are the tick's
values, known whether or not the entity was there. A tick at which the source has no
rows at all is not a real tick: tracks skip it, and ``Track.ticks`` shows the gap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.sources.schema import Schema
from kuration.sources.entities import entity_key
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


def _entity_sort_key(entity: Any) -> tuple:
    # Canonical and total: grouped by type name first, so 1, True, 1.0 and "1" never
    # collide and never need comparing; within a plain type the natural order (2 before
    # 10), otherwise the repr.
    if isinstance(entity, (bool, int, float, str, bytes)):
        return (type(entity).__name__, 0, entity, repr(entity))  # repr: -0.0 vs 0.0
    return (type(entity).__name__, 1, repr(entity), "")


def _rows_by_entity(entity: np.ndarray, codes: np.ndarray | None) -> list[tuple[Any, np.ndarray]]:
    """(entity, its rows) per distinct value of the ``entity`` column. Uses the per-row
    ``codes`` when the ticks carry them; otherwise groups by the type-tagged key (plain
    ==/hash would merge 1, True, 1.0)."""
    if codes is None:
        keys: dict[str, int] = {}
        codes = np.asarray([keys.setdefault(entity_key(e), len(keys)) for e in entity.tolist()], dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.r_[True, codes[order][1:] != codes[order][:-1], True])
    return [(entity[order[a]], order[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _tagged_rows(ticks: Ticks) -> np.ndarray | None:
    if ticks.tags is None:
        return None
    if ticks.tagged_rows is not None:
        return ticks.tagged_rows
    return np.flatnonzero(np.fromiter(map(bool, ticks.tags), dtype=bool, count=len(ticks.tags)))


def tracks_from_ticks(schema: Schema, ticks: Ticks, source_id: str | None = None) -> list[Track]:
    """One :class:`Track` per entity, in canonical entity order (by type name, then value:
    ``1`` and ``"1"`` are two entities, and ints sort numerically). A single-entity schema
    gives one track whose ``entity_id`` is None. No rows, no tracks."""
    source_id = source_id or ticks.source_id
    if not len(ticks):
        return []
    all_ticks, first_row, tick_index = np.unique(ticks.tick, return_index=True, return_inverse=True)
    global_values = {name: ticks.columns[name][first_row] for name in schema.globals}
    if ticks.entity is None:
        groups = [(SINGLE_ENTITY, np.arange(len(ticks)))]
    else:
        groups = sorted(_rows_by_entity(ticks.entity, ticks.entity_codes), key=lambda g: _entity_sort_key(g[0]))
    tagged = _tagged_rows(ticks)
    tracks = []
    for entity, rows in groups:
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
            values[name] = global_values[name][lo:hi].copy()  # tracks never share buffers
        media = {}
        for name, refs in ticks.media.items():
            col = np.full(length, None, dtype=object)
            col[slots - lo] = refs[rows]
            media[name] = col
        tags: list[tuple[str, ...]] = [()] * length
        if tagged is not None and ticks.tags is not None and len(tagged):  # tagged rows only come with tags
            mine = np.isin(rows, tagged)
            for row, slot in zip(rows[mine].tolist(), (slots[mine] - lo).tolist(), strict=True):
                tags[slot] = ticks.tags[row]
        tracks.append(Track(source_id, entity, all_ticks[lo:hi], present, values, media, tags, schema.sample_hz))
    return tracks
