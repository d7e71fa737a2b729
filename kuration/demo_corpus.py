"""A deterministic demo landing zone: a drone fleet's recordings, described by a universe.

``write_demo_landing_zone(root, seed=...)`` writes ``universe.csv`` plus one COCO
annotation file per recording. The fleet flies at several sites (the leakage ``group``),
each recording is cut into numbered 10-second clips (the ``index``), and rare labelled
events (near misses, hard landings, low battery) are COCO categories on clips, with the
weather as an image tag. Same seed, same bytes.

The recordings' tick data arrive with the input-side work; until then the universe rows
point at where each recording's Parquet file will live (``recordings/<site>/<id>.parquet``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
from dataclasses import dataclass

from kuration import storage

CATEGORIES = ({"id": 1, "name": "near_miss"}, {"id": 2, "name": "hard_landing"}, {"id": 3, "name": "low_battery"})
SITES = ("airfield_north", "airfield_south", "coastal_cliffs", "forest_edge", "harbour", "quarry", "vineyard", "wind_farm")
WEATHER = ("calm", "windy", "gusty", "rain")
CLIP_SECONDS = 10


@dataclass(frozen=True)
class DemoLandingZone:
    root: str
    universe_csv: str
    recordings: int
    clips: int
    sites: int


def write_demo_landing_zone(
    root: str | os.PathLike[str], *, seed: int = 7, recordings_per_site: int = 5, event_rate: float = 0.04
) -> DemoLandingZone:
    """Write the demo ``universe.csv`` and annotations under ``root``."""
    root = os.fspath(root)
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["source", "index", "materialized_path", "annotation", "format", "group", "operator"])
    clips = 0
    recordings = 0
    for site in SITES:
        for n in range(recordings_per_site):
            drone = f"drone_{rng.randrange(1, 9):02d}"
            rec_id = f"{site}/{drone}_flight_{n:03d}"
            minutes = rng.randint(3, 15)
            n_clips = minutes * 60 // CLIP_SECONDS
            weather = rng.choice(WEATHER)
            images, annotations = [], []
            for clip in range(n_clips):
                images.append({"id": clip, "file_name": f"{rec_id}#{clip}", "tags": [weather]})
                if rng.random() < event_rate:
                    annotations.append({
                        "id": len(annotations) + 1, "image_id": clip,
                        "category_id": rng.choice(CATEGORIES)["id"],
                    })
            ann_rel = f"annotations/{rec_id}.json"
            doc = {"images": images, "annotations": annotations, "categories": list(CATEGORIES)}
            storage.write_bytes_atomic(storage.join_url(root, *ann_rel.split("/")), json.dumps(doc, indent=1).encode())
            writer.writerow([
                f"{rec_id}.parquet", f"0-{n_clips - 1}", f"recordings/{rec_id}.parquet", ann_rel, "parquet",
                site, f"operator_{rng.randrange(1, 4)}",
            ])
            clips += n_clips
            recordings += 1
    csv_url = storage.write_bytes_atomic(storage.join_url(root, "universe.csv"), out.getvalue().encode())
    return DemoLandingZone(root, csv_url, recordings, clips, len(SITES))
