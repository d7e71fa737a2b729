"""The selector language: eleven kinds of sample query, and their strict validation.

A ``Selector`` is a small typed query over the universe. Exactly the fields valid for its
kind may be set (the Cuvis.AI rule), so a typo such as a ``glob`` selector carrying
``ids`` fails when the file is read instead of silently meaning something else.
Validation here is structural only; whether names and indices exist is checked against
the live universe by :mod:`kuration.splits.resolve`.

Limits, checked when a selector is built (from a file or in Python) and refused with a
:class:`~kuration.errors.SelectorError` that names the selector:

* ``union`` / ``except`` / ``intersect`` nest at most :data:`MAX_SELECTOR_DEPTH` levels (a
  ``splits.json`` is bounded sooner, by the 64-level limit of
  :mod:`kuration.canonical.strict_json`, to 31 levels);
* every id, range bound and step is at most :data:`MAX_ID` (the int64 universe indices);
* one selector's ids expand to at most :data:`MAX_IDS` values, counted from the range
  arithmetic before anything is expanded.

The serialized shape (``to_dict``) is the Cuvis.AI ``Selector`` model dumped with every
field, in its field order, so our files and theirs are interchangeable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from kuration.errors import SelectorError, check_keys, shown
from kuration.numbers import is_digits
from kuration.splits._bounds import MAX_INDEX, RangeError, expand_runs, parse_range


class SelectorKind(StrEnum):
    FILES = "files"
    FILE_INDICES = "file_indices"
    DIR_INDICES = "dir_indices"
    STEMS = "stems"
    GLOB = "glob"
    TAG = "tag"
    CATEGORIES = "categories"
    ALL = "all"
    UNION = "union"
    EXCEPT = "except"
    INTERSECT = "intersect"


#: Exactly the fields each kind sets; every other field must stay empty.
FIELDS_BY_KIND: dict[SelectorKind, tuple[str, ...]] = {
    SelectorKind.FILES: ("paths",),
    SelectorKind.FILE_INDICES: ("source", "ids"),
    SelectorKind.DIR_INDICES: ("ids",),
    SelectorKind.STEMS: ("stems",),
    SelectorKind.GLOB: ("pattern",),
    SelectorKind.TAG: ("any_of",),
    SelectorKind.CATEGORIES: ("any_of",),
    SelectorKind.ALL: (),
    SelectorKind.UNION: ("of",),
    SelectorKind.EXCEPT: ("of",),
    SelectorKind.INTERSECT: ("of",),
}
#: Kinds that name concrete samples by identity; a split holding only these is baked.
CONCRETE_KINDS = frozenset({SelectorKind.FILES, SelectorKind.FILE_INDICES})
_AT_LEAST_TWO_OPERANDS = frozenset({SelectorKind.EXCEPT, SelectorKind.INTERSECT})
_SCALAR_FIELDS = frozenset({"source", "pattern"})
_FIELD_ORDER = ("kind", "paths", "source", "ids", "stems", "pattern", "any_of", "of")
#: Deepest nesting of set operations (a leaf selector is depth 1).
MAX_SELECTOR_DEPTH = 32
#: Largest id, range bound or step: universe indices are int64.
MAX_ID = MAX_INDEX
#: Most ids one selector may expand to. A baked split names whole sources' frames as
#: ``a-b`` ranges, so this bounds one source's share of one stage; name a larger set with a
#: ``files`` selector.
MAX_IDS = 10_000_000


@dataclass(frozen=True, slots=True)
class Selector:
    """One selector. Build with keyword arguments or :meth:`from_dict`; both validate."""

    kind: SelectorKind
    paths: tuple[str, ...] = ()
    source: str | None = None
    ids: tuple[int | str, ...] = ()
    stems: tuple[str, ...] = ()
    pattern: str | None = None
    any_of: tuple[str, ...] = ()
    of: tuple[Selector, ...] = ()
    #: Nesting depth (1 for a leaf); kept so that building a parent checks one level only.
    depth: int = field(default=1, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            kind = SelectorKind(self.kind)
        except ValueError:
            raise SelectorError(
                f"unknown selector kind {self.kind!r}; valid kinds: {sorted(k.value for k in SelectorKind)}"
            ) from None
        object.__setattr__(self, "kind", kind)
        for name in ("paths", "ids", "stems", "any_of", "of"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise SelectorError(
                    f"selector kind '{kind.value}': field '{name}' must be a list, got {shown(value)}"
                )
            object.__setattr__(self, name, tuple(value))
        _validate_structure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "selector", _level: int = 1) -> Selector:
        """Parse the JSON form. ``where`` (``train[2].of[0]``) prefixes every error."""
        if _level > MAX_SELECTOR_DEPTH:
            raise SelectorError(_too_deep(where))
        if not isinstance(data, Mapping):
            raise SelectorError(f"{where}: a selector must be a JSON object, got {data!r}")
        check_keys(data, _FIELD_ORDER, where=where, error=SelectorError)
        if "kind" not in data:
            raise SelectorError(f"{where}: selector has no 'kind'")
        values: dict[str, Any] = {"kind": data["kind"]}
        for name in ("paths", "ids", "stems", "any_of", "of"):
            raw = data.get(name)
            if raw is None:
                continue
            if not isinstance(raw, list):
                raise SelectorError(f"{where}: field '{name}' must be a list, got {shown(raw)}")
            values[name] = tuple(raw)
        for name in ("source", "pattern"):
            raw = data.get(name)
            if raw is not None and not isinstance(raw, str):
                raise SelectorError(f"{where}: field '{name}' must be a string, got {shown(raw)}")
            values[name] = raw
        if "of" in values:
            values["of"] = tuple(cls.from_dict(child, where=f"{where}.of[{i}]", _level=_level + 1)
                                 for i, child in enumerate(values["of"]))
        try:
            return cls(**values)
        except SelectorError as exc:
            raise SelectorError(f"{where}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Every field, in the Cuvis.AI field order (what ``model_dump`` writes)."""
        return {
            "kind": self.kind.value,
            "paths": list(self.paths),
            "source": self.source,
            "ids": list(self.ids),
            "stems": list(self.stems),
            "pattern": self.pattern,
            "any_of": list(self.any_of),
            "of": [child.to_dict() for child in self.of],
        }

    def describe(self) -> str:
        """A short human description for error messages."""
        parts = [f"kind '{self.kind.value}'"]
        for name in FIELDS_BY_KIND[self.kind]:
            if name == "of":
                parts.append(f"{len(self.of)} operands")
                continue
            value = getattr(self, name)
            if isinstance(value, tuple) and len(value) > 6:
                value = f"[{', '.join(map(repr, value[:6]))}, ... {len(value)} in all]"
            parts.append(f"{name}={value!r}")
        return ", ".join(parts)

    def walk(self) -> Iterable[Selector]:
        """This selector and every selector nested in it, depth first."""
        yield self
        for child in self.of:
            yield from child.walk()


def _too_deep(where: str) -> str:
    return (
        f"{where}: union/except/intersect selectors nest deeper than {MAX_SELECTOR_DEPTH} levels; "
        "flatten the expression (a union's operands can be listed side by side)"
    )


def _validate_structure(sel: Selector) -> None:
    kind = sel.kind.value
    present = {
        "paths": bool(sel.paths),
        "source": sel.source is not None,
        "ids": bool(sel.ids),
        "stems": bool(sel.stems),
        "pattern": sel.pattern is not None,
        "any_of": bool(sel.any_of),
        "of": bool(sel.of),
    }
    allowed = FIELDS_BY_KIND[sel.kind]
    extra = [name for name, is_set in present.items() if is_set and name not in allowed]
    if extra:
        raise SelectorError(
            f"selector kind '{kind}' must not set field(s) {extra}; "
            f"it takes exactly {list(allowed) or 'no fields'}"
        )
    for name in allowed:
        if not present[name]:
            qualifier = "" if name in _SCALAR_FIELDS else "non-empty "
            raise SelectorError(f"selector kind '{kind}' requires {qualifier}'{name}'")
    if sel.kind in _AT_LEAST_TWO_OPERANDS and len(sel.of) < 2:
        raise SelectorError(
            f"selector kind '{kind}' requires at least 2 operands in 'of', got {len(sel.of)}"
        )
    for name in ("source", "pattern"):
        value = getattr(sel, name)
        if value is not None and not isinstance(value, str):
            raise SelectorError(f"selector kind '{kind}': field '{name}' must be a string, got {shown(value)}")
    for name in ("paths", "stems", "any_of"):
        # Empty strings are allowed (they match nothing), as Cuvis.AI allows them.
        bad = [v for v in getattr(sel, name) if not isinstance(v, str)]
        if bad:
            raise SelectorError(f"selector kind '{kind}': '{name}' entries must be strings, got {shown(bad)}")
    for child in sel.of:
        if not isinstance(child, Selector):
            raise SelectorError(f"selector kind '{kind}': 'of' entries must be selectors, got {shown(child)}")
    if sel.of:
        depth = 1 + max(child.depth for child in sel.of)
        if depth > MAX_SELECTOR_DEPTH:
            raise SelectorError(_too_deep(f"selector kind '{kind}'"))
        object.__setattr__(sel, "depth", depth)
    if sel.ids:
        _id_runs(sel.ids, what=f"selector kind '{kind}'")


def _id_runs(ids: Sequence[int | str], *, what: str, limit: int = MAX_IDS) -> list[tuple[int, int, int]]:
    """``(start, step, count)`` of each id in order (a plain id is a run of one), validated
    and counted without expanding anything."""
    if isinstance(ids, (str, bytes, Mapping)) or not isinstance(ids, Iterable):
        raise SelectorError(f"{what}: ids must be a list of ints or 'a-b' ranges, got {shown(ids)}")
    runs: list[tuple[int, int, int]] = []
    total = 0
    for item in ids:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise SelectorError(f"{what}: ids must be ints or 'a-b' ranges, got {shown(item)}")
        if isinstance(item, int):
            if item < 0:
                raise SelectorError(f"{what}: index {shown(item)} must be >= 0")
            if item > MAX_ID:
                raise SelectorError(f"{what}: index {shown(item)} is above the largest index {MAX_ID} (2**63 - 1)")
            runs.append((item, 1, 1))
            total += 1
        else:
            try:
                run = parse_range(item)
            except RangeError as exc:
                raise SelectorError(f"{what}: {_range_problem(item, exc)}") from None
            runs.append(run)
            total += run[2]
        if total > limit:
            raise SelectorError(
                f"{what}: ids expand to more than {limit} indices (at {shown(item, length=True)}); "
                "select whole sources with a 'files' selector instead"
            )
    return runs


def _range_problem(item: str, exc: RangeError) -> str:
    if exc.reason == "form":
        # A bare "7" is refused, as the Cuvis.AI resolver refuses it, so that a file one
        # tool accepts never fails in the other.
        bare = item.strip()
        hint = f"; write the number {bare} without quotes" if is_digits(bare) else ""
        return f"ids must be ints or 'a-b' ranges (optionally 'a-b:step'), got {shown(item, length=True)}{hint}"
    if exc.reason == "too_large":
        return f"range {shown(item, length=True)} has a number above the largest index {MAX_ID} (2**63 - 1)"
    if exc.reason == "step":
        return f"range {item!r}: step must be > 0"
    return f"range {item!r}: start {exc.start} must be <= stop {exc.stop}"


def expand_ids_array(ids: Sequence[int | str], *, what: str = "ids", limit: int = MAX_IDS) -> np.ndarray:
    """:func:`expand_ids` as an int64 array, built without Python ints per value."""
    return expand_runs(_id_runs(ids, what=what, limit=limit))


def expand_ids(ids: Sequence[int | str], *, what: str = "ids", limit: int = MAX_IDS) -> list[int]:
    """Expand ints and inclusive ``"a-b"`` / ``"a-b:step"`` ranges into ints, in order.

    Raises :class:`SelectorError` on a negative id, a non-range string, a bool, a
    reversed range, a non-positive step, a number above :data:`MAX_ID`, or more than
    ``limit`` values in all (counted before expanding).
    """
    return expand_ids_array(ids, what=what, limit=limit).tolist()


def compress_ids(indices: Iterable[int]) -> list[int | str]:
    """Sorted unique ints as the shortest id list: runs of two or more become ``"a-b"``."""
    ordered = sorted(set(int(i) for i in indices))
    out: list[int | str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(ordered[i] if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return out


def required_attrs_of(selectors: Iterable[Selector]) -> frozenset[str]:
    """Which lazily loaded sample attributes (``tags``, ``category_ids``) the selectors read."""
    needed: set[str] = set()
    for top in selectors:
        for sel in top.walk():
            if sel.kind is SelectorKind.TAG:
                needed.add("tags")
            elif sel.kind is SelectorKind.CATEGORIES:
                needed.add("category_ids")
    return frozenset(needed)
