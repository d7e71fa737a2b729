"""Quality gates: whether a committed dataset meets a declared policy (``kur-check``).

A policy is a JSON object (``quality.json``); every key is optional, and each present key is
one gate:

============================  ===========================================================
``min_sources``               at least this many distinct sources among the shards (int >= 0)
``min_shards``                at least this many shards in all splits together (int >= 0)
``required_modalities``       every modality named here is in the output spec (list of strings)
``verify``                    true: every shard decodes and matches its size and SHA-256
``min_budget_utilization``    every split that requested a budget admitted at least this
                              fraction of it (finite number >= 0)
``max_skipped_sources``       at most this many sources skipped by scoring (int >= 0)
============================  ===========================================================

An unknown key, a value of the wrong type (``true`` is not a number, ``3.0`` is not a count),
a non-finite number and an empty policy (which would approve anything) are
:class:`~kuration.errors.InputError` naming the file and the key. Gates fail closed: a figure
the dataset does not record (no budget request, skipped sources not recorded, a report made
without verification for ``verify``) fails its gate, saying what is missing.

:func:`check_quality` returns a :class:`QualityResult`, a :class:`~kuration.checks.CheckResult`
whose ``gates`` list each gate with ``passed``, ``value`` and ``threshold``; a failed gate
is one of its ``errors``. It decides nothing else (the CLI maps a failure to exit status 2).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kuration import storage
from kuration.checks import CheckResult, Figure, count
from kuration.errors import InputError, KurationError, check_keys, shown
from kuration.inspect.report import DatasetReport, Progress, inspect_dataset, lowest_utilization
from kuration.numbers import finite_float, format_number, format_percent, whole_number
from kuration.canonical.strict_json import parse_strict_json

#: The policy keys, in the order gates are evaluated and shown.
POLICY_KEYS = ("min_sources", "min_shards", "required_modalities", "verify", "min_budget_utilization",
               "max_skipped_sources")
#: What the gates that measure a number measure, by the name a dashboard follows it under.
MEASURES = {"min_sources": "sources", "min_shards": "shards", "verify": "bad_shards",
            "min_budget_utilization": "lowest_budget_utilization", "max_skipped_sources": "skipped_sources"}


@dataclass(frozen=True)
class QualityPolicy:
    """A checked policy; None means the gate is not part of it."""

    min_sources: int | None = None
    min_shards: int | None = None
    required_modalities: tuple[str, ...] | None = None
    verify: bool | None = None
    min_budget_utilization: float | None = None
    max_skipped_sources: int | None = None
    #: Not a gate: whether a failed gate blocks (Dagster's ``dataset_quality`` fails at ERROR
    #: severity, so the staged version is not published), rather than warns.
    blocking: bool = False

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "quality policy") -> QualityPolicy:
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: must be a JSON object of gates, got {type(data).__name__}")
        check_keys(data, (*POLICY_KEYS, "blocking"), where=where)
        if not set(data) & set(POLICY_KEYS):
            raise InputError(f"{where}: names no gate, so it would approve any dataset; use at least one of "
                             f"{list(POLICY_KEYS)}")
        values: dict[str, Any] = {}
        for key in ("min_sources", "min_shards", "max_skipped_sources"):
            if key in data:
                n = whole_number(data[key])
                if n is None or n < 0:
                    raise InputError(f"{where}: {key} must be a whole number >= 0, got {shown(data[key])}")
                values[key] = n
        if "required_modalities" in data:
            names = data["required_modalities"]
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise InputError(f"{where}: required_modalities must be a list of modality names (strings), got "
                                 f"{shown(names)}")
            values["required_modalities"] = tuple(names)
        if "verify" in data:
            if not isinstance(data["verify"], bool):
                raise InputError(f"{where}: verify must be true or false, got {shown(data['verify'])}")
            values["verify"] = data["verify"]
        if "min_budget_utilization" in data:
            fraction = finite_float(data["min_budget_utilization"])
            if fraction is None or fraction < 0:
                raise InputError(f"{where}: min_budget_utilization must be a finite number >= 0 (a fraction: 0.95 "
                                 f"is 95%), got {shown(data['min_budget_utilization'])}")
            values["min_budget_utilization"] = fraction
        if "blocking" in data:
            if not isinstance(data["blocking"], bool):
                raise InputError(f"{where}: blocking must be true or false, got {shown(data['blocking'])}")
            values["blocking"] = data["blocking"]
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in POLICY_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = list(value) if isinstance(value, tuple) else value
        if self.blocking:
            out["blocking"] = True
        return out


def load_policy(path: str | os.PathLike[str]) -> QualityPolicy:
    """The policy in the JSON file at ``path`` (a local path or an fsspec URL), parsed
    strictly (no duplicate keys, no NaN)."""
    where = os.fspath(path)
    try:
        data = storage.read_bytes(where)
    except OSError as exc:
        raise InputError(f"{where}: cannot read the quality policy: {exc.strerror or exc}") from None
    return parse_policy(data, where=where)


def parse_policy(text: str | bytes, *, where: str) -> QualityPolicy:
    """The policy in JSON ``text`` (from a file or run config), parsed strictly."""
    return QualityPolicy.from_dict(parse_strict_json(text, where=where, what="quality policy", error=InputError),
                                   where=where)


@dataclass(frozen=True)
class QualityResult(CheckResult):
    """The policy's verdict: ``gates`` holds one dict per gate (``gate``, ``passed``,
    ``value``, ``threshold``, ``detail``), ``report`` the inspection it was judged on."""

    gates: tuple[dict[str, Any], ...] = ()
    report: DatasetReport | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "gates": [dict(g) for g in self.gates]}

    def measured(self) -> dict[str, int | float]:
        """What the gates measured, where it is a number, under the names in :data:`MEASURES`
        (``sources``, ``shards``, ``bad_shards``, ...): the figures a dashboard follows from one
        check to the next. A figure the dataset does not record (None) is left out."""
        return {MEASURES[g["gate"]]: g["value"] for g in self.gates
                if g["gate"] in MEASURES and isinstance(g["value"], (int, float)) and not isinstance(g["value"], bool)}


def _gate(name: str, passed: bool, value: Any, threshold: Any, detail: str) -> dict[str, Any]:
    return {"gate": name, "passed": passed, "value": value, "threshold": threshold, "detail": detail}


def _gates(report: DatasetReport, policy: QualityPolicy) -> list[dict[str, Any]]:
    gates = []
    if policy.min_sources is not None:
        gates.append(_gate("min_sources", report.sources >= policy.min_sources, report.sources, policy.min_sources,
                           f"{count(report.sources, 'source')} among the shards, at least "
                           f"{format_number(policy.min_sources)} required"))
    if policy.min_shards is not None:
        gates.append(_gate("min_shards", report.shards >= policy.min_shards, report.shards, policy.min_shards,
                           f"{count(report.shards, 'shard')}, at least {format_number(policy.min_shards)} required"))
    if policy.required_modalities is not None:
        have = {m["name"] for m in report.modalities}
        missing = [n for n in policy.required_modalities if n not in have]
        gates.append(_gate("required_modalities", not missing, sorted(have), list(policy.required_modalities),
                           f"missing {missing}; the output spec has {sorted(have)}" if missing
                           else f"all {len(policy.required_modalities)} present"))
    if policy.verify:
        verification = report.verification
        if not verification.get("performed"):
            gates.append(_gate("verify", False, None, True, "the report was made without verification; inspect "
                                                            "with verify=True"))
        else:
            bad = verification["bad_shards"]
            detail = (f"{len(bad)} of {count(verification['shards_checked'], 'shard')} failed; first: "
                      f"{bad[0]['path']}: {bad[0]['error']}" if bad else
                      f"problems: {verification['problems']}" if verification["problems"] else
                      f"{count(verification['shards_checked'], 'shard')} decoded and matched")
            gates.append(_gate("verify", bool(verification["valid"]), len(bad), 0, detail))
    if policy.min_budget_utilization is not None:
        lowest = lowest_utilization(report.budget)
        threshold = policy.min_budget_utilization
        if lowest is None:
            gates.append(_gate("min_budget_utilization", False, None, threshold,
                               "the dataset records no split with a budget request, so there is no utilization"))
        else:
            gates.append(_gate("min_budget_utilization", lowest >= threshold, lowest, threshold,
                               f"lowest split utilization {format_percent(lowest)}, at least "
                               f"{format_percent(threshold)} required"))
    if policy.max_skipped_sources is not None:
        skipped = report.skipped_sources
        limit = policy.max_skipped_sources
        if skipped is None:
            gates.append(_gate("max_skipped_sources", False, None, limit,
                               "config.json does not record the skipped sources (job.skipped_sources)"))
        else:
            gates.append(_gate("max_skipped_sources", len(skipped) <= limit, len(skipped), limit,
                               f"{count(len(skipped), 'source')} skipped" + (f", e.g. {next(iter(skipped))}: "
                                                                             f"{next(iter(skipped.values()))}"
                                                                             if skipped else "")
                               + f"; at most {format_number(limit)} allowed"))
    return gates


def check_quality(dataset: str | os.PathLike[str] | DatasetReport, policy: QualityPolicy | Mapping[str, Any], *,
                  untrusted: bool = True, progress: Progress | None = None) -> QualityResult:
    """Judge ``dataset`` (a path or URL, inspected here with ``verify`` as the policy asks;
    or a :class:`DatasetReport` made already) against ``policy``."""
    if not isinstance(policy, QualityPolicy):
        policy = QualityPolicy.from_dict(policy)
    report = (dataset if isinstance(dataset, DatasetReport) else
              inspect_dataset(dataset, bool(policy.verify), untrusted=untrusted, progress=progress))
    gates = _gates(report, policy)
    failed = [g for g in gates if not g["passed"]]
    errors = tuple(f"{g['gate']}: {g['detail']}" for g in failed)
    figures: dict[str, Figure] = {f"{g['gate']}_passed": g["passed"] for g in gates}
    verdict = (f"{len(failed)} of {count(len(gates), 'gate')} failed; first: {errors[0]}" if failed else
               f"all {count(len(gates), 'gate')} passed")
    return QualityResult(verdict, errors, tuple(report.warnings), figures, gates=tuple(gates), report=report)


def advisory_quality(dataset: str | os.PathLike[str], *, policy_json: str | None, policy_url: str,
                     untrusted: bool = False) -> QualityResult:
    """The answer of Dagster's ``dataset_quality`` check: the policy in ``policy_json`` (run
    config) when given, else the file at ``policy_url``. A failed gate is a *warning* here
    (the dataset is usable, but look), unlike :func:`check_quality`'s errors that fail
    ``kur-check``, unless the policy says ``"blocking": true``: then it is an error, and the
    version is not published. A policy or dataset that cannot be read is an error; with no
    policy at all the result passes and says so. Never raises for what it finds."""
    try:
        if policy_json is not None:
            policy = parse_policy(policy_json, where="run config policy_json")
        elif storage.exists(policy_url):
            policy = load_policy(policy_url)
        else:
            policy = None
    except (KurationError, OSError) as exc:
        return QualityResult.cannot_check("the quality policy", exc)
    return advisory_quality_of(dataset, policy, policy_url=policy_url, untrusted=untrusted)


def advisory_quality_of(dataset: str | os.PathLike[str], policy: QualityPolicy | None, *, policy_url: str,
                        untrusted: bool = False) -> QualityResult:
    """:func:`advisory_quality` with the policy already read (``None``: there is none at
    ``policy_url``, which the verdict names)."""
    if policy is None:
        return QualityResult(f"no quality policy: add {policy_url} (a kur-check policy) or set policy_json in the "
                             "check's run config")
    try:
        result = check_quality(dataset, policy, untrusted=untrusted)
    except (KurationError, OSError) as exc:
        return QualityResult.cannot_check("the dataset", exc)
    if policy.blocking:
        return result
    return replace(result, errors=(), warnings=result.errors + result.warnings)


__all__ = ["MEASURES", "POLICY_KEYS", "QualityPolicy", "QualityResult", "advisory_quality", "advisory_quality_of",
           "check_quality", "load_policy", "parse_policy"]
