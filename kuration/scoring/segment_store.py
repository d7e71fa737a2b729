"""Scored segments on storage: one Parquet file per source, and the figures dashboards show.

Layout under a storage root: ``scored_segments/<source_id>.parquet`` (the source id's
folders are kept), each file holding that source's segment table in canonical order, with the scoring run
fingerprint (schema, segmenter, strategy, code) in its schema metadata.
"""

from __future__ import annotations

import io
import math
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage

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
    return storage.join_url(os.fspath(root), SEGMENTS_DIR, *f"{source_id}.parquet".split("/"))


def write_source_segments(root: str | os.PathLike[str], source_id: str, table: pa.Table) -> str:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return storage.write_bytes_atomic(segments_url(root, source_id), buffer.getvalue())


def read_source_segments(root: str | os.PathLike[str], source_id: str, *, columns: list[str] | None = None) -> pa.Table:
    url = segments_url(root, source_id)
    if not storage.exists(url):
        raise FileNotFoundError(f"no scored segments for {source_id!r} at {url}; materialize that scored_segments partition")
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
    for source, entity, start, stop, seconds in zip(*columns.values()):
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


def segment_summary(table: pa.Table) -> dict[str, Any]:
    """Segment count, hours, absent windows (the entity never present: the budget plan
    leaves them out of every span), non-finite priorities of the other windows, and the
    finite priorities' spread."""
    n = table.num_rows
    priority = table.column("priority").to_numpy(zero_copy_only=False) if n else np.empty(0)
    absent = table.column("present_fraction").to_numpy(zero_copy_only=False) == 0 if n else np.zeros(0, bool)
    finite = priority[np.isfinite(priority)]
    summary: dict[str, Any] = {
        "segments": n,
        "hours": covered_seconds(table) / 3600.0,
        "absent": int(np.count_nonzero(absent)),
        "non_finite": int(np.count_nonzero((np.isnan(priority) | np.isposinf(priority)) & ~absent)),
        "filtered_out": int(np.count_nonzero(np.isneginf(priority))),
    }
    if len(finite):
        summary.update(priority_min=float(finite.min()), priority_median=float(np.median(finite)),
                       priority_max=float(finite.max()))
    else:
        summary.update(priority_min=math.nan, priority_median=math.nan, priority_max=math.nan)
    return summary


def list_scored_sources(root: str | os.PathLike[str]) -> list[str]:
    """Every source with a stored segment file, sorted."""
    files = storage.list_files(storage.join_url(os.fspath(root), SEGMENTS_DIR), pattern="*.parquet")
    return [rel[: -len(".parquet")] for rel in files]


def pool_summary(root: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`segment_summary` over every stored source, plus the source count."""
    sources = list_scored_sources(root)
    tables = [read_source_segments(root, s, columns=SUMMARY_COLUMNS) for s in sources]
    pooled = pa.concat_tables(tables, promote_options="permissive") if tables else None
    summary = segment_summary(pooled) if pooled is not None else {
        "segments": 0, "hours": 0.0, "absent": 0, "non_finite": 0, "filtered_out": 0,
        "priority_min": math.nan, "priority_median": math.nan, "priority_max": math.nan,
    }
    summary["sources"] = len(sources)
    return summary


def score_and_store(
    adapter,
    *,
    segmenter,
    strategy,
    sources,
    root: str | os.PathLike[str],
    workers: int = 1,
    executor: str = "local",
    progress=None,
):
    """Score ``sources`` (reusing the cache under ``root``) and write one segment file
    each. A skipped source gets an empty file recording its error, so stale segments of
    an earlier version never outlive a failure. Returns ``[(outcome, url, summary)]``."""
    from kuration.scoring.cache import FsspecScoreCache
    from kuration.scoring import score_sources

    result = score_sources(
        adapter, segmenter=segmenter, strategy=strategy, sources=sources, workers=workers, executor=executor,
        cache=FsspecScoreCache(score_cache_url(root)), progress=progress,
        allow_empty=True,
    )
    stored = []
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
