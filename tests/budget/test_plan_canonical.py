"""A plan depends on the values of its segments, never on how their floats are spelled:
zeros of either sign and NaNs of any sign or payload plan to the same bytes, and the
plan's own floats are canonical (:mod:`kuration.canonical.floats`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from kuration.budget.spans import feature_columns
from tests.budget.pinned_pools import plan_digest
from tests.budget.random_pools import SETTINGS, cases

QUIET_NAN = np.array([np.nan]).view(np.uint64)[0]
SIGN = np.uint64(1 << 63)


def respelled(segments: pa.Table, seed: int) -> pa.Table:
    """``segments`` with each zero's sign and each NaN's sign and payload drawn at random in
    the priority and every feature column."""
    rng = np.random.default_rng(seed)
    for name in ["priority", *feature_columns(segments)]:
        values = segments.column(name).to_numpy().astype(np.float64)
        bits = values.view(np.uint64).copy()
        zero, nan = values == 0, np.isnan(values)
        bits[zero] = np.where(rng.random(int(zero.sum())) < 0.5, SIGN, np.uint64(0))
        payload = rng.integers(0, 1 << 51, int(nan.sum()), dtype=np.uint64)
        bits[nan] = QUIET_NAN | payload | np.where(rng.random(int(nan.sum())) < 0.5, SIGN, np.uint64(0))
        segments = segments.set_column(segments.column_names.index(name), name, pa.array(bits.view(np.float64)))
    return segments


def _float_bits_are_canonical(table: pa.Table) -> bool:
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_floating(field.type):
            values = column.to_numpy().astype(np.float64)
            bits = values.view(np.uint64)
            if (bits[values == 0] != 0).any() or (bits[np.isnan(values)] != QUIET_NAN).any():
                return False
    return True


@SETTINGS
@given(cases(palette=[0.0, -0.0, 1.0, -1.0]), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_zero_signs_and_nan_payloads_never_change_a_plan(case, seed_a, seed_b):
    a = case.plan(respelled(case.segments, seed_a))
    b = case.plan(respelled(case.segments, seed_b))
    assert plan_digest(a) == plan_digest(b) == plan_digest(case.plan())
    assert _float_bits_are_canonical(a.items)
