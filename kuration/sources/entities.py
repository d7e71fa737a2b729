"""Entity ids: one canonical form for every place that groups, sorts or names entities.

An entity id can be any plain value a recording uses (a drone's int id, a vehicle's
string, a tuple). ``1``, ``True``, ``1.0`` and ``"1"`` must stay four entities, which
Python's ``==`` and ``hash`` would merge, so grouping and naming go through
:func:`entity_key`, a type-tagged string that also names the entity in tables and
manifests. A float zero is one entity, ``float:0.0``, whatever its sign: ``==``, ``hash`` and
``np.unique`` merge ``0.0`` and ``-0.0`` already, and which of the two an unstable sort
keeps first depends on the CPU, so a signed name would not be reproducible.
:func:`parse_entity_key` turns such a string back into the value, for a reader
of a plan or a manifest; it accepts only the canonical strings :func:`entity_key` writes.

Grammar of a key (what ``entity_key`` writes; no spaces anywhere)::

    key      := "none:None" | "bool:" ("True" | "False") | "int:" -?[0-9]+
              | "float:" <repr of a finite float>   | "str:" <repr of a str>
              | "bytes:" <repr of a bytes>          | "tuple:(" [key ("," key)*] ")"
              | "frozenset:{" [key ("," key)*] "}"     (elements sorted by their key)
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any

import numpy as np

from kuration.errors import RecordingError
from kuration.canonical.floats import canonical_float

#: Entity id types with a canonical value representation.
_ENTITY_SCALARS = (bool, int, float, str, bytes)


class EntityIdError(RecordingError):
    """An entity id has no canonical representation (an extension object, a NaN float...)."""


def entity_key(entity: Any) -> str:
    """Canonical, type-tagged string for an entity id, so ``1`` and ``"1"`` never alias:
    ``"none:None"``, ``"bool:True"``, ``"int:1"``, ``"float:1.5"``, ``"str:'a'"``,
    ``"bytes:b'a'"``, ``"tuple:(int:1,str:'a')"``, ``"frozenset:{int:1,int:2}"`` (elements
    sorted). NumPy scalars count as the Python value they hold (``np.int64(1)`` is
    ``"int:1"``). Anything else, and non-finite floats, raise :class:`EntityIdError`."""
    if isinstance(entity, np.generic) and not isinstance(entity, (np.datetime64, np.timedelta64, np.void)):
        value = entity.item()
        if not isinstance(value, np.generic):  # e.g. longdouble stays NumPy: reject below
            return entity_key(value)
    if entity is None:
        return "none:None"
    if isinstance(entity, bool):
        return f"bool:{entity!r}"
    if isinstance(entity, int):
        return f"int:{int(entity)!r}"
    if isinstance(entity, float):
        if not math.isfinite(entity):
            raise EntityIdError(f"entity id {entity!r}: a non-finite float has no canonical representation")
        return f"float:{canonical_float(float(entity))!r}"
    if isinstance(entity, str):
        return f"str:{str(entity)!r}"
    if isinstance(entity, bytes):
        return f"bytes:{bytes(entity)!r}"
    if isinstance(entity, tuple):
        return "tuple:(" + ",".join(entity_key(e) for e in entity) + ")"
    if isinstance(entity, frozenset):
        return "frozenset:{" + ",".join(sorted(entity_key(e) for e in entity)) + "}"
    raise EntityIdError(
        f"entity id {entity!r} of type {type(entity).__name__} has no canonical representation; use None, bool, "
        "int, finite float, str, bytes, or tuples / frozensets of those (NumPy scalars of those are fine)"
    )


def canonical_entity(value: Any) -> Any:
    """Plain Python form of an entity id, or raise ValueError naming what is wrong."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        raise ValueError("entity id is null")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"entity id {value!r} is not finite")
        value = canonical_float(value)
    if isinstance(value, _ENTITY_SCALARS):
        return value
    if isinstance(value, (tuple, frozenset)):
        items = [canonical_entity(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else frozenset(items)
    raise ValueError(
        f"entity id {value!r} of type {type(value).__name__} has no canonical form; "
        "use None-free ints, finite floats, strings, bytes, bools, tuples or frozensets"
    )


#: Deeper tuples or frozensets than this are refused rather than parsed (no entity id nests
#: this deep; a crafted key must not exhaust the stack).
MAX_KEY_DEPTH = 64
_TAG = re.compile(r"([a-z]+):")
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?")
_SCALARS = {"none": ("None",), "bool": ("True", "False")}
_CONTAINERS = {"tuple": ("(", ")"), "frozenset": ("{", "}")}
_EXAMPLES = "e.g. 'int:5', \"str:'car_3'\", \"tuple:(int:1,str:'a')\""


def parse_entity_key(key: str) -> Any:
    """The entity id a key of :func:`entity_key` stands for, as a plain Python value
    (``"int:5"`` -> ``5``, ``"tuple:(int:1,str:'a')"`` -> ``(1, 'a')``); NumPy scalars come
    back as the Python value they held. ``entity_key(parse_entity_key(k)) == k`` for every
    key the encoder writes; anything else (a malformed, unknown-type, non-canonical or
    over-deep key) raises :class:`EntityIdError` saying what is wrong and where."""
    if not isinstance(key, str):
        raise EntityIdError(f"entity key {key!r}: must be a str (what entity_key writes, {_EXAMPLES}), "
                            f"got {type(key).__name__}")
    parser = _KeyParser(key)
    value, end = parser.value(0, 0)
    if end != len(key):
        raise parser.error(end, "unexpected text after the key")
    canonical = entity_key(value)
    if canonical != key:
        raise EntityIdError(f"entity key {key!r}: not in canonical form; the same id is written {canonical!r}")
    return value


class _KeyParser:
    """Recursive descent over one key; every error names the character it stopped at."""

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, at: int, problem: str) -> EntityIdError:
        return EntityIdError(f"entity key {self.text!r}, character {at}: {problem}; an entity key is what "
                             f"kuration.entity_key writes, {_EXAMPLES}")

    def value(self, at: int, depth: int) -> tuple[Any, int]:
        if depth > MAX_KEY_DEPTH:
            raise self.error(at, f"nested more than {MAX_KEY_DEPTH} levels deep")
        match = _TAG.match(self.text, at)
        if match is None:
            raise self.error(at, "expected '<type>:<value>'")
        tag, at = match.group(1), match.end()
        if tag in _SCALARS:
            for word in _SCALARS[tag]:
                if self.text.startswith(word, at):
                    return {"None": None, "True": True, "False": False}[word], at + len(word)
            raise self.error(at, f"{tag} must be {' or '.join(_SCALARS[tag])}")
        if tag == "int":
            return self._number(at, _INT, int, "an integer")
        if tag == "float":
            return self._number(at, _FLOAT, float, "a finite float")
        if tag in ("str", "bytes"):
            return self._literal(at, tag)
        if tag in _CONTAINERS:
            return self._container(at, tag, depth)
        raise self.error(at - len(tag) - 1, f"unknown type {tag!r}; one of ['bool', 'bytes', 'float', 'frozenset', "
                                            "'int', 'none', 'str', 'tuple']")

    def _number(self, at: int, pattern: re.Pattern[str], kind: type, what: str) -> tuple[Any, int]:
        match = pattern.match(self.text, at)
        if match is None:
            raise self.error(at, f"expected {what}")
        try:
            number = kind(match.group())
        except ValueError as exc:  # an int past Python's digit limit
            raise self.error(at, f"not {what} ({exc})") from None
        if kind is float and not math.isfinite(number):
            raise self.error(at, f"{match.group()} is out of float range")
        return number, match.end()

    def _literal(self, at: int, tag: str) -> tuple[Any, int]:
        start = at
        if tag == "bytes":
            if not self.text.startswith("b", at):
                raise self.error(at, "expected a bytes literal (b'...')")
            at += 1
        quote = self.text[at: at + 1]
        if quote not in ("'", '"'):
            raise self.error(at, f"expected a quoted {tag} literal")
        at += 1
        while at < len(self.text) and self.text[at] != quote:
            at += 2 if self.text[at] == "\\" else 1
        if at >= len(self.text):
            raise self.error(start, f"unterminated {tag} literal")
        # One quoted literal, scanned above: literal_eval evaluates nothing but the literal.
        # An escape repr never writes ('\c') is only a warning to Python: an error here.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                value = ast.literal_eval(self.text[start: at + 1])
        except (ValueError, SyntaxError, Warning) as exc:
            raise self.error(start, f"not a valid {tag} literal ({exc})") from None
        return value, at + 1

    def _container(self, at: int, tag: str, depth: int) -> tuple[Any, int]:
        opening, closing = _CONTAINERS[tag]
        if not self.text.startswith(opening, at):
            raise self.error(at, f"expected {opening!r}")
        at += 1
        items: list[Any] = []
        if self.text.startswith(closing, at):
            return (tuple(items) if tag == "tuple" else frozenset(items)), at + 1
        while True:
            item, at = self.value(at, depth + 1)
            items.append(item)
            if self.text.startswith(",", at):
                at += 1
            elif self.text.startswith(closing, at):
                return (tuple(items) if tag == "tuple" else frozenset(items)), at + 1
            else:
                raise self.error(at, f"expected ',' or {closing!r}")


__all__ = ["EntityIdError", "MAX_KEY_DEPTH", "canonical_entity", "entity_key", "parse_entity_key"]
