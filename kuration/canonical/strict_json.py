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
from itertools import chain
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
    result = dict(pairs)  # built in C; a duplicate shows as a shorter dict, then is named
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate key {key!r} in one object (only one value per key is allowed)")
            seen.add(key)
    return result


def _refuse_constant(token: str) -> Any:
    raise _Refused(f"non-finite number {token} is not allowed")


#: Bytes with every ASCII digit as ``0`` and every other byte as ``.``: runs of digits show as runs of ``0``.
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 46 for b in range(256))
#: What precedes an integer literal (after its ``-``) in JSON text: a literal of 19 or more
#: digits elsewhere is inside a string (a SHA-256, a name), not a number.
_BEFORE_NUMBER = frozenset(b":,[ \t\n\r")
_LONG_DIGITS = b"0" * 19


def _may_hold_long_int(data: bytes) -> bool:
    """Whether the JSON text ``data`` may hold an integer literal of 19 or more digits (the
    only ones that can leave the int64 range): a run of 19 digits preceded by what precedes a
    number. Never False for text that holds one; True for some that do not (then the exact
    hook decides)."""
    runs = data.translate(_DIGIT_RUNS)
    start = 0
    while (at := runs.find(_LONG_DIGITS, start)) >= 0:
        before = at - 1
        if before >= 0 and data[before] == 45:  # '-'
            before -= 1
        if before < 0 or data[before] in _BEFORE_NUMBER:
            return True
        end = runs.find(b".", at)
        if end < 0:
            return False
        start = end
    return False


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
        # The types are collected in C, so the common shapes cost no Python-level step per
        # value: a container of scalars, and a container of records of scalars (a
        # manifest's entries), whose records are one level deeper and hold no container.
        types = set(map(type, children))
        if _CONTAINERS.isdisjoint(types):
            continue
        if types == {dict} and _CONTAINERS.isdisjoint(map(type, chain.from_iterable(map(dict.values, children)))):
            if depth + 1 > limit:
                return True
            continue
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _utf8_of(data: bytes | str, text: str) -> bytes:
    """The UTF-8 bytes of ``text`` (``data`` decoded, a byte-order mark dropped), reusing
    ``data`` when it is them: bytes.translate runs in C, str.translate looks characters up."""
    if isinstance(data, bytes):
        return data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    return text.encode("utf-8", "surrogatepass")


def parse_strict_json(data: bytes | str, *, where: str, what: str = "JSON file",
                      error: type[Exception] = ValueError, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` or raise ``error("<where>: not a valid <what> (<reason>)")``."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
        if isinstance(data, (bytes, bytearray)) and text.startswith("\ufeff"):
            text = text[1:]  # a byte-order mark from an editor is not content
        # Integers are converted in C unless the text may hold one past the int64 range:
        # the range hook runs once per integer, the largest cost of a big manifest's parse.
        value = json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_refuse_constant,
                           parse_int=_parse_int if _may_hold_long_int(_utf8_of(data, text)) else None,
                           parse_float=parse_finite_float)
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
