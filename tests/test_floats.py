"""Canonical floats: -0.0 becomes 0.0, every NaN becomes one NaN, nothing else changes a bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.canonical.floats import canonical_float, canonical_floats

UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}


def _signed_nan(dtype, payload: int) -> np.ndarray:
    """A NaN of ``dtype`` with the sign bit set and ``payload`` in its low mantissa bits."""
    uint = UINT[dtype]
    bits = np.array([np.nan], dtype).view(uint)[0] | uint(1 << (8 * np.dtype(dtype).itemsize - 1)) | uint(payload)
    return np.array([bits], uint).view(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_negative_zero_and_every_nan_become_one_pattern(dtype):
    info = np.finfo(dtype)
    values = np.concatenate([np.array([-0.0, 0.0, np.inf, -np.inf, info.tiny, -info.smallest_subnormal, -1.5], dtype),
                             _signed_nan(dtype, 1), _signed_nan(dtype, 3)])
    out = canonical_floats(values)
    uint = UINT[dtype]
    bits = out.view(uint)
    assert out.dtype == dtype
    assert bits[0] == bits[1] == 0
    assert (bits[2:7] == values[2:7].view(uint)).all()  # everything else keeps its bits, subnormals included
    assert (bits[7:] == np.array([np.nan], dtype).view(uint)[0]).all()
    assert np.signbit(values[0]) and np.isnan(values[7]), "the caller's array is never modified"


def test_non_float_arrays_come_back_unchanged_and_odd_layouts_are_handled():
    ints = np.arange(4)
    assert canonical_floats(ints) is ints
    assert canonical_floats(np.array(["a"])).tolist() == ["a"]
    big_endian = np.array([-0.0, 2.0, np.nan], ">f8")
    out = canonical_floats(big_endian)
    assert not np.signbit(out).any() and out[1] == 2.0 and math.isnan(out[2])
    strided = np.array([[-0.0, 1.0], [-0.0, 1.0]])[:, 0]
    assert canonical_floats(strided).tolist() == [0.0, 0.0] and not np.signbit(canonical_floats(strided)).any()
    assert canonical_floats(np.float64(-0.0)).shape == () and not np.signbit(canonical_floats(np.float64(-0.0)))


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize in (2, 4, 8), reason="longdouble is a plain double here")
def test_a_float_width_no_schema_declares_is_refused():
    with pytest.raises(TypeError, match="is not a 16, 32 or 64-bit float"):
        canonical_floats(np.zeros(2, np.longdouble))


def test_the_scalar_form_agrees():
    assert math.copysign(1.0, canonical_float(-0.0)) == 1.0
    nan = canonical_float(-math.nan)
    assert np.array([nan]).view(np.uint64)[0] == np.array([np.nan]).view(np.uint64)[0]
    assert canonical_float(-2.5) == -2.5 and canonical_float(math.inf) == math.inf


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_any_bits_canonicalize_to_the_value_they_hold(bit_patterns):
    values = np.array(bit_patterns, np.uint64).view(np.float64)
    out = canonical_floats(values)
    # Equal values (0.0 == -0.0) and NaNs are now one bit pattern each; the rest are untouched.
    nan = np.isnan(values)
    assert (out.view(np.uint64)[nan] == np.array([np.nan]).view(np.uint64)[0]).all()
    zero = values == 0
    assert (out.view(np.uint64)[zero] == 0).all()
    other = ~nan & ~zero
    assert (out.view(np.uint64)[other] == values.view(np.uint64)[other]).all()
