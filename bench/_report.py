"""The uniform figure format every bench script adds to its JSON under ``"report"``.

A figure is ``{"name", "value", "unit", "baseline", "target", "met", "note"}``:

- ``value``: a float, or None when the figure could not be measured (``note`` says why);
- ``unit``: ``"x"`` for a ratio, ``"s"`` for seconds, ``"exponent"`` for a scaling exponent,
  ``"fraction"`` for a share of cases;
- ``baseline``: what the ratio is taken against, measured in the same run (for an absolute
  figure: what it is, and that there is no ratio);
- ``target``: the target as stated by the bench and bench/README.md (``">= 0.8"``,
  ``"<= 1 s"``), or None when none is stated;
- ``met``: whether ``value`` meets ``target``; None when there is no target or no value.

``bench/make_report.py`` renders these into bench/REPORT.md.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from typing import Any

_TARGET = re.compile(r"^\s*(>=|<=|==|>|<)\s*([-+0-9.eE]+)\s*([A-Za-z%]*)\s*$")
_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, ">": operator.gt, "<": operator.lt}


def judge(value: float | None, target: str | None) -> bool | None:
    """Whether ``value`` meets ``target`` (``">= 5"``, ``"<= 1 s"``); None without either."""
    if target is None or value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    match = _TARGET.match(target)
    if match is None:
        raise ValueError(f"target {target!r} is not '<op> <number> [unit]' with op one of {sorted(_OPS)}")
    return bool(_OPS[match.group(1)](value, float(match.group(2))))


def figure(name: str, value: float | None, unit: str, baseline: str, *, target: str | None = None,
           met: bool | None = None, note: str = "") -> dict[str, Any]:
    """One figure. ``met`` defaults to :func:`judge` of ``value`` against ``target``; pass it
    when the bench judges the target itself (e.g. on another run than the best)."""
    if value is not None:
        value = float(value)
    if value is None:
        met = None
    elif met is None:
        met = judge(value, target)
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "target": target,
            "met": None if met is None else bool(met), "note": note}


def ratio(name: str, numerator: float | None, denominator: float | None, baseline: str, *,
          target: str | None = None, note: str = "") -> dict[str, Any]:
    """A ratio figure ``numerator / denominator`` (None when either side is missing)."""
    value = None if numerator is None or not denominator else numerator / denominator
    return figure(name, value, "x", baseline, target=target, note=note)


def scaling_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> float | None:
    """The least-squares slope of log(seconds) against log(size): 1.0 is linear. None for
    fewer than two distinct sizes."""
    points = [(math.log(n), math.log(t)) for n, t in zip(sizes, seconds, strict=True) if n > 0 and t > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return (sum((x - mean_x) * (y - mean_y) for x, y in points)
            / sum((x - mean_x) ** 2 for x, _ in points))
