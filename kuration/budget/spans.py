"""Budget items from scored segments: sub-track spans (the hours path) or the segments
themselves (the count path), each with one priority, its tags and aggregated features.

A span is ``[k * N, min((k + 1) * N, track_steps))`` of one track (one entity of one source),
``N`` from ``span_steps`` / ``span_seconds``, or the whole track when neither is set. Its
priority and features aggregate, with ``clip_aggregate``, only the **present** segments
overlapping it (a segment ``[start, stop)`` overlaps a span ``[a, b)`` when ``start < b``
and ``stop > a``); its tags are the union of those segments' tags.

Absent windows. A segment whose ``present_fraction`` is 0 saw no row of its entity: its
features are NaN (there is nothing to reduce) or counts of nothing, and they describe no
data. It is left out of its spans' aggregates, so a span aggregates its present windows,
and a radio gap no longer sinks the present data around it as non-finite. (A table without
a ``present_fraction`` column counts every segment as present.) A span's ``status`` decides
whether the fill may consider it:

- ``ok``: at least one overlapping present segment has a finite priority;
- ``non_finite``: an overlapping present segment's priority is NaN or +inf. The span
  cannot be ranked, so it is excluded (fail closed) rather than ranked on part of its data;
- ``filtered``: every overlapping present segment's priority is -inf (a ``filter``
  strategy's predicates failed on all of them). The span's priority is -inf and it is
  never admitted;
- ``absent``: segments overlap it, but none is present: the entity was never seen in it.
  Its priority is NaN and it is never admitted; it holds no present data to lose;
- ``unscored``: no segment overlaps it. The segmenter's end-aligned tail window covers the
  end of every track, so this is a span inside a gap of a stride larger than the window,
  or of a table whose segments do not cover their tracks.

With a ``filter`` strategy a span that has passing segments aggregates only those, so one
failing window does not sink a whole span under ``mean`` or ``min``.

``present_seconds`` estimates the time the entity was present in a span, for the budget
block's account of present data lost to exclusions: the span's seconds times the share of
present steps in the windows overlapping it, each window weighted by its overlap with the
span. It is exact when those windows tile the span (no overlap, no straddling); a span no
window overlaps counts as present throughout (nothing measured it). For a count the item
is the segment, and its present seconds are exact.

Priorities and features come out as canonical floats (:mod:`kuration.canonical.floats`): a ``max``
over ``0.0`` and ``-0.0`` returns either zero depending on the CPU's SIMD kernel, and a
NaN any payload, so the items, the plan digest and the run fingerprint would otherwise
differ between machines. A table whose zeros carry either sign, or whose NaNs carry any
payload, plans to the same bytes.

Everything is columnar and O(P log P) in the segment-span overlaps P; no Python loop runs per
segment or per span.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kuration.budget.options import BudgetOptions
from kuration.budget.ordering import sort_tied_runs
from kuration.errors import BudgetError
from kuration.canonical.floats import canonical_floats

#: Columns a stored segment table must have for a plan; features are whatever else is float.
REQUIRED_SEGMENT_COLUMNS = (
    "source_id", "entity_id", "segment_index", "start", "stop", "seconds", "track_steps", "sample_hz",
    "tags", "priority",
)
_ID_COLUMNS = ("source_id", "entity_id")
_NOT_FEATURES = set(REQUIRED_SEGMENT_COLUMNS) | {"start_tick", "stop_tick", "present_fraction", "passed",
                                                 "present_seconds"}
STATUSES = ("ok", "non_finite", "filtered", "unscored", "absent")
#: The statuses of items that cannot be ranked (priority NaN): never candidates, and the
#: plan's reasons of the same names, whose present data the budget block counts as lost.
UNRANKABLE = ("non_finite", "unscored", "absent")
#: An optional column: without it, every segment counts as present.
PRESENT_FRACTION = "present_fraction"


def feature_columns(segments: pa.Table) -> list[str]:
    """The strategy feature columns of a segment table: every float column that is not
    bookkeeping, in table order."""
    return [f.name for f in segments.schema if f.name not in _NOT_FEATURES and pa.types.is_floating(f.type)]


def _check_columns(segments: pa.Table) -> list[str]:
    """The columns a plan reads from ``segments`` (raises when a required one is missing)."""
    missing = [c for c in REQUIRED_SEGMENT_COLUMNS if c not in segments.column_names]
    if missing:
        hint = (" (segment tables from before track_steps was recorded: re-materialize scored_segments)"
                if {"track_steps", "sample_hz"} & set(missing) else "")
        raise BudgetError(f"segment table: missing column(s) {missing}{hint}; it has {segments.column_names}")
    optional = [PRESENT_FRACTION] if PRESENT_FRACTION in segments.column_names else []
    return [*REQUIRED_SEGMENT_COLUMNS, *optional, *feature_columns(segments)]


def _present_fraction(segments: pa.Table) -> np.ndarray | None:
    """Per segment, the share of its steps with the entity present; ``None`` when every
    segment saw its entity throughout (or the table does not say), the usual case, in which
    the presence bookkeeping has a known answer and is skipped."""
    if PRESENT_FRACTION not in segments.column_names or not segments.num_rows:
        return None
    fraction = _column(segments, PRESENT_FRACTION, np.float64)
    lowest, highest = fraction.min(), fraction.max()  # NaN, if any, comes out of both
    if not (0.0 <= lowest and highest <= 1.0):
        row = int(np.flatnonzero(~((fraction >= 0) & (fraction <= 1)))[0])
        raise BudgetError(f"segment table: present_fraction of segment {segments.column('segment_index')[row].as_py()} "
                          f"is {float(fraction[row])!r}; it must be a share of the window's steps, in [0, 1]")
    return None if lowest == 1.0 else fraction


def sorted_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Integer codes of a string column that sort like its strings (byte order, as Arrow
    sorts), and the distinct strings in that order. One string sort per distinct value."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    names = encoded.dictionary
    by_name = pc.sort_indices(names).to_numpy()
    rank = np.empty(len(names), np.int64)
    rank[by_name] = np.arange(len(names))
    return rank[encoded.indices.to_numpy()], names.take(pa.array(by_name))


def _canonical(segments: pa.Table, columns: list[str]) -> tuple[pa.Table, np.ndarray | None, np.ndarray]:
    """``columns`` of ``segments``, the permutation that sorts them by (source, entity, start,
    segment_index) (``None`` when they already are: one source's stored file, sources
    concatenated in name order) and each row's track code in that order (ascending with
    (source, entity)): the plan never depends on the order segments arrive in. The rows are
    not gathered here: :func:`_rows` gathers one block at a time, so no permuted copy of the
    whole table is ever made (fresh memory of that size costs more in page faults than the
    gather itself)."""
    src, _ = sorted_codes(segments.column("source_id"))
    ent, ent_names = sorted_codes(segments.column("entity_id"))
    track = src * max(len(ent_names), 1) + ent
    start = _column(segments, "start", np.int64)
    index = _column(segments, "segment_index", np.int64)
    table = segments.select(columns)
    if not len(track):
        return table, None, track
    # One packed (track, start) key when it fits in 62 bits: one diff to check the order,
    # instead of a lexicographic test over three columns (big temporaries cost page faults).
    span = int(start.max()) - int(start.min()) + 1
    if int(track.max()) < (1 << 62) // span:
        key = track * span + (start - start.min())
        step = np.diff(key)
        ordered = bool(np.all((step > 0) | ((step == 0) & (np.diff(index) >= 0))))
        order = None if ordered else _key_order(key, index)
    else:
        order = np.lexsort((index, start, track))
        ordered = bool(np.all(np.diff(order) == 1))
    if ordered:
        return table, None, track
    return table, order, track[order]


def _key_order(key: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``np.lexsort((index, key))``. Rows arrive in runs already sorted by key (a track's
    segments, in order), which a stable sort of the one key merges in near-linear time; the
    rare equal keys (two segments of a track at one start) are then ordered by ``index``,
    keeping arrival order among equal indices, as the stable lexsort does."""
    order = np.argsort(key, kind="stable")
    ranked = key[order]
    return sort_tied_runs(order, ranked[1:] == ranked[:-1], lambda at: (index[at],))


def _rows(table: pa.Table, order: np.ndarray | None, a: int, b: int) -> pa.Table:
    """Rows ``a:b`` of ``table`` in canonical order (see :func:`_canonical`)."""
    if order is None:
        return table.slice(a, b - a)
    return table.take(pa.array(order[a:b]))


def _column(table: pa.Table, name: str, dtype: type[np.generic]) -> np.ndarray:
    return table.column(name).to_numpy().astype(dtype, copy=False)


def _per_track_constant(values: np.ndarray, starts: np.ndarray, name: str, ids: pa.Table) -> np.ndarray:
    first = values[starts[:-1]]
    lengths = np.diff(starts)
    differs = np.flatnonzero(np.repeat(first, lengths) != values)
    if len(differs):
        row = int(differs[0])
        track = int(np.searchsorted(starts, row, "right")) - 1
        raise BudgetError(
            f"segment table: {name} differs within the track {ids.column('source_id')[track].as_py()!r} / "
            f"{ids.column('entity_id')[track].as_py()!r} ({values[row]!r} vs {first[track]!r}); "
            "each track is scored once, so its segments must agree"
        )
    return first


def _segment_status(priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment: (usable finite priority, NaN or +inf)."""
    bad = np.isnan(priority) | np.isposinf(priority)
    return np.isfinite(priority), bad


class _SpanGroups:
    """Segment-span pairs sorted by span: each span's run of pairs, computed once and shared
    by the priority and every feature."""

    def __init__(self, pair_span: np.ndarray, n_spans: int) -> None:
        self.n_spans = n_spans
        self.sizes = np.bincount(pair_span, minlength=n_spans).astype(np.int64)
        self.present = np.flatnonzero(self.sizes)
        self.bounds = (np.cumsum(self.sizes) - self.sizes)[self.present]

    def count(self, flags: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_spans, np.int64)
        if len(self.present):
            out[self.present] = np.add.reduceat(flags, self.bounds, dtype=np.int64)
        return out

    def total(self, values: np.ndarray) -> np.ndarray:
        """Per span, the sum of its pairs' ``values`` (0 for a span with no pair)."""
        out = np.zeros(self.n_spans)
        if len(self.present):
            out[self.present] = np.add.reduceat(values, self.bounds)
        return out

    def aggregate(self, values: np.ndarray, use: np.ndarray, how: str) -> np.ndarray:
        """``how`` of ``values[use]`` per span, canonical; NaN where a span uses nothing. NaN
        among the used values propagates, as a missing feature must."""
        out = np.full(self.n_spans, np.nan)
        if not len(self.present):
            return out
        counts = np.add.reduceat(use, self.bounds, dtype=np.int64)
        if how == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                reduced = np.add.reduceat(np.where(use, values, 0.0), self.bounds) / counts
        else:
            fill, ufunc = (-np.inf, np.fmax) if how == "max" else (np.inf, np.fmin)
            reduced = ufunc.reduceat(np.where(use, values, fill), self.bounds)
        nan_used = np.logical_or.reduceat(use & np.isnan(values), self.bounds)
        reduced[(counts == 0) | nan_used] = np.nan
        out[self.present] = canonical_floats(reduced)
        return out


STATUS_CODE = {name: i for i, name in enumerate(STATUSES)}
#: Indexed by status code: whether the status is :data:`UNRANKABLE`.
_UNRANKABLE_STATUS = np.array([name in UNRANKABLE for name in STATUSES])


def _status(n_overlapping: np.ndarray, n_present: np.ndarray, n_bad: np.ndarray, n_usable: np.ndarray) -> np.ndarray:
    """Counts are of overlapping segments; ``n_bad`` and ``n_usable`` of present ones."""
    status = np.full(len(n_overlapping), STATUS_CODE["ok"], dtype=np.int8)
    status[n_usable == 0] = STATUS_CODE["filtered"]
    status[n_bad > 0] = STATUS_CODE["non_finite"]
    status[n_present == 0] = STATUS_CODE["absent"]
    status[n_overlapping == 0] = STATUS_CODE["unscored"]
    return status


@dataclass(frozen=True)
class _SegmentDecisions:
    """Per segment: its priority, present fraction and presence (both ``None`` when every
    segment is fully present, see :func:`_present_fraction`), and whether its priority is
    usable (finite) or bad (NaN or +inf); those two are only ever true for a present segment."""

    priority: np.ndarray
    fraction: np.ndarray | None
    present: np.ndarray | None
    usable: np.ndarray
    bad: np.ndarray


def _segment_decisions(segments: pa.Table) -> _SegmentDecisions:
    priority = _column(segments, "priority", np.float64)
    usable, bad = _segment_status(priority)
    fraction = _present_fraction(segments)
    if fraction is None:
        return _SegmentDecisions(priority, None, None, usable, bad)
    present = fraction > 0
    return _SegmentDecisions(priority, fraction, present, usable & present, bad & present)


def _status_array(codes: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int8()), pa.array(list(STATUSES), pa.string()))


def span_items(segments: pa.Table, options: BudgetOptions, *, clip_aggregate: str) -> pa.Table:
    """One row per span of every track in ``segments``: ``source_id``, ``entity_id``,
    ``span_index``, ``start``, ``stop``, ``steps``, ``seconds``, ``present_seconds``,
    ``sample_hz``, ``priority``, ``status``, ``segments`` (overlapping, absent ones included),
    ``tags`` and the aggregated features."""
    features = feature_columns(segments)
    segments, order, track_code = _canonical(segments, _check_columns(segments))
    n = segments.num_rows
    starts = np.concatenate([[0], np.flatnonzero(np.diff(track_code)) + 1,
                             [n]]).astype(np.int64) if n else np.zeros(1, np.int64)
    # The string ids are gathered once per track, not per segment: a span's ids are its
    # track's, and gathering strings row by row is the dearest part of reordering a table.
    ids = segments.select(list(_ID_COLUMNS))
    segments = segments.drop_columns(list(_ID_COLUMNS))

    def block(a: int, b: int, inner: np.ndarray) -> pa.Table:
        firsts = a + inner[:-1]
        track_ids = ids.take(pa.array(firsts if order is None else order[firsts]))
        return _block_spans(_rows(segments, order, a, b), track_ids, inner, features, options, clip_aggregate)

    if n <= BLOCK_ROWS:
        return block(0, n, starts)
    # Tracks are independent, so blocks of whole tracks give exactly the same spans; blocks
    # keep the temporaries small enough to be reused instead of faulted in fresh each time.
    cuts = np.unique(np.concatenate([[0], starts[np.searchsorted(starts, np.arange(BLOCK_ROWS, n, BLOCK_ROWS))], [n]]))
    blocks = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        inner = starts[(starts >= a) & (starts <= b)] - a
        blocks.append(block(a, b, inner))
    return pa.concat_tables(blocks)


#: Segments per block of :func:`span_items` (whole tracks; a longer track is its own block).
BLOCK_ROWS = 1 << 19


@dataclass(frozen=True)
class _BlockTracks:
    """The tracks of one block: per segment its track and bounds, per track its steps and rate."""

    of_segment: np.ndarray
    seg_start: np.ndarray
    seg_stop: np.ndarray
    steps: np.ndarray
    hz: np.ndarray


@dataclass(frozen=True)
class _SpanLayout:
    """Every track of a block cut into spans of its ``length`` steps (the last one shorter)."""

    #: Per track: steps per span.
    length: np.ndarray
    #: Per track: its first span's position; one more entry holds the number of spans.
    offset: np.ndarray
    #: Per span: its track, its index within the track and its steps ``[start, stop)``.
    track: np.ndarray
    index: np.ndarray
    start: np.ndarray
    stop: np.ndarray

    @property
    def n(self) -> int:
        return int(self.offset[-1])


@dataclass(frozen=True)
class _Pairs:
    """Every (segment, span) pair where the segment overlaps the span, sorted by span."""

    seg: np.ndarray
    span: np.ndarray
    #: Each segment inside one span and no reordering: pair ``i`` is segment ``i``.
    identity: bool
    groups: _SpanGroups

    def per_pair(self, values: np.ndarray) -> np.ndarray:
        """Per-segment ``values`` as one per pair (no gather when the pairs are the segments)."""
        return values if self.identity else values[self.seg]


@dataclass(frozen=True)
class _Ranking:
    """Per span its status and priority; per pair whether it enters the span's features,
    and whether its segment is present (``None`` when every one is)."""

    status: np.ndarray
    priority: np.ndarray
    feature_use: np.ndarray
    pair_present: np.ndarray | None


def _block_spans(segments: pa.Table, ids: pa.Table, starts: np.ndarray, features: list[str], options: BudgetOptions,
                 clip_aggregate: str) -> pa.Table:
    """:func:`span_items` over canonical ``segments`` whose tracks begin at ``starts``; ``ids``
    holds each track's ``source_id`` and ``entity_id``."""
    tracks = _block_tracks(segments, ids, starts)
    spans = _span_layout(tracks, options)
    pairs = _segment_span_pairs(tracks, spans, segments.num_rows)
    decisions = _segment_decisions(segments)
    ranking = _rank_spans(pairs, decisions, clip_aggregate)
    aggregated = {
        key: pairs.groups.aggregate(pairs.per_pair(_column(segments, key, np.float64)), ranking.feature_use,
                                    clip_aggregate)
        for key in features
    }
    seconds = (spans.stop - spans.start) / tracks.hz[spans.track]
    fraction = decisions.fraction
    if fraction is None:
        present_seconds = seconds
    else:
        present_seconds = seconds * _present_share(
            pairs.groups, pairs.per_pair(tracks.seg_start), pairs.per_pair(tracks.seg_stop), pairs.per_pair(fraction),
            spans.start[pairs.span], spans.stop[pairs.span])
    pair_seg, pair_span = pairs.seg, pairs.span
    if ranking.pair_present is not None:  # an absent window carries no tags of the entity
        pair_seg, pair_span = pair_seg[ranking.pair_present], pair_span[ranking.pair_present]
    columns = {
        "source_id": ids.column("source_id").take(pa.array(spans.track)),
        "entity_id": ids.column("entity_id").take(pa.array(spans.track)),
        "span_index": pa.array(spans.index),
        "start": pa.array(spans.start),
        "stop": pa.array(spans.stop),
        "steps": pa.array(spans.stop - spans.start),
        "seconds": pa.array(seconds),
        "present_seconds": pa.array(present_seconds),
        "sample_hz": pa.array(tracks.hz[spans.track]),
        "priority": pa.array(ranking.priority),
        "status": _status_array(ranking.status),
        "segments": pa.array(pairs.groups.sizes),
        "tags": _span_tags(segments.column("tags"), pair_seg, pair_span, spans.n),
    }
    columns.update({key: pa.array(values) for key, values in aggregated.items()})
    return pa.table(columns)


def _block_tracks(segments: pa.Table, ids: pa.Table, starts: np.ndarray) -> _BlockTracks:
    """Each track's steps and rate (one per track, or raises), with every segment checked to
    lie inside its track."""
    n_tracks = len(starts) - 1
    track_of = np.repeat(np.arange(n_tracks), np.diff(starts))
    track_steps = _per_track_constant(_column(segments, "track_steps", np.int64), starts, "track_steps", ids)
    track_hz = _per_track_constant(_column(segments, "sample_hz", np.float64), starts, "sample_hz", ids)
    seg_start = _column(segments, "start", np.int64)
    seg_stop = _column(segments, "stop", np.int64)
    bad_rows = np.flatnonzero((seg_start < 0) | (seg_stop <= seg_start) | (seg_stop > track_steps[track_of]))
    if len(bad_rows):
        row = int(bad_rows[0])
        raise BudgetError(
            f"segment table: segment {segments.column('segment_index')[row].as_py()} of "
            f"{ids.column('source_id')[int(track_of[row])].as_py()!r} / "
            f"{ids.column('entity_id')[int(track_of[row])].as_py()!r} spans [{seg_start[row]}, {seg_stop[row]}) "
            f"outside its track of {track_steps[track_of[row]]} steps"
        )
    return _BlockTracks(track_of, seg_start, seg_stop, track_steps, track_hz)


def _span_layout(tracks: _BlockTracks, options: BudgetOptions) -> _SpanLayout:
    """The spans of every track: ``span_steps`` (or ``span_seconds`` at the track's rate)
    each, or the whole track when neither is set."""
    track_steps = tracks.steps
    if options.span_steps is None and options.span_seconds is None:
        span_len = track_steps.copy()  # one whole-track span
    else:
        hz_values, hz_inverse = np.unique(tracks.hz, return_inverse=True)
        span_len = np.array([options.span_steps_at(float(hz)) for hz in hz_values], np.int64)[hz_inverse]
    spans_per_track = -(-track_steps // np.maximum(span_len, 1))
    span_offset = np.concatenate([[0], np.cumsum(spans_per_track)]).astype(np.int64)
    n_spans = int(span_offset[-1])
    span_track = np.repeat(np.arange(len(track_steps)), spans_per_track)
    span_index = np.arange(n_spans, dtype=np.int64) - span_offset[span_track]
    span_start = span_index * span_len[span_track]
    span_stop = np.minimum(span_start + span_len[span_track], track_steps[span_track])
    return _SpanLayout(span_len, span_offset, span_track, span_index, span_start, span_stop)


def _segment_span_pairs(tracks: _BlockTracks, spans: _SpanLayout, n: int) -> _Pairs:
    """Segment -> every span it overlaps (a contiguous run of span indices), sorted by span."""
    track_of = tracks.of_segment
    seg_len = spans.length[track_of]
    k0 = tracks.seg_start // seg_len
    k1 = (tracks.seg_stop - 1) // seg_len
    reps = (k1 - k0 + 1).astype(np.int64)
    pair_seg = np.repeat(np.arange(n, dtype=np.int64), reps)
    within = np.arange(len(pair_seg), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    pair_span = spans.offset[track_of[pair_seg]] + k0[pair_seg] + within
    if len(pair_span) > 1 and np.any(pair_span[1:] < pair_span[:-1]):  # windows overlapping span edges
        order = np.argsort(pair_span, kind="stable")
        pair_seg, pair_span = pair_seg[order], pair_span[order]
    identity = len(pair_seg) == n and (n == 0 or pair_seg[-1] == n - 1 and bool(np.all(np.diff(pair_seg) == 1)))
    return _Pairs(pair_seg, pair_span, identity, _SpanGroups(pair_span, spans.n))


def _rank_spans(pairs: _Pairs, decisions: _SegmentDecisions, clip_aggregate: str) -> _Ranking:
    """Each span's status and its priority aggregated over its usable present segments
    (-inf when filtered, NaN when it cannot be ranked)."""
    present, usable = decisions.present, decisions.usable
    groups = pairs.groups
    pair_present = pairs.per_pair(present) if present is not None and not present.all() else None
    n_present = groups.sizes if pair_present is None else groups.count(pair_present)
    n_bad = groups.count(pairs.per_pair(decisions.bad))
    pair_usable = pairs.per_pair(usable)
    n_usable = groups.count(pair_usable)
    status = _status(groups.sizes, n_present, n_bad, n_usable)
    span_priority = groups.aggregate(pairs.per_pair(decisions.priority), pair_usable, clip_aggregate)
    span_priority[status == STATUS_CODE["filtered"]] = -np.inf
    span_priority[_UNRANKABLE_STATUS[status]] = np.nan
    # Features aggregate over the segments the priority used; a span with none usable shows
    # its present segments' figures, so a review can say why it was filtered.
    feature_use = pair_usable | (n_usable == 0)[pairs.span]
    if pair_present is not None:
        feature_use &= pair_present
    return _Ranking(status, span_priority, feature_use, pair_present)


def _present_share(groups: _SpanGroups, start: np.ndarray, stop: np.ndarray, fraction: np.ndarray,
                   span_start: np.ndarray, span_stop: np.ndarray) -> np.ndarray:
    """Per span, the share of its steps the entity was present, from the overlapping windows
    (per pair: the window's bounds and present fraction, the span's bounds): each window's
    present fraction weighted by its steps inside the span. 1 for a span no window overlaps."""
    overlap = (np.minimum(stop, span_stop) - np.maximum(start, span_start)).astype(np.float64)
    weighted = groups.total(overlap * fraction)
    covered = groups.total(overlap)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(covered > 0, weighted / covered, 1.0)


def _span_tags(tags: pa.ChunkedArray, pair_seg: np.ndarray, pair_span: np.ndarray, n_spans: int) -> pa.Array:
    """The sorted union of the tags of the segments paired with each span."""
    tags = tags.combine_chunks()
    flat = pc.list_flatten(tags)
    if len(flat) == 0:
        return pa.ListArray.from_arrays(pa.array(np.zeros(n_spans + 1, np.int32)), pa.array([], pa.string()))
    owner = pc.list_parent_indices(tags).to_numpy()  # non-decreasing: flattening keeps list order
    codes, sorted_names = sorted_codes(flat)  # ranked by name, so each span's list comes out sorted
    n_names = len(sorted_names)
    per_seg = np.bincount(owner, minlength=len(tags))
    seg_tag_start = np.cumsum(per_seg) - per_seg
    counts = per_seg[pair_seg]
    span_rep = np.repeat(pair_span, counts)
    flat_rows = np.repeat(seg_tag_start[pair_seg], counts) + (
        np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts))
    tag_codes = codes[flat_rows]
    unique = np.unique(span_rep * n_names + tag_codes)
    span_of, tag_of = unique // n_names, unique % n_names
    offsets = np.concatenate([[0], np.cumsum(np.bincount(span_of, minlength=n_spans))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), sorted_names.take(pa.array(tag_of)))


def segment_items(segments: pa.Table) -> pa.Table:
    """The count path: one row per segment, with the same columns as :func:`span_items`
    (``segment_index`` for ``span_index``, ``segments`` = 1). An absent segment (present
    fraction 0) is ``absent``, never admitted."""
    features = feature_columns(segments)
    segments, order, _ = _canonical(segments, _check_columns(segments))
    segments = _rows(segments, order, 0, segments.num_rows)
    start, stop = _column(segments, "start", np.int64), _column(segments, "stop", np.int64)
    decisions = _segment_decisions(segments)
    priority, fraction, present = decisions.priority, decisions.fraction, decisions.present
    ones = np.ones(len(priority), np.int64)
    status = _status(ones, ones if present is None else present.astype(np.int64), decisions.bad.astype(np.int64),
                     decisions.usable.astype(np.int64))
    seconds = _column(segments, "seconds", np.float64)
    priority = canonical_floats(np.where(_UNRANKABLE_STATUS[status], np.nan, priority))  # a segment is never unscored
    columns = {
        "source_id": segments.column("source_id"),
        "entity_id": segments.column("entity_id"),
        "segment_index": segments.column("segment_index"),
        "start": pa.array(start),
        "stop": pa.array(stop),
        "steps": pa.array(stop - start),
        "seconds": segments.column("seconds"),
        "present_seconds": pa.array(seconds if fraction is None else seconds * fraction),
        "sample_hz": segments.column("sample_hz"),
        "priority": pa.array(priority),
        "status": _status_array(status),
        "segments": pa.array(ones),
        "tags": segments.column("tags"),
    }
    columns.update({key: pa.array(canonical_floats(segments.column(key).to_numpy())) for key in features})
    return pa.table(columns)


__all__ = ["PRESENT_FRACTION", "REQUIRED_SEGMENT_COLUMNS", "STATUSES", "STATUS_CODE", "UNRANKABLE", "feature_columns",
           "segment_items", "sorted_codes", "span_items"]
