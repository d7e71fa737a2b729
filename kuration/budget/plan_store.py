"""A budget plan under a storage root, and the scored pool it is planned from.

Layout (``<root>/budget/``):

- ``plan_items.parquet``: every item with its decision (the review reads this, never rescoring);
- ``admitted.parquet``: the admitted items only, sorted by (source, entity, index), for
  consumers that need just the selection (the dataset writer reads the whole plan, so its
  result can be reviewed);
- ``budget.json``: the budget block, the options, the strategy and the inputs (scored
  sources, scoring run, splits digest).

The two Parquet files are written first and ``budget.json`` last, each atomically, so a
reader that finds ``budget.json`` finds the items it describes; ``budget.json`` records the
SHA-256 of both, and :func:`read_budget_plan` refuses a mismatch.

:func:`plan_stored_budget` is the whole step the ``budget_plan`` asset runs: the pool and
the resolved split read from storage, the plan made and stored. :func:`check_budget_plan`
re-validates a stored plan (the ``budget`` check), failing rather than raising when the plan
cannot be read.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.budget.options import BudgetOptions
from kuration.budget.plan import BudgetPlan, plan_budget
from kuration.budget.validation import BudgetValidation, validate_budget_plan
from kuration.errors import BudgetError, KurationError, shown
from kuration.canonical.hashing import sha256_hex
from kuration.landing.recordings import recording_names
from kuration.numbers import format_bytes, parse_bytes
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring import MemoryBudgetError, provide_fingerprint
from kuration.scoring.segment_store import (
    IDENTITY_KEY, RUN_KEY, SKIPPED_KEY, read_source_segments, score_cache_url, segments_url,
)
from kuration.scoring.strategy import Strategy
from kuration.sources.protocol import SourceIdentity
from kuration.splits.artifacts import read_split_assignments

BUDGET_DIR = "budget"
ITEMS_FILE = "plan_items.parquet"
ADMITTED_FILE = "admitted.parquet"
BUDGET_FILE = "budget.json"


def budget_url(root: str | os.PathLike[str], name: str) -> str:
    return storage.join_url(os.fspath(root), BUDGET_DIR, name)


@dataclass(frozen=True)
class ScoredPool:
    """Every stored segment of the requested sources, in one table; ``skipped`` maps a
    source the scoring pass skipped to its error; ``run_fingerprint`` is the one scoring run
    all of them come from."""

    segments: pa.Table
    skipped: dict[str, str]
    run_fingerprint: str | None
    #: With ``memory_budget``: bytes held in memory and mapped, and how many sources were mapped.
    memory: dict[str, int] | None = None


def load_scored_pool(root: str | os.PathLike[str], sources: list[str], *, expected_run: str | None = None,
                     memory_budget: int | None = None) -> ScoredPool:
    """Read ``scored_segments/<source>.parquet`` for each source. Refuses (``BudgetError``)
    a missing file, and a pool mixing scoring runs, or from another run than ``expected_run``
    (a strategy or segmenter changed and only some sources were re-scored).

    ``memory_budget`` (bytes; a local ``root`` only) bounds the pool held in memory: a
    source whose segment file names a strong identity is held as its memory-mapped Arrow
    checkpoint in the score cache (file pages, not heap), the rest are decoded into memory
    and counted; past the budget the load fails, saying how to provide a fingerprint."""
    if not sources:
        raise BudgetError("scored pool: no sources; add recordings and materialize scored_segments first")
    recording_names(sources)  # two sources of one name would read one stored file
    mapped = None if memory_budget is None else _MappedCheckpoints(root, memory_budget)
    tables: list[pa.Table] = []
    skipped: dict[str, str] = {}
    runs: dict[str | None, list[str]] = {}
    for source in sorted(sources):
        try:
            table, meta = _read_stored(root, source, mapped)
        except FileNotFoundError:
            raise BudgetError(
                f"scored pool: no scored segments for source {source!r} at {segments_url(root, source)}; materialize "
                "that scored_segments partition (or remove the partition)"
            ) from None
        run = meta.get(RUN_KEY, b"").decode() or None
        runs.setdefault(run, []).append(source)
        if SKIPPED_KEY in meta:
            skipped[source] = meta[SKIPPED_KEY].decode()
        if table.num_rows:
            tables.append(table.replace_schema_metadata(None))
    if len(runs) > 1:
        described = "; ".join(f"{(run or 'unrecorded')[:12]}: {len(s)} source(s), e.g. {s[0]!r}" for run, s in sorted(
            runs.items(), key=lambda kv: (kv[0] or "")))
        raise BudgetError(
            f"scored pool: sources were scored by different scoring runs ({described}); the strategy, segmenter or "
            "schema changed between them. Backfill every scored_segments partition, then plan again"
        )
    run = next(iter(runs))
    if expected_run is not None and run != expected_run:
        raise BudgetError(
            f"scored pool: the stored segments come from scoring run {(run or 'unrecorded')[:12]}, but the current "
            f"settings give {expected_run[:12]}; the strategy, segmenter or schema changed. Backfill every "
            "scored_segments partition, then plan again"
        )
    if not tables:
        raise BudgetError(
            f"scored pool: none of the {len(sources)} source(s) has a segment ({len(skipped)} skipped); check the "
            "scored_segments partitions' skipped_error"
        )
    segments = pa.concat_tables(tables, promote_options="permissive")
    return ScoredPool(segments, skipped, run, None if mapped is None else mapped.report())


def _read_stored(root: str | os.PathLike[str], source: str,
                 mapped: _MappedCheckpoints | None) -> tuple[pa.Table, dict[bytes, bytes]]:
    """One source's stored segments and their metadata; under a budget, its memory-mapped
    checkpoint when one matches the stored file."""
    if mapped is None:
        table = read_source_segments(root, source)
        return table, dict(table.schema.metadata or {})
    meta, rows = _stored_footer(root, source)
    table = mapped.table(source, meta, rows)
    if table is None:
        table = read_source_segments(root, source)
        mapped.count_resident(source, table, meta)
    return table, meta


def _stored_footer(root: str | os.PathLike[str], source: str) -> tuple[dict[bytes, bytes], int]:
    """A stored segment file's schema metadata and row count, from its footer alone."""
    footer = pq.read_metadata(storage.local_path(segments_url(root, source)))
    return dict(footer.schema.to_arrow_schema().metadata or {}), footer.num_rows


class _MappedCheckpoints:
    """The score cache's Arrow checkpoints of a local storage root, for a budgeted pool load."""

    def __init__(self, root: str | os.PathLike[str], budget: int) -> None:
        if storage.is_remote(os.fspath(root)):
            raise BudgetError(f"memory_budget needs a local storage root to map checkpoints from; {os.fspath(root)} is "
                              "remote. Leave memory_budget unset, or plan from a local copy")
        self.root = root
        self.budget = budget
        self.cache = FsspecScoreCache(score_cache_url(root))
        self.resident = 0
        self.mapped = 0
        self.mapped_sources = 0

    def table(self, source: str, meta: dict[bytes, bytes], stored_rows: int) -> pa.Table | None:
        """The source's checkpoint, mapped, if one matches its stored file; else None."""
        token, run = meta.get(IDENTITY_KEY), meta.get(RUN_KEY)
        if not token or not run:
            return None
        try:
            identity = SourceIdentity.from_token(token.decode())
        except ValueError:
            return None
        table = self.cache.get(run.decode(), source, identity)
        if table is None or table.num_rows != stored_rows:
            return None  # pruned, torn or from another scoring: decode the segment file instead
        self.mapped += table.nbytes
        self.mapped_sources += 1
        return table

    def count_resident(self, source: str, table: pa.Table, meta: dict[bytes, bytes]) -> None:
        self.resident += table.nbytes
        if self.resident > self.budget:
            why = ("its segment file names no strong identity (the source was scored under a logical one, or before "
                   "identities were recorded)" if IDENTITY_KEY not in meta
                   else "its checkpoint is missing or does not match")
            raise MemoryBudgetError(
                f"scored pool: memory_budget={format_bytes(self.budget)} is passed ({format_bytes(self.resident)} in "
                f"memory) at source {source!r}: {why}, so it cannot be held memory-mapped. "
                f"{provide_fingerprint('the adapter')}, then re-materialize its scored_segments partition; or raise "
                "memory_budget")

    def report(self) -> dict[str, int]:
        return {"budget_bytes": self.budget, "resident_bytes": self.resident, "mapped_bytes": self.mapped,
                "mapped_sources": self.mapped_sources}


def _parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_budget_plan(plan: BudgetPlan, root: str | os.PathLike[str], *,
                      inputs: dict[str, Any] | None = None) -> dict[str, str]:
    """Write the plan under ``<root>/budget/``; returns the three URLs by name."""
    return _write_budget_plan(plan, root, inputs)[0]


def budget_plan_files(plan: BudgetPlan, inputs: dict[str, Any] | None = None) -> dict[str, bytes]:
    """The bytes of the three files a stored plan is made of, by file name, in the order
    they must be written (``budget.json``, which pins the other two, last). The dataset
    writer stores the same files in a dataset's ``budget/`` folder."""
    items = _parquet_bytes(plan.items)
    admitted = _parquet_bytes(plan.admitted())
    record = {
        "format": 1,
        "accounting": plan.accounting,
        "options": plan.options.to_dict(),
        "strategy": plan.strategy,
        "inputs": inputs or {},
        "files": {
            ITEMS_FILE: {"sha256": sha256_hex(items), "bytes": len(items)},
            ADMITTED_FILE: {"sha256": sha256_hex(admitted), "bytes": len(admitted)},
        },
    }
    body = json.dumps(record, indent=1, sort_keys=True, allow_nan=False).encode()
    return {ITEMS_FILE: items, ADMITTED_FILE: admitted, BUDGET_FILE: body}


def _write_budget_plan(plan: BudgetPlan, root: str | os.PathLike[str],
                       inputs: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
    files = budget_plan_files(plan, inputs)
    urls = {
        "items": storage.write_bytes_atomic(budget_url(root, ITEMS_FILE), files[ITEMS_FILE]),
        "admitted": storage.write_bytes_atomic(budget_url(root, ADMITTED_FILE), files[ADMITTED_FILE]),
        "budget": storage.write_bytes_atomic(budget_url(root, BUDGET_FILE), files[BUDGET_FILE]),
    }
    return urls, json.loads(files[BUDGET_FILE])


@dataclass(frozen=True)
class StoredBudgetPlan:
    """What :func:`plan_stored_budget` planned and wrote: the plan, the files' URLs by name
    (``items``, ``admitted``, ``budget``), the SHA-256 of ``admitted.parquet`` (the
    selection's identity), and of the pool it came from only what a report reads (not its
    segments, which may be gigabytes, mapped): the skipped sources with their errors and,
    under a ``memory_budget``, its memory figures (:attr:`ScoredPool.memory`)."""

    plan: BudgetPlan
    urls: dict[str, str]
    admitted_sha256: str
    skipped: dict[str, str]
    pool_memory: dict[str, int] | None


def plan_stored_budget(root: str | os.PathLike[str], sources: Sequence[str], options: BudgetOptions, *,
                       strategy: Strategy, expected_run: str | None = None, memory_budget: int | str | None = None,
                       underfill_warn_fraction: float = 0.1) -> StoredBudgetPlan:
    """Plan ``options`` over the stored scored segments of ``sources`` and the resolved split
    under ``root``, and store the plan there. ``expected_run`` refuses a pool scored with other
    settings; ``memory_budget`` (bytes, or a string like ``"2GiB"``) bounds the pool held in
    memory (see :func:`load_scored_pool`); ``underfill_warn_fraction`` is recorded for the
    ``budget`` check."""
    budget_bytes = None if memory_budget is None else parse_bytes(memory_budget, name="memory_budget")
    pool = load_scored_pool(root, list(sources), expected_run=expected_run, memory_budget=budget_bytes)
    assignments, splits_digest = read_split_assignments(root)
    plan = plan_budget(pool.segments, options, strategy=strategy, split_assignments=assignments)
    urls, record = _write_budget_plan(plan, root, {
        "scoring_run": pool.run_fingerprint, "sources": len(sources), "skipped_sources": pool.skipped,
        "splits_sha256": splits_digest, "check": {"underfill_warn_fraction": underfill_warn_fraction},
    })
    return StoredBudgetPlan(plan, urls, record["files"][ADMITTED_FILE]["sha256"], pool.skipped, pool.memory)


def check_budget_plan(root: str | os.PathLike[str], *,
                      underfill_warn_fraction: float | None = None) -> BudgetValidation:
    """:func:`validate_budget_plan` on the stored plan, warning past ``underfill_warn_fraction``
    (default: what the plan was made with). It fails a requested split that admits nothing and
    scored sources in no split, and warns of a budget larger than a split's pool. Never
    raises: a missing or tampered plan fails."""
    try:
        plan, threshold = read_plan_to_check(root, underfill_warn_fraction=underfill_warn_fraction)
    except KurationError as exc:
        return BudgetValidation.cannot_check("the budget plan", exc)
    return validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=threshold)


_RECORD_KEYS = ("accounting", "options", "strategy", "inputs", "files")


def read_budget_record(root: str | os.PathLike[str]) -> dict[str, Any]:
    """``budget.json``, with the keys every reader relies on checked once, here."""
    url = budget_url(root, BUDGET_FILE)
    if not storage.exists(url):
        raise BudgetError(f"no budget plan at {url}; materialize budget_plan")
    try:
        record = storage.read_json(url, what="budget plan")
    except KurationError as exc:
        raise BudgetError(f"{exc}; re-materialize budget_plan") from None
    return checked_budget_record(record, where=url)


def checked_budget_record(record: Any, *, where: str, fix: str = "re-materialize budget_plan") -> dict[str, Any]:
    """``record`` (a parsed ``budget.json``) when it has what every reader relies on;
    ``BudgetError`` naming ``where`` and saying ``fix`` otherwise."""
    if not isinstance(record, dict):
        raise BudgetError(f"{where}: must be a JSON object, found {type(record).__name__}; {fix}")
    missing = [k for k in _RECORD_KEYS if k not in record]
    files = record.get("files")
    if missing or not isinstance(files, dict) or any(
            not isinstance(files.get(n), dict) or {"sha256", "bytes"} - set(files[n])
            for n in (ITEMS_FILE, ADMITTED_FILE)):
        raise BudgetError(f"{where}: not a complete budget plan record (missing {missing or 'file digests'}); {fix}")
    return record


def stored_underfill_warn_fraction(record: dict[str, Any]) -> float:
    """The underfill warning threshold the plan was made with (0.1 when none was recorded)."""
    return float((record.get("inputs") or {}).get("check", {}).get("underfill_warn_fraction", 0.1))


def _verified(root: str | os.PathLike[str], name: str, record: dict[str, Any]) -> bytes:
    url = budget_url(root, name)
    if not storage.exists(url):
        raise BudgetError(f"budget plan: {url} is missing; re-materialize budget_plan")
    return checked_plan_file(storage.read_bytes(url), name, record, where=url)


def checked_plan_file(data: bytes, name: str, record: dict[str, Any], *, where: str,
                      fix: str = "re-materialize budget_plan") -> bytes:
    """``data``, the plan file ``name``, when it has the size and SHA-256 ``record`` pins."""
    expected = record["files"][name]
    if len(data) != expected["bytes"] or sha256_hex(data) != expected["sha256"]:
        raise BudgetError(
            f"budget plan: {where} does not match the SHA-256 and size {BUDGET_FILE} records (changed after the plan "
            f"was written); {fix}"
        )
    return data


def plan_from_files(record: dict[str, Any], items: bytes) -> BudgetPlan:
    """The plan a checked ``budget.json`` record and its verified ``plan_items.parquet`` bytes hold."""
    return BudgetPlan(pq.read_table(io.BytesIO(items)), record["accounting"],
                      BudgetOptions.from_dict(record["options"]), record["strategy"])


def _plan_of(root: str | os.PathLike[str], record: dict[str, Any]) -> BudgetPlan:
    return plan_from_files(record, _verified(root, ITEMS_FILE, record))


def read_budget_plan(root: str | os.PathLike[str]) -> BudgetPlan:
    """The stored plan, with its items checked against the SHA-256 in ``budget.json``."""
    return _plan_of(root, read_budget_record(root))


def read_plan_to_check(root: str | os.PathLike[str], *,
                       underfill_warn_fraction: float | None = None) -> tuple[BudgetPlan, float]:
    """The stored plan (as :func:`read_budget_plan`) and the underfill threshold to check it
    with: ``underfill_warn_fraction``, else the one the plan was made with. ``budget.json``
    is read once. Raises ``BudgetError`` as :func:`read_budget_plan` does."""
    record = read_budget_record(root)
    plan = _plan_of(root, record)
    if underfill_warn_fraction is None:
        underfill_warn_fraction = stored_underfill_warn_fraction(record)
    return plan, underfill_warn_fraction


def stored_split_identity(root: str | os.PathLike[str]) -> dict[str, str] | None:
    """The identity of the resolved split the stored plan was made over: ``{"origin":
    "splits_json", "sha256": <SHA-256 of the baked splits.json>}``, or None for a plan stored
    before plans recorded it. ``write_planned_dataset(split=...)`` records it in the
    dataset's provenance."""
    digest = read_budget_record(root)["inputs"].get("splits_sha256")
    if digest is None:
        return None
    if not isinstance(digest, str) or len(digest) != 64:
        raise BudgetError(f"{budget_url(root, BUDGET_FILE)}: inputs.splits_sha256 must be a SHA-256 hex string, got "
                          f"{shown(digest)}; re-materialize budget_plan")
    return {"origin": "splits_json", "sha256": digest}


def stored_scoring_job(root: str | os.PathLike[str]) -> dict[str, Any]:
    """What the scoring pass behind the stored plan recorded (its run fingerprint, and the
    sources it skipped with their errors), for the ``job`` block of a dataset written from
    that plan, so the dataset says what it could not include."""
    inputs = read_budget_record(root)["inputs"]
    return {"scoring_run": inputs.get("scoring_run"), "skipped_sources": inputs.get("skipped_sources", {})}


def read_admitted(root: str | os.PathLike[str]) -> pa.Table:
    """The admitted items, checked against ``budget.json``: what a writer consumes."""
    record = read_budget_record(root)
    return pq.read_table(io.BytesIO(_verified(root, ADMITTED_FILE, record)))


__all__ = [
    "ADMITTED_FILE", "BUDGET_DIR", "BUDGET_FILE", "ITEMS_FILE", "ScoredPool", "budget_plan_files", "budget_url",
    "checked_budget_record", "checked_plan_file", "load_scored_pool", "plan_from_files",
    "read_admitted", "read_budget_plan", "read_budget_record", "read_plan_to_check", "stored_scoring_job",
    "stored_split_identity",
    "stored_underfill_warn_fraction",
    "write_budget_plan",
]
