"""Canonical floats: one bit pattern per value, whatever CPU computed it.

numpy picks its SIMD kernels by CPU (AVX-512, AVX2, SSE), and the kernels differ where IEEE
754 leaves the result open: ``max``/``min`` of ``0.0`` and ``-0.0`` may return either zero,
and a NaN out of a reduction may carry any operand's sign and payload. Those bits reach
plan digests, run fingerprints and shard files, so every float that is reduced, hashed or
written goes through :func:`canonical_floats` first: ``-0.0`` becomes ``0.0`` and every NaN
becomes ``np.nan`` (the quiet NaN with no sign and no payload). Every other value,
infinities and subnormals included, keeps its bits.

The zero is fixed on the bits (an integer view), not with ``x + 0.0``: the result must not
depend on the floating-point environment either (a library that turns on flush-to-zero
would make ``x + 0.0`` zero a subnormal).

This module does not round, and it does not make sums independent of their order: code
that sums floats fixes the order itself.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: The unsigned integer of each float width: its ``-0.0`` is the sign bit alone.
_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def canonical_floats(values: Any) -> np.ndarray:
    """A copy of ``values`` with ``-0.0`` as ``0.0`` and every NaN as ``np.nan``; arrays that
    are not floating point (ints, bools, strings) come back unchanged, as they have one
    representation per value already. Raises :class:`TypeError` for a float width other
    than 16, 32 or 64 bits (no schema or spec declares one)."""
    array = np.asarray(values)
    if array.dtype.kind != "f":
        return array
    uint = _BITS.get(array.dtype.itemsize)
    if uint is None:
        raise TypeError(f"canonical_floats: {array.dtype} is not a 16, 32 or 64-bit float")
    # A fresh, contiguous, native-order copy: the caller's array is never touched, and the
    # integer view below reads the bits as this machine stores them.
    out = np.array(array, dtype=array.dtype.newbyteorder("="), order="C")
    bits = out.view(uint)
    bits[bits == uint(1 << (8 * array.dtype.itemsize - 1))] = 0
    np.copyto(out, np.nan, where=np.isnan(out))
    return out


def canonical_float(value: float) -> float:
    """:func:`canonical_floats` for one Python float."""
    if value != value:
        return math.nan
    return 0.0 if value == 0.0 else value


__all__ = ["canonical_float", "canonical_floats"]
