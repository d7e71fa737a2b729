"""``DataSplitConfig`` and its file form, ``splits.json``.

The file is interchangeable with Cuvis.AI's: we read what it writes and it reads what we
write. Two spellings of the leakage policy exist and both are read:

* the seed's ``leakage_check``: ``error`` (the default), ``warn`` or ``off``;
* the current Cuvis.AI ``constraints`` list of ``{kind, severity}`` entries, kinds
  ``no_split_overlap`` / ``no_source_overlap`` / ``no_train_anomalous``; a disabled
  constraint is simply absent.

``save_splits`` always writes the ``constraints`` form, because the current
``cuvis-ai-schemas`` release rejects unknown keys. A file carrying neither spelling gets
the seed's default, ``leakage_check: error``; a file with an explicit empty
``constraints`` list declares no checks.

Loading validates shape only; nothing here touches the universe.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from kuration import storage
from kuration.errors import SelectorError, SplitConfigError
from kuration.splits.selectors import CONCRETE_KINDS, Selector, required_attrs_of

STAGES = ("train", "val", "test", "predict")
#: The stages leakage is checked across; ``predict`` may legitimately overlap them.
EXCLUSIVE_STAGES = ("train", "val", "test")
LEAKAGE_MODES = ("error", "warn", "off")


class ConstraintKind(StrEnum):
    NO_SPLIT_OVERLAP = "no_split_overlap"
    NO_SOURCE_OVERLAP = "no_source_overlap"
    NO_TRAIN_ANOMALOUS = "no_train_anomalous"


class ConstraintSeverity(StrEnum):
    ERROR = "error"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class Constraint:
    kind: ConstraintKind
    severity: ConstraintSeverity = ConstraintSeverity.ERROR

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", ConstraintKind(self.kind))
        except ValueError:
            raise SplitConfigError(
                f"unknown constraint kind {self.kind!r}; valid kinds: {[k.value for k in ConstraintKind]}"
            ) from None
        try:
            object.__setattr__(self, "severity", ConstraintSeverity(self.severity))
        except ValueError:
            raise SplitConfigError(
                f"constraint '{self.kind.value}': unknown severity {self.severity!r}; "
                f"valid: {[s.value for s in ConstraintSeverity]}"
            ) from None

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "severity": self.severity.value}


def constraints_for_leakage_check(mode: str) -> tuple[Constraint, ...]:
    """The ``constraints`` equivalent of a seed-style ``leakage_check`` value."""
    if mode not in LEAKAGE_MODES:
        raise SplitConfigError(f"leakage_check must be one of {list(LEAKAGE_MODES)}, got {mode!r}")
    if mode == "off":
        return ()
    return (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity(mode)),)


@dataclass(frozen=True, slots=True)
class DataSplitConfig:
    """Per-stage selector lists (each unioned in order) plus the pinned universe and policy.

    An empty ``predict`` means the whole universe. ``splits_path`` is carried only so a
    Cuvis.AI file round-trips unchanged.
    """

    universe_hash: str | None = None
    train: tuple[Selector, ...] = ()
    val: tuple[Selector, ...] = ()
    test: tuple[Selector, ...] = ()
    predict: tuple[Selector, ...] = ()
    constraints: tuple[Constraint, ...] = field(
        default_factory=lambda: constraints_for_leakage_check("error")
    )
    splits_path: str | None = None

    def __post_init__(self) -> None:
        for stage in STAGES:
            value = tuple(getattr(self, stage))
            for i, sel in enumerate(value):
                if not isinstance(sel, Selector):
                    raise SplitConfigError(f"{stage}[{i}]: expected a Selector, got {sel!r}")
            object.__setattr__(self, stage, value)
        constraints = tuple(self.constraints)
        kinds = [c.kind for c in constraints]
        dupes = sorted({k.value for k in kinds if kinds.count(k) > 1})
        if dupes:
            raise SplitConfigError(f"duplicate constraint kind(s): {', '.join(dupes)}")
        object.__setattr__(self, "constraints", constraints)

    def stage(self, name: str) -> tuple[Selector, ...]:
        if name not in STAGES:
            raise SplitConfigError(f"unknown stage {name!r}; stages are {list(STAGES)}")
        return getattr(self, name)

    def constraint(self, kind: ConstraintKind) -> Constraint | None:
        return next((c for c in self.constraints if c.kind == kind), None)

    @property
    def leakage_check(self) -> str:
        """The seed-style policy this config implies: the ``no_split_overlap`` severity, or ``off``."""
        c = self.constraint(ConstraintKind.NO_SPLIT_OVERLAP)
        return "off" if c is None else c.severity.value

    def with_leakage_check(self, mode: str) -> DataSplitConfig:
        """A copy whose ``no_split_overlap`` constraint follows ``mode``; other constraints stay."""
        others = tuple(c for c in self.constraints if c.kind != ConstraintKind.NO_SPLIT_OVERLAP)
        return replace(self, constraints=constraints_for_leakage_check(mode) + others)

    def all_selectors(self) -> list[Selector]:
        return [sel for stage in STAGES for sel in getattr(self, stage)]

    @property
    def is_baked(self) -> bool:
        """True when every selector (nested ones included) is concrete and a hash is pinned."""
        return self.universe_hash is not None and all(
            sel.kind in CONCRETE_KINDS for top in self.all_selectors() for sel in top.walk()
        )

    def required_attrs(self) -> frozenset[str]:
        return required_attrs_of(self.all_selectors())

    def to_dict(self) -> dict[str, Any]:
        """The Cuvis.AI ``DataSplitConfig`` dump: every field, in its field order."""
        return {
            "splits_path": self.splits_path,
            "universe_hash": self.universe_hash,
            **{stage: [sel.to_dict() for sel in getattr(self, stage)] for stage in STAGES},
            "constraints": [c.to_dict() for c in self.constraints],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "splits") -> DataSplitConfig:
        if not isinstance(data, Mapping):
            raise SplitConfigError(f"{where}: expected a JSON object, got {type(data).__name__}")
        known = {"splits_path", "universe_hash", "constraints", "leakage_check", *STAGES}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SplitConfigError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(known)}")
        stages: dict[str, tuple[Selector, ...]] = {}
        for stage in STAGES:
            raw = data.get(stage) or []
            if not isinstance(raw, list):
                raise SplitConfigError(f"{where}: '{stage}' must be a list of selectors, got {raw!r}")
            try:
                stages[stage] = tuple(
                    Selector.from_dict(item, where=f"{where}: {stage}[{i}]") for i, item in enumerate(raw)
                )
            except SelectorError as exc:
                raise SplitConfigError(str(exc)) from None
        for key in ("universe_hash", "splits_path"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise SplitConfigError(f"{where}: '{key}' must be a string or null, got {data[key]!r}")
        constraints = _read_policy(data, where)
        try:
            return cls(
                universe_hash=data.get("universe_hash"),
                constraints=constraints,
                splits_path=data.get("splits_path"),
                **stages,
            )
        except SplitConfigError as exc:
            raise SplitConfigError(f"{where}: {exc}") from None


def _read_policy(data: Mapping[str, Any], where: str) -> tuple[Constraint, ...]:
    has_constraints = "constraints" in data
    if has_constraints and data["constraints"] is None:
        raise SplitConfigError(f"{where}: 'constraints' must be a list (use [] to declare no checks), got null")
    legacy = data.get("leakage_check")
    if legacy is not None and not isinstance(legacy, str):
        raise SplitConfigError(f"{where}: 'leakage_check' must be one of {list(LEAKAGE_MODES)}, got {legacy!r}")
    if not has_constraints:
        try:
            return constraints_for_leakage_check(legacy if legacy is not None else "error")
        except SplitConfigError as exc:
            raise SplitConfigError(f"{where}: {exc}") from None
    raw = data["constraints"]
    if not isinstance(raw, list):
        raise SplitConfigError(f"{where}: 'constraints' must be a list, got {raw!r}")
    constraints: list[Constraint] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or "kind" not in item or set(item) - {"kind", "severity"}:
            raise SplitConfigError(
                f"{where}: constraints[{i}] must be an object with 'kind' and optional 'severity', got {item!r}"
            )
        try:
            constraints.append(Constraint(item["kind"], item.get("severity", "error")))
        except SplitConfigError as exc:
            raise SplitConfigError(f"{where}: constraints[{i}]: {exc}") from None
    if legacy is not None:
        implied = "off"
        for c in constraints:
            if c.kind == ConstraintKind.NO_SPLIT_OVERLAP:
                implied = c.severity.value
        if implied != legacy:
            raise SplitConfigError(
                f"{where}: 'leakage_check': {legacy!r} contradicts 'constraints', whose "
                f"no_split_overlap implies {implied!r}; keep one spelling"
            )
    return tuple(constraints)


def dumps_splits(cfg: DataSplitConfig) -> str:
    """The exact text ``save_splits`` writes (what Cuvis.AI writes for the same config)."""
    return json.dumps(cfg.to_dict(), indent=2)


def loads_splits(text: str | bytes, *, where: str = "splits.json") -> DataSplitConfig:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SplitConfigError(f"{where}: not valid JSON: {exc}") from None
    return DataSplitConfig.from_dict(data, where=where)


def load_splits(path: str | os.PathLike[str]) -> DataSplitConfig:
    """Read and shape-validate a ``splits.json`` (local path or fsspec URL)."""
    where = os.fspath(path)
    if not storage.exists(where):
        raise FileNotFoundError(f"splits file not found: {where}")
    return loads_splits(storage.read_bytes(where), where=where)


def save_splits(cfg: DataSplitConfig, path: str | os.PathLike[str]) -> str:
    """Write ``cfg`` as stable, pretty JSON, atomically. Returns where it went."""
    return storage.write_bytes_atomic(path, dumps_splits(cfg).encode("utf-8"))
