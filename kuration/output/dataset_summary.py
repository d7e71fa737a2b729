"""What a dataset write produced, in the units people read: :func:`summarize_dataset`.

The manifest counts steps and bytes per split and the budget block counts seconds; a
dashboard wants hours emitted against hours requested, the shard counts, and the first
shards as a preview. This module only converts and selects what the write result holds; it
verifies nothing (that is :func:`kuration.read.verify_dataset`'s job) and formats no markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the writer is heavy to import; only its result's shape is needed here
    from kuration.output.write_dataset import DatasetWriteResult


@dataclass(frozen=True)
class SplitOutput:
    """One split as written. ``requested_hours`` is None for a count budget (it requests
    segments, not hours)."""

    shards: int
    bytes: int
    steps: int
    emitted_hours: float
    requested_hours: float | None


@dataclass(frozen=True)
class DatasetSummary:
    """The write at a glance; ``preview`` holds the first shards' entries (path, split,
    n_steps, bytes, the SHA-256's first 12 hex digits) and ``more`` how many were left out.
    ``written`` counts the shards this write wrote, ``reused`` those it kept as they were
    (a resume's finished shards, or another run's with the same content key)."""

    commit_state: str
    shards: int
    written: int
    reused: int
    splits: dict[str, SplitOutput]
    preview: list[dict[str, Any]]
    more: int
    #: The run whose shards were kept (this run's own on a resume), None when none were.
    reused_from_run: str | None = None


def summarize_dataset(result: DatasetWriteResult, *, sample_hz: float, preview_rows: int = 10) -> DatasetSummary:
    """``result`` of a write whose tracks tick at ``sample_hz``."""
    manifest = result.manifest
    budget = manifest["budget"]
    splits = {}
    for name, split in manifest["splits"].items():
        requested = budget["splits"].get(name, {}).get("requested") if budget["unit"] == "seconds" else None
        splits[name] = SplitOutput(
            shards=split["shards"], bytes=split["bytes"], steps=split["steps"],
            emitted_hours=split["steps"] / sample_hz / 3600.0,
            requested_hours=None if requested is None else requested / 3600.0,
        )
    entries = manifest["entries"]
    preview = [{"path": e["path"], "split": e["split"], "n_steps": e["n_steps"], "bytes": e["bytes"],
                "sha256": e["sha256"][:12]} for e in entries[:preview_rows]]
    reused_from = result.config["results"].get("resume", {}).get("reused_from_run")
    return DatasetSummary(result.record.state, len(entries), result.written, result.reused, splits, preview,
                          max(0, len(entries) - preview_rows), reused_from)


__all__ = ["DatasetSummary", "SplitOutput", "summarize_dataset"]
