"""Scored segments on storage: one Parquet file per source, and the figures dashboards show.

Layout under a storage root: ``scored_segments/<name>.parquet``, ``<name>`` being the
recording's name (its source id without the recording extension, folders kept:
``kuration.landing.recordings.recording_name``; two recordings of one name are refused where they are
listed), each file holding that source's segment table in canonical order, with the scoring run
fingerprint (schema, segmenter, strategy, code) in its schema metadata.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.landing.recordings import recording_name, recording_names
from kuration.checks import CheckResult, Figure, count, first
from kuration.numbers import format_hours
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring.score_sources import SourceOutcome, score_sources
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.sources.protocol import SourceAdapter

SEGMENTS_DIR = "scored_segments"
#: Schema metadata of a stored segment file: the scoring run it came from, and why a source was skipped.
RUN_KEY = b"kuration.run"
SKIPPED_KEY = b"kuration.skipped_error"
#: The source's identity token, when strong: it names the source's Arrow checkpoint in the
#: score cache (``<root>/cache/scoring``), which a budgeted pool load maps instead of
#: decoding this file into memory.
IDENTITY_KEY = b"kuration.identity"
SCORE_CACHE_DIR = ("cache", "scoring")


def score_cache_url(root: str | os.PathLike[str]) -> str:
    return storage.join_url(os.fspath(root), *SCORE_CACHE_DIR)


def segments_url(root: str | os.PathLike[str], source_id: str) -> str:
    """Where a source's segments are stored: the one naming every writer and reader uses."""
    return _named_segments_url(root, recording_name(source_id))


def _named_segments_url(root: str | os.PathLike[str], name: str) -> str:
    return storage.join_url(os.fspath(root), SEGMENTS_DIR, *f"{name}.parquet".split("/"))


def write_source_segments(root: str | os.PathLike[str], source_id: str, table: pa.Table) -> str:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return storage.write_bytes_atomic(segments_url(root, source_id), buffer.getvalue())


def read_source_segments(root: str | os.PathLike[str], source_id: str, *, columns: list[str] | None = None) -> pa.Table:
    return _read_segments(segments_url(root, source_id), source_id, columns)


def _read_segments(url: str, what: str, columns: list[str] | None) -> pa.Table:
    if not storage.exists(url):
        raise FileNotFoundError(f"no scored segments for {what!r} at {url}; materialize that scored_segments "
                                "partition")
    return pq.read_table(io.BytesIO(storage.read_bytes(url)), columns=columns)


#: What the pool figures read: not the feature columns, which dominate a segment file.
SUMMARY_COLUMNS = ["source_id", "entity_id", "start", "stop", "seconds", "present_fraction", "priority"]


def covered_seconds(table: pa.Table) -> float:
    """Seconds of track the segments cover, each moment once: overlapping windows (a stride
    shorter than the window) must not count the same data twice."""
    if not table.num_rows:
        return 0.0
    columns = table.select(["source_id", "entity_id", "start", "stop", "seconds"]).to_pydict()
    spans: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    for source, entity, start, stop, seconds in zip(*columns.values(), strict=True):
        spans.setdefault((source, entity), []).append((start, stop, seconds / max(stop - start, 1)))
    total = 0.0
    for intervals in spans.values():
        intervals.sort()
        reach = None
        for start, stop, per_step in intervals:
            if reach is None or start >= reach:
                total += (stop - start) * per_step
                reach = stop
            elif stop > reach:
                total += (stop - reach) * per_step
                reach = stop
    return total


def _priority_and_absent(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each segment's priority, and whether its window is absent (the entity never present)."""
    if not table.num_rows:
        return np.empty(0), np.zeros(0, bool)
    return (table.column("priority").to_numpy(zero_copy_only=False),
            table.column("present_fraction").to_numpy(zero_copy_only=False) == 0)


def _non_finite(priority: np.ndarray, absent: np.ndarray) -> int:
    """Segments with a NaN or +inf priority in a window the entity was present in."""
    return int(np.count_nonzero((np.isnan(priority) | np.isposinf(priority)) & ~absent))


def _priority_spread(priority: np.ndarray) -> dict[str, float]:
    """The finite priorities' min, median and max (NaN when there is none)."""
    finite = priority[np.isfinite(priority)]
    if not len(finite):
        return {"priority_min": math.nan, "priority_median": math.nan, "priority_max": math.nan}
    return {"priority_min": float(finite.min()), "priority_median": float(np.median(finite)),
            "priority_max": float(finite.max())}


def segment_summary(table: pa.Table) -> dict[str, Any]:
    """Segment count, hours, absent windows (the entity never present: the budget plan
    leaves them out of every span), non-finite priorities of the other windows, and the
    finite priorities' spread."""
    priority, absent = _priority_and_absent(table)
    summary: dict[str, Any] = {
        "segments": table.num_rows,
        "hours": covered_seconds(table) / 3600.0,
        "absent": int(np.count_nonzero(absent)),
        "non_finite": _non_finite(priority, absent),
        "filtered_out": int(np.count_nonzero(np.isneginf(priority))),
    }
    summary.update(_priority_spread(priority))
    return summary


#: The per-source figures a pool adds up (hours too: each source's windows are its own, so
#: the covered hours of the pool are the sum of its sources').
_ADDED_UP = ("segments", "hours", "absent", "non_finite", "filtered_out")


def list_scored_recordings(root: str | os.PathLike[str]) -> list[str]:
    """The name of every recording with a stored segment file, sorted."""
    files = storage.list_files(storage.join_url(os.fspath(root), SEGMENTS_DIR), pattern="*.parquet")
    return [rel[: -len(".parquet")] for rel in files]


def _stored_pool(root: str | os.PathLike[str]) -> list[tuple[str, pa.Table]]:
    return [(name, _read_segments(_named_segments_url(root, name), name, SUMMARY_COLUMNS))
            for name in list_scored_recordings(root)]


def _skipped_error(table: pa.Table) -> str | None:
    value = (table.schema.metadata or {}).get(SKIPPED_KEY)
    return value.decode() if value is not None else None


def _top_folder(source_id: str) -> str:
    """The first folder of a source id (a site, a fleet, a day); ``.`` for a source at the top."""
    return source_id.split("/", 1)[0] if "/" in source_id else "."


@dataclass(frozen=True)
class SegmentPoolCheck(CheckResult):
    """The ``segment_pool`` answer. ``folders``: one row per first folder of the source ids
    (``folder``, ``sources``, ``skipped``, ``segments``, ``hours``, ``non_finite``,
    ``filtered_out``, ``absent``), sorted by folder; ``skipped``: each skipped source and
    why, sorted by source."""

    folders: tuple[dict[str, Figure], ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()


def _folder_rows(stored: list[tuple[str, pa.Table]], per_source: list[dict[str, Any]],
                 skipped: set[str]) -> tuple[dict[str, Figure], ...]:
    rows: dict[str, dict[str, Any]] = {}
    for (source, _), summary in zip(stored, per_source, strict=True):
        folder = _top_folder(source)
        row = rows.setdefault(folder, {"folder": folder, "sources": 0, "skipped": 0, "segments": 0, "hours": 0.0,
                                       "non_finite": 0, "filtered_out": 0, "absent": 0})
        row["sources"] += 1
        row["skipped"] += source in skipped
        for key in ("segments", "hours", "non_finite", "filtered_out", "absent"):
            row[key] += summary[key]
    return tuple(rows[folder] for folder in sorted(rows))


def _pooled_summary(stored: list[tuple[str, pa.Table]], per_source: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`segment_summary` over every stored source, from each source's, plus the source count."""
    summary: dict[str, Any] = {key: sum(s[key] for s in per_source) for key in _ADDED_UP}
    summary["hours"] = float(summary["hours"])
    priorities = [_priority_and_absent(t)[0] for _, t in stored]
    summary.update(_priority_spread(np.concatenate(priorities) if priorities else np.empty(0)))
    summary["sources"] = len(stored)
    return summary


def check_segment_pool(root: str | os.PathLike[str]) -> SegmentPoolCheck:
    """The pool over every stored source: an empty pool is an error (nothing to plan from;
    the verdict names the first skipped sources and why), non-finite priorities of windows
    the entity was present in are a warning naming the first sources that hold them. A
    skipped source in a pool that is not empty is named in the verdict; the result's
    ``folders`` and ``skipped`` break the pool down for a dashboard."""
    stored = _stored_pool(root)
    per_source = [segment_summary(t) for _, t in stored]
    summary = _pooled_summary(stored, per_source)
    skipped = tuple((s, error) for s, t in stored if (error := _skipped_error(t)) is not None)
    folders = _folder_rows(stored, per_source, {s for s, _ in skipped})
    figures = {"sources": summary["sources"], "skipped_sources": len(skipped), "segments": summary["segments"],
               "track_hours": summary["hours"], "absent_segments": summary["absent"],
               "non_finite_segments": summary["non_finite"], "filtered_out_segments": summary["filtered_out"],
               "priority_min": summary["priority_min"], "priority_median": summary["priority_median"],
               "priority_max": summary["priority_max"]}
    named_skipped = first(f"{s} ({error})" for s, error in skipped)
    if summary["segments"] == 0:
        why = f"; skipped: {named_skipped}" if skipped else ""
        message = (f"no segments in any of {count(len(stored), 'scored source')}{why}. Check skipped_error on the "
                   "partitions, the schema against the files, and that the segment window is shorter than the "
                   "recordings")
        return SegmentPoolCheck(message, (message,), figures=figures, folders=folders, skipped=skipped)
    verdict = (f"{count(summary['segments'], 'segment')} ({format_hours(summary['hours'])} of track) from "
               f"{count(summary['sources'], 'source')}; {summary['filtered_out']:,} filtered out, "
               f"{summary['absent']:,} absent")
    # what the pool lacks comes last, so the figures above read the same with or without it
    lacking = f"; {count(len(skipped), 'source')} skipped: {named_skipped}" if skipped else ""
    if not summary["non_finite"]:
        return SegmentPoolCheck(f"{verdict}, every other priority finite{lacking}", figures=figures, folders=folders,
                                skipped=skipped)
    offenders = [f"{s} ({n['non_finite']:,})" for (s, _), n in zip(stored, per_source, strict=True)
                 if n["non_finite"]]
    warning = (f"{count(summary['non_finite'], 'segment')} with a non-finite priority (NaN or +inf) although the "
               f"entity was present, in {first(offenders, shown=5)}")
    return SegmentPoolCheck(f"{verdict}; {warning}{lacking}", warnings=(warning,), figures=figures, folders=folders,
                            skipped=skipped)


def score_and_store(
    adapter: SourceAdapter,
    *,
    segmenter: Segmenter,
    strategy: Strategy,
    sources: Sequence[str] | None,
    root: str | os.PathLike[str],
    workers: int = 1,
    executor: str = "local",
    progress: Callable[[SourceOutcome, int, int], None] | None = None,
) -> list[tuple[SourceOutcome, str, dict[str, Any]]]:
    """Score ``sources`` (all the adapter lists, if None; reusing the cache under ``root``)
    and write one segment file each. A skipped source gets an empty file recording its
    error, so stale segments of an earlier version never outlive a failure. Returns
    ``[(outcome, url, summary)]``, one per source, sorted by source id. Two sources of one
    name (``a.parquet`` and ``a.npz``) are refused before anything is scored: they would
    write one file."""
    if sources is None:
        sources = adapter.list_sources()
    recording_names(sources)
    result = score_sources(
        adapter, segmenter=segmenter, strategy=strategy, sources=sources, workers=workers, executor=executor,
        cache=FsspecScoreCache(score_cache_url(root)), progress=progress,
        allow_empty=True,
    )
    stored: list[tuple[SourceOutcome, str, dict[str, Any]]] = []
    for outcome in result.outcomes:
        table = result.for_source(outcome.source_id)
        # The run fingerprint lets a reader of many stored sources refuse a mix of strategies.
        metadata = {RUN_KEY: result.run_fingerprint.encode()}
        if outcome.identity is not None and outcome.identity.strong:
            metadata[IDENTITY_KEY] = outcome.identity.token().encode()
        if outcome.error:
            metadata[SKIPPED_KEY] = outcome.error.encode()
        table = table.replace_schema_metadata(metadata)
        url = write_source_segments(root, outcome.source_id, table)
        stored.append((outcome, url, segment_summary(table)))
    return stored
