"""Sorting helper shared by the canonical segment order and the fill order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def sort_tied_runs(order: np.ndarray, same: np.ndarray,
                   tie_keys: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> np.ndarray:
    """Finish a sort done on the primary key alone: ``order`` is sorted by it and ``same[i]``
    says positions ``i`` and ``i + 1`` hold equal primary keys. Each run of equal keys is
    re-sorted, in place, by ``tie_keys(elements)`` (``np.lexsort`` keys: last is primary),
    keeping the current order among elements equal in all of them. With ``order`` from a
    stable sort this equals one ``np.lexsort`` of all the keys, at the cost of sorting only
    the tied elements; when they are few, one fast sort of the primary key plus this beats
    a multi-key lexsort by several times."""
    if not same.any():
        return order
    tied = np.zeros(len(order), bool)
    tied[:-1] = same
    tied[1:] |= same
    at = np.flatnonzero(tied)
    new_run = np.r_[True, ~same[at[1:] - 1]]
    run_start = at[new_run]
    run_length = np.diff(np.r_[np.flatnonzero(new_run), len(at)])
    # Most runs are pairs (two items sharing one best segment): a compare-and-swap each.
    first = run_start[run_length == 2]
    a, b = order[first], order[first + 1]
    after = np.zeros(len(first), bool)
    equal = np.ones(len(first), bool)
    for key_a, key_b in zip(reversed(tie_keys(a)), reversed(tie_keys(b)), strict=True):
        after |= equal & (key_a > key_b)
        equal &= key_a == key_b
    order[first], order[first + 1] = np.where(after, b, a), np.where(after, a, b)
    longer = np.repeat(run_length > 2, run_length)
    if longer.any():
        at = at[longer]
        run = np.cumsum(new_run[longer])
        elements = order[at]
        order[at] = elements[np.lexsort((*tie_keys(elements), run))]
    return order


__all__ = ["sort_tied_runs"]
