"""Segmenting tracks: fixed windows over a track's timesteps, the unit features are scored on.

A :class:`Segmenter` declares a window and a stride, in seconds (converted to whole
timesteps with the sample rate) or in steps. ``Segmenter.segments(track)`` cuts one track
into :class:`Segment` s: windows ``[start, start + window)`` for ``start = 0, stride,
2*stride, ...`` while the window fits, and, when those end before the track does, one more
**end-aligned** window ``[len(track) - window, len(track))``. Windows count *timesteps*
(rows of the track), not tick numbers: a track whose source skipped ticks still gets
windows of ``window`` rows.

Deliberate edges of the contract:

- A track shorter than one window gives exactly **one** segment covering it whole, so
  short tracks are scored rather than silently lost.
- The end-aligned window covers the tail a plain sliding window leaves when the stride
  does not divide ``len(track) - window``. Every row of a track is then scored (with a
  stride no larger than the window), so a span's aggregated features describe every row
  written under its ``segment:`` labels: with ``max``, no row's value exceeds its span's
  ``<field>.max``. It overlaps the window before it by more than the stride, and it is
  the last segment (index ``k + 1`` after the ``k``-th regular window).
- A stride larger than the window leaves gaps between segments on purpose (the tail
  window still ends the track).
- Seconds become steps with Python's :func:`round` (half to even, e.g. 2.5 steps -> 2);
  each of window and stride must come to at least one step.

This module only plans windows; it reads no data beyond ``track.ticks`` and
``track.present``. Features live in :mod:`kuration.scoring.features`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.errors import InputError, check_keys, shown
from kuration.canonical.hashing import canonical_digest
from kuration.numbers import finite_float
from kuration.sources.schema import MAX_WINDOW_STEPS, SAMPLE_HZ_RANGE
from kuration.sources.tracks import Track

UNITS = ("seconds", "steps")
_SEGMENTER_KEYS = ("window", "stride", "unit", "sample_hz")


class SegmenterError(InputError):
    """A segmenter is misconfigured, or cannot segment a given track."""


@dataclass(frozen=True)
class Segment:
    """One window of one track. ``start`` / ``stop`` are row offsets into the track (stop
    exclusive); ``start_tick`` / ``stop_tick`` are the tick numbers they cover (stop
    exclusive: ``ticks[stop - 1] + 1``); ``present_fraction`` is the share of the window's
    timesteps at which the entity was present."""

    source_id: str
    entity_id: Any
    index: int
    start: int
    stop: int
    start_tick: int
    stop_tick: int
    present_fraction: float

    @property
    def n_steps(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Segmenter:
    """Fixed windows over a track. ``window`` and ``stride`` are positive numbers in
    ``unit`` ("seconds" or "steps"). With seconds, ``sample_hz`` converts them to steps; left
    ``None``, each track's own ``sample_hz`` is used. Options are keyword-only."""

    window: float
    stride: float
    unit: str = field(default="seconds", kw_only=True)
    sample_hz: float | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.unit, str) or self.unit not in UNITS:
            raise SegmenterError(f"Segmenter.unit: must be one of {list(UNITS)}, got {shown(self.unit)}")
        for name in ("window", "stride"):
            raw = getattr(self, name)
            value = finite_float(raw)
            if value is None or value <= 0:
                raise SegmenterError(f"Segmenter.{name}: must be a positive number of {self.unit}, got {shown(raw)}")
            if self.unit == "steps":
                if not value.is_integer():
                    raise SegmenterError(f"Segmenter.{name}: {shown(raw)} is not a whole number of steps; use "
                                         "unit='seconds' for fractions")
                if value > MAX_WINDOW_STEPS:
                    raise SegmenterError(f"Segmenter.{name}: {shown(raw)} steps; at most {MAX_WINDOW_STEPS} are "
                                         "allowed")
                object.__setattr__(self, name, int(value))
            else:
                object.__setattr__(self, name, value)
        if self.sample_hz is not None:
            hz = finite_float(self.sample_hz)
            if hz is None or hz <= 0:
                raise SegmenterError(
                    "Segmenter.sample_hz: must be a positive number (timesteps per second) or None, got "
                    f"{shown(self.sample_hz)}")
            if not SAMPLE_HZ_RANGE[0] <= hz <= SAMPLE_HZ_RANGE[1]:
                raise SegmenterError(f"Segmenter.sample_hz: {hz:g} Hz is outside the supported range "
                                     f"{SAMPLE_HZ_RANGE[0]:g} to {SAMPLE_HZ_RANGE[1]:g} Hz")
            object.__setattr__(self, "sample_hz", hz)
            self.steps()  # fail at construction when the conversion is already known to be bad

    # -- plan -------------------------------------------------------------------------------

    def steps(self, sample_hz: float | None = None) -> tuple[int, int]:
        """``(window, stride)`` in whole steps. ``sample_hz`` is used only for unit seconds
        when the segmenter was built without one."""
        if self.unit == "steps":
            return int(self.window), int(self.stride)
        hz = self.sample_hz if self.sample_hz is not None else sample_hz
        if hz is None:
            raise SegmenterError(
                "Segmenter: unit='seconds' needs a sample rate; pass Segmenter(..., sample_hz=HZ) "
                "or segment a track (its sample_hz is used)"
            )
        out = []
        for name in ("window", "stride"):
            seconds = float(getattr(self, name))
            if seconds * hz > MAX_WINDOW_STEPS:  # also catches inf, which round() cannot take
                raise SegmenterError(
                    f"Segmenter.{name}: {seconds:g} s at {hz:g} Hz is more than {MAX_WINDOW_STEPS} steps; use a "
                    f"shorter {name}"
                )
            n = round(seconds * hz)
            if n < 1:
                raise SegmenterError(
                    f"Segmenter.{name}: {seconds:g} s at {hz:g} Hz rounds to {n} steps; "
                    f"use at least {1 / hz:g} s (one step)"
                )
            out.append(int(n))
        return out[0], out[1]

    def bounds(self, n_steps: int, sample_hz: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Pure plan: ``(starts, stops)`` int64 arrays for a track of ``n_steps`` rows, the
        end-aligned tail window included."""
        if n_steps <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        window, stride = self.steps(sample_hz)
        if n_steps < window:
            return np.array([0], np.int64), np.array([n_steps], np.int64)
        starts = np.arange(0, n_steps - window + 1, stride, dtype=np.int64)
        if starts[-1] + window < n_steps:  # the tail: see the module docstring
            starts = np.append(starts, np.int64(n_steps - window))
        return starts, starts + window

    def segments(self, track: Track) -> list[Segment]:
        """The segments of ``track`` (a :class:`kuration.sources.tracks.Track`), in start order."""
        if self.unit == "seconds" and self.sample_hz is not None and not math.isclose(self.sample_hz, track.sample_hz):
            raise SegmenterError(
                f"Segmenter.sample_hz: {self.sample_hz:g} Hz but track {track.source_id!r}/{track.entity_id!r} is "
                f"sampled at {track.sample_hz:g} Hz; the window would not be {self.window:g} s. "
                "Pass the schema's sample_hz, or None to use each track's own"
            )
        ticks = np.asarray(track.ticks, dtype=np.int64)
        present = np.asarray(track.present, dtype=bool)
        starts, stops = self.bounds(len(ticks), track.sample_hz)
        if not len(starts):
            return []
        csum = np.concatenate([[0], np.cumsum(present, dtype=np.int64)])
        fractions = (csum[stops] - csum[starts]) / (stops - starts)
        start_ticks = ticks[starts]
        stop_ticks = ticks[stops - 1] + 1
        return [
            Segment(track.source_id, track.entity_id, i, int(a), int(b), int(ta), int(tb), float(f))
            for i, (a, b, ta, tb, f) in enumerate(
                zip(starts.tolist(), stops.tolist(), start_ticks.tolist(), stop_ticks.tolist(), fractions.tolist(),
                    strict=True)
            )
        ]

    # -- identity ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "stride": self.stride, "unit": self.unit, "sample_hz": self.sample_hz}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segmenter:
        if not isinstance(data, Mapping):
            raise SegmenterError(f"segmenter: expected a mapping, got {type(data).__name__}")
        check_keys(data, _SEGMENTER_KEYS, where="segmenter", error=SegmenterError)
        missing = [k for k in ("window", "stride") if k not in data]
        if missing:
            raise SegmenterError(f"segmenter: missing key(s) {missing}")
        return cls(data["window"], data["stride"], unit=data.get("unit", "seconds"), sample_hz=data.get("sample_hz"))

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON form: part of the cache key of scored segments."""
        return canonical_digest(self.to_dict())
