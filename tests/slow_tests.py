"""Which tests took long without saying why: the rule the suite keeps so it stays fast.

A test slower than :data:`SLOW_TEST_SECONDS` (its setup, call and teardown together, so the
first user of a shared fixture counts the fixture's build) explains in its docstring what
needs that long. ``tests/conftest.py`` collects the figures and prints the offenders at the
end of the run. It warns and never fails a run: the seconds are the machine's, and no test
asserts wall-clock time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: A test slower than this explains itself in its docstring.
SLOW_TEST_SECONDS = 30.0


def documented(function: Callable[..., Any] | None) -> bool:
    """Whether a test function has a docstring with something in it (a test item without a
    function, a doctest say, counts as documented)."""
    return function is None or bool((function.__doc__ or "").strip())


def undocumented_slow_tests(seconds: Mapping[str, float], documented_ids: Mapping[str, bool], *,
                            threshold: float = SLOW_TEST_SECONDS) -> list[tuple[float, str]]:
    """(seconds, node id) of every test over ``threshold`` without a docstring, slowest first;
    a node id never collected (documented_ids has no entry) is left out."""
    return sorted(((spent, nodeid) for nodeid, spent in seconds.items()
                   if spent > threshold and not documented_ids.get(nodeid, True)), reverse=True)
