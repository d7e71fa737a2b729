"""Numbers that come from input (a settings file, a manifest, a dict built in Python, an
option such as ``memory_budget="2GiB"``), checked before any arithmetic touches them.

``math.isfinite(10**400)`` raises ``OverflowError`` instead of answering, and ``True`` is an
``int``: every declaration that takes a number (a sample rate, a weight, a window, a shard
length) asks :func:`finite_float` or :func:`whole_number` first, which raise nothing and
only say whether a value is usable, then words its own error with the key it is about.
Byte counts as people write them (``"512MiB"``, ``"2 GB"``, ``1073741824``) are read by
:func:`parse_bytes`, which raises :class:`~kuration.errors.InputError` naming the option,
and printed by :func:`format_bytes`.

Figures a person reads (a check's verdict, a metadata table, the inspect report, a
command's output) come from here and nowhere else, so one figure reads the same on every
page: :func:`rounded` and :func:`percent` give the numbers stored as metadata (which the
Dagster UI plots), and :func:`format_number`, :func:`format_hours` and
:func:`format_percent` the text: three significant digits, whole numbers with thousands
separators from a thousand on, no padding zeros (``4.01 h``, ``0.512 h``, ``4 h``,
``1,234 h``, ``100.3%``).

Indices written as text (a ``universe.csv`` cell, a selector range, the row of a media
reference) are ASCII digits only (:func:`is_digits`: ``"\u0661"`` is a decimal to Python,
and ``int`` reads it) and at most :data:`MAX_INDEX`, the int64 range they are stored in
(:func:`bounded_index`, which refuses a longer number from its digits, before ``int``,
which refuses past 4300 digits, sees it).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from kuration.errors import InputError, shown
from kuration.canonical.strict_json import INT64_MAX

#: Largest index, id, range bound, step or row written as text: indices are int64 (2**63 - 1).
MAX_INDEX = INT64_MAX
_MAX_INDEX_DIGITS = len(str(MAX_INDEX))

_REAL = (int, float, np.integer, np.floating)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


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
    if type(value) is int:  # the common case, first: a bool's type is bool, not int
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return int(value)


def is_digits(text: str) -> bool:
    """True when ``text`` is ASCII decimal digits and nothing else (no sign, no space, no
    other script's digits)."""
    return text.isascii() and text.isdecimal()


def bounded_index(digits: str) -> int | None:
    """The ASCII decimal string ``digits`` as an int (leading zeros allowed), or None when it
    is above :data:`MAX_INDEX`. Raises ``ValueError`` when ``digits`` fails :func:`is_digits`:
    callers tell text that is no number from a number too large."""
    if not is_digits(digits):
        raise ValueError(f"not ASCII decimal digits: {digits[:20]!r}")
    significant = digits.lstrip("0") or "0"
    if len(significant) > _MAX_INDEX_DIGITS:
        return None
    value = int(significant)
    return value if value <= MAX_INDEX else None


def parse_bytes(value: int | str, *, name: str = "size") -> int:
    """A positive number of bytes from an int or a string such as ``"512MiB"`` or ``"2 GB"``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"{name} must be a number of bytes or a string like '512MiB', got {value!r}")
    if isinstance(value, int):
        n = value
    else:
        match = _SIZE.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise InputError(f"{name}={value!r}: write a number and one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB "
                             "(for example '512MiB')")
        n = int(float(match.group(1)) * _UNITS[unit])
    if n <= 0:
        raise InputError(f"{name} must be positive, got {value!r}")
    return n


def format_bytes(n: float) -> str:
    """A byte count as people read it, in binary units: ``0 B``, ``1023 B``, ``1.0 KiB``,
    ``95.7 MiB``, ``4.0 TiB``. A negative count (a difference) keeps its sign; a NaN or an
    infinity is no byte count and raises ``ValueError``."""
    value = finite_float(n)
    if value is None:
        raise ValueError(f"format_bytes: {n!r} is not a byte count")
    for unit in _BINARY_UNITS:
        if abs(value) < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def rounded(value: float, digits: int = 3) -> float:
    """``value`` to ``digits`` significant digits, and to a whole number from ``10**digits``
    on (``4.0119444444444445`` -> ``4.01``, ``0.51166`` -> ``0.512``, ``1234.5`` -> ``1234.0``):
    what a figure on a dashboard needs, not what the computation carried. Non-finite values
    come back unchanged, since rounding cannot make them readable."""
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return value
    if abs(value) >= 10**digits:
        return float(round(value))
    return float(f"{value:.{digits}g}")


def percent(fraction: float) -> float:
    """A fraction as a percentage to one decimal: ``1.0029861`` -> ``100.3``."""
    value = float(fraction)
    return round(value * 100, 1) if math.isfinite(value) else value


def format_number(value: Any, digits: int = 3) -> str:
    """A figure as text: an integer with thousands separators (``3,322``), any other real
    number :func:`rounded` to ``digits`` significant digits without padding zeros (``4.01``,
    ``0.512``, ``4``) and whole with separators from ``10**digits`` on (``14,169``, never
    ``1.42e+04``). ``None`` and NaN, a figure not recorded, are empty text; an infinity
    reads ``inf``. A boolean or a string is no figure and raises ``TypeError``."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
        raise TypeError(f"format_number: {shown(value)} is not a number")
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    number = rounded(float(value), digits)
    if math.isnan(number):
        return ""
    if math.isinf(number) or abs(number) < 10**digits:
        return f"{number:,.{digits}g}"
    return f"{number:,.0f}"


def format_hours(value: Any) -> str:
    """Hours as every page shows them: ``4.01 h``, ``0.512 h``, ``4 h``, ``1,234 h``; empty
    text when not recorded (see :func:`format_number`)."""
    text = format_number(value)
    return f"{text} h" if text else ""


def format_percent(fraction: Any) -> str:
    """A fraction as a percentage to one decimal: ``1.0029861`` -> ``100.3%``, ``0.5`` ->
    ``50.0%``; empty text when not recorded."""
    if fraction is None:
        return ""
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, _REAL):
        raise TypeError(f"format_percent: {shown(fraction)} is not a number")
    value = percent(float(fraction))
    return "" if math.isnan(value) else f"{value:.1f}%"


__all__ = ["MAX_INDEX", "bounded_index", "finite_float", "format_bytes", "format_hours", "format_number",
           "format_percent", "is_digits", "parse_bytes", "percent", "rounded", "whole_number"]
