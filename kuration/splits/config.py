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
``constraints`` list declares no checks. The constructor takes the same two spellings
(``DataSplitConfig(leakage_check="warn")``) with the same rules as a file.

Loading validates shape only; nothing here touches the universe. The text is read by
:func:`kuration.canonical.strict_json.parse_strict_json`: duplicate keys, ``NaN`` / ``Infinity``,
numbers out of range and nesting deeper than 64 levels are refused, naming the file. A
stage must be a list (``false``, ``0``, ``""``, ``{}`` and ``null`` are refused, not read as
empty). Selector limits (nesting, ids) are those of :mod:`kuration.splits.selectors`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from kuration import storage
from kuration.errors import SelectorError, SplitConfigError, check_keys, cut, shown
from kuration.splits._bounds import ItemsError, typed_items
from kuration.splits.selectors import CONCRETE_KINDS, Selector, required_attrs_of
from kuration.splits.stages import STAGES
from kuration.canonical.strict_json import parse_strict_json

LEAKAGE_MODES = ("error", "warn", "off")
#: The keys of a ``splits.json``, in the order :meth:`DataSplitConfig.to_dict` writes them
#: (``leakage_check``, the seed's spelling, is read but never written).
_CONFIG_KEYS = ("splits_path", "universe_hash", *STAGES, "constraints", "leakage_check")


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
    if not isinstance(mode, str) or mode not in LEAKAGE_MODES:
        raise SplitConfigError(f"leakage_check must be one of {list(LEAKAGE_MODES)}, got {shown(mode)}")
    if mode == "off":
        return ()
    return (Constraint(ConstraintKind.NO_SPLIT_OVERLAP, ConstraintSeverity(mode)),)


def _leakage_check_of(constraints: Iterable[Constraint]) -> str:
    return next((c.severity.value for c in constraints if c.kind == ConstraintKind.NO_SPLIT_OVERLAP), "off")


def _typed_list(value: object, kind: type, name: str, noun: str) -> tuple:
    """``value`` as a tuple, refused unless it is a list-like of ``kind``
    (:func:`~kuration.splits._bounds.typed_items`), naming the first item of another type."""
    try:
        return typed_items(value, (kind,))
    except ItemsError as exc:
        if not exc.wrong:
            raise SplitConfigError(f"'{name}' must be a list of {noun}, got {shown(value)}") from None
        first = exc.wrong[0]
        raise SplitConfigError(f"{name}[{first}]: expected a {kind.__name__}, got {shown(exc.items[first])}") from None


def _policy(constraints: Iterable[Constraint] | None, leakage_check: str | None) -> tuple[Constraint, ...]:
    """The constraints a config holds, from either spelling or both (which must agree).

    Neither given is the seed's default, ``error``; an explicit empty ``constraints``
    declares no checks."""
    implied_by_mode = constraints_for_leakage_check(leakage_check) if leakage_check is not None else None
    if constraints is None:
        return implied_by_mode if implied_by_mode is not None else constraints_for_leakage_check("error")
    given = _typed_list(constraints, Constraint, "constraints", "constraints")
    if leakage_check is not None and _leakage_check_of(given) != leakage_check:
        raise SplitConfigError(
            f"'leakage_check': {leakage_check!r} contradicts 'constraints', whose no_split_overlap implies "
            f"{_leakage_check_of(given)!r}; keep one spelling"
        )
    return given


@dataclass(frozen=True, slots=True, init=False)
class DataSplitConfig:
    """Per-stage selector lists (each unioned in order) plus the pinned universe and policy.

    An empty ``predict`` means the whole universe. ``splits_path`` is carried only so a
    Cuvis.AI file round-trips unchanged. The leakage policy is given as ``constraints``,
    as the seed's ``leakage_check``, or both when they agree; neither means ``error``.
    """

    universe_hash: str | None
    train: tuple[Selector, ...]
    val: tuple[Selector, ...]
    test: tuple[Selector, ...]
    predict: tuple[Selector, ...]
    constraints: tuple[Constraint, ...]
    splits_path: str | None

    def __init__(
        self,
        universe_hash: str | None = None,
        train: Iterable[Selector] = (),
        val: Iterable[Selector] = (),
        test: Iterable[Selector] = (),
        predict: Iterable[Selector] = (),
        constraints: Iterable[Constraint] | None = None,
        splits_path: str | None = None,
        *,
        leakage_check: str | None = None,
    ) -> None:
        for name, value in (("universe_hash", universe_hash), ("splits_path", splits_path)):
            if value is not None and not isinstance(value, str):
                raise SplitConfigError(f"'{name}' must be a string or null, got {shown(value)}")
        object.__setattr__(self, "universe_hash", universe_hash)
        object.__setattr__(self, "splits_path", splits_path)
        for stage, given in (("train", train), ("val", val), ("test", test), ("predict", predict)):
            object.__setattr__(self, stage, _typed_list(given, Selector, stage, "selectors"))
        policy = _policy(constraints, leakage_check)
        kinds = [c.kind for c in policy]
        dupes = sorted({k.value for k in kinds if kinds.count(k) > 1})
        if dupes:
            raise SplitConfigError(f"duplicate constraint kind(s): {', '.join(dupes)}")
        object.__setattr__(self, "constraints", policy)

    def stage(self, name: str) -> tuple[Selector, ...]:
        if name not in STAGES:
            raise SplitConfigError(f"unknown stage {name!r}; stages are {list(STAGES)}")
        return getattr(self, name)

    def constraint(self, kind: ConstraintKind) -> Constraint | None:
        return next((c for c in self.constraints if c.kind == kind), None)

    @property
    def leakage_check(self) -> str:
        """The seed-style policy this config implies: the ``no_split_overlap`` severity, or ``off``."""
        return _leakage_check_of(self.constraints)

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
        check_keys(data, _CONFIG_KEYS, where=where, error=SplitConfigError)
        stages: dict[str, tuple[Selector, ...]] = {}
        for stage in STAGES:
            raw = data.get(stage, [])
            if not isinstance(raw, list):
                # false / 0 / "" / {} / null are not an empty stage: a typo must not shrink a split
                raise SplitConfigError(
                    f"{where}: '{stage}' must be a list of selectors (use [] for an empty stage), got "
                    f"{_json_shown(raw)}"
                )
            try:
                stages[stage] = tuple(
                    Selector.from_dict(item, where=f"{where}: {stage}[{i}]") for i, item in enumerate(raw)
                )
            except SelectorError as exc:
                raise SplitConfigError(str(exc)) from None
        constraints = _read_constraints(data, where)
        leakage_check = _read_leakage_check(data, where)
        try:
            return cls(
                universe_hash=data.get("universe_hash"),
                splits_path=data.get("splits_path"),
                constraints=constraints,
                leakage_check=leakage_check,
                **stages,
            )
        except SplitConfigError as exc:
            raise SplitConfigError(f"{where}: {exc}") from None


def _json_shown(value: Any) -> str:
    """A value as the JSON it came from (``false``, ``null``), for messages about files;
    a string keeps its quotes."""
    if isinstance(value, str):
        return shown(value, length=True)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON (a dict built in Python), or an int past 4300 digits
        return shown(value)
    return cut(text, total=len(text))


def _read_leakage_check(data: Mapping[str, Any], where: str) -> str | None:
    if "leakage_check" not in data:
        return None
    value = data["leakage_check"]
    if not isinstance(value, str):
        raise SplitConfigError(f"{where}: 'leakage_check' must be one of {list(LEAKAGE_MODES)}, got "
                               f"{_json_shown(value)}")
    return value


def _read_constraints(data: Mapping[str, Any], where: str) -> tuple[Constraint, ...] | None:
    if "constraints" not in data:
        return None
    raw = data["constraints"]
    if not isinstance(raw, list):
        hint = " (use [] to declare no checks)" if raw is None else ""
        raise SplitConfigError(f"{where}: 'constraints' must be a list{hint}, got {_json_shown(raw)}")
    constraints: list[Constraint] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or "kind" not in item:
            raise SplitConfigError(
                f"{where}: constraints[{i}] must be an object with 'kind' and optional 'severity', got {shown(item)}"
            )
        check_keys(item, ("kind", "severity"), where=f"{where}: constraints[{i}]", error=SplitConfigError)
        try:
            constraints.append(Constraint(item["kind"], item.get("severity", "error")))
        except SplitConfigError as exc:
            raise SplitConfigError(f"{where}: constraints[{i}]: {exc}") from None
    return tuple(constraints)


def dumps_splits(cfg: DataSplitConfig) -> str:
    """The exact text ``save_splits`` writes (what Cuvis.AI writes for the same config)."""
    return json.dumps(cfg.to_dict(), indent=2)


def loads_splits(text: str | bytes, *, where: str = "splits.json") -> DataSplitConfig:
    """Parse ``splits.json`` text strictly (see the module docstring) and shape-validate it."""
    data = parse_strict_json(text, where=where, what="splits.json", error=SplitConfigError)
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
