"""Small committed drone datasets for the rollout generation tests, built directly through
the commit protocol (no corpus, no scoring): each shard is one drone's track, given as rows
of position, velocity, battery and presence; pad rows are appended up to the shard length.
Also a resolved split on a storage root (report, splits.json, assignments)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration.budget.split_pools import split_assignments_identity
from kuration.canonical.hashing import readable_json
from kuration.output.commit_protocol import publish_committed
from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import LocalDestination
from kuration.output.spec import OutputSpec

SHARD_LENGTH = 16
FRAME_SHAPE = (2, 3)


def drone_spec(*, modalities: Sequence[str] = ("pos", "vel", "battery", "frame"), presence: bool = True) -> OutputSpec:
    declared = {"pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
                "vel": {"dtype": "float32", "shape": [3], "source": "field:vel"},
                "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
                "frame": {"dtype": "uint8", "shape": list(FRAME_SHAPE), "source": "media:frame"}}
    return OutputSpec.from_dict({"shard_length": SHARD_LENGTH, "short_policy": "pad", "container": "npz",
                                 "presence_mask": presence,
                                 "modalities": {name: declared[name] for name in modalities}})


@dataclass
class Track:
    """One shard's recorded rows (pad rows are added when written)."""

    pos: np.ndarray
    battery: np.ndarray | None = None
    present: np.ndarray | None = None
    split: str = "train"
    source: str = "rec_0"
    entity: str = "str:'drone_01'"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.pos)


def straight_track(n: int, *, start=(0.0, 0.0, 10.0), step=(1.0, 0.0, 0.0), battery: float = 0.9, **kw) -> Track:
    pos = np.asarray(start, np.float32) + np.arange(n, dtype=np.float32)[:, None] * np.asarray(step, np.float32)
    return Track(pos=pos, battery=np.full(n, battery, np.float32), **kw)


def _shard(track: Track, spec: OutputSpec, index: int) -> ShardArrays:
    rows = SHARD_LENGTH
    n = track.n
    pos = np.zeros((rows, 3), np.float32)
    pos[:n] = track.pos
    vel = np.zeros((rows, 3), np.float32)
    vel[: max(n - 1, 0)] = np.diff(track.pos, axis=0) * 10
    battery = np.zeros(rows, np.float32)
    battery[:n] = track.battery if track.battery is not None else 1.0
    frame = ((np.arange(rows)[:, None, None] + index * 16) % 256 * np.ones(FRAME_SHAPE)).astype(np.uint8)
    arrays = {"pos": pos, "vel": vel, "battery": battery, "frame": frame}
    present = None
    if spec.presence_mask:
        present = np.zeros(rows, bool)
        present[:n] = True if track.present is None else track.present
    return ShardArrays({name: arrays[name] for name in spec.modalities}, present, n)


def build_dataset(out: Path, tracks: Sequence[Track], *, spec: OutputSpec | None = None,
                  split_identity: dict[str, Any] | None = None) -> Path:
    """A committed dataset at ``out``: one shard per track; ``split_identity`` is recorded
    as ``config.json``'s ``provenance.split`` (what write_dataset records)."""
    spec = spec or drone_spec()
    destination = LocalDestination(out)
    box = get_container("npz")
    entries = []
    for i, track in enumerate(tracks):
        path = f"{track.split}/{track.source}_{i:02d}_shard0000.npz"
        written = destination.stage_shard(path, box, _shard(track, spec, i)).seal()
        entries.append({"path": path, "split": track.split, "source_id": track.source, "entity_id": track.entity,
                        "span_index": None, "shard_index": i, "n_steps": track.n, "rows": SHARD_LENGTH,
                        "padded": track.n < SHARD_LENGTH, "container": "npz", "bytes": written.bytes,
                        "sha256": written.sha256})
    manifest = {"format": 1, "output": spec.to_dict(), "entries": entries}
    provenance = {"run_fingerprint": "e" * 64, **({"split": split_identity} if split_identity else {})}
    publish_committed(destination, run_fingerprint="e" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json({"job": {}, "provenance": provenance}))
    return out


def build_split_root(root: Path, assignments: dict[str, list[str]],
                     splits_text: str = '{"train": [], "universe_hash": "u"}') -> tuple[pa.Table, str]:
    """A resolved split under ``root`` as ``resolved_splits`` leaves it: ``splits.json``,
    ``split_assignments.parquet`` and a report naming the splits.json SHA-256."""
    folder = root / "splits"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table(assignments)
    pq.write_table(table, folder / "split_assignments.parquet")
    data = splits_text.encode()
    (folder / "splits.json").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (folder / "split_report.json").write_text(json.dumps({"status": "resolved", "splits_sha256": digest}))
    return table, digest


def identity_of(table: pa.Table) -> dict[str, Any]:
    return split_assignments_identity(table)
