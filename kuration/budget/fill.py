"""The fill: admit items (spans, or segments for a count) into each split, best first.

Per split, over its pool's candidates (status ``ok``, so finite priority):

1. **Order.** Descending priority; equal priorities by a seeded hash of the item's identity
   (source, entity, index), then by that identity itself. Input order never matters.
2. **Tag reserve** (``selection.tag_coverage``). Rarest tag first (fewest candidates carry
   it; ties by name), a tag not yet carried by a reserved item reserves its highest-priority
   candidate, while the reserved total stays within ``min_tag_frac`` of the budget. A tag
   whose best candidate does not fit is left to the ordinary fill and reported.
3. **Admission sequence**: the reserved items (in reserve order), then every other
   candidate in priority order.
4. **Group cap** (``selection.max_group_overshoot``). With ``n`` groups in the split's
   candidates, a group may hold at most ``max_group_overshoot * budget / n``. Walking the
   sequence, an item that would take its group over the cap is skipped (first fit: a later,
   shorter item of that group may still fit). The cap is never exceeded.
5. **Cut.** Walking the sequence, an item is admitted while the admitted total *before* it
   is below the budget (by more than :func:`cut_tolerance`, a 1e-9 relative margin that
   absorbs float drift in summed seconds). So "honoured to within one span" means exactly: the admitted total
   minus the last admitted item is below the budget, i.e. the overshoot is smaller than the
   last admitted item. A pool too small to reach the budget is underfilled; nothing outside
   the pool (no -inf, non-finite, unscored or absent item) ever tops it up.

For a count the unit is one segment, so the cut is exact, and the fractional reserve bound
and group cap round up: a positive ``min_tag_frac`` or cap never becomes zero segments.

Everything but the handful of tags and the capped groups' overflow is vectorised; the
cost is the sort, O(n log n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kuration.budget.ordering import sort_tied_runs

#: Why an item was or was not admitted. Candidates get one of the first five.
REASONS = (
    "reserved",        # admitted first, as a tag's best item
    "admitted",        # admitted by priority
    "budget_full",     # the budget was reached before its turn
    "group_cap",       # its group would have gone over the cap while the budget had room
    "not_requested",   # its split requests nothing
    "filtered",        # priority -inf: every overlapping segment failed the filter
    "non_finite",      # a NaN or +inf priority among its present segments
    "unscored",        # no segment overlaps it
    "absent",          # segments overlap it, but the entity is absent from all of them
    "not_in_split",    # its source is in no split pool
)
ADMITTED_REASONS = ("reserved", "admitted")
CANDIDATE_REASONS = REASONS[:5]  # the items a split's fill considered
CODE = {name: i for i, name in enumerate(REASONS)}


def reason_in(reason: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Whether each item's reason code (every one decided, so in :data:`CODE`) is one of
    ``names``: a single lookup-table pass, where ``np.isin`` costs one pass per name."""
    table = np.zeros(len(REASONS), bool)
    table[[CODE[name] for name in names]] = True
    return table[reason]


@dataclass(frozen=True)
class FillSelection:
    """The strategy's selection options the fill reads, plus its tags of interest."""

    tags: tuple[str, ...] = ()
    tag_coverage: bool = False
    min_tag_frac: float = 0.0
    max_group_overshoot: float | None = None


@dataclass
class SplitFill:
    """What filling one split decided, beyond the per-item reasons."""

    requested: float
    groups: int = 0
    group_cap: float | None = None
    reserve_bound: float = 0.0
    last_admitted: float = 0.0
    tags: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class FillItems:
    """Every item of a plan (span, or segment for a count) as parallel arrays indexed by the
    item's canonical position. One instance serves all the splits: each :func:`fill_split`
    reads the first five for its candidates and writes its decisions into the last three."""

    #: Priority (float64); the fill's candidates are finite.
    priority: np.ndarray
    #: Seeded 64-bit hash of the item's identity (:func:`tiebreak_keys`), the tie after priority.
    tiebreak: np.ndarray
    #: What the item costs the budget: seconds, or 1 per segment for a count.
    weight: np.ndarray
    #: Group code, -1 for none.
    group: np.ndarray
    #: Tag -> the ascending items carrying it.
    tag_items: dict[str, np.ndarray]
    #: Written: a :data:`CODE`, -1 until some step decides it.
    reason: np.ndarray
    #: Written: the item's place in its split's admission sequence, -1 if it had none.
    fill_rank: np.ndarray
    #: Written: index into the selection's tags of the tag the item was reserved for, -1 for none.
    reserved_tag: np.ndarray

    def __post_init__(self) -> None:
        lengths = {name: len(getattr(self, name))
                   for name in ("priority", "tiebreak", "weight", "group", "reason", "fill_rank", "reserved_tag")}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"FillItems: the per-item arrays differ in length: {lengths}")


#: Items per block of :func:`tiebreak_keys`: its scratch stays in cache.
MIX_BLOCK = 1 << 16


def _splitmix64(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, in place on ``x`` (uint64; ``scratch`` of the same length)."""
    x += np.uint64(0x9E3779B97F4A7C15)
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(x, np.uint64(shift), out=scratch)
        x ^= scratch
        x *= np.uint64(multiplier)
    np.right_shift(x, np.uint64(31), out=scratch)
    x ^= scratch
    return x


def tiebreak_keys(source_codes: np.ndarray, source_hashes: np.ndarray, entity_codes: np.ndarray,
                  entity_hashes: np.ndarray, index: np.ndarray) -> np.ndarray:
    """A 64-bit key per item from seeded hashes of its source and entity names and its index.
    Mixed in place, block by block: a dozen elementwise passes over full-length temporaries
    would each be fresh memory (page faults) and a trip through main memory."""
    out = np.empty(len(index), np.uint64)
    scratch = np.empty(min(len(index), MIX_BLOCK), np.uint64)
    with np.errstate(over="ignore"):
        for a in range(0, len(index), MIX_BLOCK):
            b = min(a + MIX_BLOCK, len(index))
            x, tmp = out[a:b], scratch[: b - a]
            np.copyto(x, index[a:b], casting="unsafe")
            _splitmix64(x, tmp)
            x ^= entity_hashes[entity_codes[a:b]]
            _splitmix64(x, tmp)
            x ^= source_hashes[source_codes[a:b]]
            _splitmix64(x, tmp)
    return out


def _round_up(value: float, whole: bool) -> float:
    # The 1e-9 keeps float noise (0.3 * 10 = 3.0000000000000004) from adding a segment; the
    # max keeps a positive fraction from rounding to zero segments.
    if not whole:
        return value
    return float(max(1, math.ceil(value - 1e-9))) if value > 0 else 0.0


def cut_tolerance(requested: float) -> float:
    """How far below the request the admitted total before an item must be for the item to
    be admitted: summing float seconds drifts (ten 0.1 s spans sum to 0.9999999999999999),
    and without it a budget of exactly ten spans would admit an eleventh."""
    return 1e-9 * requested  # relative only: a tiny but positive request still admits its first item


def _narrow(codes: np.ndarray) -> np.ndarray:
    """Small integer codes in the narrowest type that holds them: numpy's stable sort is a
    linear radix sort for 8- and 16-bit integers and a merge sort above; equal keys keep
    their order either way, so the permutation is the same."""
    if not len(codes):
        return codes
    lo, hi = int(codes.min()), int(codes.max())
    for dtype in (np.int8, np.int16):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            return codes.astype(dtype)
    return codes


def best_first(candidates: np.ndarray, priority: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """``candidates`` ordered by descending priority, then ascending ``tiebreak``, then
    ascending index: ``candidates[np.lexsort((candidates, tiebreak[candidates],
    -priority[candidates]))]``, one strict total order. A three-key lexsort is several times
    slower than one float sort (SIMD on x86) and grows faster with n, so sort the priorities
    alone and re-sort only the runs of equal priorities by the two tie keys."""
    negated = -priority[candidates]
    # Unstable, so tied elements may come out in any order (it differs between SIMD
    # kernels), which is harmless: every run of ties is re-sorted below by a total order.
    order = np.argsort(negated)
    ranked = negated[order]
    nan = np.isnan(ranked)
    # Ties as lexsort sees them: -0.0 equals 0.0 (== agrees), NaN equals NaN (== does not).
    same = (ranked[1:] == ranked[:-1]) | (nan[1:] & nan[:-1])
    sort_tied_runs(order, same, lambda at: (candidates[at], tiebreak[candidates[at]]))
    return candidates[order]


def _cap_eligible(groups: np.ndarray, weights: np.ndarray, cap: float) -> np.ndarray:
    """First fit per group along the sequence: True where the item fits under ``cap``."""
    n = len(groups)
    eligible = np.ones(n, bool)
    if n == 0:
        return eligible
    tol = 1e-9 * max(cap, 1.0)
    by_group = np.argsort(_narrow(groups), kind="stable")
    g, w = groups[by_group], weights[by_group]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], n]
    cum = np.cumsum(w)
    base = np.repeat(cum[starts] - w[starts], ends - starts)
    in_group = cum - base
    fits = in_group <= cap + tol  # a prefix of each group: weights are positive
    ok = fits.copy()
    for a, b in zip(starts, ends, strict=True):
        if fits[b - 1]:
            continue
        first = a + int(np.argmin(fits[a:b]))
        remaining = cap - (in_group[first] - w[first])
        i = first
        # Past the first misfit, keep fitting smaller items while any could fit.
        while i < b:
            room = np.flatnonzero(w[i:b] <= remaining + tol)
            if not len(room):
                break
            j = i + int(room[0])
            ok[j] = True
            remaining -= w[j]
            i = j + 1
    eligible[by_group] = ok
    return eligible


def fill_split(
    candidates: np.ndarray,
    items: FillItems,
    *,
    requested: float,
    selection: FillSelection,
    whole_units: bool,
) -> SplitFill:
    """Fill one split from ``candidates`` (ascending item indices); writes ``items.reason``,
    ``items.fill_rank`` and ``items.reserved_tag`` in place for those items."""
    info = SplitFill(requested=requested)
    if not len(candidates):
        return info
    # Candidate indices are canonical positions, the final tie.
    order = best_first(candidates, items.priority, items.tiebreak)
    info.groups = int(np.count_nonzero(np.bincount(items.group[candidates] + 1)))
    if requested <= 0:
        items.reason[order] = CODE["not_requested"]
        items.fill_rank[order] = np.arange(len(order))
        return info

    cap = None
    if selection.max_group_overshoot is not None:
        cap = _round_up(selection.max_group_overshoot * requested / info.groups, whole_units)
        info.group_cap = cap
    reserved: list[int] = []
    if selection.tag_coverage and selection.tags:
        info.reserve_bound = _round_up(selection.min_tag_frac * requested, whole_units)
        reserved = _reserve_tags(candidates, items, selection, cap=cap, info=info)
    if reserved:
        is_reserved = order == reserved[0]
        for item in reserved[1:]:
            is_reserved |= order == item
        sequence = np.concatenate([np.array(reserved, np.int64), order[~is_reserved]])
    else:
        sequence = order
    _cap_and_cut(sequence, items, reserved, requested=requested, cap=cap, info=info)
    return info


def _reserve_tags(candidates: np.ndarray, items: FillItems, selection: FillSelection, *, cap: float | None,
                  info: SplitFill) -> list[int]:
    """The tag reserve (step 2): each tag's best candidate, rarest tag first, while the
    reserve stays within ``info.reserve_bound`` and its group under ``cap``. Records each
    tag's outcome in ``info.tags`` and the reserved items' tag in ``items.reserved_tag``;
    returns the reserved items in reserve order."""
    best = _best_tagged(candidates, items, selection.tags, info)
    bound = info.reserve_bound
    reserved: list[int] = []
    group_used: dict[int, float] = {}
    carried: set[str] = set()
    used = 0.0
    tol = 1e-9 * max(bound, 1.0)
    for tag in sorted(best, key=lambda t: (best[t][0], t)):
        if tag in carried:
            info.tags[tag] = {"reserve": "carried_by_reserved_item"}
            continue
        item = best[tag][1]
        w = float(items.weight[item])
        g = int(items.group[item])
        if used + w > bound + tol:
            info.tags[tag] = {"reserve": "over_reserve_bound", "best_item": item}
            continue
        if cap is not None and group_used.get(g, 0.0) + w > cap + 1e-9 * max(cap, 1.0):
            info.tags[tag] = {"reserve": "group_cap", "best_item": item}
            continue
        used += w
        group_used[g] = group_used.get(g, 0.0) + w
        reserved.append(item)
        items.reserved_tag[item] = selection.tags.index(tag)
        info.tags[tag] = {"reserve": "reserved", "best_item": item}
        carried |= {t for t in selection.tags if t in best and _carries(items.tag_items[t], item)}
    return reserved


def _best_tagged(candidates: np.ndarray, items: FillItems, tags: tuple[str, ...],
                 info: SplitFill) -> dict[str, tuple[int, int]]:
    """Per tag carried by some candidate: (how many candidates carry it, the best of them).
    A tag no candidate carries is recorded in ``info.tags`` as ``not_in_pool``."""
    best: dict[str, tuple[int, int]] = {}
    for tag in tags:
        tagged = items.tag_items.get(tag, np.zeros(0, np.int64))
        # Both ascending: membership by binary search, not a mask as long as all items.
        at = np.minimum(np.searchsorted(candidates, tagged), len(candidates) - 1)
        tagged = tagged[candidates[at] == tagged]
        if len(tagged):
            best[tag] = (len(tagged), int(best_first(tagged, items.priority, items.tiebreak)[0]))
        else:
            info.tags[tag] = {"reserve": "not_in_pool"}
    return best


def _cap_and_cut(sequence: np.ndarray, items: FillItems, reserved: list[int], *, requested: float,
                 cap: float | None, info: SplitFill) -> None:
    """Group cap and cut (steps 4 and 5) along the admission ``sequence``, whose first
    items are the ``reserved`` ones: writes each item's reason and fill rank."""
    w_seq = items.weight[sequence].astype(np.float64)
    eligible = _cap_eligible(items.group[sequence], w_seq, cap) if cap is not None else np.ones(len(sequence), bool)
    taken = np.where(eligible, w_seq, 0.0)
    before = np.cumsum(taken) - taken
    room = before < requested - cut_tolerance(requested)
    admitted = eligible & room
    codes = np.full(len(sequence), CODE["budget_full"], np.int8)
    codes[~eligible & room] = CODE["group_cap"]
    codes[admitted] = CODE["admitted"]
    if reserved:
        codes[: len(reserved)] = np.where(admitted[: len(reserved)], CODE["reserved"], codes[: len(reserved)])
        # A reserve always fits the budget, except by a float whisker at min_tag_frac 1.0;
        # an item the cut then refused is not reported as reserved.
        for item, taken_in in zip(reserved, admitted[: len(reserved)], strict=True):
            if not taken_in:
                items.reserved_tag[item] = -1
    items.reason[sequence] = codes
    items.fill_rank[sequence] = np.arange(len(sequence))
    if admitted.any():
        info.last_admitted = float(w_seq[np.flatnonzero(admitted)[-1]])


def _carries(items: np.ndarray, item: int) -> bool:
    # Tag item lists are ascending (canonical order), so this is a binary search.
    i = int(np.searchsorted(items, item))
    return i < len(items) and items[i] == item


__all__ = ["ADMITTED_REASONS", "CANDIDATE_REASONS", "CODE", "FillItems", "FillSelection", "REASONS", "SplitFill",
           "best_first", "cut_tolerance", "fill_split", "reason_in", "tiebreak_keys"]
