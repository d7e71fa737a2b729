"""One shape for every validator's answer: :class:`CheckResult`.

The validators (universe table, leakage, drift, segment pool, budget, dataset integrity)
each return a ``CheckResult``, or a subclass that keeps the richer attributes its callers
use. It holds what was wrong (``errors``), what someone should look at (``warnings``), plain
figures for a dashboard, and a one-line ``verdict`` with numbers and units that a person can
read without opening a file; on failure the verdict names the first offenders.

The severity rule is the same everywhere: errors fail the check as an error (the artifact
must not be used), warnings alone fail it as a warning (usable, but look), neither passes.
This module only describes results: it does not log, raise on a failed check, or know how
a dashboard shows them (the Dagster adapter lives in ``kuration_dagster_checks``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

#: A figure is a plain value a table cell can show; nested structures belong in the artifact.
Figure = int | float | str | bool | None
Severity = Literal["error", "warn"]

#: How long a verdict may grow; past it the rest is cut (the errors keep the full text).
VERDICT_LIMIT = 400

_Result = TypeVar("_Result", bound="CheckResult")


@dataclass(frozen=True)
class CheckResult:
    """A validator's answer. ``verdict`` is one line; ``figures`` map a name (with its unit,
    e.g. ``train_admitted_hours``) to a plain value."""

    verdict: str
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    figures: Mapping[str, Figure] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, str) or not self.verdict.strip():
            raise ValueError(f"a check result needs a verdict, got {self.verdict!r}")
        # Frozen, so the normalized values go in through object.__setattr__.
        object.__setattr__(self, "verdict", one_line(self.verdict))
        object.__setattr__(self, "errors", tuple(str(e) for e in self.errors))
        object.__setattr__(self, "warnings", tuple(str(w) for w in self.warnings))
        for name, value in self.figures.items():
            if not isinstance(name, str) or not (value is None or isinstance(value, (int, float, str, bool))):
                raise TypeError(f"figure {name!r}: must be a number, string, bool or None, got {type(value).__name__}")
        object.__setattr__(self, "figures", dict(self.figures))

    @property
    def ok(self) -> bool:
        """No errors: what was checked may be used (warnings never make it unusable)."""
        return not self.errors

    @property
    def passed(self) -> bool:
        """Neither errors nor warnings."""
        return not self.errors and not self.warnings

    @property
    def severity(self) -> Severity | None:
        """``error`` with errors, ``warn`` with warnings only, None when the check passed."""
        if self.errors:
            return "error"
        return "warn" if self.warnings else None

    @classmethod
    def cannot_check(cls: type[_Result], what: str, exc: BaseException) -> _Result:
        """The check could not run (a missing or tampered input): that fails it as an error."""
        return cls(verdict=f"cannot check {what}: {exc}", errors=(str(exc),))

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "passed": self.passed, "severity": self.severity, "verdict": self.verdict,
                "errors": list(self.errors), "warnings": list(self.warnings), "figures": dict(self.figures)}


def one_line(text: str, limit: int = VERDICT_LIMIT) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def first(items: Iterable[object], total: int | None = None, *, shown: int = 3) -> str:
    """The first ``shown`` items, and how many more of ``total`` there are."""
    listed = [str(i) for i in items]
    total = len(listed) if total is None else total
    head = ", ".join(listed[:shown])
    return f"{head} and {total - min(shown, len(listed))} more" if total > shown else head


def count(n: int, noun: str) -> str:
    """``3,322 shards``; ``1 shard``. ``noun`` is the singular; the plural adds an s."""
    return f"{n:,} {noun if n == 1 else noun + 's'}"


def failed_verdict(errors: tuple[str, ...], noun: str = "problem") -> str:
    """``2 problems; first: <the first error>``: a failing verdict that names its first offender."""
    return f"{count(len(errors), noun)}; first: {errors[0]}"


__all__ = ["CheckResult", "Figure", "Severity", "count", "failed_verdict", "first", "one_line"]
