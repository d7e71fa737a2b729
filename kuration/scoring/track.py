"""``score_track``: one track -> its scored segment table (one row per segment).

This is the per-track unit of the feature pass: segment the track, compute the strategy's
features, score them, and return an Arrow table whose schema depends only on the strategy
(:func:`segment_table_schema`), so tables from many tracks and sources concatenate. It does
no I/O and no budget filling; the multi-source pass (:mod:`kuration.scoring`) calls it.

Columns, in order: ``source_id``, ``entity_id`` (:func:`entity_key`, a type-tagged string),
``segment_index``, ``start``, ``stop`` (row offsets, stop exclusive), ``start_tick``,
``stop_tick`` (tick numbers, stop exclusive), ``seconds``, ``present_fraction``,
``track_steps`` and ``sample_hz`` (the whole track's length and rate: the budget plan cuts
spans over the whole track, including rows no window covers, e.g. a gap left by a stride
larger than the window), one float64
column per ``strategy.feature_keys()`` named by the key, ``tags`` (sorted distinct event
tags on present timesteps), ``priority`` and ``passed``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.sources.entities import EntityIdError, entity_key
from kuration.scoring.features import compute_features, segment_tags
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.sources.tracks import Track

_LEADING = [
    ("source_id", pa.string()),
    ("entity_id", pa.string()),
    ("segment_index", pa.int64()),
    ("start", pa.int64()),
    ("stop", pa.int64()),
    ("start_tick", pa.int64()),
    ("stop_tick", pa.int64()),
    ("seconds", pa.float64()),
    ("present_fraction", pa.float64()),
    ("track_steps", pa.int64()),
    ("sample_hz", pa.float64()),
]
_TRAILING = [("tags", pa.list_(pa.string())), ("priority", pa.float64()), ("passed", pa.bool_())]


@functools.lru_cache(maxsize=64)
def segment_table_schema(strategy: Strategy) -> pa.Schema:
    """The Arrow schema of every :func:`score_track` table for ``strategy`` (built once per
    strategy: it is asked for on every track)."""
    features = [(key, pa.float64()) for key in strategy.feature_keys()]
    return pa.schema(_LEADING + features + _TRAILING)


def score_track(track: Track, *, segmenter: Segmenter, strategy: Strategy) -> pa.Table:
    """Segment ``track``, compute ``strategy``'s features, score them: one row per segment,
    in segment order. A track without segments (empty) gives an empty table of the same schema."""
    schema = segment_table_schema(strategy)
    segments = segmenter.segments(track)
    if not segments:
        return schema.empty_table()
    keys = strategy.feature_keys()
    features = compute_features(track, segments, keys)
    scored = strategy.score(features)
    n = len(segments)
    starts = np.fromiter((s.start for s in segments), np.int64, n)
    stops = np.fromiter((s.stop for s in segments), np.int64, n)
    columns: dict[str, Any] = {
        "source_id": [str(track.source_id)] * n,
        "entity_id": [entity_key(track.entity_id)] * n,
        "segment_index": np.fromiter((s.index for s in segments), np.int64, n),
        "start": starts,
        "stop": stops,
        "start_tick": np.fromiter((s.start_tick for s in segments), np.int64, n),
        "stop_tick": np.fromiter((s.stop_tick for s in segments), np.int64, n),
        "seconds": (stops - starts) / float(track.sample_hz),
        "present_fraction": np.fromiter((s.present_fraction for s in segments), np.float64, n),
        "track_steps": np.full(n, len(track), np.int64),
        "sample_hz": np.full(n, float(track.sample_hz), np.float64),
    }
    columns.update({key: features[key] for key in keys})
    columns["tags"] = segment_tags(track, segments)
    columns["priority"] = scored.priority
    columns["passed"] = scored.passed
    arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


__all__ = ["EntityIdError", "entity_key", "score_track", "segment_table_schema"]
