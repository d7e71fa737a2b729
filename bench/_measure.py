"""Timing helper shared by the benchmarks: best of N runs, with a GC before each."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """(best seconds, every run's seconds, the last result)."""
    times: list[float] = []
    out = None
    for _ in range(repeats):
        out = None
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, out
