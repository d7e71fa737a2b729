"""Parse JSON that a person or another tool wrote, refusing everything a reader would have to guess at.

Every JSON file Kuration reads (``splits.json``, ``schema.json``, ``strategy.json``,
``output_spec.json``, a dataset's manifest, config and commit record, a lease) goes through
:func:`parse_strict_json`. It refuses, with one error naming the file and what is wrong:

- text that is not UTF-8 JSON;
- duplicate keys in one object (plain ``json`` keeps the last one silently);
- ``NaN``, ``Infinity`` and numbers beyond the float range (``1e999``);
- integers outside the signed 64-bit range;
- nesting deeper than :data:`MAX_DEPTH` arrays and objects.

The caller chooses the error class, so each file keeps the error its readers catch
(``SplitConfigError`` for a split, ``CommitError`` for a dataset, ...).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

#: Deepest nesting of arrays and objects accepted. Real Kuration files nest fewer than ten
#: levels (a split's ``union``/``except`` selectors are the deepest); the bound keeps a
#: crafted file from reaching the interpreter's recursion limit anywhere downstream.
MAX_DEPTH = 64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class _Refused(ValueError):
    """What the hooks raise; turned into the caller's error with the file named."""


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"duplicate key {key!r} in one object (only one value per key is allowed)")
        result[key] = value
    return result


def _refuse_constant(token: str) -> Any:
    raise _Refused(f"non-finite number {token} is not allowed")


def _parse_int(text: str) -> int:
    # Up to 18 characters (18 digits, or a sign and 17) always fit: the common case pays for
    # one length check (this runs once per integer of a 100,000-entry manifest).
    if len(text) <= 18:
        return int(text)
    # checked on the digits first: int() of a 5000-digit string is refused by Python anyway,
    # and a 400-digit one would only fail later, as an OverflowError far from the file
    if len(text.lstrip("-")) > 19 or not INT64_MIN <= (value := int(text)) <= INT64_MAX:
        raise _Refused(f"integer {text[:24]}{'...' if len(text) > 24 else ''} is outside the signed 64-bit range")
    return value


def parse_finite_float(text: str) -> float:
    """A ``json.loads`` ``parse_float`` hook: the float of a JSON number literal, or
    ``ValueError`` (``number <text> is beyond the float range``) for one that overflows
    (``1e999``), where plain ``json`` gives an infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:24]}{'...' if len(text) > 24 else ''} is beyond the float range")
    return value


_CONTAINERS = frozenset((dict, list))


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        # The types are collected in C: a container of scalars (every manifest entry) costs
        # no Python-level step per value.
        if _CONTAINERS.isdisjoint(map(type, children)):
            continue
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_strict_json(data: bytes | str, *, where: str, what: str = "JSON file",
                      error: type[Exception] = ValueError, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` or raise ``error("<where>: not a valid <what> (<reason>)")``."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
        if isinstance(data, (bytes, bytearray)) and text.startswith("\ufeff"):
            text = text[1:]  # a byte-order mark from an editor is not content
        value = json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_refuse_constant,
                           parse_int=_parse_int, parse_float=parse_finite_float)
    except RecursionError:
        reason = f"nested deeper than {max_depth} levels"
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    except (json.JSONDecodeError, ValueError) as exc:
        reason = str(exc)
    else:
        if not _deeper_than(value, max_depth):
            return value
        reason = f"nested deeper than {max_depth} levels"
    raise error(f"{where}: not a valid {what} ({reason})") from None


__all__ = ["INT64_MAX", "INT64_MIN", "MAX_DEPTH", "parse_finite_float", "parse_strict_json"]
