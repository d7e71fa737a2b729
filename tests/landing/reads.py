"""Counting what a piece of code reads from storage, by file name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kuration import storage


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each file (by name) is read through :func:`kuration.storage.read_bytes`
    from now on, in this process (every settings file and JSON read goes through it)."""
    counted: Counter[str] = Counter()
    original = storage.read_bytes

    def counting(url, *args, **kwargs):
        counted[Path(str(url)).name] += 1
        return original(url, *args, **kwargs)

    monkeypatch.setattr(storage, "read_bytes", counting)
    return counted
