"""Where per-source feature results are kept between runs: one protocol, two stores.

An entry is keyed by the run fingerprint (schema, segmenter, strategy, code version)
plus the source's identity, so any change to what scoring depends on misses the cache.
Only strong identities are ever written or read: a logical identity (path, size, mtime)
could hide changed content behind an old entry.
"""

from __future__ import annotations

import hashlib
import io
import os
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.sources.protocol import SourceIdentity


def entry_key(run_fingerprint: str, source_id: str, identity: SourceIdentity) -> str:
    return hashlib.sha256(f"{run_fingerprint}\n{source_id}\n{identity.token()}".encode()).hexdigest()


class ScoreCache(Protocol):
    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None: ...

    def put(self, run_fingerprint: str, source_id: str, identity: SourceIdentity, table: pa.Table) -> None: ...


class MemoryScoreCache:
    """For tests and notebooks: entries live as long as the object."""

    def __init__(self) -> None:
        self.entries: dict[str, pa.Table] = {}

    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None:
        if not identity.strong:
            return None
        return self.entries.get(entry_key(run_fingerprint, source_id, identity))

    def put(self, run_fingerprint: str, source_id: str, identity: SourceIdentity, table: pa.Table) -> None:
        if identity.strong:
            self.entries[entry_key(run_fingerprint, source_id, identity)] = table


class FsspecScoreCache:
    """Parquet files under a local folder or fsspec URL, one namespace per run fingerprint:
    ``<root>/<fingerprint[:16]>/<entry key>.parquet``. Each file also records what it was
    computed from, and a read whose record disagrees is a miss, never a wrong answer."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)

    def _url(self, run_fingerprint: str, key: str) -> str:
        return storage.join_url(self.root, run_fingerprint[:16], f"{key}.parquet")

    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None:
        if not identity.strong:
            return None
        url = self._url(run_fingerprint, entry_key(run_fingerprint, source_id, identity))
        if not storage.exists(url):
            return None
        try:
            table = pq.read_table(io.BytesIO(storage.read_bytes(url)))
        except (pa.ArrowInvalid, OSError):
            return None  # a torn or foreign file is a miss; the source is scored again
        meta = table.schema.metadata or {}
        expected = {b"kuration.run": run_fingerprint.encode(), b"kuration.source": source_id.encode(),
                    b"kuration.identity": identity.token().encode()}
        if any(meta.get(k) != v for k, v in expected.items()):
            return None
        return table.replace_schema_metadata({k: v for k, v in meta.items() if not k.startswith(b"kuration.")} or None)

    def put(self, run_fingerprint: str, source_id: str, identity: SourceIdentity, table: pa.Table) -> None:
        if not identity.strong:
            return
        meta = dict(table.schema.metadata or {})
        meta.update({b"kuration.run": run_fingerprint.encode(), b"kuration.source": source_id.encode(),
                     b"kuration.identity": identity.token().encode()})
        buffer = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(meta), buffer)
        storage.write_bytes_atomic(self._url(run_fingerprint, entry_key(run_fingerprint, source_id, identity)), buffer.getvalue())
