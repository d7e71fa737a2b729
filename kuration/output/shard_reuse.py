"""Shard reuse: which shards a dataset write keeps from the dataset already at its
destination instead of writing them again, whether that dataset is the same run's (a
resume) or another run's (a new plan after one new recording, replacing the old one).

The content key. Every shard the dataset writer writes records a ``content_key`` in its
manifest entry: the digest of everything its bytes are made from.

- the source's identity token, when it is strong (a content hash, fingerprint, version or
  ETag). A weak identity (a path, a size and mtime) gives no key (``None``), so a shard of
  such a source is never reused;
- the shard's place: split, source, entity, span index, shard index and rows ``[start, stop)``;
- the span's values the writer hands the track (the plan's span features, priority and
  span index): ``segment:`` modalities and encoders read them;
- the output spec, the schema, the code fingerprints of the encoder, of the adapter and
  of the media providers the spec decodes through, and the Kuration version
  (:func:`content_key_basis`).

Shard bytes embed nothing else: no run fingerprint, no plan digest, and not the split (it
is the folder, and the path is a function of the place above). So a shard whose key
matches is byte for byte the shard a fresh write would produce, under the same name.

Where candidates come from (:func:`reuse_candidates`): only from the destination's own
records, and only when its commit record is intact and the output-spec marker it pins is
the file on disk: the committed manifest (pinned by the record), and the resume records of
the run the record names (an interrupted run's finished and adopted shards). A shard file
no such record describes is never adopted.

Adoption (:func:`verified_reuse`): a candidate is kept when its recorded entry is exactly
the entry this write would record for the target at that path (same key, same rows, same
container; only the size and SHA-256 are taken from it) and the file still has that size
and SHA-256. The file is hashed before publication begins, and it stays where it is: it is
never copied, moved or rewritten. Its bytes are then covered by the new manifest like any
other shard. On an object store a shard with a content key lies in the dataset root's
shard pool (:mod:`.shard_pool`), named by the key: its entry names the pool object
(``stored_at``), which the new manifest names again, so a kept shard costs no copy.

What it deliberately does not do: copy a shard to another path (a source whose split
changed is written anew, and so is a dataset whose shards carry the older names,
``<source id>_<type-tagged entity>_...``), trust a torn commit record, read another folder,
or reuse anything under a weak identity.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuration.errors import CommitError
from kuration.canonical.hashing import canonical_digest, canonical_state, code_fingerprint, sha256_hex
from kuration.output.commit_protocol import (
    COMMIT_FILE, MANIFEST_FILE, RESUME_DIR, SPEC_MARKER_FILE, CommitRecord, strict_json,
)
from kuration.output.destinations import Destination
from kuration.output.shard_files import WrittenShard
from kuration.output.shard_pool import shard_location
from kuration.output.spec import OutputSpec
from kuration.output.write_track import ShardTarget, manifest_entry
from kuration.sources.media import media_provider_factory
from kuration.sources.protocol import SourceIdentity
from kuration.sources.schema import Schema

#: Bumped when what a content key covers changes, so no older key ever matches a newer one.
CONTENT_KEY_FORMAT = 1
#: Threads that hash kept shards before publication (SHA-256 is bound by one core per file).
HASH_THREADS = max(1, min(4, os.cpu_count() or 1))
#: The resume record that lists the shards a run adopted, so a resume after a crash keeps them.
ADOPTED_RECORD = "adopted.json"


def content_key_basis(*, spec: OutputSpec, schema: Schema, encoder: Any, adapter: Any, kuration: str) -> str:
    """The digest of what every shard of one write shares: the output spec, the schema, the
    encoder's, adapter's and media providers' code fingerprints and the Kuration version.
    ``encoder`` and ``adapter`` are their code fingerprints, as the run fingerprint holds them."""
    providers = sorted({schema.media[m.key].provider for m in spec.of_kind("media").values()})
    return canonical_digest({
        "format": CONTENT_KEY_FORMAT, "output_spec": spec.fingerprint(), "schema": schema.fingerprint(),
        "encoder": encoder, "adapter": adapter, "kuration": kuration,
        "media_providers": {name: code_fingerprint(media_provider_factory(name)) for name in providers},
    })


def content_key(basis: str, identity: SourceIdentity, target: ShardTarget, span: Mapping[str, Any]) -> str | None:
    """The content key of ``target``'s shard, or None when its source's identity is weak.
    ``span`` holds the values the writer puts in the span's track meta."""
    if not identity.strong:
        return None
    return canonical_digest({
        "basis": basis, "source": identity.token(), "split": target.split, "source_id": target.source_id,
        "entity_id": target.entity_id, "span_index": target.span_index, "shard_index": target.shard_index,
        "start": target.start, "stop": target.stop, "span": canonical_state(dict(span)),
    })


def shard_entry(target: ShardTarget, spec: OutputSpec, key: str | None, size: int, sha256: str) -> dict[str, Any]:
    """The manifest entry the writer records for ``target``'s shard of ``size`` bytes."""
    n_steps = target.stop - target.start
    entry = manifest_entry(target, n_steps, spec.shard_rows(n_steps), spec.container,
                           WrittenShard(Path(target.path), size, sha256))
    return {**entry, "content_key": key}


@dataclass(frozen=True)
class ReuseCandidates:
    """Entries the destination's records hold, by shard path; ``run`` is the run whose
    records they are, ``refused`` why there are none."""

    entries: Mapping[str, Mapping[str, Any]]
    run: str | None
    refused: str = ""


def resume_folder(run_fingerprint: str) -> str:
    """Where ``run_fingerprint``'s resume records go (a run's records never authorize another's)."""
    return f"{RESUME_DIR}/{run_fingerprint[:16]}"


def _journal_entries(destination: Destination, run_fingerprint: str) -> list[Any]:
    """Entries of a run's finished (one record each) and adopted (one record) shards,
    from the records it left."""
    entries: list[Any] = []
    for name in destination.files_under(resume_folder(run_fingerprint)):
        try:
            item = strict_json(destination.read(name) or b"", where=destination.where(name), what="resume record")
        except CommitError:
            continue  # a torn or odd record only costs a rebuild
        if not isinstance(item, dict) or item.get("run") != run_fingerprint:
            continue
        if isinstance(item.get("entry"), dict):
            entries.append(item["entry"])
        elif isinstance(item.get("entries"), list):
            entries.extend(item["entries"])
    return entries


def _committed_entries(destination: Destination, record: CommitRecord) -> list[Any]:
    if record.state != "committed":
        return []
    try:
        data = destination.read(MANIFEST_FILE)
    except CommitError:
        return []
    if data is None or sha256_hex(data) != record.manifest_sha256:
        return []
    try:
        manifest = strict_json(data, where=destination.where(MANIFEST_FILE), what="manifest")
    except CommitError:
        return []
    entries = manifest.get("entries") if isinstance(manifest, dict) else None
    return list(entries) if isinstance(entries, list) else []


def reuse_candidates(destination: Destination, record: CommitRecord | None) -> ReuseCandidates:
    """What the destination's records say its shards hold (see the module docstring).
    Entries are read from files: anything that is not an object with a string path and a
    string content key is left out (it only costs a rebuild)."""
    if record is None:
        return ReuseCandidates({}, None, f"no {COMMIT_FILE} at the destination")
    try:
        marker = destination.read(SPEC_MARKER_FILE)
    except CommitError:
        marker = None
    if marker is None or sha256_hex(marker) != record.spec_marker_sha256:
        return ReuseCandidates({}, record.run_fingerprint, (
            f"the destination's {SPEC_MARKER_FILE} is missing or is not the one {COMMIT_FILE} pins (it was edited, or "
            "belongs to another run)"))
    found = _committed_entries(destination, record) + _journal_entries(destination, record.run_fingerprint)
    entries = {e["path"]: e for e in found
               if isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("content_key"), str)}
    refused = "" if entries else "no shard of a source with a strong identity was recorded with a content key"
    return ReuseCandidates(entries, record.run_fingerprint, refused)


def _matches(dataset_root: Destination | None, folder: Destination, entry: Mapping[str, Any]) -> bool:
    try:
        location = shard_location(dataset_root, folder, entry)
    except CommitError:  # a pooled entry with no pool to look in: not kept
        return False
    return location.destination.shard_matches(location.relative, entry)


def verified_reuse(destination: Destination, candidates: ReuseCandidates, spec: OutputSpec,
                   wanted: Sequence[tuple[ShardTarget, str | None]], *,
                   dataset_root: Destination | None = None) -> dict[str, dict[str, Any]]:
    """The shards of ``wanted`` (each target with its content key) that may be kept as they
    are: the candidate at the target's path records exactly the entry this write would
    record for it (:func:`shard_entry`; only the size and SHA-256 are taken from the
    candidate; a pooled target's entry names its pool object), and its file has that size
    and SHA-256 (hashed now), in ``destination`` or, pooled, in ``dataset_root``'s pool
    (:func:`~kuration.output.shard_pool.shard_location`). Path -> that entry."""
    to_check: list[tuple[str, dict[str, Any]]] = []
    for target, key in wanted:
        recorded = candidates.entries.get(target.path)
        if recorded is None or key is None:
            continue
        size, digest = recorded.get("bytes"), recorded.get("sha256")
        if isinstance(size, bool) or not isinstance(size, int) or not isinstance(digest, str):
            continue
        expected = shard_entry(target, spec, key, size, digest)
        if dict(recorded) == expected:
            to_check.append((target.path, expected))
    # Reading and hashing release the GIL: a few threads hash as many files at once.
    with ThreadPoolExecutor(max_workers=HASH_THREADS, thread_name_prefix="kuration-reuse-sha256") as pool:
        matches = list(pool.map(lambda item: _matches(dataset_root, destination, item[1]), to_check))
    return {path: expected for (path, expected), ok in zip(to_check, matches, strict=True) if ok}


__all__ = [
    "ADOPTED_RECORD", "CONTENT_KEY_FORMAT", "ReuseCandidates", "content_key", "content_key_basis", "resume_folder",
    "reuse_candidates", "shard_entry", "verified_reuse",
]
