"""A landing zone shaped unlike the demo, generated in the test: a delivery fleet's sessions.

``write_fleet_landing_zone(tmp_path / "landing", plugins=tmp_path / "plugins")`` writes::

    landing/
      curation.json       recordings "sessions", media_root ".", the plugin, small budgets
      schema.json         4 Hz, time in seconds ("t"), entity "track_id" (ints), vehicle fields
      strategy.json       the plugin's feature and the "cut_in" / "hard_brake" tags weigh most
      output_spec.json    24-step parquet shards, tails kept (not padded)
      universe.csv        one row per session; group = scenario; source ids relative to sessions/
      sessions/<day>/<vehicle>.parquet        one row per (time, tracked road user)
      frames/<day>/<vehicle>.npz              camera crops: one array per track (``trk_<id>``)
      frames/<day>/<vehicle>_depth.npz        depth patches in uint16 millimetres, one array
    plugins/<module>.py   registers feature ``fn.<prefix>_reentries`` and media provider
                          ``<prefix>_depth_mm`` (the schema's ``depth`` column)

How it differs from :mod:`kuration.demo.corpus`: the recordings root is ``sessions/``, not
``recordings/``; media sit in ``frames/`` *beside* it, referenced relative to the landing
zone (hence ``"media_root": "."``); media are ``.npz`` archives, not ``.npy`` files; time is
in seconds, not ticks; entities are integer track ids, not strings; the sample rate, window,
stride, span and shard length are other numbers; one media column needs a plugin provider
and the strategy a plugin feature.

Each session's road users behave on purpose: track 1 is in view throughout; track 2 leaves
the view twice and comes back (absent rows in between: the plugin feature counts those
re-entries); track 3 is out of view for longer than a whole scoring window. The output
modalities keep the fleet's own names (``xyz``, ``velocity``, ``visibility``); curation.json's
``rollouts`` tells the rollout recipe ``kuration run`` ends with which is the position and
the state, and that there is no battery or frame payload.

Same arguments, same bytes. :func:`add_session` writes one more session and appends its
universe row, as a new day of a fleet's data would arrive. What a team changes later:
:func:`write_strategy` (a strategy change, e.g. :func:`reweighted_strategy`),
:func:`edit_plugin_feature` (the plugin feature's code) and :func:`bake_leaking_split` (a
hand-written ``splits.json`` that puts one scenario in two stages). :func:`fleet_on_an_instance`
sets a module up to curate the fleet on an instance of its own.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SAMPLE_HZ = 4
RECORDINGS = "sessions"
FRAMES = "frames"
CAMERA_SHAPE = (6, 8, 3)
DEPTH_SHAPE = (4, 5)
TAGS = ("cut_in", "hard_brake")
#: (day, vehicle, scenario, seconds): seven sessions, four scenarios (the universe's groups).
SESSIONS: tuple[tuple[str, str, str, int], ...] = (
    ("2024-03-04", "van_07", "urban_intersection", 80),
    ("2024-03-04", "truck_12", "highway_merge", 72),
    ("2024-03-05", "van_07", "depot_yard", 64),
    ("2024-03-05", "bus_03", "urban_intersection", 76),
    ("2024-03-06", "truck_12", "roundabout", 68),
    ("2024-03-06", "bus_03", "highway_merge", 84),
    ("2024-03-07", "van_09", "roundabout", 60),
)

SETTINGS: dict[str, Any] = {
    "recordings": RECORDINGS,
    "media_root": ".",
    "segment_window": 6,
    "segment_stride": 3,
    "workers": 2,
    # about a fifth of each split's pool: the fill ranks and cuts, and the check passes
    "budget": {"train_hours": 0.04, "val_hours": 0.012, "test_hours": 0.012, "span_seconds": 12},
    "split": {"strategy": "stratified", "seed": 3, "val_ratio": 0.25, "test_ratio": 0.25, "group_by": "group"},
    "rollouts": {"position": "xyz", "battery": None, "state_modalities": ["xyz", "velocity", "visibility"],
                 "payload_modality": None, "site_half_extent_m": 500},
}


@dataclass(frozen=True)
class FleetLandingZone:
    """What :func:`write_fleet_landing_zone` wrote: the landing zone, the plugin folder (to
    put on ``sys.path`` / ``PYTHONPATH``), the plugin module and the names it registers."""

    root: Path
    plugin_folder: Path
    plugin_module: str
    feature: str
    provider: str

    @property
    def feature_key(self) -> str:
        return f"fn.{self.feature}"

    @property
    def universe_csv(self) -> Path:
        return self.root / "universe.csv"

    def source_ids(self) -> list[str]:
        """Every universe source id, in file order."""
        with self.universe_csv.open(newline="") as handle:
            return [row["source"] for row in csv.DictReader(handle)]

    def groups(self) -> dict[str, str]:
        """Source id -> its scenario (universe group)."""
        with self.universe_csv.open(newline="") as handle:
            return {row["source"]: row["group"] for row in csv.DictReader(handle)}


def schema(provider: str) -> dict[str, Any]:
    return {
        "sample_hz": SAMPLE_HZ,
        "time": "t",
        "time_unit": "seconds",
        "entity": "track_id",
        "fields": {
            "xyz": {"dtype": "float32", "shape": [3]},        # m, the session's local frame
            "velocity": {"dtype": "float32", "shape": [3]},   # m/s
            "visibility": {"dtype": "float32", "shape": []},  # share of the road user in view, 0..1
        },
        "globals": {"ego_speed": {"dtype": "float32", "shape": []}},
        "media": {
            "camera": {"dtype": "uint8", "shape": list(CAMERA_SHAPE), "provider": "npy_index"},
            "depth": {"dtype": "float32", "shape": list(DEPTH_SHAPE), "provider": provider},
        },
        "tags": "labels",
    }


def strategy(feature_key: str) -> dict[str, Any]:
    return {
        "name": "interactions-first",
        "method": "inclusion",
        "priority": {feature_key: 1.5, "tag.cut_in": 2.0, "tag.hard_brake": 1.0, "velocity.std": 0.3,
                     "ego_speed.mean": 0.05},
        "predicates": [{"feature": "visibility.mean", "op": ">", "value": 0.2}],
        "tags": list(TAGS),
        "selection": {"tag_coverage": False, "max_group_overshoot": 2.0},
    }


OUTPUT_SPEC: dict[str, Any] = {
    "shard_length": 24,
    "short_policy": "keep",
    "container": "parquet",
    "presence_mask": True,
    "modalities": {
        "xyz": {"dtype": "float32", "shape": [3], "source": "field:xyz"},
        "velocity": {"dtype": "float32", "shape": [3], "source": "field:velocity"},
        "visibility": {"dtype": "float32", "shape": [], "source": "field:visibility"},
        "ego_speed": {"dtype": "float32", "shape": [], "source": "field:ego_speed"},
        "camera": {"dtype": "uint8", "shape": list(CAMERA_SHAPE), "source": "media:camera"},
        "depth": {"dtype": "float32", "shape": list(DEPTH_SHAPE), "source": "media:depth"},
        "cut_in": {"dtype": "float32", "shape": [], "source": "segment:tag.cut_in"},
    },
}


def reweighted_strategy(feature_key: str) -> dict[str, Any]:
    """:func:`strategy` changed the way a team changes it: other weights (the road users'
    motion first, the ego speed against), a stricter predicate, another name; the same
    features."""
    changed = strategy(feature_key)
    changed.update(name="motion-first", priority={feature_key: 0.1, "tag.cut_in": 0.5, "tag.hard_brake": 0.2,
                                                  "velocity.std": 4.0, "ego_speed.mean": -0.5})
    changed["predicates"] = [{"feature": "visibility.mean", "op": ">", "value": 0.5}]
    return changed


def write_strategy(zone: FleetLandingZone, doc: dict[str, Any]) -> None:
    _write_json(zone.root / "strategy.json", doc)


def plugin_source(feature: str, provider: str, *, reentry_weight: int = 1) -> str:
    """The plugin module: a feature counting re-entries into view (``reentry_weight`` times
    each: another definition of the same feature), and a provider decoding depth patches
    stored as uint16 millimetres into float32 metres."""
    counted = "float((np.diff(present) == 1).sum())"
    if reentry_weight != 1:
        counted = f"{reentry_weight}.0 * {counted}"
    return textwrap.dedent(f'''\
        """Fleet plugin: feature fn.{feature} and media provider {provider}."""
        import dataclasses

        import numpy as np

        from kuration.scoring.features import register_feature
        from kuration.sources.media import MediaError, NpyIndexProvider, register_media_provider


        @register_feature({feature!r})
        def reentries(track, segment) -> float:
            """How often the road user comes back into view within the segment."""
            present = track.present[segment.start:segment.stop].astype(np.int8)
            return {counted}


        class MillimetreDepth:
            """npz depth patches in uint16 millimetres, decoded to float32 metres."""

            def dependencies(self, refs, spec, *, root):
                return NpyIndexProvider().dependencies(refs, spec, root=root)

            def decode(self, refs, spec, *, root, source_id):
                if spec.dtype != "float32":  # metres are float32: another dtype would round them away
                    at = next((i for i, ref in enumerate(refs) if ref is not None), None)
                    raise MediaError(f"{{source_id}}: media {{spec.name!r}}: reference {{refs[at]!r}} holds float32, "
                                     f"declared {{spec.dtype}}; declare the column float32", reference=at)
                stored = dataclasses.replace(spec, dtype="uint16")
                millimetres = NpyIndexProvider().decode(refs, stored, root=root, source_id=source_id)
                return millimetres.astype(np.float32) / np.float32(1000.0)


        register_media_provider({provider!r}, MillimetreDepth)
        ''')


def write_fleet_landing_zone(root: Path, *, plugins: Path, prefix: str = "fleet", seed: int = 11,
                             sessions: tuple[tuple[str, str, str, int], ...] = SESSIONS) -> FleetLandingZone:
    """Write the landing zone under ``root`` and its plugin module under ``plugins``.

    ``prefix`` starts the plugin module's, feature's and provider's names (one per test,
    so tests in one process do not share registrations)."""
    root.mkdir(parents=True, exist_ok=True)
    plugins.mkdir(parents=True, exist_ok=True)
    zone = FleetLandingZone(root, plugins, f"{prefix}_plugin", f"{prefix}_reentries", f"{prefix}_depth_mm")
    (plugins / f"{zone.plugin_module}.py").write_text(plugin_source(zone.feature, zone.provider))
    importlib.invalidate_caches()  # a finder may have cached the folder's listing before the module existed
    _write_json(root / "curation.json", {"plugins": [zone.plugin_module], **SETTINGS})
    _write_json(root / "schema.json", schema(zone.provider))
    _write_json(root / "strategy.json", strategy(zone.feature_key))
    _write_json(root / "output_spec.json", OUTPUT_SPEC)
    zone.universe_csv.write_text("source,index,group,vehicle\n")
    for number, (day, vehicle, scenario, seconds) in enumerate(sessions):
        add_session(zone, day, vehicle, scenario, seconds=seconds, seed=seed + number)
    return zone


def edit_plugin_feature(zone: FleetLandingZone, reentry_weight: int) -> None:
    """Rewrite the plugin module with the feature counting each re-entry ``reentry_weight``
    times, as a team edits its feature: a process importing the plugin from now on gets the
    new definition."""
    (zone.plugin_folder / f"{zone.plugin_module}.py").write_text(
        plugin_source(zone.feature, zone.provider, reentry_weight=reentry_weight))
    importlib.invalidate_caches()


@dataclass(frozen=True)
class LeakingSplit:
    """:func:`bake_leaking_split`'s file: ``group`` has ``in_train`` in train and ``in_val`` in val."""

    path: Path
    group: str
    in_train: str
    in_val: str


def bake_leaking_split(zone: FleetLandingZone) -> LeakingSplit:
    """Write ``splits.json`` (selectors by file, the default ``no_split_overlap`` policy) and
    point curation.json's ``split.splits_json`` at it. Every session gets a stage; the first
    scenario with two sessions has one in train and the other in val, so the group leaks."""
    by_group: dict[str, list[str]] = {}
    for source, group in zone.groups().items():
        by_group.setdefault(group, []).append(source)
    group, (in_train, in_val, *rest) = next((g, s) for g, s in by_group.items() if len(s) >= 2)
    stages: dict[str, list[str]] = {"train": [in_train, *rest], "val": [in_val], "test": []}
    for other, sources in by_group.items():
        if other != group:
            stages["test" if not stages["test"] else "train"].extend(sources)
    path = zone.root / "splits.json"
    _write_json(path, {stage: [{"kind": "files", "paths": sorted(sources)}] for stage, sources in stages.items()})
    settings = json.loads((zone.root / "curation.json").read_text())
    settings["split"] = {"splits_json": path.name}
    _write_json(zone.root / "curation.json", settings)
    return LeakingSplit(path, group, in_train, in_val)


def add_session(zone: FleetLandingZone, day: str, vehicle: str, scenario: str, *, seconds: int = 64,
                seed: int = 101, interactions: int = 1, in_universe: bool = True) -> str:
    """Write session ``<day>/<vehicle>.parquet`` with its frames and depth archives and append
    its universe row (group ``scenario``, one sample per 8 s clip; none with
    ``in_universe=False``); returns its source id. ``interactions`` scales how many tagged
    events it holds (a busier session ranks higher)."""
    source_id = f"{day}/{vehicle}.parquet"
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, len(day), len(vehicle)])))
    frames_ref = f"{FRAMES}/{day}/{vehicle}.npz"
    depth_ref = f"{FRAMES}/{day}/{vehicle}_depth.npz"
    table, camera, depth = _session(rng, seconds, frames_ref, depth_ref, interactions)
    path = zone.root / RECORDINGS / day / f"{vehicle}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    frames = zone.root / FRAMES / day
    frames.mkdir(parents=True, exist_ok=True)
    np.savez(frames / f"{vehicle}.npz", **camera)
    np.savez(frames / f"{vehicle}_depth.npz", depth)
    if not in_universe:
        return source_id
    clips = seconds // 8
    with zone.universe_csv.open("a", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerow([source_id, f"0-{clips - 1}", scenario, vehicle])
    return source_id


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=1))


def _presence(ticks: int) -> dict[int, np.ndarray]:
    """Track id -> which ticks it is in view: 1 throughout; 2 leaves twice and comes back;
    3 is gone for a stretch longer than a scoring window (a whole window without it)."""
    always = np.ones(ticks, bool)
    flickers = always.copy()
    for start in (ticks // 5, ticks // 2):
        flickers[start:start + 3 * SAMPLE_HZ] = False
    away = always.copy()
    away[ticks // 3: ticks // 3 + 14 * SAMPLE_HZ] = False
    return {1: always, 2: flickers, 3: away}


def _session(rng: np.random.Generator, seconds: int, frames_ref: str, depth_ref: str,
             interactions: int) -> tuple[pa.Table, dict[str, np.ndarray], np.ndarray]:
    ticks = seconds * SAMPLE_HZ
    time = np.arange(ticks) / SAMPLE_HZ
    ego_speed = np.round(8.0 + 3.0 * np.sin(time / 9.0 + rng.uniform(0, 6)), 2).astype(np.float32)
    rows: list[tuple[int, int]] = []
    per_track: dict[int, dict[str, np.ndarray]] = {}
    for track, seen in _presence(ticks).items():
        heading = rng.uniform(0, 2 * np.pi)
        speed = rng.uniform(2.0, 12.0) + np.cumsum(rng.normal(0, 0.15, ticks))
        direction = np.stack([np.cos(heading), np.sin(heading), 0.0])
        velocity = (speed[:, None] * direction[None, :]).astype(np.float32)
        xyz = (np.cumsum(velocity, axis=0) / SAMPLE_HZ + rng.uniform(-30, 30, 3) * [1, 1, 0]).astype(np.float32)
        visibility = np.clip(0.6 + 0.3 * np.sin(time / 5.0 + track), 0.0, 1.0).astype(np.float32)
        per_track[track] = {"xyz": xyz, "velocity": velocity, "visibility": visibility, "seen": seen}
        rows.extend((tick, track) for tick in np.flatnonzero(seen).tolist())
    rows.sort()
    events = _events(rng, ticks, interactions)
    camera = {f"trk_{track}": rng.integers(0, 256, (ticks, *CAMERA_SHAPE), dtype=np.uint8) for track in per_track}
    depth = rng.integers(500, 60_000, (len(rows), *DEPTH_SHAPE), dtype=np.uint16)
    tick_of = np.array([tick for tick, _ in rows])
    track_of = np.array([track for _, track in rows])

    def take(name: str) -> np.ndarray:
        return np.stack([per_track[track][name][tick] for tick, track in rows])

    def vectors(values: np.ndarray) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float32()), 3)

    table = pa.table({
        "t": pa.array(time[tick_of]),
        "track_id": pa.array(track_of.astype(np.int64)),
        "xyz": vectors(take("xyz")),
        "velocity": vectors(take("velocity")),
        "visibility": pa.array(take("visibility")),
        "ego_speed": pa.array(ego_speed[tick_of]),
        "camera": pa.array([f"{frames_ref}#trk_{track}/{tick}" for tick, track in rows]),
        "depth": pa.array([f"{depth_ref}#{row}" for row in range(len(rows))]),
        "labels": pa.array([events.get((tick, track), []) for tick, track in rows], pa.list_(pa.string())),
        "driver_note": pa.array(["undeclared column, ignored"] * len(rows)),
    })
    return table, camera, depth


def _events(rng: np.random.Generator, ticks: int, interactions: int) -> dict[tuple[int, int], list[str]]:
    """A few tagged onsets on track 1 (always in view), ``interactions`` times as many for a busy session."""
    events: dict[tuple[int, int], list[str]] = {}
    for tag, count in (("cut_in", 2 * interactions), ("hard_brake", 3 * interactions)):
        for tick in rng.choice(ticks, size=min(count, ticks), replace=False).tolist():
            events.setdefault((int(tick), 1), []).append(tag)
    return events



@dataclass(frozen=True)
class FleetOnAnInstance:
    """:func:`fleet_on_an_instance`'s landing zone, storage root and instance home, and the
    process environment it patched (``env``, restored when the context ends)."""

    zone: FleetLandingZone
    storage: Path
    home: Path
    env: Any

    def run(self) -> tuple[int, str]:
        """``kuration run`` on the fleet in this process: its exit status and what it printed."""
        from argparse import Namespace

        from kuration_cli.graph_run import run_main

        lines: list[str] = []
        code = run_main(Namespace(landing=str(self.zone.root), storage=str(self.storage), config=None),
                        out=lines.append)
        return code, "\n".join(lines)

    def serve(self) -> None:
        """Point the resources at the fleet, as ``scripts/ui.sh`` does for the UI's code server and run workers."""
        self.env.setenv("KURATION_LANDING_ZONE", str(self.zone.root))
        self.env.setenv("KURATION_STORAGE_ROOT", str(self.storage))


def forget_fleet_plugin(zone: FleetLandingZone) -> None:
    """Undo what importing the fleet's plugin did in this process (its module, its feature and
    its media provider), so a later test sees the registries as the library left them."""
    from kuration.landing.plugins import forget_loaded_plugins
    from kuration.scoring.features import unregister_feature
    from kuration.sources.media import unregister_media_provider

    forget_loaded_plugins()
    sys.modules.pop(zone.plugin_module, None)
    unregister_feature(zone.feature)
    unregister_media_provider(zone.provider)


@contextmanager
def fleet_on_an_instance(tmp: Path, *, prefix: str) -> Iterator[FleetOnAnInstance]:
    """A fleet landing zone under ``tmp`` with its own Dagster instance (``DAGSTER_HOME``,
    telemetry off) and storage root, for a module's shared fixture: the plugin importable
    here and in every subprocess (``sys.path``, ``PYTHONPATH``), no plugins or settings file
    from the caller's environment; afterwards the environment is restored and the plugin's
    registrations are forgotten. ``prefix`` names the plugin (one per module)."""
    import pytest

    from kuration.landing.plugins import PLUGINS_ENV, forget_loaded_plugins

    zone = write_fleet_landing_zone(tmp / "landing", plugins=tmp / "plugins", prefix=prefix)
    home = tmp / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as env:
        env.syspath_prepend(str(zone.plugin_folder))
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(zone.plugin_folder), os.environ.get("PYTHONPATH")])))
        env.delenv(PLUGINS_ENV, raising=False)
        env.delenv("KURATION_CONFIG", raising=False)
        env.setenv("DAGSTER_HOME", str(home))
        forget_loaded_plugins()
        try:
            yield FleetOnAnInstance(zone, tmp / "storage", home, env)
        finally:
            forget_fleet_plugin(zone)
