"""A deterministic demo landing zone: a drone fleet's recordings, described by a universe.

``write_demo_landing_zone(root, seed=...)`` simulates a fleet flying at eight sites and
writes, under ``root``::

    schema.json                                   the demo schema (``DEMO_SCHEMA``)
    strategy.json                                 the demo curation strategy (``DEMO_STRATEGY``)
    universe.csv                                  one row per recording, index = its clips
    annotations/<site>/flight_NNN.json            COCO: one image per clip, events as categories
    recordings/<site>/flight_NNN.parquet          one row per (tick, drone), sorted by tick then drone
    recordings/<site>/flight_NNN.frames.npy       (seconds * drones, H, W, 3) uint8 top-down frames

Same seed, same bytes (every file). ``ParquetTickAdapter(<root>/recordings, demo_schema())``
reads every recording: its source ids are exactly the ``universe.csv`` ``source`` values,
and its ``frame`` media references (``<site>/flight_NNN.frames.npy#<k>``, relative to the
adapter root) decode with the ``npy_index`` provider.

The simulation
--------------
A recording lasts a whole number of seconds drawn from ``minutes``, at ``SAMPLE_HZ``, with
2-4 drones (the entities) from the site's fleet. Each drone idles on its pad, takes off
(vertical climb, then a smooth acceleration into a path made of sums of sinusoids), cruises
at its own altitude, and descends vertically to touchdown before the recording ends
(``airborne`` is False on the ground). Wind (the tick-level global) is the site's
prevailing wind plus smooth gusts; drones drift with the gusts. The battery drains with
speed and wind while airborne (a little on the ground); a drone whose battery falls below
``LOW_BATTERY`` returns to the ground early. The radio link drops now and then: for those
ticks the drone's rows are absent (a presence gap, never a row of zeros); every drone has
rows at the first and last tick, so the last tick is ``duration * SAMPLE_HZ - 1``.

Events are derived from that state and written to the ``events`` tag column on the tick
they happen (their onset), so they are rare per tick:

* ``near_miss``: two airborne drones come within ``NEAR_MISS_M`` of each other (tagged on
  both drones' rows). Besides chance encounters, about ``event_rate`` per clip, a
  conflict is staged by bending one drone's path smoothly towards another's.
* ``landing``: the touchdown tick.
* ``low_battery``: the first tick the battery is below ``LOW_BATTERY``.

A row's ``frame`` is a tiny top-down render of the site for that drone, one per drone per
second: the site's ground, the other drones (red), this drone (white, brighter when
higher; yellow on the ground), and a green battery bar on the bottom row. ``FRAME_SHAPE`` is
kept at 12 x 16 so that one frame per drone per second stays about 40 MB for the default
corpus (about 6.4 recorded hours, 125 drone flights).

Clips and annotations
---------------------
Clip ``k`` covers ticks ``[k * CLIP_SECONDS * SAMPLE_HZ, (k + 1) * CLIP_SECONDS * SAMPLE_HZ)``.
A recording of ``d`` seconds has ``d // CLIP_SECONDS`` clips (floor: a tail shorter than a
clip is not a sample, and events in it belong to no clip). Its COCO file has one image per
clip (``id`` = clip = universe ``index``, tagged with the recording's weather) and one
annotation per (clip, event kind) that occurs in the clip, with the category named after
the event tag (``near_miss``, ``landing``, ``low_battery``) and the ticks and drones
involved. The ``universe.csv`` groups recordings by site; ``operator`` is an extra column.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.sources.schema import Schema

SAMPLE_HZ = 10
CLIP_SECONDS = 10
FRAME_SHAPE = (12, 16, 3)  # per drone per second: ~40 MB at the default size
NEAR_MISS_M = 5.0
LOW_BATTERY = 0.15
EVENTS = ("near_miss", "landing", "low_battery")
CATEGORIES = ({"id": 1, "name": "near_miss"}, {"id": 2, "name": "landing"}, {"id": 3, "name": "low_battery"})
SITES = ("airfield_north", "airfield_south", "coastal_cliffs", "forest_edge", "harbour", "quarry", "vineyard",
         "wind_farm")
RECORDINGS_FOLDER = "recordings"
FLEET_SIZE = 8  # drones per site: drone_01 .. drone_08, each recording flies 2-4 of them

DEMO_SCHEMA: dict[str, Any] = {
    "sample_hz": SAMPLE_HZ,
    "time": "tick",
    "time_unit": "ticks",
    "entity": "drone",
    "fields": {
        "pos": {"dtype": "float32", "shape": [3]},      # m, site frame (x east, y north, z up)
        "vel": {"dtype": "float32", "shape": [3]},      # m/s
        "battery": {"dtype": "float32", "shape": []},   # state of charge, 0..1
        "airborne": {"dtype": "bool", "shape": []},
    },
    "globals": {"wind": {"dtype": "float32", "shape": [2]}},  # m/s (east, north)
    "media": {"frame": {"dtype": "uint8", "shape": list(FRAME_SHAPE), "provider": "npy_index"}},
    "tags": "events",
}

#: The strategy the demo job curates with (written as ``strategy.json``, next to
#: ``schema.json``): flights with near misses and low batteries first, busy flying next.
DEMO_STRATEGY: dict[str, Any] = {
    "name": "eventful-flights",
    "method": "inclusion",
    "priority": {"tag.near_miss": 2.0, "tag.low_battery": 1.0, "tag.landing": 0.5, "vel.std": 0.2, "wind.max": 0.1},
    "predicates": [{"feature": "airborne.frac", "op": ">=", "value": 0.5}],
    "tags": list(EVENTS),
    "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": 1.5},
}

#: What each timestep of the demo's training shards holds (written as ``output_spec.json``):
#: the drone's state, the camera frame, the wind, and the span's near-miss score.
DEMO_OUTPUT_SPEC: dict[str, Any] = {
    "shard_length": 64,
    "short_policy": "pad",
    "container": "npz",
    "presence_mask": True,
    "modalities": {
        "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
        "vel": {"dtype": "float32", "shape": [3], "source": "field:vel"},
        "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
        "wind": {"dtype": "float32", "shape": [2], "source": "field:wind"},
        "frame": {"dtype": "uint8", "shape": list(FRAME_SHAPE), "source": "media:frame"},
        "near_miss": {"dtype": "float32", "shape": [], "source": "segment:tag.near_miss"},
    },
}

#: The demo's quality gates (``kur-check``'s policy; the demo job writes it as the landing
#: zone's ``quality.json``, which the ``dataset_quality`` check evaluates): what a team would
#: ask of this corpus before training on it.
DEMO_QUALITY_POLICY: dict[str, Any] = {
    "min_sources": 30,
    "min_shards": 1000,
    "required_modalities": ["pos", "vel", "frame"],
    "verify": True,
    "min_budget_utilization": 0.99,
    "max_skipped_sources": 0,
}


def write_demo_quality_policy(root: str | os.PathLike[str]) -> str:
    """Write :data:`DEMO_QUALITY_POLICY` as ``<root>/quality.json``; returns its URL."""
    return storage.write_bytes_atomic(storage.join_url(os.fspath(root), "quality.json"),
                                      json.dumps(DEMO_QUALITY_POLICY, indent=1).encode())


# Site climate: prevailing wind speed (m/s), gust strength (m/s), wind direction (deg,
# where it blows towards), ground colour (RGB). Fixed per site, whatever the seed.
_SITE_CLIMATE = {
    "airfield_north": (4.0, 1.2, 200.0, (96, 128, 80)),
    "airfield_south": (3.0, 1.0, 30.0, (110, 140, 86)),
    "coastal_cliffs": (7.5, 3.0, 110.0, (70, 100, 140)),
    "forest_edge": (2.0, 0.8, 250.0, (40, 90, 45)),
    "harbour": (6.0, 2.2, 80.0, (60, 80, 120)),
    "quarry": (3.5, 2.8, 160.0, (140, 130, 110)),
    "vineyard": (2.5, 1.0, 300.0, (120, 110, 60)),
    "wind_farm": (9.0, 3.5, 45.0, (130, 150, 90)),
}
_SITE_HALF_EXTENT_M = 160.0  # a frame shows x, y in [-160, 160] m
_CLIMB_S = 8.0
_DESCENT_S = 10.0


@dataclass(frozen=True)
class DemoLandingZone:
    """What ``write_demo_landing_zone`` wrote.

    ``events`` counts tagged rows per event tag (a near miss tags both drones' rows);
    ``entities`` counts (recording, drone) pairs; ``hours`` is the recorded wall time;
    ``bytes`` is the size of every file written."""

    root: str
    universe_csv: str
    recordings: int
    clips: int
    sites: int
    recordings_root: str = ""
    schema: Schema | None = None
    hours: float = 0.0
    entities: int = 0
    events: Mapping[str, int] = field(default_factory=dict)
    rows: int = 0
    bytes: int = 0


def demo_schema() -> Schema:
    """The demo recordings' :class:`~kuration.sources.schema.Schema` (built from ``DEMO_SCHEMA``)."""
    return Schema.from_dict(copy.deepcopy(DEMO_SCHEMA))


def write_demo_landing_zone(
    root: str | os.PathLike[str],
    *,
    seed: int = 7,
    recordings_per_site: int = 5,
    event_rate: float = 0.04,
    minutes: tuple[float, float] = (3, 15),
    sites: int | None = None,
) -> DemoLandingZone:
    """Simulate the demo fleet and write its landing zone under ``root`` (path or fsspec URL).

    ``recordings_per_site`` recordings at each of the first ``sites`` sites (all eight by
    default), each lasting a whole number of seconds in ``minutes`` (inclusive).
    ``event_rate`` is the rate of staged near-miss conflicts per clip. Recording ``n`` of a
    site depends only on ``(seed, site, n)`` and these options, so a larger corpus extends a
    smaller one.
    """
    root = os.fspath(root)
    lo, hi = (float(m) for m in minutes)
    if not 1.0 <= lo <= hi:
        raise ValueError(f"minutes: expected (lo, hi) with 1 <= lo <= hi, got {minutes!r}")
    if recordings_per_site < 1:
        raise ValueError(f"recordings_per_site: must be >= 1, got {recordings_per_site}")
    if not 0.0 <= event_rate <= 1.0:
        raise ValueError(f"event_rate: must be in [0, 1], got {event_rate}")
    if sites is not None and not 1 <= sites <= len(SITES):
        raise ValueError(f"sites: must be between 1 and {len(SITES)}, got {sites}")
    site_names = SITES if sites is None else SITES[:sites]

    rec_root = storage.join_url(root, RECORDINGS_FOLDER)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["source", "index", "materialized_path", "annotation", "format", "group", "operator"])
    written = 0
    clips = rows = entities = seconds = 0
    events = {name: 0 for name in EVENTS}
    for name, doc in (("schema.json", DEMO_SCHEMA), ("strategy.json", DEMO_STRATEGY),
                      ("output_spec.json", DEMO_OUTPUT_SPEC)):
        data = json.dumps(doc, indent=1).encode()
        storage.write_bytes_atomic(storage.join_url(root, name), data)
        written += len(data)
    for site_index, site in enumerate(site_names):
        background = _site_background(site_index, site)
        for n in range(recordings_per_site):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, site_index, n])))
            rec_id = f"{site}/flight_{n + 1:03d}"
            rec = _simulate(rng, site, lo, hi, event_rate)
            frames = _render_frames(rec, background)
            table = _table(rec, f"{rec_id}.frames.npy")
            parquet_bytes = _parquet_bytes(table)
            frames_bytes = _npy_bytes(frames)
            storage.write_bytes_atomic(storage.join_url(rec_root, *f"{rec_id}.parquet".split("/")), parquet_bytes)
            storage.write_bytes_atomic(storage.join_url(rec_root, *f"{rec_id}.frames.npy".split("/")), frames_bytes)
            n_clips = rec.duration_s // CLIP_SECONDS
            ann_rel = f"annotations/{rec_id}.json"
            ann_bytes = json.dumps(_coco(rec, rec_id, n_clips), indent=1).encode()
            storage.write_bytes_atomic(storage.join_url(root, *ann_rel.split("/")), ann_bytes)
            writer.writerow([
                f"{rec_id}.parquet", f"0-{n_clips - 1}", f"{RECORDINGS_FOLDER}/{rec_id}.parquet", ann_rel, "parquet",
                site, rec.operator,
            ])
            written += len(parquet_bytes) + len(frames_bytes) + len(ann_bytes)
            clips += n_clips
            rows += table.num_rows
            entities += rec.n_drones
            seconds += rec.duration_s
            for tick, d, name in rec.events:
                if rec.present[tick, d]:
                    events[name] += 1
    csv_bytes = out.getvalue().encode()
    csv_url = storage.write_bytes_atomic(storage.join_url(root, "universe.csv"), csv_bytes)
    written += len(csv_bytes)
    recordings = len(site_names) * recordings_per_site
    return DemoLandingZone(
        root, csv_url, recordings, clips, len(site_names), rec_root, demo_schema(), round(seconds / 3600.0, 4),
        entities, events, rows, written,
    )


# --------------------------------------------------------------------------- simulation


@dataclass
class _Recording:
    site: str
    operator: str
    weather: str
    duration_s: int
    drones: list[str]
    pos: np.ndarray        # (T, n, 3) float64
    vel: np.ndarray        # (T, n, 3)
    battery: np.ndarray    # (T, n)
    airborne: np.ndarray   # (T, n) bool
    wind: np.ndarray       # (T, 2)
    present: np.ndarray    # (T, n) bool: the link was up, the row exists
    events: list[tuple[int, int, str]]  # (tick, drone index, tag), sorted

    @property
    def n_drones(self) -> int:
        return len(self.drones)


@dataclass
class _Flight:
    pad: np.ndarray        # (2,) takeoff spot
    t_off: int             # last tick on the ground before the climb
    t_land: int            # touchdown tick
    altitude: float        # cruise altitude, m
    amp: np.ndarray        # (2, K) sinusoid amplitudes, m
    omega: np.ndarray      # (2, K) rad/s
    phase: np.ndarray      # (2, K)
    bob: tuple[float, float, float]  # altitude wobble: amplitude m, rad/s, phase
    charge: float          # battery at the start
    capacity: float        # relative capacity (drain divisor)


def _grid(values: np.ndarray, bits: int) -> np.ndarray:
    """Snap to multiples of ``2**-bits`` (a sensor's resolution). The values are then exact
    in float32, so events derived here hold on the stored data, and their zero low mantissa
    bits compress well."""
    return np.rint(values * (1 << bits)) / (1 << bits)


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _smooth_noise(rng: np.random.Generator, n: int, tau_ticks: float, channels: int) -> np.ndarray:
    """Unit-variance noise, low-passed twice by an exponential kernel of ``tau_ticks``."""
    k = np.exp(-np.arange(int(5 * tau_ticks) + 1) / tau_ticks)
    k /= k.sum()
    pad = 2 * (len(k) - 1)
    white = rng.standard_normal((channels, n + pad))
    out = np.empty((n, channels))
    for c in range(channels):
        once = np.convolve(white[c], k, mode="valid")
        out[:, c] = np.convolve(once, k, mode="valid")
    out -= out.mean(axis=0)
    std = out.std(axis=0)
    return out / np.where(std > 0, std, 1.0)


@dataclass(frozen=True)
class _Weather:
    """A recording's wind (``(T, 2)`` m/s, gridded), its smooth unit gusts and their
    strength, and the weather label its COCO images are tagged with."""

    wind: np.ndarray
    gusts: np.ndarray
    gust: float
    rain: bool
    label: str


@dataclass(frozen=True)
class _Timeline:
    """A recording's ticks, and the drift every airborne drone takes from the gusts."""

    ticks: np.ndarray
    drift: np.ndarray  # (T, 2) m


def _simulate(rng: np.random.Generator, site: str, lo_min: float, hi_min: float, event_rate: float) -> _Recording:
    """One recording of ``site``: every draw from ``rng`` in a fixed order (duration, fleet,
    operator, weather, flight plans, staged conflicts, link loss), so a seed gives the
    same recording on every machine."""
    duration_s = int(rng.integers(round(lo_min * 60), round(hi_min * 60) + 1))
    T = duration_s * SAMPLE_HZ
    n = int(rng.integers(2, 5))
    fleet = rng.choice(FLEET_SIZE, size=n, replace=False)
    drones = [f"drone_{i + 1:02d}" for i in sorted(fleet.tolist())]
    operator = f"operator_{int(rng.integers(1, 4))}"
    weather = _draw_weather(rng, site, T)
    flights = _plan_flights(rng, n, duration_s, rain=weather.rain)
    # Tracking error: the drones give a little with each gust.
    timeline = _Timeline(np.arange(T), 0.35 * weather.gust * weather.gusts)
    bumps = np.zeros((n, T, 3))
    states = [_fly(f, bumps[d], timeline) for d, f in enumerate(flights)]
    _stage_conflicts(rng, flights, states, bumps, timeline, expected=event_rate * (duration_s // CLIP_SECONDS))
    battery, events = _fly_on_battery(flights, states, bumps, timeline, weather.wind)

    exact = np.stack([s[0] for s in states], axis=1)
    pos = _grid(exact, 8)
    airborne = np.stack([s[1] for s in states], axis=1)
    vel = _grid(np.gradient(exact, axis=0) * SAMPLE_HZ, 8)
    events = sorted(set(events + _near_misses(pos, airborne)))
    present = _link_loss(rng, duration_s, n, events)
    return _Recording(site, operator, weather.label, duration_s, drones, pos, vel, battery, airborne, weather.wind,
                      present, events)


def _draw_weather(rng: np.random.Generator, site: str, T: int) -> _Weather:
    """The site's prevailing wind, veering slowly, plus smooth gusts; and rain, now and then."""
    hz = SAMPLE_HZ
    t = np.arange(T)
    speed0, gust0, heading0, _ = _SITE_CLIMATE[site]
    speed = speed0 * float(rng.lognormal(0.0, 0.25))
    gust = gust0 * float(rng.lognormal(0.0, 0.2))
    heading = math.radians(heading0 + float(rng.normal(0.0, 20.0)))
    veer = heading + 0.3 * np.sin(2 * np.pi * t / (600.0 * hz) + float(rng.uniform(0, 2 * np.pi)))
    gusts = _smooth_noise(rng, T, 3.0 * hz, 2)
    wind = _grid(np.stack([speed * np.cos(veer), speed * np.sin(veer)], axis=1) + gust * gusts, 8)
    rain = bool(rng.random() < 0.15)
    label = "rain" if rain else ("calm" if speed < 3.0 and gust < 1.5 else ("gusty" if gust >= 2.0 else "windy"))
    return _Weather(wind, gusts, gust, rain, label)


def _plan_flights(rng: np.random.Generator, n: int, duration_s: int, *, rain: bool) -> list[_Flight]:
    """``n`` drones side by side on a row of pads, each with its own takeoff, landing,
    altitude, path, charge and battery capacity (smaller in the rain)."""
    hz = SAMPLE_HZ
    T = duration_s * hz
    margin = min(30.0, 0.1 * duration_s)
    flights = []
    pad_row = rng.uniform(-40.0, 40.0, size=2)
    for d in range(n):
        k = 3
        flights.append(_Flight(
            pad=pad_row + np.array([10.0 * d, 0.0]),
            t_off=int(rng.uniform(1.0, max(2.0, margin)) * hz),
            t_land=T - int(rng.uniform(2.0, max(3.0, margin)) * hz),
            altitude=float(rng.uniform(20.0, 45.0)),
            amp=rng.uniform([60.0, 25.0, 6.0], [90.0, 40.0, 12.0], size=(2, k)),
            omega=2 * np.pi / rng.uniform([150.0, 45.0, 15.0], [300.0, 90.0, 30.0], size=(2, k)),
            phase=rng.uniform(0.0, 2 * np.pi, size=(2, k)),
            bob=(float(rng.uniform(1.0, 4.0)), 2 * np.pi / float(rng.uniform(20.0, 60.0)),
                 float(rng.uniform(0, 2 * np.pi))),
            charge=float(rng.uniform(0.45, 1.0)),
            capacity=float(rng.uniform(0.8, 1.15)) * (0.9 if rain else 1.0),
        ))
    return flights


def _fly(f: _Flight, bump: np.ndarray, timeline: _Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One drone's flight: its position ``(T, 3)``, whether it is airborne, and how far into
    its cruise it is (0 on the ground, 1 cruising). ``bump`` bends the path while cruising."""
    hz = SAMPLE_HZ
    t = timeline.ticks
    climb, descent = _CLIMB_S * hz, _DESCENT_S * hz
    vertical = _smoothstep((t - f.t_off) / climb) * _smoothstep((f.t_land - t) / descent)
    cruise = _smoothstep((t - f.t_off - 0.5 * climb) / climb) * _smoothstep((f.t_land - descent - t) / climb)
    tau = np.cumsum(cruise) / hz  # seconds of "cruise time": the path slows in and out smoothly
    path = (f.amp[:, :, None] * np.sin(f.omega[:, :, None] * tau + f.phase[:, :, None])).sum(axis=1).T
    path0 = (f.amp * np.sin(f.phase)).sum(axis=1)
    pos = np.empty((len(t), 3))
    pos[:, :2] = f.pad + path - path0 + timeline.drift * vertical[:, None] + bump[:, :2] * cruise[:, None]
    wobble = f.bob[0] * np.sin(f.bob[1] * tau + f.bob[2])
    pos[:, 2] = vertical * (f.altitude + wobble) + bump[:, 2] * cruise
    return pos, vertical > 0, cruise


def _stage_conflicts(rng: np.random.Generator, flights: list[_Flight], states: list, bumps: np.ndarray,
                     timeline: _Timeline, *, expected: float) -> None:
    """Staged conflicts, about ``expected`` of them: bend one drone's path smoothly towards
    another's at a moment when both cruise and are already within 80 m of each other.
    Updates ``bumps`` and ``states`` in place."""
    t = timeline.ticks
    T = len(t)
    n = len(flights)
    sigma = 20.0 * SAMPLE_HZ
    window = int(3 * sigma)
    for _ in range(int(rng.poisson(expected))):
        a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
        both = (states[a][2] >= 1.0) & (states[b][2] >= 1.0)
        csum = np.concatenate([[0], np.cumsum(both)])
        inner = np.arange(window, T - window)  # ticks whose whole +-3 sigma window both cruise
        steady = np.zeros(T, dtype=bool)
        steady[inner] = csum[inner + window + 1] - csum[inner - window] == 2 * window + 1
        horizontal = np.linalg.norm(states[a][0][:, :2] - states[b][0][:, :2], axis=1)
        candidates = np.flatnonzero(steady & (horizontal < 80.0))
        if not len(candidates):
            continue
        t_star = int(candidates[int(rng.integers(len(candidates)))])
        direction = rng.normal(size=3)
        direction[2] *= 0.3
        offset = direction / np.linalg.norm(direction) * float(rng.uniform(1.0, 3.5))
        delta = states[a][0][t_star] + offset - states[b][0][t_star]
        bumps[b] += delta[None, :] * np.exp(-0.5 * ((t - t_star) / sigma) ** 2)[:, None]
        states[b] = _fly(flights[b], bumps[b], timeline)


def _battery_level(f: _Flight, pos: np.ndarray, airborne: np.ndarray, wind: np.ndarray) -> np.ndarray:
    """State of charge per tick: drains with speed, climb and wind while airborne, a little on the ground."""
    vel = np.gradient(pos, axis=0) * SAMPLE_HZ
    load = (1.0 + 0.004 * (vel ** 2).sum(axis=1) + 0.005 * (wind ** 2).sum(axis=1)
            + 0.05 * np.clip(vel[:, 2], 0, None))
    drain = np.where(airborne, load / 1500.0, 1.0 / 30000.0) / f.capacity  # per second
    return _grid(np.clip(f.charge - np.cumsum(drain) / SAMPLE_HZ, 0.0, 1.0), 16)


def _fly_on_battery(flights: list[_Flight], states: list, bumps: np.ndarray, timeline: _Timeline,
                    wind: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, str]]]:
    """Batteries ``(T, n)`` and the ``low_battery`` and ``landing`` events. A drone whose
    battery runs low before its planned descent comes down early (the path up to that tick
    is unchanged, so the crossing tick stays where it was); ``flights`` and ``states`` are
    updated in place."""
    T = len(timeline.ticks)
    events: list[tuple[int, int, str]] = []
    battery = np.empty((T, len(flights)))
    for d, f in enumerate(flights):
        pos, airborne, _ = states[d]
        level = _battery_level(f, pos, airborne, wind)
        low = np.flatnonzero(level < LOW_BATTERY)
        if len(low):
            t_low = int(low[0])
            earliest = t_low + int((_CLIMB_S + _DESCENT_S) * SAMPLE_HZ) + 1
            if airborne[t_low] and earliest < f.t_land:
                f.t_land = earliest
                states[d] = _fly(f, bumps[d], timeline)
                pos, airborne, _ = states[d]
                level = _battery_level(f, pos, airborne, wind)
            events.append((t_low, d, "low_battery"))
        battery[:, d] = level
        if f.t_land < T:
            events.append((f.t_land, d, "landing"))
    return battery, events


def _near_misses(pos: np.ndarray, airborne: np.ndarray) -> list[tuple[int, int, str]]:
    """Onsets of two airborne drones closer than ``NEAR_MISS_M`` (a new onset needs 5 s
    apart), tagged on both drones."""
    n = pos.shape[1]
    events: list[tuple[int, int, str]] = []
    for a in range(n):
        for b in range(a + 1, n):
            close = airborne[:, a] & airborne[:, b] & (np.linalg.norm(pos[:, a] - pos[:, b], axis=1) < NEAR_MISS_M)
            ticks = np.flatnonzero(close)
            if not len(ticks):
                continue
            onsets = ticks[np.concatenate([[True], np.diff(ticks) > 5 * SAMPLE_HZ])]
            for tick in onsets.tolist():
                events += [(tick, a, "near_miss"), (tick, b, "near_miss")]
    return events


def _link_loss(rng: np.random.Generator, duration_s: int, n: int, events: list[tuple[int, int, str]]) -> np.ndarray:
    """Which rows exist ``(T, n)``: the link drops now and then, but never at an event, the
    first or the last tick (every drone is seen on the ground at both ends), nor for every
    drone at once."""
    T = duration_s * SAMPLE_HZ
    present = np.ones((T, n), dtype=bool)
    for d in range(n):
        for _ in range(int(rng.poisson(duration_s / 150.0))):
            start = int(rng.integers(T))
            present[start:start + int(rng.integers(3, 60)), d] = False
    for tick, d, _ in events:
        present[tick, d] = True
    present[[0, T - 1]] = True
    nobody = ~present.any(axis=1)
    present[nobody, 0] = True
    return present


# --------------------------------------------------------------------------- rendering


def _site_background(site_index: int, site: str) -> np.ndarray:
    h, w, _ = FRAME_SHAPE
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0xD3E0, site_index])))
    coarse = rng.normal(0.0, 10.0, size=(4, 4, 3))
    texture = np.kron(coarse, np.ones((math.ceil(h / 4), math.ceil(w / 4), 1)))[:h, :w]
    base = np.asarray(_SITE_CLIMATE[site][3], dtype=np.float64)
    return np.clip(base + texture + rng.normal(0.0, 4.0, size=(h, w, 3)), 0, 255).astype(np.uint8)


def _render_frames(rec: _Recording, background: np.ndarray) -> np.ndarray:
    """One frame per (second, drone), flattened to ``(seconds * drones, H, W, 3)``:
    frame ``s * drones + d`` is drone ``d``'s view at tick ``s * SAMPLE_HZ``."""
    h, w, _ = FRAME_SHAPE
    n, secs = rec.n_drones, rec.duration_s
    at = np.arange(secs) * SAMPLE_HZ
    pos, airborne, battery = rec.pos[at], rec.airborne[at], rec.battery[at]
    scale = 2.0 * _SITE_HALF_EXTENT_M
    col = np.clip(((pos[..., 0] + _SITE_HALF_EXTENT_M) / scale * w).astype(np.int64), 0, w - 1)
    row = np.clip(((_SITE_HALF_EXTENT_M - pos[..., 1]) / scale * (h - 1)).astype(np.int64), 0, h - 2)
    frames = np.broadcast_to(background, (secs, n, h, w, 3)).copy()
    s = np.arange(secs)
    other = np.where(airborne[..., None], np.array([255, 40, 40]), np.array([140, 40, 40])).astype(np.uint8)
    lift = np.clip(pos[..., 2] / 45.0, 0.0, 1.0)
    level = (150 + 105 * lift).astype(np.uint8)
    mine = np.where(airborne[..., None], level[..., None], np.array([220, 200, 60])).astype(np.uint8)
    for viewer in range(n):
        for j in range(n):
            if j != viewer:
                frames[s, viewer, row[:, j], col[:, j]] = other[:, j]
        frames[s, viewer, row[:, viewer], col[:, viewer]] = mine[:, viewer]
    filled = np.arange(w)[None, None, :] < np.rint(battery * w)[..., None]
    frames[:, :, h - 1] = np.where(filled[..., None], np.array([40, 220, 40], np.uint8),
                                   np.array([20, 20, 20], np.uint8))
    return frames.reshape(secs * n, h, w, 3)


# --------------------------------------------------------------------------- writing


def _table(rec: _Recording, frames_ref: str) -> pa.Table:
    T, n = rec.present.shape
    keep = rec.present.reshape(-1)  # tick-major: rows sorted by tick, then drone
    tick = np.repeat(np.arange(T, dtype=np.int64), n)[keep]
    drone_idx = np.tile(np.arange(n), T)[keep]
    frame_idx = (tick // SAMPLE_HZ) * n + drone_idx

    def vectors(values: np.ndarray, size: int) -> pa.Array:
        flat = values.reshape(T * n, size)[keep].astype(np.float32).reshape(-1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), size)

    row_of = np.cumsum(keep) - 1  # flat (tick, drone) slot -> row
    tags: dict[int, list[str]] = {}
    for tk, d, name in rec.events:
        if rec.present[tk, d]:
            tags.setdefault(int(row_of[tk * n + d]), []).append(name)
    counts = np.zeros(len(tick), dtype=np.int32)
    for r, names in tags.items():
        counts[r] = len(names)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = [name for r in sorted(tags) for name in tags[r]]
    drone_names = pa.array(rec.drones, pa.string())
    return pa.table({
        "tick": pa.array(tick, pa.int64()),
        "drone": pa.DictionaryArray.from_arrays(pa.array(drone_idx.astype(np.int32)), drone_names).cast(pa.string()),
        "pos": vectors(rec.pos, 3),
        "vel": vectors(rec.vel, 3),
        "battery": pa.array(rec.battery.reshape(-1)[keep].astype(np.float32)),
        "airborne": pa.array(rec.airborne.reshape(-1)[keep]),
        "wind": pa.FixedSizeListArray.from_arrays(
            pa.array(rec.wind[tick].astype(np.float32).reshape(-1), pa.float32()), 2),
        "frame": pa.array([f"{frames_ref}#{k}" for k in frame_idx.tolist()], pa.string()),
        "events": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.string())),
    })


_FLOAT_LEAVES = ["pos.list.element", "vel.list.element", "battery", "wind.list.element"]


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    # Floats byte-stream-split without dictionaries compress about twice as well as the
    # defaults; nothing time-dependent goes into the file, so the bytes are reproducible.
    pq.write_table(table, sink, compression="zstd", compression_level=9, use_dictionary=["drone", "frame"],
                   use_byte_stream_split=_FLOAT_LEAVES, write_statistics=True, store_schema=True)
    return sink.getvalue().to_pybytes()


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def _coco(rec: _Recording, rec_id: str, n_clips: int) -> dict[str, Any]:
    clip_ticks = CLIP_SECONDS * SAMPLE_HZ
    images = [{"id": clip, "file_name": f"{rec_id}#{clip}", "tags": [rec.weather]} for clip in range(n_clips)]
    by_clip: dict[tuple[int, str], tuple[list[int], set[str]]] = {}
    for tick, d, name in rec.events:
        clip = tick // clip_ticks
        if clip < n_clips and rec.present[tick, d]:
            ticks, drones = by_clip.setdefault((clip, name), ([], set()))
            if tick not in ticks:
                ticks.append(tick)
            drones.add(rec.drones[d])
    ids = {c["name"]: c["id"] for c in CATEGORIES}
    annotations = [
        {"id": i + 1, "image_id": clip, "category_id": ids[name], "ticks": sorted(ticks), "drones": sorted(drones)}
        for i, ((clip, name), (ticks, drones)) in enumerate(sorted(by_clip.items(),
                                                                   key=lambda kv: (kv[0][0], ids[kv[0][1]])))
    ]
    return {"images": images, "annotations": annotations, "categories": [dict(c) for c in CATEGORIES]}
