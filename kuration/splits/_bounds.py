"""What the splits parsers share for hostile input: the index bound, and quoting values.

Universe indices are int64, so no id, index, range bound or step above
:data:`MAX_INDEX` can mean anything; such numbers are refused from their digits, before
``int`` sees them (``int`` refuses past 4300 digits, and numpy overflows past 19). A
hostile file can also put a megabyte in one cell; an error quoting it whole is
unreadable, so values are shown cut short.
"""

from __future__ import annotations

from kuration.strict_json import INT64_MAX

#: Largest index, id, range bound or step (2**63 - 1).
MAX_INDEX = INT64_MAX
_MAX_DIGITS = len(str(MAX_INDEX))


def bounded_index(digits: str) -> int | None:
    """The decimal string ``digits`` as an int, or None when it is above :data:`MAX_INDEX`."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _MAX_DIGITS:
        return None
    value = int(significant)
    return value if value <= MAX_INDEX else None


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters, with the full length said."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4300-digit printing limit
        return f"<a {type(value).__name__} too large to print>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value))} characters)"
