"""What the splits parsers share for hostile input: index ranges, and lists of one type.

Universe indices are int64, so no id, index, range bound or step above
:data:`MAX_INDEX` can mean anything; such numbers are refused from their digits (see
:func:`kuration.numbers.bounded_index`). A range is checked and counted from its
arithmetic (:func:`parse_range`) and expanded only once its caller has bounded the count
(:func:`expand_runs`). A hostile file can also put a megabyte in one cell; an error
quotes such text with :func:`kuration.errors.shown` and ``length=True``, cut short with
its length said.

A field that takes a list of one type (a stage's selectors, a sample's tags) is read by
:func:`typed_items`, whose :class:`ItemsError` each caller words, as with ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from kuration.numbers import MAX_INDEX, bounded_index

#: An inclusive range ``a-b`` or ``a-b:step``. ASCII digits only: ``\d`` would also take
#: other scripts' digits (``"\u0661"``), which ``int`` reads.
_RANGE = re.compile(r"^\s*([0-9]+)-([0-9]+)(?::([0-9]+))?\s*$")


class RangeError(ValueError):
    """Why a text is no usable range. ``reason`` is ``"form"`` (not ``a-b`` or ``a-b:step``),
    ``"too_large"`` (a number above :data:`MAX_INDEX`), ``"step"`` (a step of 0) or
    ``"order"`` (start above stop, both given in ``start`` and ``stop``). Each caller words
    its own error from it."""

    def __init__(self, reason: str, start: int = 0, stop: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.start = start
        self.stop = stop


def parse_range(text: str) -> tuple[int, int, int]:
    """``(start, step, count)`` of the inclusive range ``text`` (``a-b`` or ``a-b:step``,
    surrounding whitespace allowed), counted without expanding it. Raises
    :class:`RangeError`."""
    match = _RANGE.match(text)
    if match is None:
        raise RangeError("form")
    start, stop, step = (bounded_index(g) for g in (match.group(1), match.group(2), match.group(3) or "1"))
    if start is None or stop is None or step is None:
        raise RangeError("too_large")
    if step <= 0:
        raise RangeError("step")
    if start > stop:
        raise RangeError("order", start, stop)
    return start, step, (stop - start) // step + 1


def expand_runs(runs: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """The int64 values of ``(start, step, count)`` runs, in order: ``start, start + step,
    ...``, ``count`` of them per run. The caller bounds the counts (their sum is allocated);
    ``start + k * step`` never passes a range's stop, so int64 holds every value."""
    if not runs:
        return np.empty(0, np.int64)
    starts, steps, counts = np.asarray(runs, dtype=np.int64).reshape(-1, 3).T
    run_of = np.repeat(np.arange(len(counts)), counts)
    within = np.arange(len(run_of), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return starts[run_of] + within * steps[run_of]


class ItemsError(ValueError):
    """Why a value is no list of the wanted type. ``wrong`` is empty when it is no list at
    all, else the positions of the ``items`` of another type."""

    def __init__(self, items: tuple = (), wrong: tuple[int, ...] = ()) -> None:
        super().__init__("not a list" if not wrong else f"items of another type at {list(wrong)}")
        self.items = items
        self.wrong = wrong


def typed_items(value: object, kinds: tuple[type, ...]) -> tuple:
    """``value``'s items as a tuple, when each is an instance of ``kinds`` (a bool never
    counts as an int). A string, bytes or a mapping is iterable but never meant as a list.
    Raises :class:`ItemsError`."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ItemsError()
    items = tuple(value)
    wrong = tuple(i for i, item in enumerate(items) if isinstance(item, bool) or not isinstance(item, kinds))
    if wrong:
        raise ItemsError(items, wrong)
    return items


__all__ = ["MAX_INDEX", "ItemsError", "RangeError", "expand_runs", "parse_range", "typed_items"]
