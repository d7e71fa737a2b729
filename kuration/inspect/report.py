"""``inspect_dataset``: what a committed dataset holds, from its manifest and config alone.

A training team runs this before it trusts an artifact; it needs neither the job that wrote
the dataset nor the corpus it came from. The report (:class:`DatasetReport`) gives, per
split, shards, steps, bytes and hours (steps over the ``sample_hz`` the config's schema
records; None when the config records no schema), the modalities, the padding (padded
shards and pad rows), the distribution of shard lengths, the budget block (requested,
admitted and emitted per split with utilization and underfill), the priorities of the
admitted and the rejected items of the plan the dataset carries (``budget/``, read through
the commit chain, :mod:`kuration.read.dataset_plan`), the sources the scoring pass skipped
with their errors, the provenance fingerprints and the execution mode.

``verify=True`` also decodes every shard with :func:`kuration.read.read_shard` (size and
SHA-256 first, then the decode and the step count), and reports each failing shard by path
in ``verification["bad_shards"]``; ``verification["valid"]`` is the verdict (None without
verify). Inspection is for artifacts someone else may have written, so by default the
dataset is loaded ``untrusted=True``: ``hdf5`` and ``parquet`` shards are decoded in a
worker with a time and memory limit (see :mod:`kuration.read.committed`); pass
``untrusted=False`` for your own artifacts to decode them in process.

Loading is fail closed: a dataset that is not committed, or whose metadata does not match
its commit record, raises ``CommitError`` (nothing is reported about a dataset that cannot
be trusted). Problems found in metadata that did load (a plan that does not match its pin,
a config field of the wrong type) are listed in ``problems`` and make ``valid`` False under
verify. This module reads and summarizes; it formats no text or markup (``html.py``,
``cli.py``) and decides no policy (``quality.py``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.budget.fill import ADMITTED_REASONS, CANDIDATE_REASONS
from kuration.budget.plan import BudgetPlan
from kuration.budget.review import hours_selection_review
from kuration.budget.validation import string_codes
from kuration.errors import KurationError
from kuration.numbers import finite_float
from kuration.read.committed import CommittedDataset, load_committed, read_shard
from kuration.read.dataset_plan import plan_pin, read_dataset_budget_plan
from kuration.splits.stages import EXCLUSIVE_STAGES

#: Bumped whenever a key of :meth:`DatasetReport.to_dict` is renamed, removed or changes meaning.
REPORT_SCHEMA_VERSION = 1
#: Reasons an item was ranked and left out (the others that are not admitted could not be ranked).
REJECTED_REASONS = tuple(r for r in CANDIDATE_REASONS if r not in ADMITTED_REASONS)
#: Bins of the priority histogram.
PRIORITY_BINS = 20

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class DatasetReport:
    """One dataset at a glance; :meth:`to_dict` is its JSON form (``schema_version`` keyed)."""

    root: str
    commit: dict[str, Any]
    output: dict[str, Any]
    sample_hz: float | None
    splits: dict[str, dict[str, Any]]
    modalities: list[dict[str, Any]]
    padding: dict[str, int]
    #: n_steps -> how many shards have it (as strings in JSON), ascending.
    shard_lengths: dict[int, int]
    #: Distinct sources among the shards: those the budget admitted at least one span of.
    sources: int
    #: Sources given to scoring: those the budget plan chose from (its split pools and the
    #: sources in no split, from the manifest's budget block) and those scoring skipped; the
    #: count the universe, scoring and budget pages show. None when not recorded.
    scored_sources: int | None
    budget: dict[str, Any] | None
    priorities: dict[str, Any] | None
    #: Source id -> the scoring error; None when the config does not record them.
    skipped_sources: dict[str, str] | None
    provenance: dict[str, Any]
    execution: dict[str, Any]
    warnings: list[str]
    problems: list[str]
    verification: dict[str, Any] = field(default_factory=dict)

    @property
    def shards(self) -> int:
        return sum(split["shards"] for split in self.splits.values())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shard_lengths"] = {str(k): v for k, v in self.shard_lengths.items()}
        data["shards"] = self.shards
        return {"schema_version": REPORT_SCHEMA_VERSION, "kind": "dataset_report", **data}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sample_hz(config: Mapping[str, Any], problems: list[str]) -> float | None:
    schema = _dict(_dict(config.get("job")).get("schema"))
    if "sample_hz" not in schema:
        return None
    hz = finite_float(schema["sample_hz"])
    if hz is None or hz <= 0:
        problems.append(f"config.json: job.schema.sample_hz must be a positive number, got {schema['sample_hz']!r}")
        return None
    return hz


def _hours(steps: int, sample_hz: float | None) -> float | None:
    return None if sample_hz is None else steps / sample_hz / 3600.0


def _splits(dataset: CommittedDataset, sample_hz: float | None,
            budget: Mapping[str, Any] | None) -> tuple[dict[str, dict[str, Any]], dict[str, int], Counter[int], int]:
    """Per-split sizes, the padding, the shard-length counts and the distinct sources, in one
    pass over the entries (the manifest can hold 100,000 of them)."""
    shard_length = dataset.spec.shard_length
    sizes = {name: [0, 0, 0, 0, 0] for name in EXCLUSIVE_STAGES}  # shards, steps, bytes, padded, pad rows
    lengths: Counter[int] = Counter()
    sources = set()
    for entry in dataset.manifest["entries"]:
        row = sizes[entry["split"]]
        n_steps = entry["n_steps"]
        pad = entry.get("rows", shard_length) - n_steps
        row[0] += 1
        row[1] += n_steps
        row[2] += entry["bytes"]
        if pad > 0 or entry.get("padded") is True:
            row[3] += 1
        row[4] += pad
        lengths[n_steps] += 1
        sources.add(entry.get("source_id"))
    seconds = budget is not None and budget.get("unit") == "seconds"
    splits: dict[str, dict[str, Any]] = {}
    for name, (shards, steps, size, padded, pad_rows) in sizes.items():
        block = _dict(_dict(budget.get("splits") if budget else None).get(name))
        requested = finite_float(block.get("requested")) if seconds else None
        splits[name] = {"shards": shards, "steps": steps, "bytes": size, "hours": _hours(steps, sample_hz),
                        "requested_hours": None if requested is None else requested / 3600.0,
                        "padded_shards": padded, "pad_rows": pad_rows}
    padding = {"padded_shards": sum(s["padded_shards"] for s in splits.values()),
               "pad_rows": sum(s["pad_rows"] for s in splits.values())}
    sources.discard(None)
    return splits, padding, Counter(dict(sorted(lengths.items()))), len(sources)


_BUDGET_KEYS = ("requested", "candidate", "admitted", "emitted", "utilization", "underfill")


def _budget(manifest: Mapping[str, Any], problems: list[str]) -> dict[str, Any] | None:
    block = manifest.get("budget")
    if block is None:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("splits"), dict):
        problems.append("dataset_manifest.json: budget must be an object with a splits object")
        return None
    splits = {}
    for name in EXCLUSIVE_STAGES:
        split = _dict(block["splits"].get(name))
        splits[name] = {key: split.get(key) for key in _BUDGET_KEYS}
    return {"unit": block.get("unit"), "splits": splits, "totals": _dict(block.get("totals")),
            "span_seconds": block.get("span_seconds"), "span_steps": block.get("span_steps")}


def _scored_sources(manifest: Mapping[str, Any], skipped: Mapping[str, str] | None) -> int | None:
    """How many sources scoring was given (see :attr:`DatasetReport.scored_sources`)."""
    block = _dict(manifest.get("budget"))
    pools, outside = _dict(_dict(block.get("pools")).get("sources")), _dict(block.get("not_in_split")).get("sources")
    counts = [n for n in [*(pools.get(name) for name in EXCLUSIVE_STAGES), outside] if type(n) is int and n >= 0]
    if len(counts) != len(EXCLUSIVE_STAGES) + 1:
        return None  # no budget block, or one that does not count its sources: nothing to compare with
    return sum(counts) + len(skipped or ())


def lowest_utilization(budget: Mapping[str, Any] | None) -> float | None:
    """The lowest utilization among the splits that requested something (None when none did)."""
    if not budget:
        return None
    values = [finite_float(split.get("utilization")) for split in budget["splits"].values()
              if (finite_float(split.get("requested")) or 0) > 0]
    known = [v for v in values if v is not None]
    return min(known) if known else None


def priority_distribution(plan: BudgetPlan) -> dict[str, Any]:
    """Histogram of the finite priorities of the admitted items and of the rejected ones
    (ranked, left out), on shared bin edges; items that could not be ranked are counted."""
    items = plan.items
    reasons = string_codes(items.column("reason").cast(pa.string()))  # millions of items: numpy, not strings
    priority = np.asarray(items.column("priority").to_numpy(zero_copy_only=False), dtype=np.float64)
    finite = np.isfinite(priority)
    admitted = reasons.among(ADMITTED_REASONS) & finite
    rejected = reasons.among(REJECTED_REASONS) & finite
    ranked = priority[admitted | rejected]
    counts = np.bincount(reasons.codes + 1, minlength=len(reasons.names) + 1)  # a null reason reads as "None"
    reason_counts = {name: int(n) for name, n in sorted(zip([str(None), *reasons.names], counts, strict=True)) if n}
    if not ranked.size:
        return {"edges": [], "admitted": [], "rejected": [], "unrankable": int((~(admitted | rejected)).sum()),
                "reasons": reason_counts}
    low, high = float(ranked.min()), float(ranked.max())
    if high == low:
        high = low + 1.0
    edges = np.linspace(low, high, PRIORITY_BINS + 1)
    return {"edges": [float(e) for e in edges],
            "admitted": [int(n) for n in np.histogram(priority[admitted], edges)[0]],
            "rejected": [int(n) for n in np.histogram(priority[rejected], edges)[0]],
            "unrankable": int((~(admitted | rejected)).sum()), "reasons": reason_counts}


def _selection(plan: BudgetPlan) -> dict[str, Any]:
    """Per split, the priority cut from the selection review (no second implementation)."""
    review = hours_selection_review(plan, max_examples=1)
    return {name: review.split_review(name)["priority"] for name in EXCLUSIVE_STAGES}


def _skipped(config: Mapping[str, Any], problems: list[str]) -> dict[str, str] | None:
    job = _dict(config.get("job"))
    if "skipped_sources" not in job:
        return None
    skipped = job["skipped_sources"]
    if not isinstance(skipped, dict):
        problems.append(f"config.json: job.skipped_sources must be an object, got {type(skipped).__name__}")
        return None
    return {str(k): str(v) for k, v in sorted(skipped.items())}


def _execution(config: Mapping[str, Any]) -> dict[str, Any]:
    job, results = _dict(config.get("job")), _dict(config.get("results"))
    return {"executor": job.get("executor"), "workers": job.get("workers"), "on_error": job.get("on_error"),
            "memory_budget_bytes": job.get("memory_budget_bytes"),
            "resume_requested": _dict(results.get("resume")).get("requested"),
            "written_shards": results.get("written_shards"), "reused_shards": results.get("reused_shards"),
            "timestamps": _dict(config.get("timestamps"))}


def _warnings(report_splits: Mapping[str, Any], budget: Mapping[str, Any] | None,
              skipped: Mapping[str, str] | None, has_plan: bool, sample_hz: float | None) -> list[str]:
    """What is usable but worth a look."""
    out = []
    for name, split in (budget or {}).get("splits", {}).items():
        underfill = finite_float(split.get("underfill")) or 0.0
        if underfill > 0:
            out.append(f"{name}: underfilled by {underfill:g} {budget.get('unit') if budget else ''} of "
                       f"{split.get('requested')} requested (the pool ran out of admissible items)")
    if skipped:
        out.append(f"{len(skipped)} source(s) skipped by scoring, e.g. {next(iter(skipped))}")
    if not has_plan:
        out.append("the dataset records no budget plan (results.budget_plan): priorities cannot be shown")
    if sample_hz is None:
        out.append("config.json records no job.schema.sample_hz: durations cannot be given in hours")
    empty = [name for name, split in report_splits.items() if split["shards"] == 0
             and (finite_float(((budget or {}).get("splits", {}).get(name) or {}).get("requested")) or 0) > 0]
    out.extend(f"{name}: requested a budget but holds no shard" for name in empty)
    return out


def _verify(dataset: CommittedDataset, problems: list[str], progress: Progress | None) -> dict[str, Any]:
    bad: list[dict[str, str]] = []
    entries = dataset.manifest["entries"]
    for done, entry in enumerate(entries, start=1):
        try:
            read_shard(dataset, entry)
        except KurationError as exc:
            bad.append({"path": entry["path"], "error": str(exc)})
        if progress is not None:
            progress(done, len(entries), entry["path"])
    return {"performed": True, "valid": not bad and not problems, "shards_checked": len(entries),
            "bad_shards": bad, "problems": list(problems)}


def inspect_dataset(path: str | os.PathLike[str] | CommittedDataset, verify: bool = False, *, untrusted: bool = True,
                    progress: Progress | None = None) -> DatasetReport:
    """Report on the committed dataset at ``path`` (a directory, an fsspec URL such as
    ``s3://bucket/run1``, or its ``dataset_manifest.json``; or one already loaded, whose own
    ``untrusted`` setting then applies). ``verify=True`` decodes every shard;
    ``progress(done, total, shard_path)`` is called after each. See the module doc."""
    dataset = path if isinstance(path, CommittedDataset) else load_committed(path, untrusted=untrusted)
    manifest, config, spec = dataset.manifest, dataset.config, dataset.spec
    problems: list[str] = []
    sample_hz = _sample_hz(config, problems)
    budget = _budget(manifest, problems)
    splits, padding, lengths, sources = _splits(dataset, sample_hz, budget)
    priorities = None
    has_plan = False
    try:
        has_plan = plan_pin(dataset) is not None
        if has_plan:
            plan = read_dataset_budget_plan(dataset)
            priorities = {**priority_distribution(plan), "splits": _selection(plan)}
    except KurationError as exc:
        problems.append(f"budget plan: {exc}")
    skipped = _skipped(config, problems)
    modalities = [{"name": m.name, "dtype": m.dtype, "shape": list(m.shape), "kind": m.kind, "source": m.source}
                  for m in spec.modalities.values()]
    record = dataset.record
    report = DatasetReport(
        root=dataset.root,
        commit={"state": record.state, "run_fingerprint": record.run_fingerprint,
                "manifest_sha256": record.manifest_sha256, "config_sha256": record.config_sha256},
        output={"container": spec.container, "shard_length": spec.shard_length, "short_policy": spec.short_policy,
                "presence_mask": spec.presence_mask},
        sample_hz=sample_hz, splits=splits, modalities=modalities, padding=padding, shard_lengths=dict(lengths),
        sources=sources, scored_sources=_scored_sources(manifest, skipped), budget=budget, priorities=priorities,
        skipped_sources=skipped,
        provenance=_dict(config.get("provenance")), execution=_execution(config),
        warnings=_warnings(splits, budget, skipped, has_plan, sample_hz), problems=problems,
        verification=(_verify(dataset, problems, progress) if verify else
                      {"performed": False, "valid": None, "shards_checked": 0, "bad_shards": [],
                       "problems": list(problems)}),
    )
    return report


__all__ = ["REPORT_SCHEMA_VERSION", "DatasetReport", "inspect_dataset", "lowest_utilization",
           "priority_distribution"]
