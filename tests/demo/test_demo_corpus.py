"""The bundled demo corpus: deterministic, readable by the Parquet adapter, and consistent
between its recordings (ticks, tags, frames) and its universe (clips, COCO categories)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from kuration.demo.corpus import (
    CATEGORIES, CLIP_SECONDS, DEMO_SCHEMA, DEMO_STRATEGY, EVENTS, FRAME_SHAPE, LOW_BATTERY, NEAR_MISS_M, SAMPLE_HZ,
    SITES,
    DemoLandingZone, demo_schema, write_demo_landing_zone,
)
from kuration.sources.schema import Schema
from kuration.sources.parquet import ParquetTickAdapter
from kuration.splits import read_universe_csv
from kuration.sources.tracks import tracks_from_ticks

CLIP_TICKS = CLIP_SECONDS * SAMPLE_HZ


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[DemoLandingZone, ParquetTickAdapter, dict]:
    """16 recordings of 2-5 minutes, every source read once."""
    zone = write_demo_landing_zone(tmp_path_factory.mktemp("demo") / "landing", seed=11, recordings_per_site=2,
                                   minutes=(2, 5))
    adapter = ParquetTickAdapter(zone.recordings_root, demo_schema())
    ticks = {source: adapter.read_ticks(source) for source in adapter.list_sources()}
    return zone, adapter, ticks


def _universe_rows(zone: DemoLandingZone) -> list[dict[str, str]]:
    import csv

    with open(zone.universe_csv, newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------- determinism


def test_same_seed_same_bytes_different_seed_different_bytes(tmp_path):
    kwargs = dict(recordings_per_site=1, minutes=(1, 2))
    a = write_demo_landing_zone(tmp_path / "a", seed=5, **kwargs)
    b = write_demo_landing_zone(tmp_path / "b", seed=5, **kwargs)
    c = write_demo_landing_zone(tmp_path / "c", seed=6, **kwargs)
    da, db, dc = _digests(tmp_path / "a"), _digests(tmp_path / "b"), _digests(tmp_path / "c")
    # schema.json, strategy.json, output_spec.json, universe.csv; per recording: parquet, frames, COCO
    assert len(da) == 4 + 3 * len(SITES)
    assert da == db
    assert a.events == b.events and a.rows == b.rows and a.bytes == b.bytes
    assert set(dc) == set(da)  # same layout...
    differing = {name for name in da if da[name] != dc[name]}
    assert "universe.csv" in differing and any(n.endswith(".parquet") for n in differing)  # ...other data
    assert any(n.endswith(".frames.npy") for n in differing)
    assert c.rows != a.rows


def test_a_larger_corpus_extends_a_smaller_one(tmp_path):
    write_demo_landing_zone(tmp_path / "one", seed=2, recordings_per_site=1, minutes=(1, 2), sites=2)
    write_demo_landing_zone(tmp_path / "two", seed=2, recordings_per_site=2, minutes=(1, 2), sites=2)
    one, two = _digests(tmp_path / "one"), _digests(tmp_path / "two")
    recordings = {k: v for k, v in one.items() if k.startswith(("recordings/", "annotations/"))}
    assert len(recordings) == 2 * 3
    assert all(two[k] == v for k, v in recordings.items())


# ---------------------------------------------------------------- schema and layout


def test_schema_constant_function_and_file_agree(corpus):
    zone, _, _ = corpus
    schema = demo_schema()
    assert schema == Schema.from_dict(DEMO_SCHEMA) == zone.schema
    assert json.loads((Path(zone.root) / "schema.json").read_text()) == DEMO_SCHEMA
    assert schema.entity == "drone" and schema.tags == "events" and schema.sample_hz == SAMPLE_HZ
    assert {k: (v.dtype, v.shape) for k, v in schema.fields.items()} == {
        "pos": ("float32", (3,)), "vel": ("float32", (3,)), "battery": ("float32", ()), "airborne": ("bool", ()),
    }
    assert {k: (v.dtype, v.shape) for k, v in schema.globals.items()} == {"wind": ("float32", (2,))}
    frame = schema.media["frame"]
    assert (frame.dtype, frame.shape, frame.provider) == ("uint8", FRAME_SHAPE, "npy_index")


def test_demo_strategy_file_resolves_against_the_schema(corpus):
    Strategy = pytest.importorskip("kuration.scoring.strategy").Strategy
    zone, _, _ = corpus
    assert json.loads((Path(zone.root) / "strategy.json").read_text()) == DEMO_STRATEGY
    Strategy.from_dict(DEMO_STRATEGY).validate_against(demo_schema())


def test_universe_sources_are_the_adapter_sources(corpus):
    zone, adapter, ticks = corpus
    rows = _universe_rows(zone)
    assert [r["source"] for r in rows] == adapter.list_sources() == sorted(ticks)
    assert len(rows) == zone.recordings == 16
    for row in rows:
        assert row["materialized_path"] == f"recordings/{row['source']}"
        assert (Path(zone.root) / row["materialized_path"]).is_file()
        assert (Path(zone.root) / row["annotation"]).is_file()
        assert row["group"] == row["source"].split("/")[0] and row["format"] == "parquet"
        assert row["operator"].startswith("operator_")


def test_parquet_layout(corpus):
    import pyarrow as pa
    import pyarrow.parquet as pq

    zone, adapter, _ = corpus
    source = adapter.list_sources()[0]
    table = pq.read_table(Path(zone.recordings_root) / source)
    assert table.schema.field("pos").type == pa.list_(pa.float32(), 3)
    assert table.schema.field("vel").type == pa.list_(pa.float32(), 3)
    assert table.schema.field("wind").type == pa.list_(pa.float32(), 2)
    assert table.schema.field("events").type == pa.list_(pa.string())
    assert table.schema.field("tick").type == pa.int64() and table.schema.field("airborne").type == pa.bool_()
    keys = list(zip(table.column("tick").to_pylist(), table.column("drone").to_pylist(), strict=True))
    assert keys == sorted(keys) and len(set(keys)) == len(keys)  # by tick, then drone


# ---------------------------------------------------------------- recordings


def test_every_source_reads_into_two_to_four_tracks_with_gaps_somewhere(corpus):
    _, _, ticks = corpus
    schema = demo_schema()
    absent = 0
    for source, tk in ticks.items():
        tracks = tracks_from_ticks(schema, tk)
        assert 2 <= len(tracks) <= 4, source
        duration_ticks = int(tk.tick.max()) + 1
        for track in tracks:
            assert track.ticks[0] == 0 and track.ticks[-1] == duration_ticks - 1  # seen at both ends
            airborne = track.values["airborne"]
            assert not airborne[0] and not airborne[-1] and airborne.any()  # takes off, lands
            battery = track.values["battery"][track.present]
            assert ((battery >= 0) & (battery <= 1)).all() and battery[-1] < battery[0]  # drains
            pos = track.values["pos"][track.present]
            assert (pos[:, 2] >= 0).all() and pos[:, 2].max() > 15
            speed = np.linalg.norm(track.values["vel"][track.present], axis=1)
            assert speed.max() < 25  # a plausible drone
            absent += int((~track.present).sum())
        wind = tracks[0].values["wind"]
        assert np.isfinite(wind).all() and np.linalg.norm(wind, axis=1).max() < 40
    assert absent > 0  # link losses exist: presence masks have something to do


def test_paths_are_smooth(corpus):
    _, _, ticks = corpus
    tk = next(iter(ticks.values()))
    track = tracks_from_ticks(demo_schema(), tk)[0]
    pos, vel = track.values["pos"].astype(np.float64), track.values["vel"].astype(np.float64)
    both = track.present[1:] & track.present[:-1]
    step = np.linalg.norm(np.diff(pos, axis=0), axis=1)[both]
    assert step.max() < 25 / SAMPLE_HZ  # no teleports
    # velocity is the position's rate of change
    predicted = (pos[:-1] + vel[:-1] / SAMPLE_HZ)[both]
    assert np.abs(predicted - pos[1:][both]).max() < 0.2


def test_wind_depends_on_the_site(tmp_path):
    zone = write_demo_landing_zone(tmp_path / "z", seed=1, recordings_per_site=3, minutes=(1, 2))
    adapter = ParquetTickAdapter(zone.recordings_root, demo_schema())
    mean_speed: dict[str, list[float]] = {}
    for source in adapter.list_sources():
        wind = adapter.read_ticks(source).columns["wind"]
        mean_speed.setdefault(source.split("/")[0], []).append(float(np.linalg.norm(wind.mean(axis=0))))
    calm, windy = np.mean(mean_speed["forest_edge"]), np.mean(mean_speed["wind_farm"])
    assert windy > 2 * calm


def test_frames_decode_to_the_declared_shape(corpus):
    zone, adapter, ticks = corpus
    spec = demo_schema().media["frame"]
    for source, tk in list(ticks.items())[:4]:
        refs = tk.media["frame"]
        stem = source[: -len(".parquet")]
        assert all(r.startswith(f"{stem}.frames.npy#") for r in refs[:50])
        n_drones = len(set(tk.entity.tolist()))
        seconds = (int(tk.tick.max()) + 1) // SAMPLE_HZ
        stored = np.load(Path(zone.recordings_root) / f"{stem}.frames.npy", mmap_mode="r")
        assert stored.shape == (seconds * n_drones, *spec.shape)
        # one frame per drone per second
        assert len(set(refs.tolist())) == len({(t // SAMPLE_HZ, e)
                                               for t, e in zip(tk.tick.tolist(), tk.entity.tolist(), strict=True)})
        sample = refs[:: max(1, len(refs) // 64)]
        frames = adapter.decode_media("frame", list(sample), source_id=source)
        assert frames.shape == (len(sample), *spec.shape) and frames.dtype == np.dtype(spec.dtype)
        assert frames.std() > 0
        # the bottom row is the battery bar: its green length follows the battery
        rows = np.arange(0, len(refs), max(1, len(refs) // 64))
        battery = tk.columns["battery"][rows]
        frames = adapter.decode_media("frame", list(refs[rows]), source_id=source)
        bar = (frames[:, -1, :, 1] > 200).sum(axis=1)
        assert np.abs(bar - battery * spec.shape[1]).max() <= 2


# ---------------------------------------------------------------- events


def _tagged(ticks: dict) -> list[tuple[str, int, str, str]]:
    out = []
    for source, tk in ticks.items():
        for row, tags in enumerate(tk.tags):
            out.extend((source, row, tk.entity[row], tag) for tag in tags)
    return out


def test_events_are_rare_present_and_counted(corpus):
    zone, _, ticks = corpus
    tagged = _tagged(ticks)
    rows = sum(len(tk) for tk in ticks.values())
    counts = {name: sum(1 for t in tagged if t[3] == name) for name in EVENTS}
    assert dict(zone.events) == counts
    assert counts["near_miss"] > 0 and counts["landing"] > 0
    assert set(t[3] for t in tagged) <= set(EVENTS)
    assert len(tagged) / rows < 0.002  # rare per tick
    assert zone.rows == rows


def test_events_follow_from_the_state(corpus):
    _, _, ticks = corpus
    for source, tk in ticks.items():
        pos, airborne, battery = tk.columns["pos"].astype(np.float64), tk.columns["airborne"], tk.columns["battery"]
        for row, tags in enumerate(tk.tags):
            if not tags:
                continue
            drone, tick = tk.entity[row], tk.tick[row]
            mine = np.flatnonzero(tk.entity == drone)
            before = mine[mine < row]
            if "landing" in tags:
                assert not airborne[row] and airborne[before[-1]], (source, row)
            if "low_battery" in tags:
                assert battery[row] < LOW_BATTERY <= battery[before[-1]], (source, row)
            if "near_miss" in tags:
                same_tick = np.flatnonzero((tk.tick == tick) & (tk.entity != drone))
                distance = np.linalg.norm(pos[same_tick] - pos[row], axis=1)
                partners = same_tick[(distance < NEAR_MISS_M) & airborne[same_tick]]
                assert airborne[row] and len(partners), (source, row)
                assert any("near_miss" in tk.tags[p] for p in partners)


# ---------------------------------------------------------------- clips and annotations


def test_clip_count_is_whole_clips_of_the_duration(corpus):
    zone, _, ticks = corpus
    total = 0
    seconds = 0
    for row in _universe_rows(zone):
        duration_ticks = int(ticks[row["source"]].tick.max()) + 1
        assert duration_ticks % SAMPLE_HZ == 0
        n_clips = duration_ticks // CLIP_TICKS  # floor: a tail shorter than a clip is no sample
        assert row["index"] == f"0-{n_clips - 1}"
        coco = json.loads((Path(zone.root) / row["annotation"]).read_text())
        assert [img["id"] for img in coco["images"]] == list(range(n_clips))
        total += n_clips
        seconds += duration_ticks // SAMPLE_HZ
    assert total == zone.clips
    assert math.isclose(zone.hours, seconds / 3600, abs_tol=1e-4)


def test_universe_categories_and_tags_match_the_recordings(corpus):
    zone, _, ticks = corpus
    universe = read_universe_csv(zone.universe_csv)
    assert len(universe) == zone.clips
    refs = universe.refs(np.arange(len(universe)), attrs=frozenset({"tags", "category_ids"}))
    id_to_name = {c["id"]: c["name"] for c in CATEGORIES}
    expected: dict[tuple[str, int], set[str]] = {}
    for source, tk in ticks.items():
        for row, tags in enumerate(tk.tags):
            for tag in tags:
                expected.setdefault((source, int(tk.tick[row]) // CLIP_TICKS), set()).add(tag)
    with_events = 0
    for ref in refs:
        want = expected.get((ref.source, ref.index), set())
        assert {id_to_name[c] for c in ref.category_ids} == want, ref.uid
        assert ("anomalous" in ref.tags) == bool(want)
        assert any(w in ref.tags for w in ("calm", "windy", "gusty", "rain"))
        with_events += bool(want)
    assert 0 < with_events < 0.25 * len(refs)
    assert {g for g in universe.group_names} == set(SITES)


# ---------------------------------------------------------------- size, speed, options


# How long these take is measured by bench/bench_demo_corpus.py, not asserted here: a
# wall-clock limit flakes on shared cores.
def test_default_corpus_is_small(tmp_path):
    zone = write_demo_landing_zone(tmp_path / "default")
    on_disk = sum(p.stat().st_size for p in (tmp_path / "default").rglob("*") if p.is_file())
    assert zone.bytes == on_disk < 60e6
    assert zone.recordings == 40 and zone.sites == 8
    assert 2 * zone.recordings <= zone.entities <= 4 * zone.recordings
    assert 40 * 3 / 60 <= zone.hours <= 40 * 15 / 60
    assert zone.events["near_miss"] > 0 and zone.events["landing"] > 0 and zone.events["low_battery"] > 0


def test_small_corpus_has_one_short_recording_per_site(tmp_path):
    zone = write_demo_landing_zone(tmp_path / "small", seed=3, recordings_per_site=1, minutes=(1, 1))
    assert zone.recordings == len(SITES)
    assert zone.clips == 6 * len(SITES)


@pytest.mark.parametrize("kwargs", [
    {"minutes": (0.5, 2)}, {"minutes": (5, 3)}, {"recordings_per_site": 0}, {"event_rate": 2.0}, {"sites": 0},
    {"sites": 9},
])
def test_bad_options_are_refused(tmp_path, kwargs):
    with pytest.raises(ValueError):
        write_demo_landing_zone(tmp_path / "bad", **kwargs)
    assert not (tmp_path / "bad").exists()


def test_the_output_spec_fits_the_demo_schema_and_strategy(corpus):
    from kuration.demo.corpus import DEMO_OUTPUT_SPEC, DEMO_STRATEGY
    from kuration.landing.settings import load_output_spec

    zone, _, _ = corpus
    spec = load_output_spec(Path(zone.root) / "output_spec.json", demo_schema())
    assert spec.to_dict() == DEMO_OUTPUT_SPEC
    strategy_features = set(DEMO_STRATEGY["priority"]) | {f"tag.{t}" for t in DEMO_STRATEGY["tags"]}
    assert {m.key for m in spec.of_kind("segment").values()} <= strategy_features  # segment: reads span features


def test_a_broken_output_spec_names_its_file(tmp_path):
    from kuration.output import OutputSpecError
    from kuration.landing.settings import load_output_spec

    path = tmp_path / "output_spec.json"
    path.write_text(json.dumps({"shard_length": 8,
                                "modalities": {"x": {"dtype": "float32", "shape": [], "source": "field:nope"}}}))
    with pytest.raises(OutputSpecError,
                       match=f"{path}: output.modalities.x.source: schema has no field or global 'nope'"):
        load_output_spec(path, demo_schema())
