"""Numbers that come from input (a settings file, a manifest, a dict built in Python),
checked before any arithmetic touches them, and shown in error messages without failing.

``math.isfinite(10**400)`` raises ``OverflowError`` instead of answering, and ``True`` is an
``int``: every declaration that takes a number (a sample rate, a weight, a window, a shard
length) asks here first, then words its own error with the key it is about. This module
raises nothing; it only says whether a value is usable.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_REAL = (int, float, np.integer, np.floating)


def finite_float(value: Any) -> float | None:
    """``value`` as a float when it is a real, finite number (not a boolean, not beyond the
    float range); ``None`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
        return None
    try:
        out = float(value)
    except OverflowError:  # an int with more than ~308 digits
        return None
    return out if math.isfinite(out) else None


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is an integer (a Python or numpy integer, not a boolean);
    ``None`` otherwise. Floats are not whole numbers here, even ``3.0``: a count or a length
    written as a float is a typo worth reporting."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return int(value)


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message. ``repr`` of an int
    past 4300 digits raises ``ValueError`` (and anything holding one does too): such a value
    is named by its type and size instead."""
    try:
        text = repr(value)
    except ValueError:
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["finite_float", "shown", "whole_number"]
