"""What a budget plan is asked for, validated before any work: :class:`BudgetOptions` and
the shard chunking (:class:`ShardChunking`) that decides how much admitted data is emitted.

Two request forms, never mixed:

- **hours** (``train_hours`` / ``val_hours`` / ``test_hours``): each split is filled with
  spans until its seconds are reached (to within one span, see :mod:`kuration.budget.fill`);
- **count** (``train_count`` / ``val_count`` / ``test_count``): each split is filled with
  that many segments, best first.

An unset split requests nothing: its pool is reported, and nothing is admitted from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np

from kuration.errors import BudgetError, check_keys, shown
from kuration.numbers import finite_float, whole_number
from kuration.sources.schema import MAX_WINDOW_STEPS as MAX_SPAN_STEPS
from kuration.splits.stages import EXCLUSIVE_STAGES

SHORT_POLICIES = ("keep", "pad", "drop")
CLIP_AGGREGATES = ("max", "mean", "min")

#: A step count: one, or an array of them.
_Steps = TypeVar("_Steps", int, np.ndarray)


@dataclass(frozen=True)
class ShardChunking:
    """How the writer cuts an admitted span into shards of ``shard_length`` steps, and what
    it does with a shorter tail: ``keep`` it, ``pad`` it with zero rows (the real steps are
    still the data emitted), or ``drop`` it (those steps are admitted but never emitted)."""

    shard_length: int
    short_policy: str = "keep"

    def __post_init__(self) -> None:
        if isinstance(self.shard_length, bool) or not isinstance(self.shard_length, int) or self.shard_length < 1:
            raise BudgetError(f"shard_length: must be a positive whole number of steps, got {self.shard_length!r}")
        if self.short_policy not in SHORT_POLICIES:
            raise BudgetError(f"short_policy: must be one of {list(SHORT_POLICIES)}, got {self.short_policy!r}")

    def emitted_steps(self, steps: _Steps) -> _Steps:
        """Real (not padding) steps written for a span of ``steps`` (an int or an int array)."""
        if self.short_policy == "drop":
            return (steps // self.shard_length) * self.shard_length
        return steps


def _budget(value: Any, name: str, *, whole: bool) -> float | None:
    if value is None:
        return None
    number = finite_float(value)
    if number is None or number < 0:
        kind = "a whole number >= 0" if whole else "a finite number of hours >= 0"
        raise BudgetError(f"{name}: must be {kind} or unset, got {shown(value)}")
    if whole and not number.is_integer():
        raise BudgetError(f"{name}: counts whole segments, got {shown(value)}")
    return number


@dataclass(frozen=True)
class BudgetOptions:
    """A budget request. Hours and counts are mutually exclusive; at least one split must
    request something.

    ``span_steps`` / ``span_seconds`` (hours only, mutually exclusive) cut each track into
    independently budgeted spans; unset, a whole track is one span. ``clip_aggregate``
    (``max``/``mean``/``min``) turns the overlapping segments' priorities and features into
    the span's; ``None`` takes the strategy's default. ``seed`` orders equal priorities and,
    without resolved splits, partitions groups into split pools. ``chunking`` (from the
    output spec) prices the dropped tail; without it everything admitted counts as emitted.
    """

    train_hours: float | None = None
    val_hours: float | None = None
    test_hours: float | None = None
    train_count: int | None = None
    val_count: int | None = None
    test_count: int | None = None
    span_steps: int | None = None
    span_seconds: float | None = None
    clip_aggregate: str | None = None
    seed: int = 0
    chunking: ShardChunking | None = None

    def __post_init__(self) -> None:
        hours = {s: _budget(getattr(self, f"{s}_hours"), f"{s}_hours", whole=False) for s in EXCLUSIVE_STAGES}
        counts = {s: _budget(getattr(self, f"{s}_count"), f"{s}_count", whole=True) for s in EXCLUSIVE_STAGES}
        set_hours = [f"{s}_hours" for s, v in hours.items() if v is not None]
        set_counts = [f"{s}_count" for s, v in counts.items() if v is not None]
        if set_hours and set_counts:
            raise BudgetError(
                f"budget: {set_hours} and {set_counts} both set; request hours or a count of segments, not both"
            )
        if not set_hours and not set_counts:
            raise BudgetError("budget: nothing requested; set train_hours/val_hours/test_hours (or *_count)")
        if set_counts and (self.span_steps is not None or self.span_seconds is not None):
            raise BudgetError("span_steps/span_seconds: spans subdivide tracks for an hours budget; a count selects "
                              "segments")
        if self.span_steps is not None and self.span_seconds is not None:
            raise BudgetError(f"span_steps={self.span_steps!r} and span_seconds={self.span_seconds!r}: set one, not "
                              "both")
        if self.span_steps is not None and not 1 <= (whole_number(self.span_steps) or 0) <= MAX_SPAN_STEPS:
            raise BudgetError(f"span_steps: must be a positive whole number of steps, at most {MAX_SPAN_STEPS}, got "
                              f"{shown(self.span_steps)}")
        if self.span_seconds is not None and not 0 < (finite_float(self.span_seconds) or 0):
            raise BudgetError("span_seconds: must be a positive finite number of seconds, got "
                              f"{shown(self.span_seconds)}")
        if self.clip_aggregate is not None and self.clip_aggregate not in CLIP_AGGREGATES:
            raise BudgetError(f"clip_aggregate: must be one of {list(CLIP_AGGREGATES)} or unset, got "
                              f"{self.clip_aggregate!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise BudgetError(f"seed: must be an integer, got {self.seed!r}")
        if self.chunking is not None and not isinstance(self.chunking, ShardChunking):
            raise BudgetError(f"chunking: must be a ShardChunking, got {type(self.chunking).__name__}")
        chunking = self.chunking
        if chunking is not None and chunking.short_policy == "drop" and self.span_steps is not None \
                and self.span_steps < chunking.shard_length:
            raise BudgetError(
                f"span_steps={self.span_steps} < shard_length={chunking.shard_length} with short_policy 'drop': every "
                "span would chunk to zero shards while still using the hours budget; raise span_steps to a multiple "
                "of shard_length, or use short_policy 'keep' or 'pad'"
            )

    # -- derived --------------------------------------------------------------------------

    @property
    def unit(self) -> str:
        """``"seconds"`` for an hours request, ``"segments"`` for a count."""
        return "segments" if any(getattr(self, f"{s}_count") is not None for s in EXCLUSIVE_STAGES) else "seconds"

    def requested(self) -> dict[str, float]:
        """Per split, what is requested in :attr:`unit` (seconds or segments); unset is 0."""
        if self.unit == "segments":
            return {s: float(getattr(self, f"{s}_count") or 0) for s in EXCLUSIVE_STAGES}
        return {s: float(getattr(self, f"{s}_hours") or 0.0) * 3600.0 for s in EXCLUSIVE_STAGES}

    def span_steps_at(self, sample_hz: float) -> int | None:
        """Steps per span at ``sample_hz``; ``None`` means whole-track spans. Seconds round
        half to even, like the segmenter's window."""
        if self.span_steps is not None:
            return self.span_steps
        if self.span_seconds is None:
            return None
        steps = round(self.span_seconds * sample_hz)
        if steps < 1:
            raise BudgetError(
                f"span_seconds: {self.span_seconds:g} s at {sample_hz:g} Hz rounds to {steps} steps; use at least "
                f"{1 / sample_hz:g} s (one step)"
            )
        chunking = self.chunking
        if chunking is not None and chunking.short_policy == "drop" and steps < chunking.shard_length:
            raise BudgetError(
                f"span_seconds={self.span_seconds:g} is {steps} steps at {sample_hz:g} Hz, fewer than shard_length="
                f"{chunking.shard_length} with short_policy 'drop': every span would chunk to zero shards while still "
                "using the hours budget; raise span_seconds, or use short_policy 'keep' or 'pad'"
            )
        return steps

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["chunking"] = None if self.chunking is None else asdict(self.chunking)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BudgetOptions:
        if not isinstance(data, Mapping):
            raise BudgetError(f"budget options: must be a mapping, got {type(data).__name__}")
        check_keys(data, cls.__dataclass_fields__, where="budget options", error=BudgetError)
        values = dict(data)
        chunking = values.get("chunking")
        if isinstance(chunking, Mapping):
            check_keys(chunking, ShardChunking.__dataclass_fields__, where="budget options.chunking", error=BudgetError)
            values["chunking"] = ShardChunking(**chunking)
        return cls(**values)


__all__ = ["BudgetError", "BudgetOptions", "CLIP_AGGREGATES", "SHORT_POLICIES", "ShardChunking"]
