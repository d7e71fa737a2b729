"""The drift guard: a split with position-dependent selectors must match its universe.

``dir_indices`` address "the Nth sample"; if samples were added or removed since the split
was written, the same numbers now pick different samples. A split that pins a
``universe_hash`` and still holds ``dir_indices`` is therefore verified against the live
universe, and refused when it no longer matches. Baked ``file_indices`` / ``files`` name
samples by identity and are unaffected; the report still says the pin differs.

:func:`drift_check` is the ``universe_drift`` check's answer about the artifacts on storage:
the uniform :class:`~kuration.checks.CheckResult` (:class:`DriftCheck`, keeping the hashes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuration.checks import CheckResult
from kuration.errors import UniverseDriftError
from kuration.splits.config import DataSplitConfig
from kuration.splits.sample_ref import SampleRef
from kuration.splits.selectors import SelectorKind
from kuration.splits.universe import Universe, universe_hash


def has_dir_indices(cfg: DataSplitConfig) -> bool:
    """True if any stage holds a ``dir_indices`` selector, nested ones included."""
    return any(sel.kind is SelectorKind.DIR_INDICES for top in cfg.all_selectors() for sel in top.walk())


@dataclass(frozen=True)
class DriftReport:
    """``status``: ``match``, ``unpinned``, ``position_independent`` (pin differs, no
    ``dir_indices``: safe) or ``drifted`` (pin differs and ``dir_indices`` remain: refused)."""

    status: str
    expected: str | None
    actual: str
    has_dir_indices: bool

    @property
    def ok(self) -> bool:
        return self.status != "drifted"

    @property
    def message(self) -> str:
        expected = self.expected or ""  # pinned whenever the status is drifted or position_independent
        if self.status == "drifted":
            return (
                "universe changed since splits.json was committed "
                f"(expected {expected[:12]}..., got {self.actual[:12]}...). "
                "Re-run resolve-splits, or remove dir_indices in favor of files/file_indices."
            )
        if self.status == "position_independent":
            return (
                f"universe changed since the split was pinned (expected {expected[:12]}..., got "
                f"{self.actual[:12]}...), but the split holds no dir_indices, so it still selects the same samples"
            )
        if self.status == "unpinned":
            return "the split pins no universe_hash; nothing to verify"
        return f"universe matches the pinned hash {self.actual[:12]}..."

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "ok": self.ok, "expected": self.expected, "actual": self.actual,
            "has_dir_indices": self.has_dir_indices, "message": self.message,
        }


def evaluate_drift(cfg: DataSplitConfig, refs: Sequence[SampleRef] | Universe) -> DriftReport:
    """Compare the split's pinned hash with the live universe. Pure; never raises."""
    actual = universe_hash(refs)
    positional = has_dir_indices(cfg)
    if cfg.universe_hash is None:
        status = "unpinned"
    elif cfg.universe_hash == actual:
        status = "match"
    else:
        status = "drifted" if positional else "position_independent"
    return DriftReport(status, cfg.universe_hash, actual, positional)


@dataclass(frozen=True)
class DriftCheck(CheckResult):
    """The ``universe_drift`` answer. ``baked_hash`` is the universe the stored ``splits.json``
    pins (None when the split run was refused); ``input_drift`` the input rule's report."""

    universe_hash: str = ""
    baked_hash: str | None = None
    input_drift: Mapping[str, Any] | None = None


def drift_check(universe_hash: str, baked_hash: str | None, input_drift: Mapping[str, Any] | None, *,
                refused: bool = False, refusal: str | None = None) -> DriftCheck:
    """Does a stored split, baked against ``baked_hash``, belong to the stored universe?
    ``refused``: the split run refused its input and baked nothing; ``refusal`` says why
    (by default the input rule's drift message)."""
    figures = {"universe_hash": universe_hash, "baked_universe_hash": baked_hash or "",
               "input_rule": (input_drift or {}).get("status", "none")}
    fields: dict[str, Any] = {"figures": figures, "universe_hash": universe_hash, "baked_hash": baked_hash,
                              "input_drift": input_drift}
    if refused:
        message = refusal or (input_drift or {}).get("message") or "the split run was refused and wrote no splits.json"
        return DriftCheck(f"split refused: {message}", (message,), **fields)
    if baked_hash != universe_hash:
        message = (f"splits.json pins universe {str(baked_hash)[:12]}..., but universe.parquet is "
                   f"{universe_hash[:12]}...; the universe changed after the split was baked. Re-materialize "
                   "'resolved_splits'.")
        return DriftCheck(message, (message,), **fields)
    verdict = f"split is baked against the current universe {universe_hash[:12]}..."
    if input_drift and input_drift.get("status") == "position_independent":
        verdict += f" ({input_drift.get('message')})"
    return DriftCheck(verdict, **fields)


def verify_universe(cfg: DataSplitConfig, refs: Sequence[SampleRef] | Universe) -> DriftReport:
    """Raise :class:`UniverseDriftError` when a pinned split with ``dir_indices`` has drifted."""
    report = evaluate_drift(cfg, refs)
    if not report.ok:
        raise UniverseDriftError(report.message)
    return report
