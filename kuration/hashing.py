"""The one way Kuration turns values into bytes that are hashed or pinned.

Every digest the project records (run fingerprints, the commit record's checksum, spec,
schema, strategy and segmenter fingerprints) goes through :func:`canonical_json` and
:func:`sha256_hex`, so two writers of the same value can never disagree about its bytes.
``readable_json`` is the same deterministic encoding, indented, for files people open.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(data: Any) -> bytes:
    """Deterministic JSON (sorted keys, compact, UTF-8, no NaN/Infinity): the bytes that are hashed."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def readable_json(data: Any) -> bytes:
    """Deterministic, indented JSON for files people open."""
    return (json.dumps(data, sort_keys=True, indent=1, allow_nan=False, ensure_ascii=False) + "\n").encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_digest(data: Any) -> str:
    """SHA-256 of :func:`canonical_json` of ``data``."""
    return sha256_hex(canonical_json(data))


__all__ = ["canonical_digest", "canonical_json", "readable_json", "sha256_hex"]
