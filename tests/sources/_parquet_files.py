"""Writing small Parquet sources for the adapter tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def vectors(rows: np.ndarray, size: int | None = None) -> pa.Array:
    """``(N, k)`` rows as a fixed-size list column (``size`` overrides k, for bad files)."""
    rows = np.asarray(rows)
    return pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), size or rows.shape[1])


def write_table(path: Path, columns: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def write_episode(root: Path, stem: str, episode: dict[str, np.ndarray]) -> Path:
    """One single-entity source: ``<stem>.parquet`` plus its frames in ``frames/<stem>.npy``."""
    n = len(episode["pos"])
    (root / "frames").mkdir(parents=True, exist_ok=True)
    np.save(root / "frames" / f"{stem}.npy", episode["frame"])
    return write_table(root / f"{stem}.parquet", {
        "t": np.arange(n, dtype=np.int64),
        "pos": vectors(episode["pos"]),
        "speed": episode["speed"],
        "frame": [f"frames/{stem}.npy#{k}" for k in range(n)],
    })
