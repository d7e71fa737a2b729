"""``Strategy``: what "the best data" means, declared once, validated, and applied per segment.

A strategy names a ``method``, a ``priority`` (a weighted sum of segment features),
optional ``predicates`` on features, event ``tags`` of interest and the ``selection``
options the hours-budget fill reads::

    Strategy.from_dict({
        "name": "hard-braking",
        "method": "inclusion",                      # inclusion | avoidance | filter
        "priority": {"speed.std": 1.0, "tag.brake": 0.5},
        "predicates": [{"feature": "speed.mean", "op": ">", "value": 2.0}],
        "tags": ["brake", "lane_change"],           # become tag.<name> features
        "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": 1.5},
    })

Scoring (:meth:`Strategy.score`): ``raw = sum(weight * feature)``. ``inclusion`` keeps
``raw``, ``avoidance`` negates it (low raw is preferred), ``filter`` keeps ``raw`` where every
predicate passes and gives ``-inf`` where any fails (such a segment is never admitted). For
inclusion and avoidance the predicates are evaluated and reported in ``passed`` but do not
change the priority. A NaN feature makes ``raw`` NaN and is left NaN, to be counted as a
non-finite exclusion downstream, never silently turned into 0; a predicate on NaN fails.
Priorities are canonical floats (:mod:`kuration.canonical.floats`): ``avoidance`` of a zero is ``0.0``,
not ``-0.0``, and every NaN is one NaN, so equal inputs give equal bytes.

Every validation error names the key path (``strategy.predicates[1].op``), what was got
and what is valid. This module does not read tracks or fill budgets.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration.errors import InputError, check_keys, shown
from kuration.canonical.hashing import canonical_digest
from kuration.scoring.features import FeatureError, parse_feature_key
from kuration.canonical.floats import canonical_floats
from kuration.numbers import finite_float
from kuration.sources.schema import Schema

METHODS = ("inclusion", "avoidance", "filter")
OPS = ("<", "<=", ">", ">=", "==", "!=")
CLIP_AGGREGATE = {"inclusion": "max", "avoidance": "mean", "filter": "max"}
_STRATEGY_KEYS = ("name", "method", "priority", "predicates", "tags", "selection")
_PREDICATE_KEYS = ("feature", "op", "value")
_SELECTION_KEYS = ("tag_coverage", "min_tag_frac", "max_group_overshoot")
_OP_FUNCS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
             "!=": operator.ne}


class StrategyError(InputError):
    """A strategy is invalid, does not resolve against a schema, or lacks a feature to score."""


def _check_key(key: Any, path: str, schema: Schema | None = None) -> str:
    """``key`` checked by :func:`parse_feature_key`, its error raised as a
    :class:`StrategyError` that names where in the strategy the key is."""
    try:
        return parse_feature_key(key, schema).key
    except FeatureError as exc:
        raise StrategyError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class Predicate:
    """``feature op value``; on a NaN feature it fails whatever the op."""

    feature: str
    op: str
    value: float

    def evaluate(self, values: np.ndarray) -> np.ndarray:
        arr = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return _OP_FUNCS[self.op](arr, self.value) & ~np.isnan(arr)

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "op": self.op, "value": self.value}


@dataclass(frozen=True)
class Selection:
    """Options the hours-budget fill reads: reserve each tag's best data first
    (``tag_coverage``, bounded by ``min_tag_frac`` of the budget) and cap a group at
    ``max_group_overshoot`` x its fair share (None: no cap)."""

    tag_coverage: bool = False
    min_tag_frac: float = 0.0
    max_group_overshoot: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag_coverage": self.tag_coverage,
            "min_tag_frac": self.min_tag_frac,
            "max_group_overshoot": self.max_group_overshoot,
        }


@dataclass(frozen=True)
class ScoreResult:
    """Per segment: ``priority`` (float64; NaN = non-finite, -inf = rejected by a filter)
    and ``passed`` (every predicate holds)."""

    priority: np.ndarray
    passed: np.ndarray

    def __len__(self) -> int:
        return len(self.priority)


@dataclass(frozen=True, eq=False)
class Strategy:
    method: str
    priority: Mapping[str, float]
    predicates: tuple[Predicate, ...] = ()
    tags: tuple[str, ...] = ()
    selection: Selection = field(default_factory=Selection)
    name: str | None = None

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Strategy:
        """Validate and build. Raises :class:`StrategyError` naming the offending key path.
        Feature keys are checked for syntax here; :meth:`validate_against` checks that they
        resolve against a schema."""
        if not isinstance(data, Mapping):
            raise StrategyError(f"strategy: expected a mapping, got {type(data).__name__}")
        check_keys(data, _STRATEGY_KEYS, where="strategy", error=StrategyError)
        # Each key in this order, so the first error reported is the same whatever else is wrong.
        name = _name(data.get("name"))
        method = _method(data)
        priority = _priority(data)
        predicates = _predicates(data.get("predicates", []), method)
        tags = _tags(data.get("tags", []))
        selection = _selection(data.get("selection"), tags)
        return cls(method, priority, predicates, tuple(tags), selection, name)

    def to_dict(self) -> dict[str, Any]:
        """Canonical form; ``Strategy.from_dict(s.to_dict()) == s``."""
        return {
            "name": self.name,
            "method": self.method,
            "priority": dict(sorted(self.priority.items())),
            "predicates": [p.to_dict() for p in self.predicates],
            "tags": list(self.tags),
            "selection": self.selection.to_dict(),
        }

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_dict` (name included): a cache key part.

        Memoized: the strategy is immutable, and hashing it (as every per-track schema
        lookup does) must not re-serialize it."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = canonical_digest(self.to_dict())
            object.__setattr__(self, "_fingerprint", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Strategy) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    # -- resolution -------------------------------------------------------------------------

    @property
    def default_clip_aggregate(self) -> str:
        """How spans aggregate segment priorities by default: "max" (inclusion, filter) or "mean" (avoidance)."""
        return CLIP_AGGREGATE[self.method]

    def feature_keys(self) -> list[str]:
        """Sorted unique feature keys this strategy reads: priority keys, predicate
        features and ``tag.<name>`` for each tag of interest."""
        keys = set(self.priority) | {p.feature for p in self.predicates} | {f"tag.{t}" for t in self.tags}
        return sorted(keys)

    def validate_against(self, schema: Schema) -> Strategy:
        """Check that every feature key resolves against ``schema`` (and that each ``fn.``
        feature is registered). Returns ``self``; raises :class:`StrategyError` naming the key path."""
        for key in self.priority:
            _check_key(key, f"strategy.priority[{key!r}]", schema)
        for i, p in enumerate(self.predicates):
            _check_key(p.feature, f"strategy.predicates[{i}].feature", schema)
        for i, tag in enumerate(self.tags):
            _check_key(f"tag.{tag}", f"strategy.tags[{i}]", schema)
        return self

    # -- scoring ----------------------------------------------------------------------------

    def score(self, features: Mapping[str, np.ndarray]) -> ScoreResult:
        """Priority and predicate verdicts per segment from ``features`` (key -> array,
        one value per segment; extra keys are ignored)."""
        missing = [k for k in self._needed_keys() if k not in features]
        if missing:
            raise StrategyError(
                f"strategy.score: missing feature(s) {missing}; got {sorted(features)}. "
                "Compute strategy.feature_keys() with compute_features"
            )
        arrays = {k: np.asarray(features[k], dtype=np.float64) for k in self._needed_keys()}
        lengths = {k: a.shape for k, a in arrays.items()}
        shapes = set(lengths.values())
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise StrategyError("strategy.score: features must be 1-d arrays of one length (one value per segment), "
                                f"got shapes {lengths}")
        n = next(iter(shapes))[0]
        raw = np.zeros(n, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            for key, weight in sorted(self.priority.items()):  # fixed order: float sums are order-sensitive
                raw = raw + weight * arrays[key]
        passed = np.ones(n, dtype=bool)
        for p in self.predicates:
            passed &= p.evaluate(arrays[p.feature])
        if self.method == "avoidance":
            priority = -raw
        elif self.method == "filter":
            priority = np.where(passed, raw, -np.inf)
        else:
            priority = raw
        return ScoreResult(canonical_floats(priority.astype(np.float64, copy=False)), passed)

    def _needed_keys(self) -> list[str]:
        # What score() reads: priority and predicate features (tags of interest are carried
        # to the segment table, but do not enter the priority unless weighted).
        return sorted(set(self.priority) | {p.feature for p in self.predicates})


def _name(name: Any) -> str | None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise StrategyError(f"strategy.name: must be a non-empty string or absent, got {shown(name)}")
    return name


def _method(data: Mapping[str, Any]) -> str:
    if "method" not in data:
        raise StrategyError(f"strategy.method: required; one of {list(METHODS)}")
    method = data["method"]
    if method not in METHODS:
        raise StrategyError(f"strategy.method: must be one of {list(METHODS)}, got {shown(method)}")
    return method


def _priority(data: Mapping[str, Any]) -> dict[str, float]:
    """The weighted feature keys, each key's syntax checked and each weight a finite number."""
    raw_priority = data.get("priority")
    if "priority" not in data:
        raise StrategyError(
            "strategy.priority: required; a non-empty mapping of feature key -> weight, e.g. {'speed.mean': 1.0}"
        )
    if not isinstance(raw_priority, Mapping) or not raw_priority:
        raise StrategyError(
            f"strategy.priority: must be a non-empty mapping of feature key -> weight, got {shown(raw_priority)}"
        )
    priority: dict[str, float] = {}
    for key, weight in raw_priority.items():
        path = f"strategy.priority[{shown(key)}]"
        _check_key(key, path)
        number = finite_float(weight)
        if number is None:
            raise StrategyError(f"{path}: weight must be a finite number, got {shown(weight)}")
        priority[key] = number
    return priority


def _predicates(raw_predicates: Any, method: str) -> tuple[Predicate, ...]:
    if raw_predicates is None:
        raw_predicates = []
    if not isinstance(raw_predicates, (list, tuple)):
        raise StrategyError("strategy.predicates: must be a list of {feature, op, value}, got "
                            f"{shown(raw_predicates)}")
    predicates = tuple(_predicate(raw, f"strategy.predicates[{i}]") for i, raw in enumerate(raw_predicates))
    if method == "filter" and not predicates:
        raise StrategyError(
            "strategy.predicates: method 'filter' needs at least one predicate (a failing segment gets priority "
            "-inf)"
        )
    return predicates


def _predicate(raw: Any, path: str) -> Predicate:
    if not isinstance(raw, Mapping):
        raise StrategyError(f"{path}: must be a mapping with 'feature', 'op' and 'value', got {shown(raw)}")
    check_keys(raw, _PREDICATE_KEYS, where=path, error=StrategyError)
    for k in _PREDICATE_KEYS:
        if k not in raw:
            raise StrategyError(f"{path}.{k}: required (a predicate is {{'feature': key, 'op': one of "
                                f"{list(OPS)}, 'value': number}})")
    feature = _check_key(raw["feature"], f"{path}.feature")
    op = raw["op"]
    if op not in OPS:
        raise StrategyError(f"{path}.op: must be one of {list(OPS)}, got {shown(op)}")
    value = finite_float(raw["value"])
    if value is None:
        raise StrategyError(f"{path}.value: must be a finite number, got {shown(raw['value'])}")
    return Predicate(feature, op, value)


def _tags(raw_tags: Any) -> list[str]:
    if raw_tags is None:
        raw_tags = []
    if not isinstance(raw_tags, (list, tuple)):
        raise StrategyError(f"strategy.tags: must be a list of event tag names, got {shown(raw_tags)}")
    tags: list[str] = []
    for i, tag in enumerate(raw_tags):
        if not isinstance(tag, str) or not tag:
            raise StrategyError(f"strategy.tags[{i}]: must be a non-empty string, got {shown(tag)}")
        if tag in tags:
            raise StrategyError(f"strategy.tags[{i}]: {tag!r} is listed twice (first at "
                                f"strategy.tags[{tags.index(tag)}])")
        tags.append(tag)
    return tags


def _selection(raw: Any, tags: list[str]) -> Selection:
    if raw is None:
        return Selection()
    if not isinstance(raw, Mapping):
        raise StrategyError(f"strategy.selection: must be a mapping with keys {list(_SELECTION_KEYS)}, got "
                            f"{shown(raw)}")
    check_keys(raw, _SELECTION_KEYS, where="strategy.selection", error=StrategyError)
    coverage = raw.get("tag_coverage", False)
    if not isinstance(coverage, (bool, np.bool_)):
        raise StrategyError(f"strategy.selection.tag_coverage: must be true or false, got {shown(coverage)}")
    if coverage and not tags:
        raise StrategyError("strategy.selection.tag_coverage: needs strategy.tags to name the event tags to cover")
    raw_frac = raw.get("min_tag_frac", 0.0)
    frac = finite_float(raw_frac)
    if frac is None or not 0.0 <= frac <= 1.0:
        raise StrategyError(f"strategy.selection.min_tag_frac: must be a number in [0, 1], got {shown(raw_frac)}")
    raw_overshoot = raw.get("max_group_overshoot")
    overshoot = None if raw_overshoot is None else finite_float(raw_overshoot)
    if raw_overshoot is not None and (overshoot is None or overshoot < 1):
        raise StrategyError(
            "strategy.selection.max_group_overshoot: must be a number >= 1 or null (no cap), got "
            f"{shown(raw_overshoot)}")
    return Selection(bool(coverage), frac, overshoot)


__all__ = ["CLIP_AGGREGATE", "METHODS", "OPS", "Predicate", "ScoreResult", "Selection", "Strategy", "StrategyError"]
