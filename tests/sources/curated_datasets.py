"""Curated datasets for the CuratedDatasetAdapter tests: small committed datasets written
track by track (``write_episodes``, ``publish``), and the second write of a re-ingested
dataset (``rewrite``) with what to compare it by (``present_rows``)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import numpy as np

from kuration.canonical.hashing import readable_json
from kuration.output import OutputSpec
from kuration.output.commit_protocol import publish_committed
from kuration.output.destinations import LocalDestination
from kuration.output.write_dataset import DatasetWriteResult, write_dataset
from kuration.output.write_track import write_track
from kuration.read import load_committed, read_shard
from kuration.scoring import Segmenter, Strategy
from kuration.sources import CuratedDatasetAdapter
from kuration.sources.schema import Schema
from kuration.sources.ticks import Ticks
from kuration.sources.tracks import tracks_from_ticks

from tests.output.corpus import SPEC

DATASET = "dataset"
#: The contract's episodes as a recording: pos, speed and the frame as plain fields.
EPISODE_SCHEMA = Schema.from_dict({
    "sample_hz": 10, "time": "t",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"},
               "frame": {"dtype": "uint8", "shape": [2, 2]}},
})
EPISODE_SPEC = OutputSpec.from_dict({"shard_length": 2, "short_policy": "keep", "container": "npz", "modalities": {
    "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
    "speed": {"dtype": "float64", "shape": [], "source": "field:speed"},
    "frame": {"dtype": "uint8", "shape": [2, 2], "source": "field:frame"},
}})


def publish(out: Path, spec: OutputSpec, entries: list[dict], *, config: dict | None = None) -> Path:
    """Commit ``entries`` (shards already under ``out``) as a dataset, as the writer's last step does."""
    manifest = {"format": 1, "output": spec.to_dict(), "entries": entries}
    config = {"job": {"schema": {"sample_hz": 10}}} if config is None else config
    publish_committed(LocalDestination(out), run_fingerprint="e" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json(config))
    return out


def write_episodes(out: Path, episodes: list[dict[str, np.ndarray]]) -> Path:
    """Each episode as source ``ep<i>``, one whole single-entity track in 2-step shards."""
    shutil.rmtree(out, ignore_errors=True)
    entries = []
    for i, episode in enumerate(episodes):
        raw = {"t": np.arange(len(episode["pos"])), **episode}
        (track,) = tracks_from_ticks(EPISODE_SCHEMA, Ticks.from_columns(EPISODE_SCHEMA, f"ep{i}", raw))
        entries += write_track(out, track, EPISODE_SPEC, schema=EPISODE_SCHEMA, split="train")
    return publish(out, EPISODE_SPEC, entries)


STRATEGY = Strategy.from_dict({"name": "everything", "method": "inclusion", "priority": {"pos.std": 1.0}})
SEGMENTER = Segmenter(2.0, 2.0, unit="seconds", sample_hz=10)


def spec_with(container: str) -> OutputSpec:
    spec = copy.deepcopy(SPEC)
    spec["container"] = container
    return OutputSpec.from_dict(spec)


def present_rows(out: Path, entries: list[dict]) -> dict[str, np.ndarray]:
    """Every modality's present, unpadded rows over ``entries``, in order."""
    dataset = load_committed(out)
    parts: dict[str, list[np.ndarray]] = {}
    for entry in entries:
        shard = read_shard(dataset, entry)
        keep = shard.present[: entry["n_steps"]]
        for name, values in shard.arrays.items():
            parts.setdefault(name, []).append(values[: entry["n_steps"]][keep])
    return {name: np.concatenate(values) for name, values in parts.items()}


def rewrite(adapter: CuratedDatasetAdapter, out: Path | str, **spec_options) -> DatasetWriteResult:
    """Write every re-ingested source again, whole, in its original split."""
    return write_dataset(out, schema=adapter.schema, adapter=adapter, strategy=STRATEGY, segmenter=SEGMENTER,
                         spec=adapter.passthrough_spec(**spec_options), train_hours=1.0, test_hours=1.0,
                         split_assignments=adapter.split_assignments())
