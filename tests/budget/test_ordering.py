"""``sort_tied_runs``: a sort on the primary key alone, finished on its tied runs, equals one
``np.lexsort`` of all the keys (pairs, longer runs, no ties, all tied, equal tie keys)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.budget.ordering import sort_tied_runs


def _finish(primary: np.ndarray, *tie_keys: np.ndarray) -> np.ndarray:
    """``tie_keys`` as ``np.lexsort`` takes them: the last one decides first."""
    order = np.argsort(primary, kind="stable")
    same = primary[order][1:] == primary[order][:-1]
    return sort_tied_runs(order, same, lambda elements: tuple(k[elements] for k in tie_keys))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 60), primary_values=st.integers(1, 8), tie_values=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1))
def test_equals_a_full_lexsort(n, primary_values, tie_values, seed):
    rng = np.random.default_rng(seed)
    primary = rng.integers(0, primary_values, n).astype(np.float64)
    hash_key = rng.integers(0, tie_values, n).astype(np.uint64)  # collisions: the index must decide
    index = rng.permutation(n).astype(np.int64)
    expected = np.lexsort((index, hash_key, primary))
    assert np.array_equal(_finish(primary, index, hash_key), expected)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**32 - 1))
def test_equal_tie_keys_keep_the_stable_order(n, seed):
    rng = np.random.default_rng(seed)
    primary = rng.integers(0, 3, n).astype(np.float64)
    constant = np.zeros(n, np.uint64)
    assert np.array_equal(_finish(primary, constant), np.argsort(primary, kind="stable"))


def test_no_ties_returns_the_order_untouched():
    primary = np.array([3.0, 1.0, 2.0])
    order = np.argsort(primary, kind="stable")
    assert sort_tied_runs(order, np.zeros(2, bool), lambda e: (e,)) is order
    assert list(order) == [1, 2, 0]
