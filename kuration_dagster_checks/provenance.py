"""Provenance: the values a materialization records for Kuration's own machinery, not for people.

A recording's change token (what the new-recordings sensor compares to see that a recording
was rewritten), the universe's token, and a source's score-cache identity are cache keys: a
person reading an asset page has no use for ``size:5924:mtime:1796194204.7471824``. They go
into one metadata entry, ``provenance``, the last row of the page: a caption that says what
it is and the values as one line of JSON in a code span. :func:`recorded_provenance` reads
them back exactly. What this module does not do: decide what is recorded (the assets
do), or show figures (those are tables and numbers, :mod:`kuration_dagster_checks`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from dagster import MetadataValue

#: The metadata key of the entry.
PROVENANCE = "provenance"
_CAPTION = "Not a figure: what Kuration's sensor and caches compare with later."
_CODE = re.compile(r"`(\{.*\})`", re.DOTALL)

ProvenanceValue = str | int | float | bool | None


def provenance_entry(values: Mapping[str, ProvenanceValue]) -> dict[str, MetadataValue]:
    """``{"provenance": <Markdown>}``: the caption, then ``values`` as one line of JSON in a
    code span; to put last in a materialization's metadata."""
    text = json.dumps(dict(values), sort_keys=True, ensure_ascii=True, allow_nan=False)
    # a backtick inside a value would end the code span: JSON spells it as an escape instead
    text = text.replace("`", "\\u0060")
    return {PROVENANCE: MetadataValue.md(f"{_CAPTION} `{text}`")}


def recorded_provenance(metadata: Mapping[str, Any]) -> dict[str, ProvenanceValue]:
    """The values :func:`provenance_entry` recorded in ``metadata`` (a materialization's);
    empty when it has no provenance entry (a materialization reported by hand, or none)."""
    entry = metadata.get(PROVENANCE)
    text = getattr(entry, "value", entry)
    found = _CODE.search(text) if isinstance(text, str) else None
    if found is None:
        return {}
    values = json.loads(found.group(1))
    return values if isinstance(values, dict) else {}


__all__ = ["PROVENANCE", "ProvenanceValue", "provenance_entry", "recorded_provenance"]
