"""Timing helper shared by the benchmarks: best of N runs, with a GC before each."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one run, after a GC."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


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


def _proc_status_kb(field: str, pid: int | str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def vmhwm_kb(pid: int | str = "self") -> int | None:
    """Peak RSS of one process from /proc (Linux): per address space, so unlike
    ``ru_maxrss`` it does not inherit the parent's peak through fork + exec."""
    return _proc_status_kb("VmHWM", pid)


def vmrss_kb() -> int | None:
    """This process's current resident set from /proc (Linux)."""
    return _proc_status_kb("VmRSS")


def reset_peak_rss() -> bool:
    """Reset this process's /proc VmHWM (Linux >= 4.0), so the next read is the peak since."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
