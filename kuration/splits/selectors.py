"""The selector language: eleven kinds of sample query, and their strict validation.

A ``Selector`` is a small typed query over the universe. Exactly the fields valid for its
kind may be set (the Cuvis.AI rule), so a typo such as a ``glob`` selector carrying
``ids`` fails when the file is read instead of silently meaning something else.
Validation here is structural only; whether names and indices exist is checked against
the live universe by :mod:`kuration.splits.resolve`.

The serialized shape (``to_dict``) is the Cuvis.AI ``Selector`` model dumped with every
field, in its field order, so our files and theirs are interchangeable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kuration.errors import SelectorError


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
SET_KINDS = frozenset({SelectorKind.UNION, SelectorKind.EXCEPT, SelectorKind.INTERSECT})
_AT_LEAST_TWO_OPERANDS = frozenset({SelectorKind.EXCEPT, SelectorKind.INTERSECT})
_SCALAR_FIELDS = frozenset({"source", "pattern"})
_FIELD_ORDER = ("kind", "paths", "source", "ids", "stems", "pattern", "any_of", "of")
_RANGE = re.compile(r"^\s*(\d+)-(\d+)(?::(\d+))?\s*$")


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
                    f"selector kind '{kind.value}': field '{name}' must be a list, got {value!r}"
                )
            object.__setattr__(self, name, tuple(value))
        _validate_structure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "selector") -> Selector:
        """Parse the JSON form. ``where`` (``train[2].of[0]``) prefixes every error."""
        if not isinstance(data, Mapping):
            raise SelectorError(f"{where}: a selector must be a JSON object, got {data!r}")
        unknown = sorted(set(data) - set(_FIELD_ORDER))
        if unknown:
            raise SelectorError(
                f"{where}: unknown selector field(s) {unknown}; valid fields: {list(_FIELD_ORDER)}"
            )
        if "kind" not in data:
            raise SelectorError(f"{where}: selector has no 'kind'")
        values: dict[str, Any] = {"kind": data["kind"]}
        for name in ("paths", "ids", "stems", "any_of"):
            raw = data.get(name)
            if raw is None:
                continue
            if not isinstance(raw, list):
                raise SelectorError(f"{where}: field '{name}' must be a list, got {raw!r}")
            values[name] = tuple(raw)
        for name in ("source", "pattern"):
            raw = data.get(name)
            if raw is not None and not isinstance(raw, str):
                raise SelectorError(f"{where}: field '{name}' must be a string, got {raw!r}")
            values[name] = raw
        raw_of = data.get("of")
        if raw_of is not None:
            if not isinstance(raw_of, list):
                raise SelectorError(f"{where}: field 'of' must be a list, got {raw_of!r}")
            values["of"] = tuple(
                cls.from_dict(child, where=f"{where}.of[{i}]") for i, child in enumerate(raw_of)
            )
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
    for name in ("paths", "stems", "any_of"):
        # Empty strings are allowed (they match nothing), as Cuvis.AI allows them.
        bad = [v for v in getattr(sel, name) if not isinstance(v, str)]
        if bad:
            raise SelectorError(f"selector kind '{kind}': '{name}' entries must be strings, got {bad!r}")
    for child in sel.of:
        if not isinstance(child, Selector):
            raise SelectorError(f"selector kind '{kind}': 'of' entries must be selectors, got {child!r}")
    if sel.ids:
        expand_ids(sel.ids, what=f"selector kind '{kind}'")


def expand_ids(ids: Sequence[int | str], *, what: str = "ids") -> list[int]:
    """Expand ints and inclusive ``"a-b"`` / ``"a-b:step"`` ranges into ints, in order.

    Raises :class:`SelectorError` on a negative id, a non-range string, a bool, a
    reversed range or a non-positive step.
    """
    out: list[int] = []
    for item in ids:
        if isinstance(item, bool):
            raise SelectorError(f"{what}: ids must be ints or 'a-b' ranges, got {item!r}")
        if isinstance(item, int):
            if item < 0:
                raise SelectorError(f"{what}: index {item} must be >= 0")
            out.append(item)
            continue
        if isinstance(item, str):
            match = _RANGE.match(item)
            if match is None:
                # A bare "7" is refused, as the Cuvis.AI resolver refuses it, so that a file
                # one tool accepts never fails in the other.
                hint = f"; write the number {item.strip()} without quotes" if item.strip().isdecimal() else ""
                raise SelectorError(
                    f"{what}: ids must be ints or 'a-b' ranges (optionally 'a-b:step'), got {item!r}{hint}"
                )
            start, stop = int(match.group(1)), int(match.group(2))
            step = int(match.group(3)) if match.group(3) is not None else 1
            if step <= 0:
                raise SelectorError(f"{what}: range {item!r}: step must be > 0")
            if start > stop:
                raise SelectorError(f"{what}: range {item!r}: start {start} must be <= stop {stop}")
            out.extend(range(start, stop + 1, step))
            continue
        raise SelectorError(f"{what}: ids must be ints or 'a-b' ranges, got {item!r}")
    return out


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
