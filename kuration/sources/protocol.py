"""The source-adapter boundary: list sources, read one source's ticks, decode its media,
and say who a source is.

Identity decides whether cached work may be reused. It is *strong* when it changes
whenever the content does: a content hash, an immutable remote version or ETag, or a
fingerprint the adapter vouches for. A logical identity (a path, a size and a
modification time) can still be scored, but nothing cached under it is ever reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from kuration.sources.schema import Schema
from kuration.sources.ticks import Ticks

STRONG_KINDS = frozenset({"content_sha256", "etag", "version", "fingerprint"})


@dataclass(frozen=True)
class SourceIdentity:
    kind: str
    value: str

    @property
    def strong(self) -> bool:
        return self.kind in STRONG_KINDS

    def token(self) -> str:
        return f"{self.kind}:{self.value}"

    @classmethod
    def from_token(cls, token: str) -> SourceIdentity:
        kind, sep, value = token.partition(":")
        if not sep or not kind:
            raise ValueError(f"not a source identity token: {token!r} (expected '<kind>:<value>')")
        return cls(kind, value)


@runtime_checkable
class SourceAdapter(Protocol):
    schema: Schema

    def list_sources(self) -> list[str]:
        """Every source id, sorted."""

    def read_ticks(self, source_id: str) -> Ticks:
        """One source's rows, validated (raises ``TickDataError`` naming column and row)."""

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        """A batch of a media column's references as ``(len(refs), *shape)``."""

    def identity(self, source_id: str) -> SourceIdentity:
        """Who the source is now; strong identities authorize cache reuse."""
