"""End to end from real data: the demo landing zone, a resolved split, a dataset committed by
write_dataset(split_assignments=...), rollout records from MotionDirectionRecipe, and a store
promoted by write_rollout_store_atomically(**generation.writer_options()). Also datasets
shaped unlike the demo's default: no presence mask, a short shard length with pad rows
(track tails), and 'full' retention keeping frames as the selected payload."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from kuration.demo.corpus import write_demo_landing_zone
from kuration.output import OutputSpec
from kuration.output.write_dataset import write_dataset
from kuration.read import load_committed
from kuration.read.loaders import iter_shards
from kuration.rollouts import (
    MotionDirectionRecipe,
    RolloutZarrStoreReader,
    rollout_records_from_dataset,
    write_rollout_store_atomically,
)
from kuration.rollouts.demo_recipe import MOTION_ACTIONS, TERMINATION_REASONS
from kuration.landing.settings import load_curation_settings
from kuration.sources import ParquetTickAdapter
from kuration.splits.artifacts import SplitRequest, materialize_splits, read_split_assignments
from kuration.splits.universe_csv import read_universe_csv
from tests.output.corpus import version_dir

FRAME = [12, 16, 3]


def spec(*, shard_length: int, presence: bool) -> OutputSpec:
    return OutputSpec.from_dict({"shard_length": shard_length, "short_policy": "pad", "container": "npz",
                                 "presence_mask": presence, "modalities": {
                                     "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                                     "vel": {"dtype": "float32", "shape": [3], "source": "field:vel"},
                                     "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
                                     "frame": {"dtype": "uint8", "shape": FRAME, "source": "media:frame"}}})


@dataclass
class Demo:
    root: Path
    splits_root: Path
    splits_sha256: str
    datasets: dict[str, Path]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    root = tmp_path_factory.mktemp("demo_rollouts")
    landing = Path(write_demo_landing_zone(root / "landing", seed=5, recordings_per_site=2, sites=2,
                                           minutes=(1, 1)).root)
    settings = load_curation_settings(landing / "schema.json", landing / "strategy.json", window=10, stride=5)
    splits_root = root / "storage"
    materialize_splits(read_universe_csv(landing / "universe.csv"),
                       SplitRequest(strategy="random", seed=2, val_ratio=0.0, test_ratio=0.5), splits_root)
    assignments, digest = read_split_assignments(splits_root)
    adapter = ParquetTickAdapter(landing / "recordings", settings.schema)
    datasets = {}
    for name, shard_length, presence in (("demo", 64, True), ("no_presence", 64, False), ("short", 24, True)):
        datasets[name] = root / name
        write_dataset(datasets[name], schema=settings.schema, adapter=adapter, strategy=settings.strategy,
                      segmenter=settings.segmenter, spec=spec(shard_length=shard_length, presence=presence),
                      train_hours=60 / 3600, test_hours=30 / 3600, span_seconds=10.0,
                      split_assignments=assignments)
    return Demo(root=root, splits_root=splits_root, splits_sha256=digest, datasets=datasets)


def manifest_entries(dataset: Path) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in json.loads((version_dir(dataset) / "dataset_manifest.json").read_text())["entries"]}


def generate_and_write(demo: Demo, name: str, store: Path, **recipe: Any) -> RolloutZarrStoreReader:
    options = {"stride": 4, "chain_length": 6, "horizon": 3, **recipe}
    generation = rollout_records_from_dataset(demo.datasets[name], MotionDirectionRecipe(**options),
                                              splits_root=demo.splits_root)
    assert generation.records, f"{name}: no chains generated"
    write_rollout_store_atomically(store, generation.records, **generation.writer_options())
    return RolloutZarrStoreReader(store)


def check_store(reader: RolloutZarrStoreReader, demo: Demo, dataset: Path) -> None:
    """The contract every store generated from a demo dataset keeps."""
    result = reader.validate()
    assert result.ok, result.errors
    attrs = reader.attrs
    # lineage: sources are the dataset's shards with the manifest's SHA-256s, the split is the baked one
    entries = manifest_entries(dataset)
    paths = zarr_attrs(reader, "sources")["shard_paths"]
    codes = reader.array("sources/shard_path_code")
    digests = reader.array("sources/shard_sha256")
    for code, digest in zip(codes, digests, strict=True):
        entry = entries[paths[code]]
        assert bytes(digest).hex() == entry["sha256"] and entry["split"] == "train"
    assert attrs["config"]["split_manifest_hash"] == demo.splits_sha256
    sidecar = reader.manifest()["sidecar"]
    assert sidecar["generation"]["split_manifest_hash"] == demo.splits_sha256
    record = json.loads((version_dir(dataset) / "dataset.commit.json").read_text())
    assert attrs["config"]["source_dataset_version"] == record["manifest_sha256"]
    # the training view: S x 11 actions
    view = reader.q_h_view()
    steps, actions = reader.counts["steps"], len(MOTION_ACTIONS)
    assert reader.widths["A"] == actions
    for name in ("candidate_ids", "valid_action_mask", "q_train_mask", "one_step_labels", "reason_bits"):
        assert view[name].shape == (steps, actions), name
    assert view["positions"].shape == (steps, actions, 3)
    assert view["td_return"].shape == (steps,)
    # invalid candidates: reason bits set, label NaN, never trained on; the selected action is valid
    valid, bits = reader.array("candidates/valid_action"), reader.array("candidates/reason_bits")
    labels, label_valid = reader.array("candidates/label"), reader.array("candidates/label_valid")
    assert (bits[~valid] != 0).all() and (bits[valid] == 0).all()
    assert np.isnan(labels[~valid]).all() and not label_valid[~valid].any()
    assert not (view["q_train_mask"] & ~view["valid_action_mask"]).any()
    assert valid[reader.array("steps/selected_candidate_id")].all()
    rows = np.arange(steps)
    assert view["valid_action_mask"][rows, view["selected_action_index"]].all()
    # termination reasons are recorded, one per chain, from the recipe's vocabulary
    reasons = zarr_attrs(reader, "rollouts")["termination_reasons"]
    assert set(reasons) <= set(TERMINATION_REASONS)
    termination = reader.array("rollouts/termination_code")
    assert termination.shape == (reader.counts["rollouts"],) and set(termination.tolist()) <= set(range(len(reasons)))


def test_a_demo_dataset_becomes_a_valid_store_bound_to_its_lineage(demo: Demo, tmp_path: Path) -> None:
    reader = generate_and_write(demo, "demo", tmp_path / "rollouts.zarr")
    check_store(reader, demo, demo.datasets["demo"])
    valid = reader.array("candidates/valid_action")
    assert (~valid).any(), "the demo (landings, the ground) should give invalid candidates"
    reasons = zarr_attrs(reader, "rollouts")["termination_reasons"]
    assert "chain_length" in reasons
    assert not reader.has_array("steps/selected_payload")  # compact by default


def test_a_dataset_without_a_presence_mask(demo: Demo, tmp_path: Path) -> None:
    reader = generate_and_write(demo, "no_presence", tmp_path / "s")
    check_store(reader, demo, demo.datasets["no_presence"])


def test_short_shards_with_pad_rows_end_chains_at_the_track_tail(demo: Demo, tmp_path: Path) -> None:
    entries = manifest_entries(demo.datasets["short"])
    assert any(e["n_steps"] < e["rows"] for e in entries.values() if e["split"] == "train"), "no padded shard"
    reader = generate_and_write(demo, "short", tmp_path / "s", stride=3, chain_length=30)
    check_store(reader, demo, demo.datasets["short"])
    # a pad row is never a state: every step's source row has a recorded successor in its shard
    n_states = reader.array("sources/n_states")
    source_of_step = reader.array("rollouts/source_id")[reader.array("steps/rollout_id")]
    assert (reader.array("steps/source_row") + 1 < n_states[source_of_step]).all()
    reasons = zarr_attrs(reader, "rollouts")["termination_reasons"]
    codes = reader.array("rollouts/termination_code")
    assert "track_end" in reasons and (codes == reasons.index("track_end")).any()


def test_full_retention_keeps_each_state_frame(demo: Demo, tmp_path: Path) -> None:
    reader = generate_and_write(demo, "demo", tmp_path / "s", field_retention_policy="full")
    check_store(reader, demo, demo.datasets["demo"])
    payload = reader.array("steps/selected_payload")
    assert payload.dtype == np.uint8 and payload.shape == (reader.counts["steps"], *FRAME)
    assert reader.attrs["config"]["field_retention_policy"] == "full" and payload.any()
    # the payload is the frame of the step's source row, read back from the dataset shard
    frames = {meta["path"]: arrays["frame"] for arrays, meta in
              iter_shards(load_committed(demo.datasets["demo"]), split="train", with_meta=True)}
    paths = zarr_attrs(reader, "sources")["shard_paths"]
    source_of_step = reader.array("rollouts/source_id")[reader.array("steps/rollout_id")]
    shard_of_step = reader.array("sources/shard_path_code")[source_of_step]
    for step in range(0, reader.counts["steps"], 7):
        frame = frames[paths[shard_of_step[step]]][reader.array("steps/source_row")[step]]
        np.testing.assert_array_equal(payload[step], frame)
    assert reader.validate(validate_selected_payload=False).ok


def zarr_attrs(reader: RolloutZarrStoreReader, group: str) -> dict[str, Any]:
    return dict(zarr.open_group(reader.store_dir, mode="r")[group].attrs.asdict())
