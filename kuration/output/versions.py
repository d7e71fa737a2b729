"""A dataset root of immutable versions, and the publish log that names the current one.

Layout of a dataset root::

    ROOT/versions/v1/            a complete dataset in seed 000's layout (commit record,
    ROOT/versions/v2/            manifest, config, output-spec marker, budget/, split folders):
    ...                          locally, one version folder copied alone still loads
    ROOT/shards/<key>.npz        on an object store, every shard with a content key, once,
                                 named by the manifests that hold it (:mod:`.shard_pool`)
    ROOT/published/00000001.json one record per publication: {sequence, version, the SHA-256
    ROOT/published/00000002.json of that version's dataset.commit.json, when, forced, reason}
    ROOT/pins/<holder>.json      reader pins that keep a version from gc (:mod:`.version_pins`)

A version is written once (by :func:`kuration.output.publish.publish_version`, under the
root's lease) and never changed after it commits. What readers see is the *current*
version: the one the publish log's newest record names. Publishing is one atomic step,
creating the next record, which exists whole or not at all:

- locally, a temp file made durable and hard-linked to its name (``link`` refuses an
  existing name, so two publishers cannot both take one sequence number);
- on an object store, a conditional put (if-none-match), read back.

So a build in progress, a killed build and a failed one never change what readers see:
they only ever add a version folder nobody names yet. The log is append-only; a record
pins the commit record of the version it names, so a version folder rewritten after its
publication is refused, not read.

Retention (:mod:`.version_gc`) removes old versions' folders, never the log; a reader
asking for a published version gc removed is told so.

Readers resolve a root with :func:`resolve_dataset`: ``ROOT`` (the current version),
``ROOT@v3`` or ``version="v3"`` (that version), or a plain seed-layout dataset (a
``dataset.commit.json`` at the root and no publish log), which loads as before.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import asdict, dataclass

from kuration import storage
from kuration.canonical.hashing import canonical_digest, readable_json, sha256_hex
from kuration.errors import CommitError
from kuration.output.commit_protocol import COMMIT_FILE, CommitRecord, read_commit, strict_json
from kuration.output.destinations import Destination, open_destination

VERSIONS_DIR = "versions"
PUBLISHED_DIR = "published"
PUBLISH_FORMAT = 1
#: What a plain seed-layout dataset (no versions) is called where a version name is shown.
PLAIN_VERSION = "v0"
_VERSION = re.compile(r"v([1-9][0-9]{0,8})")
_RECORD = re.compile(r"([0-9]{8})\.json")


def version_number(name: str) -> int:
    """``"v3"`` -> 3; anything else is refused, naming what a version looks like."""
    match = _VERSION.fullmatch(name)
    if match is None:
        raise CommitError(f"{name!r} is not a version name: versions are v1, v2, ...")
    return int(match.group(1))


def version_name(number: int) -> str:
    return f"v{number}"


def split_version_ref(ref: str | os.PathLike[str]) -> tuple[str, str | None]:
    """``"ROOT@v3"`` -> (``"ROOT"``, ``"v3"``); a reference without ``@vN`` -> (it, None)."""
    text = os.fspath(ref)
    root, at, version = text.rpartition("@")
    if at and _VERSION.fullmatch(version):
        return root, version
    return text, None


@dataclass(frozen=True)
class PublishRecord:
    """One publication: ``version`` became current at ``published`` (UTC, ISO 8601).
    ``commit_sha256`` pins that version's ``dataset.commit.json``; ``forced`` says it was
    published over a failing check, ``reason`` why (what failed, who forced it)."""

    sequence: int
    version: str
    commit_sha256: str
    published: str
    forced: bool = False
    reason: str = ""
    format: int = PUBLISH_FORMAT

    def to_bytes(self) -> bytes:
        body = asdict(self)
        return readable_json({**body, "checksum": canonical_digest(body)})

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> PublishRecord:
        raw = strict_json(data, where=where, what="publish record")
        if not isinstance(raw, dict) or "checksum" not in raw:
            raise CommitError(f"{where}: not a publish record (no checksum)")
        checksum = raw.pop("checksum")
        if set(raw) != set(cls.__dataclass_fields__) or canonical_digest(raw) != checksum:
            raise CommitError(f"{where}: the publish record was edited or is not one (its keys or checksum do not "
                              "match); which version is current cannot be trusted. Restore it from a backup, or "
                              "publish a version again with `kuration publish`")
        record = cls(**raw)
        if record.format != PUBLISH_FORMAT:
            raise CommitError(f"{where}: unknown publish record format {record.format!r}")
        version_number(record.version)
        return record


@dataclass(frozen=True)
class ResolvedDataset:
    """What a reader opens: the dataset ``folder``; the dataset ``root`` it is ``version`` of
    (both None for a plain seed-layout dataset, or a folder opened alone)."""

    folder: str
    root: str | None
    version: str | None

    @property
    def reference(self) -> str:
        """What opens this dataset again: ``ROOT@vN`` for a version, else the folder."""
        return f"{self.root}@{self.version}" if self.root is not None and self.version else self.folder


class DatasetRoot:
    """The versions and the publish log of the dataset root at ``url`` (a folder or URL)."""

    def __init__(self, url: str | os.PathLike[str]) -> None:
        self.destination: Destination = open_destination(url)
        self.url = self.destination.url

    # -- what is there --------------------------------------------------------------------

    def has_plain_dataset(self) -> bool:
        """Whether the root itself is a seed-layout dataset (written before versions)."""
        return self.destination.read(COMMIT_FILE) is not None

    def versions(self) -> list[str]:
        """The version folders, oldest first (committed or not)."""
        names = [n for n in self.destination.children(VERSIONS_DIR) if _VERSION.fullmatch(n)]
        return sorted(names, key=version_number)

    def is_versioned(self) -> bool:
        return bool(self.versions()) or bool(self._record_names())

    def version_url(self, version: str) -> str:
        version_number(version)
        return storage.join_url(self.url, VERSIONS_DIR, version)

    def version_destination(self, version: str) -> Destination:
        return open_destination(self.version_url(version))

    def commit_record(self, version: str) -> CommitRecord | None:
        """``version``'s commit record (None: nothing committed or started there); a torn one raises."""
        return read_commit(self.version_destination(version))

    def newest_committed(self) -> str | None:
        """The newest committed version (published or staged); None when there is none."""
        for version in reversed(self.versions()):
            try:
                record = self.commit_record(version)
            except CommitError:
                continue
            if record is not None and record.state == "committed":
                return version
        return None

    def next_version(self) -> str:
        existing = self.versions()
        return version_name(version_number(existing[-1]) + 1 if existing else 1)

    # -- the publish log ------------------------------------------------------------------

    def _record_names(self) -> list[str]:
        return sorted(n for n in self.destination.children(PUBLISHED_DIR) if _RECORD.fullmatch(n))

    def publish_log(self) -> list[PublishRecord]:
        """Every publication, oldest first; an edited record raises."""
        records = []
        for name in self._record_names():
            relative = f"{PUBLISHED_DIR}/{name}"
            data = self.destination.read(relative)
            if data is None:  # listed, then gone: the log is append-only, so someone removed it
                raise CommitError(f"{self.destination.where(relative)}: listed but unreadable; the publish log was "
                                  "changed by hand")
            record = PublishRecord.parse(data, where=self.destination.where(relative))
            if f"{record.sequence:08d}.json" != name:
                raise CommitError(f"{self.destination.where(relative)}: holds sequence {record.sequence}; the "
                                  "publish log was changed by hand")
            records.append(record)
        return records

    def current(self) -> PublishRecord | None:
        """The newest publication (None: nothing published yet)."""
        names = self._record_names()
        if not names:
            return None
        return self.publish_log()[-1]

    def publish(self, version: str, *, forced: bool = False, reason: str = "") -> PublishRecord:
        """Make the committed ``version`` current: append one record to the publish log, in
        one atomic step. Refuses a version that is not committed. Call it under the root's lease."""
        record = self.commit_record(version)
        if record is None or record.state != "committed":
            state = "nothing" if record is None else f"state={record.state!r}"
            raise CommitError(f"{self.version_url(version)}: holds {state}, not a committed dataset; only a committed "
                              "version can be published")
        commit = self.version_destination(version).read(COMMIT_FILE) or b""
        names = self._record_names()
        sequence = int(names[-1][:8]) + 1 if names else 1
        entry = PublishRecord(sequence, version, sha256_hex(commit),
                              _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), forced, reason)
        if not self.destination.create_new(f"{PUBLISHED_DIR}/{sequence:08d}.json", entry.to_bytes()):
            raise CommitError(f"{self.url}: another publisher took publish record {sequence} at the same moment; "
                              "nothing was published. Check `kuration versions` and publish again if still wanted")
        return entry

    # -- what readers open ----------------------------------------------------------------

    def resolve(self, version: str | None = None) -> str:
        """The URL of the dataset folder a reader opens: ``version``, else the current one;
        a plain seed-layout root is itself (``version`` None or ``"v0"``)."""
        return self.locate(version).folder

    def locate(self, version: str | None = None) -> ResolvedDataset:
        """:meth:`resolve`, with the root and the version the folder is (a version's pooled
        shards lie in the root's pool, :mod:`.shard_pool`)."""
        if version is not None and version != PLAIN_VERSION:
            self._check_not_collected(version)
            return ResolvedDataset(self.version_url(version), self.url, version)
        current = self.current() if version is None else None
        if current is not None:
            self._check_pinned(current)
            return ResolvedDataset(self.version_url(current.version), self.url, current.version)
        if version == PLAIN_VERSION or self.has_plain_dataset() or not self.versions():
            # a plain dataset, or nothing: the reader's own error says what is missing
            return ResolvedDataset(self.url, None, None)
        raise CommitError(f"{self.url}: no version is published yet (staged: {', '.join(self.versions())}); "
                          f"audit one and publish it with `kuration publish {self.url} --version "
                          f"{self.versions()[-1]}`, or open it by name with version=")

    def _check_not_collected(self, version: str) -> None:
        """A version the publish log names whose commit record is gone was removed by gc
        (which deletes the commit record first): say so, and which versions are kept."""
        if self.version_destination(version).read(COMMIT_FILE) is not None or not self._record_names():
            return
        if any(record.version == version for record in self.publish_log()):
            kept = [v for v in self.versions() if v != version]
            raise CommitError(f"{self.version_url(version)}: {version} was published once and has been removed by "
                              f"gc (keep_versions); the kept versions are {', '.join(kept) or 'none'}. Open one of "
                              "those, and pin a version a long job reads (`kuration pin`) so gc keeps it")

    def _check_pinned(self, record: PublishRecord) -> None:
        data = self.version_destination(record.version).read(COMMIT_FILE)
        if data is None or sha256_hex(data) != record.commit_sha256:
            raise CommitError(f"{self.version_url(record.version)}: its {COMMIT_FILE} is not the one publish record "
                              f"{record.sequence} pins (the version was removed or rewritten after its publication); "
                              "do not trust it. Publish another version with `kuration publish`")


def locate_dataset(ref: str | os.PathLike[str], version: str | None = None) -> ResolvedDataset:
    """The dataset folder a reader opens for ``ref`` (a dataset root, ``ROOT@vN``, a
    version folder, a plain seed-layout dataset), and the root it is a version of (see the
    module docstring). A version folder given by its path is opened alone: no root."""
    root, pinned = split_version_ref(ref)
    if pinned is not None and version is not None and pinned != version:
        raise CommitError(f"{os.fspath(ref)}: names {pinned}, and version={version!r} another; give one")
    return DatasetRoot(root).locate(version or pinned)


def resolve_dataset(ref: str | os.PathLike[str], version: str | None = None) -> str:
    """The dataset folder a reader opens for ``ref``: :func:`locate_dataset`'s folder."""
    return locate_dataset(ref, version).folder


__all__ = [
    "PLAIN_VERSION", "PUBLISHED_DIR", "PublishRecord", "DatasetRoot", "ResolvedDataset", "VERSIONS_DIR",
    "locate_dataset", "resolve_dataset", "split_version_ref", "version_name", "version_number",
]
