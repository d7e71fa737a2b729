"""Where per-source feature results are kept between runs: one protocol, two stores.

An entry is keyed by a fingerprint plus the source's identity. A source's whole scored
table is keyed by the run fingerprint (schema, segmenter, strategy, code version), so any
change to what scoring depends on misses it; its segments and each feature's values are
also kept under fingerprints that leave the strategy's weights out
(:func:`kuration.scoring.fingerprints.feature_fingerprints`), so a strategy change that
keeps a feature's definition reuses its values. Every kind of entry uses the one protocol
below: the fingerprint is only a namespace to it.
Only strong identities are ever written or read: a logical identity (path, size, mtime)
could hide changed content behind an old entry.
"""

from __future__ import annotations

import hashlib
import os
from typing import Protocol

import pyarrow as pa
import pyarrow.ipc as ipc

from kuration import storage
from kuration.sources.protocol import SourceIdentity


def entry_key(run_fingerprint: str, source_id: str, identity: SourceIdentity) -> str:
    return hashlib.sha256(f"{run_fingerprint}\n{source_id}\n{identity.token()}".encode()).hexdigest()


class ScoreCache(Protocol):
    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None: ...

    def put(self, run_fingerprint: str, source_id: str, identity: SourceIdentity, table: pa.Table) -> None: ...


class MemoryScoreCache:
    """For tests and notebooks: entries live as long as the object.

    Keyed by the parts themselves, not by :func:`entry_key`'s digest of their joined text:
    two keys whose parts join to the same text (a newline in a source id) stay apart, and
    there is no stored record to tell them apart afterwards, as the file store has."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, SourceIdentity], pa.Table] = {}

    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None:
        if not identity.strong:
            return None
        return self.entries.get((run_fingerprint, source_id, identity))

    def put(self, run_fingerprint: str, source_id: str, identity: SourceIdentity, table: pa.Table) -> None:
        if identity.strong:
            self.entries[(run_fingerprint, source_id, identity)] = table


class FsspecScoreCache:
    """Arrow IPC files under a local folder or fsspec URL, one namespace per run fingerprint:
    ``<root>/<fingerprint[:16]>/<entry key>.arrow``. Each file also records what it was
    computed from, and a read whose record disagrees is a miss, never a wrong answer.

    Under a local folder an entry is read memory-mapped: its buffers are file pages the OS
    can drop and re-read, not process memory. That is what lets ``score_sources`` keep a
    hard ``memory_budget`` (:attr:`maps_locally`)."""

    SUFFIX = ".arrow"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)

    @property
    def maps_locally(self) -> bool:
        return not storage.is_remote(self.root)

    def _url(self, run_fingerprint: str, key: str) -> str:
        return storage.join_url(self.root, run_fingerprint[:16], f"{key}{self.SUFFIX}")

    def get(self, run_fingerprint: str, source_id: str, identity: SourceIdentity) -> pa.Table | None:
        if not identity.strong:
            return None
        url = self._url(run_fingerprint, entry_key(run_fingerprint, source_id, identity))
        try:
            if self.maps_locally:
                table = ipc.open_file(pa.memory_map(os.fspath(storage.local_path(url)))).read_all()
            else:
                table = ipc.open_file(pa.py_buffer(storage.read_bytes(url))).read_all()
        except (FileNotFoundError, pa.ArrowInvalid, OSError):
            return None  # missing, torn or foreign: a miss, and the source is scored again
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
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema.with_metadata(meta)) as writer:
            writer.write_table(table)
        # Not fsynced: a lost entry is a miss (the source is scored again), never wrong data.
        storage.write_bytes_atomic(self._url(run_fingerprint, entry_key(run_fingerprint, source_id, identity)),
                                   sink.getvalue().to_pybytes(), fsync=False)

    def namespaces(self) -> list[str]:
        """The run-fingerprint namespaces present (16-hex-digit folder names)."""
        return sorted({rel.split("/", 1)[0] for rel in storage.list_files(self.root) if "/" in rel})

    def prune(self, keep_run_fingerprint: str, *also_keep: str) -> list[str]:
        """Remove every namespace but ``keep_run_fingerprint``'s (and ``also_keep``'s: the
        per-feature entries of that run, :attr:`ScoringResult.cache_fingerprints`); returns
        the ones removed. Called after a successful commit, so a failed run never costs the
        cache of the run it was replacing."""
        keep = {fingerprint[:16] for fingerprint in (keep_run_fingerprint, *also_keep)}
        removed = [name for name in self.namespaces() if name not in keep]
        for name in removed:
            storage.remove_tree(storage.join_url(self.root, name))
        return removed
