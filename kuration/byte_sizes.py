"""Byte counts as people write them ("512MiB", "2 GB", 1073741824) and as errors print them."""

from __future__ import annotations

import re

from kuration.errors import KurationError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


class ByteSizeError(KurationError, ValueError):
    """A byte count that cannot be read."""


def parse_bytes(value: int | str, *, name: str = "size") -> int:
    """A positive number of bytes from an int or a string such as ``"512MiB"`` or ``"2 GB"``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ByteSizeError(f"{name} must be a number of bytes or a string like '512MiB', got {value!r}")
    if isinstance(value, int):
        n = value
    else:
        match = _SIZE.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ByteSizeError(f"{name}={value!r}: write a number and one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB "
                                "(for example '512MiB')")
        n = int(float(match.group(1)) * _UNITS[unit])
    if n <= 0:
        raise ByteSizeError(f"{name} must be positive, got {value!r}")
    return n


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
