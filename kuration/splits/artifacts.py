"""The split artifacts on storage, and the validators that re-read them.

Layout under a storage root (a local folder or an fsspec URL)::

    universe/universe.parquet          canonical universe; schema metadata pins universe_hash
    splits/splits.json                 the baked DataSplitConfig (Cuvis.AI shape)
    splits/split_assignments.parquet   one row per (sample, stage)
    splits/split_report.json           what was asked, drift and constraint verdicts, counts

``materialize_splits`` plans first and writes last: nothing is written for a request
that cannot be resolved, and a positional rule whose universe drifted is refused: only
its report is written, so the drift check (and any reader comparing the pinned hash)
fails closed. So is a baked ``splits.json`` that assigns some samples of a changed
universe to no stage, until the request says ``extend_baked``. A computed split
(``random`` / ``stratified``) whose earlier resolution under the same root used the same
rule is *extended* (:mod:`kuration.splits.extend`): every earlier assignment is kept and
only new samples are placed, so a growing universe never moves a source between stages.

The validators (:func:`check_universe_table`, :func:`check_split_leakage`,
:func:`check_universe_drift`) re-read what is on storage and return a
:class:`~kuration.checks.CheckResult` (never raising for what they find); Dagster asset
checks only wrap them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pdv
import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.checks import CheckResult, count, failed_verdict
from kuration.errors import KurationError, SplitConfigError, UniverseDriftError, UniverseError
from kuration.splits.bake import GROUP_BY, bake_from_split_column, bake_random, bake_stratified
from kuration.splits.config import LEAKAGE_MODES, DataSplitConfig, dumps_splits, load_splits, loads_splits
from kuration.splits.drift import DriftCheck, DriftReport, drift_check, evaluate_drift
from kuration.splits.extend import PriorSplit, SplitExtension, bake_file, extend_computed, prior_from_stage_table
from kuration.splits.leakage import LeakageCheck, enforce, leakage_check
from kuration.splits.resolution import SplitResolution, plan_splits
from kuration.splits.universe import Universe
from kuration.canonical.strict_json import parse_strict_json

UNIVERSE_FILE = ("universe", "universe.parquet")
SPLITS_FILE = ("splits", "splits.json")
ASSIGNMENTS_FILE = ("splits", "split_assignments.parquet")
REPORT_FILE = ("splits", "split_report.json")
STRATEGIES = ("random", "stratified")
#: The :class:`SplitRequest` fields a computed split's assignments depend on.
COMPUTED_RULE_FIELDS = ("strategy", "seed", "val_ratio", "test_ratio", "group_by", "ad_aware", "leakage")


def _url(root: str, parts: tuple[str, ...]) -> str:
    return storage.join_url(root, *parts)


# -- universe -----------------------------------------------------------------------


def write_universe(universe: Universe, root: str | os.PathLike[str]) -> str:
    """Write ``universe.parquet`` atomically; returns its URL."""
    buffer = io.BytesIO()
    pq.write_table(universe.to_arrow(), buffer)
    return storage.write_bytes_atomic(_url(os.fspath(root), UNIVERSE_FILE), buffer.getvalue())


def read_universe_table(root: str | os.PathLike[str]) -> pa.Table:
    url = _url(os.fspath(root), UNIVERSE_FILE)
    if not storage.exists(url):
        raise UniverseError(f"no universe at {url}; materialize the 'universe' asset first")
    return pq.read_table(io.BytesIO(storage.read_bytes(url)))


def load_universe(root: str | os.PathLike[str]) -> Universe:
    """The universe written by :func:`write_universe`, with its pinned hash re-verified."""
    return Universe.from_arrow(read_universe_table(root), origin=_url(os.fspath(root), UNIVERSE_FILE))


UNIVERSE_TABLE_SCHEMA = pdv.DataFrameSchema(
    {
        "uid": pdv.Column(str, unique=True),
        "source": pdv.Column(str, pdv.Check.str_length(min_value=1)),
        "index": pdv.Column("Int64", pdv.Check.ge(0), nullable=True),  # null: a whole-file sample
        "stem": pdv.Column(str),
        "group": pdv.Column(str, pdv.Check.str_length(min_value=1)),
        "annotation": pdv.Column(str, nullable=True),
        "materialized_path": pdv.Column(str, nullable=True),
        "format": pdv.Column(str, nullable=True),
        "split": pdv.Column(str, nullable=True),
    },
    unique=["source", "index"],
    strict=True,
)


def validate_universe_table(table: pa.Table) -> CheckResult:
    """Check ``universe.parquet``: pandera schema, uid = ``source#index`` (``source`` for a
    whole-file sample), canonical order, pinned hash."""
    df = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    errors: list[str] = []
    try:
        UNIVERSE_TABLE_SCHEMA.validate(df, lazy=True)
    except pdv.errors.SchemaErrors as exc:
        for case in exc.failure_cases.head(10).itertuples():
            errors.append(f"column {case.column!r}: {case.check} failed for {case.failure_case!r} (row {case.index})")
    pinned = (table.schema.metadata or {}).get(b"kuration.universe_hash", b"").decode()
    if not errors:
        # the uid rule and the index conversion are from_arrow's; the pinned hash is compared
        # here rather than there, so that a missing one is reported too
        try:
            universe = Universe.from_arrow(table.replace_schema_metadata({}))
        except UniverseError as exc:
            errors.append(str(exc))
        else:
            order = np.lexsort((universe.indices, universe.source_codes))
            if not np.array_equal(order, np.arange(len(universe))):
                errors.append("rows are not in canonical (source, index) order")
            elif pinned != universe.hash:
                errors.append(f"pinned universe_hash {pinned[:12] or '(none)'}... does not match the rows "
                              f"({universe.hash[:12]}...)")
    figures = {
        "samples": len(df), "sources": int(df["source"].nunique()) if len(df) else 0,
        "groups": int(df["group"].nunique()) if len(df) else 0, "universe_hash": pinned,
    }
    if errors:
        return CheckResult(failed_verdict(tuple(errors)), tuple(errors), figures=figures)
    return CheckResult(
        f"{count(figures['samples'], 'sample')} from {count(figures['sources'], 'source')} in "
        f"{count(figures['groups'], 'group')}: schema, uids, canonical order and pinned hash {pinned[:12]}... hold",
        figures=figures,
    )


def check_universe_table(root: str | os.PathLike[str]) -> CheckResult:
    """:func:`validate_universe_table` on the stored ``universe.parquet``. Never raises: a
    missing or unreadable file fails the check."""
    try:
        table = read_universe_table(root)
    except (KurationError, pa.ArrowException) as exc:
        return CheckResult.cannot_check("universe.parquet", exc)
    return validate_universe_table(table)


# -- splits -------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitRequest:
    """Where a split comes from: exactly one of a rule / baked file, a strategy, or the
    universe's own ``split`` column."""

    splits_json: str | None = None
    strategy: str | None = None
    from_split_column: bool = False
    seed: int = 0
    val_ratio: float = 0.2
    test_ratio: float = 0.2
    group_by: str = "group"
    ad_aware: bool = False
    leakage: str = "error"
    #: Extend a baked ``splits_json`` over samples of a changed universe it assigns to no
    #: stage (by the seeded unit hash, with ``seed`` and the ratios). Without it such a file
    #: is refused and the ``universe_drift`` check fails.
    extend_baked: bool = False

    def __post_init__(self) -> None:
        chosen = [name for name, on in (
            ("splits_json", self.splits_json), ("strategy", self.strategy),
            ("from_split_column", self.from_split_column)
        ) if on]
        if len(chosen) != 1:
            raise SplitConfigError(
                f"a split request needs exactly one of splits_json, strategy, from_split_column; got {chosen or 'none'}"
            )
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise SplitConfigError(f"strategy must be one of {list(STRATEGIES)}, got {self.strategy!r}")
        if self.group_by not in GROUP_BY:
            raise SplitConfigError(f"group_by must be one of {list(GROUP_BY)}, got {self.group_by!r}")
        if self.leakage not in LEAKAGE_MODES:
            raise SplitConfigError(f"leakage must be one of {list(LEAKAGE_MODES)}, got {self.leakage!r}")
        if self.extend_baked and not self.splits_json:
            raise SplitConfigError("extend_baked extends a baked splits_json; it needs splits_json (a computed split "
                                   "extends itself when its rule is unchanged)")

    def computed_rule(self) -> dict[str, Any]:
        """The fields that decide a computed split's assignments: an earlier resolution with
        the same values is extended, any difference resolves afresh."""
        return {name: getattr(self, name) for name in COMPUTED_RULE_FIELDS}

    def describe(self) -> str:
        if self.splits_json:
            if self.extend_baked:
                return (f"rule {self.splits_json}, extended by seed {self.seed}, group_by {self.group_by}, val "
                        f"{self.val_ratio}, test {self.test_ratio}")
            return f"rule {self.splits_json}"
        if self.from_split_column:
            return "universe split column"
        return (f"{self.strategy} split, seed {self.seed}, group_by {self.group_by}, val {self.val_ratio}, "
                f"test {self.test_ratio}")


@dataclass(frozen=True)
class _Outcome:
    """What a request bakes to before anything is written. ``refusal`` is set (and ``cfg``
    None) when the request must not be resolved; ``resolution`` is the report's account of
    how the assignments came about."""

    cfg: DataSplitConfig | None
    input_drift: DriftReport | None
    resolution: dict[str, Any]
    extension: SplitExtension | None = None
    status: str = "resolved"
    refusal: str = ""


def _bake(request: SplitRequest, universe: Universe, root: str | None) -> _Outcome:
    """The baked config for a request, and how it came about (``root`` None: resolved
    afresh, no earlier resolution looked for).

    Constraints are *not* enforced here: the caller records them and the blocking
    checks gate on them."""
    if request.splits_json:
        return _bake_file(request, universe)
    if request.from_split_column:
        return _Outcome(bake_from_split_column(universe, leakage=request.leakage, check=False), None,
                        {"mode": "split_column"})
    prior, fresh_because = (_earlier_computed(request, universe, root) if root is not None
                            else (None, "resolved in memory"))
    if prior is not None:
        cfg, extension = extend_computed(
            universe, prior, seed=request.seed, val_ratio=request.val_ratio, test_ratio=request.test_ratio,
            group_by=request.group_by, ad_aware=request.ad_aware, leakage=request.leakage, check=False,
        )
        return _Outcome(cfg, None, {"mode": "extended", **extension.to_dict()}, extension)
    bake = bake_random if request.strategy == "random" else bake_stratified
    cfg = bake(
        universe, seed=request.seed, val_ratio=request.val_ratio, test_ratio=request.test_ratio,
        group_by=request.group_by, ad_aware=request.ad_aware, leakage=request.leakage, check=False,
    )
    return _Outcome(cfg, None, {"mode": "fresh", "reason": fresh_because})


def _bake_file(request: SplitRequest, universe: Universe) -> _Outcome:
    """A rule or baked ``splits_json``: refused when a positional rule drifted, or when a
    baked file leaves samples of a changed universe in no stage and ``extend_baked`` is off."""
    where = str(request.splits_json)
    rule = load_splits(where)
    drift = evaluate_drift(rule, universe)
    if not drift.ok:
        return _Outcome(None, drift, {"mode": "refused"}, status="refused_drift", refusal=drift.message)
    baked = bake_file(
        rule, universe, where=where, extend=request.extend_baked, seed=request.seed, val_ratio=request.val_ratio,
        test_ratio=request.test_ratio, group_by=request.group_by, ad_aware=request.ad_aware, check=False,
    )
    if baked.cfg is None and baked.coverage is not None:
        return _Outcome(None, drift, {"mode": "refused", "unassigned": baked.coverage.to_dict(where)},
                        status="refused_unassigned", refusal=baked.refusal(where))
    account: dict[str, Any] = {"mode": baked.mode}
    if baked.extension is not None:
        account.update(baked.extension.to_dict())
    elif request.extend_baked:
        account["extend_baked"] = "nothing to extend: the file decides about every sample, or is a rule"
    return _Outcome(baked.cfg, drift, account, baked.extension)


def _earlier_computed(request: SplitRequest, universe: Universe, root: str) -> tuple[PriorSplit | None, str]:
    """The earlier resolution under ``root`` to extend, or None and why the split is resolved afresh.

    Only a resolution of the same computed rule is extended. One that claims the same rule
    but cannot be read is an error, not a reason to start afresh: that could silently
    move sources between stages."""
    if not storage.exists(_url(root, REPORT_FILE)):
        return None, "no earlier resolution under the storage root"
    restart = (f"To resolve afresh instead (sources may move between stages), remove {_url(root, ('splits',))} "
               "or change the seed.")
    try:
        report = read_split_report(root)
    except SplitConfigError as exc:
        raise SplitConfigError(f"{exc}. The earlier split cannot be extended. {restart}") from None
    earlier = report.get("request")
    if not isinstance(earlier, dict) or earlier.get("splits_json") or earlier.get("from_split_column"):
        return None, "the earlier resolution came from a splits_json or the split column, not this rule"
    wanted = request.computed_rule()
    changed = [f"{name} {earlier.get(name)!r} -> {value!r}" for name, value in wanted.items()
               if earlier.get(name) != value]
    if changed:
        return None, f"the rule changed since the earlier resolution ({', '.join(changed)})"
    try:
        table, _ = read_split_assignments(root)
    except SplitConfigError as exc:
        raise SplitConfigError(f"{exc}. The earlier split cannot be extended. {restart}") from None
    basis = (f"earlier resolution {_url(root, ASSIGNMENTS_FILE)} (universe "
             f"{str(report.get('universe_hash'))[:12]}...)")
    return prior_from_stage_table(universe, table, basis=basis), ""


@dataclass(frozen=True)
class SplitArtifacts:
    """What :func:`materialize_splits` did. ``resolution`` is None when the request was
    refused (``refusal`` says why: a drifted positional rule, or a baked file that assigns
    samples of a changed universe to no stage)."""

    request: SplitRequest
    report_url: str
    splits_url: str | None
    assignments_url: str | None
    input_drift: DriftReport | None
    resolution: SplitResolution | None
    #: sha256 of the written splits.json: the split's identity (empty when refused).
    splits_digest: str = ""
    #: How the assignments came about: ``fresh``, ``extended``, ``extended_baked``, ``baked``, ...
    mode: str = ""
    #: Kept against newly assigned samples, when an earlier split was extended.
    extension: SplitExtension | None = None
    refusal: str = ""

    @property
    def refused(self) -> bool:
        return self.resolution is None


def materialize_splits(universe: Universe, request: SplitRequest, root: str | os.PathLike[str]) -> SplitArtifacts:
    """Bake ``request`` against ``universe`` and write the split files under ``root``.

    The report is written last, so a reader that finds a report describing these files
    finds the files complete. A refused request (a drifted positional rule, a baked file
    that does not cover a changed universe) writes only a report. A computed request whose
    rule matches the earlier resolution under ``root`` extends it."""
    root = os.fspath(root)
    outcome = _bake(request, universe, root)
    input_drift = outcome.input_drift
    report: dict[str, Any] = {
        "request": asdict(request), "universe_hash": universe.hash,
        "input_drift": input_drift.to_dict() if input_drift else None, "resolution": outcome.resolution,
    }
    report_url = _url(root, REPORT_FILE)
    mode = str(outcome.resolution.get("mode", ""))
    if outcome.cfg is None:
        report.update(status=outcome.status, refusal=outcome.refusal)
        storage.write_bytes_atomic(report_url, json.dumps(report, indent=2, sort_keys=True).encode())
        return SplitArtifacts(request, report_url, None, None, input_drift, None, mode=mode, refusal=outcome.refusal)
    cfg = outcome.cfg
    resolution = plan_splits(cfg, universe)
    buffer = io.BytesIO()
    pq.write_table(resolution.stage_table(), buffer)
    assignments_bytes = buffer.getvalue()
    assignments_url = storage.write_bytes_atomic(_url(root, ASSIGNMENTS_FILE), assignments_bytes)
    splits_bytes = dumps_splits(cfg).encode("utf-8")
    splits_url = storage.write_bytes_atomic(_url(root, SPLITS_FILE), splits_bytes)
    digest = hashlib.sha256(splits_bytes).hexdigest()
    report.update(status="resolved", splits_sha256=digest,
                  assignments_sha256=hashlib.sha256(assignments_bytes).hexdigest(), **resolution.summary())
    storage.write_bytes_atomic(report_url, json.dumps(report, indent=2, sort_keys=True).encode())
    return SplitArtifacts(request, report_url, splits_url, assignments_url, input_drift, resolution, digest,
                          mode=mode, extension=outcome.extension)


def resolve_split_request(universe: Universe, request: SplitRequest) -> SplitResolution:
    """``request`` resolved against ``universe`` in memory, its leakage policy enforced:
    what :func:`materialize_splits` would write under a fresh storage root, for a notebook.
    Nothing is read from or written to a storage root, so no earlier split is extended.
    Raises :class:`SplitConfigError` when the request is refused (a drifted positional rule,
    a baked file that leaves samples in no stage) and ``SplitLeakageError`` on leakage."""
    outcome = _bake(request, universe, None)
    if outcome.cfg is None:
        raise SplitConfigError(outcome.refusal)
    resolution = plan_splits(outcome.cfg, universe)
    enforce(resolution.leakage)
    return resolution


def read_split_report(root: str | os.PathLike[str]) -> dict[str, Any]:
    url = _url(os.fspath(root), REPORT_FILE)
    if not storage.exists(url):
        raise SplitConfigError(f"no split report at {url}; materialize the 'resolved_splits' asset first")
    report = parse_strict_json(storage.read_bytes(url), where=url, what="split report", error=SplitConfigError)
    if not isinstance(report, dict):
        raise SplitConfigError(f"{url}: a split report is a JSON object, got {type(report).__name__}; re-materialize "
                               "'resolved_splits'")
    return report


def read_split_assignments(root: str | os.PathLike[str]) -> tuple[pa.Table, str]:
    """The resolved ``split_assignments.parquet`` and the splits.json SHA-256 it belongs to.

    Refused unless the report says the split resolved and ``splits.json`` still has that
    SHA-256: after a refused (drifted) re-run the old assignments are still on storage, and
    must not be used as if they were current."""
    root = os.fspath(root)
    report = read_split_report(root)
    if report.get("status") != "resolved":
        why = report.get("refusal") or (report.get("input_drift") or {}).get("message", "see the report")
        raise SplitConfigError(
            f"{_url(root, REPORT_FILE)}: the last split run was {report.get('status')!r}, not resolved "
            f"({why}); fix the split and re-materialize 'resolved_splits'"
        )
    splits_url, assignments_url = _url(root, SPLITS_FILE), _url(root, ASSIGNMENTS_FILE)
    for url in (splits_url, assignments_url):
        if not storage.exists(url):
            raise SplitConfigError(f"no {url}; materialize the 'resolved_splits' asset first")
    digest = hashlib.sha256(storage.read_bytes(splits_url)).hexdigest()
    if digest != report.get("splits_sha256"):
        raise SplitConfigError(
            f"{splits_url} changed after the split report was written (sha256 {digest[:12]}..., report "
            f"{str(report.get('splits_sha256'))[:12]}...); re-materialize 'resolved_splits'"
        )
    assignments = storage.read_bytes(assignments_url)
    pinned = report.get("assignments_sha256")  # reports written before it was pinned have none
    if pinned is not None and hashlib.sha256(assignments).hexdigest() != pinned:
        raise SplitConfigError(
            f"{assignments_url} changed after the split report was written (report sha256 {str(pinned)[:12]}...); "
            "re-materialize 'resolved_splits'"
        )
    return pq.read_table(io.BytesIO(assignments)), digest


def load_baked_splits(root: str | os.PathLike[str], universe: Universe) -> DataSplitConfig:
    """The committed ``splits.json``, refused unless it was baked against ``universe``.

    This is how downstream readers fail closed: a split baked against another universe
    (new recordings arrived, the split was not re-run) is stale."""
    url = _url(os.fspath(root), SPLITS_FILE)
    if not storage.exists(url):
        raise SplitConfigError(f"no baked splits at {url}; materialize the 'resolved_splits' asset first")
    cfg = loads_splits(storage.read_bytes(url), where=url)
    if cfg.universe_hash != universe.hash:
        raise UniverseDriftError(
            f"{url} was baked against universe {str(cfg.universe_hash)[:12]}..., but the universe is now "
            f"{universe.hash[:12]}...; re-materialize 'resolved_splits'"
        )
    return cfg


def check_split_leakage(root: str | os.PathLike[str]) -> LeakageCheck:
    """Re-resolve the committed ``splits.json`` against the stored universe and evaluate its
    constraints, with per-stage sample counts. Never raises: a split that cannot be read
    (missing, or baked against another universe) fails the check."""
    try:
        universe = load_universe(root)
        resolution = plan_splits(load_baked_splits(root, universe), universe)
    except KurationError as exc:
        return LeakageCheck.cannot_check("the split's leakage", exc)
    return leakage_check(resolution.leakage, resolution.counts())


def check_universe_drift(root: str | os.PathLike[str]) -> DriftCheck:
    """Does the split on storage still belong to the universe on storage?

    Fails when the asset refused the input (a drifted positional rule, or a baked file
    that assigns samples of a changed universe to no stage), or when the committed
    ``splits.json`` pins a different universe than ``universe.parquet`` holds. Never
    raises: missing or unreadable artifacts fail the check."""
    try:
        universe = load_universe(root)
        report = read_split_report(root)
        input_drift = report.get("input_drift")
        if str(report.get("status", "")).startswith("refused"):
            return drift_check(universe.hash, None, input_drift, refused=True, refusal=report.get("refusal"))
        url = _url(os.fspath(root), SPLITS_FILE)
        baked = loads_splits(storage.read_bytes(url), where=url).universe_hash
    except (KurationError, FileNotFoundError) as exc:
        return DriftCheck.cannot_check("the split's universe", exc)
    return drift_check(universe.hash, baked, input_drift)


def preview_frame(universe: Universe, rows: int = 10) -> pd.DataFrame:
    """The first rows of the universe, for a metadata preview table."""
    table = universe.to_arrow().slice(0, rows).select(["uid", "source", "index", "group", "materialized_path"])
    return table.to_pandas()
