"""The commit protocol: how a dataset directory goes from one committed state to the next
without a reader ever accepting a half-written one.

Files a dataset directory holds besides its shards::

    dataset_manifest.json        shards (relative paths, sizes, SHA-256) and the budget block
    config.json                  the resolved job, results, timestamps and provenance
    dataset.commit.json          {"state": "writing" | "committed", the SHA-256 of the manifest,
                                 the config and the output-spec marker, a checksum of itself}
    .kuration_output_spec.json   the resolved output spec and run fingerprint (what resume pins)
    budget/                      the budget plan the shards come from (budget.json, pinned by
                                 config.json, pins plan_items.parquet and admitted.parquet)

The order, which every writer follows (:mod:`kuration.output.write_dataset`):

1. everything that can fail without touching the destination (validation, scoring, the
   budget plan, the write plan: :mod:`kuration.output.write_plan`) happens first; a
   failure there leaves every published byte as it was. Steps 2 to 5 are
   :func:`kuration.output.publish.publish`;
2. ``dataset.commit.json`` moves to ``state=writing`` (pinning the new marker's SHA-256),
   then the marker is written. From here readers reject the directory;
3. shards are written, each whole before it takes its name (a local temp file moved into
   place, or a complete attempt object the object store moves), and recorded for resume;
4. the manifest and the config are written and made durable (file and directory fsync);
5. the checksummed ``state=committed`` record is published, last.

Between 4 and 5, with the directory still unreadable, the writer removes what the new
commit does not cover: an earlier run's shards, and every temp file or attempt object a
killed writer left (:func:`is_writer_leftover`), so a committed directory holds only the
files above, its shards, its ``budget/`` plan, and the documented folders (``.kuration_checkpoints/``; the
local lease file ``.kuration-writer.lock``).

Only a ``committed`` record whose checksum holds and whose manifest and config hashes match
the files makes a dataset readable (:func:`kuration.read.load_committed`). Files are
written through a :class:`kuration.output.destinations.Destination` (a local folder or an
object store), which makes each metadata write atomic and, locally, durable.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from kuration import storage
from kuration.errors import CommitError
from kuration.canonical.hashing import canonical_digest, readable_json, sha256_hex
from kuration.output.destinations import Destination
from kuration.canonical.strict_json import parse_strict_json

COMMIT_FILE = "dataset.commit.json"
MANIFEST_FILE = "dataset_manifest.json"
CONFIG_FILE = "config.json"
SPEC_MARKER_FILE = ".kuration_output_spec.json"
#: Resume records of a run in progress: one small file per finished shard, under the run's
#: fingerprint, so one run's records never authorize another's shards.
RESUME_DIR = ".kuration_resume"
#: Scored-segment checkpoints (a score cache), one namespace per scoring run fingerprint;
#: outside the commit's scope, and pruned to the committed run's namespace only after a
#: successful commit, so a failed replacement keeps the previous run's checkpoints.
CHECKPOINT_DIR = ".kuration_checkpoints"
STATES = ("writing", "committed")
COMMIT_FORMAT = 1
#: The temp files metadata writes left before temp files had one prefix
#: (:data:`kuration.storage.TEMP_PREFIX`): ``.<metadata file>.<8 mkstemp characters>.tmp``.
_OLD_METADATA_TEMP = re.compile(
    r"\.(?:" + "|".join(re.escape(name) for name in (MANIFEST_FILE, CONFIG_FILE, COMMIT_FILE, SPEC_MARKER_FILE))
    + r")\.[a-z0-9_]{8}\.tmp"
)


def is_writer_leftover(name: str) -> bool:
    """Whether ``name`` (a base name) is a temp file or attempt object a writer left: only
    these, never a file a writer did not create, may be swept up under the lease."""
    return storage.is_temp_name(name) or _OLD_METADATA_TEMP.fullmatch(name) is not None


@dataclass(frozen=True)
class CommitRecord:
    state: str
    run_fingerprint: str
    spec_marker_sha256: str
    manifest_sha256: str | None = None
    config_sha256: str | None = None
    format: int = COMMIT_FORMAT

    def body(self) -> dict[str, Any]:
        return asdict(self)

    def to_bytes(self) -> bytes:
        body = self.body()
        return readable_json({**body, "checksum": canonical_digest(body)})

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> CommitRecord:
        try:
            raw = strict_json(data, where=where, what="commit record")
        except CommitError as exc:
            raise CommitError(f"{exc}; it is torn or was edited, so nothing here can be trusted or resumed. Re-run "
                              "the write with force=True") from None
        if not isinstance(raw, dict) or "checksum" not in raw:
            raise CommitError(f"{where}: not a commit record (no checksum)")
        checksum = raw.pop("checksum")
        fields = set(cls.__dataclass_fields__)
        if set(raw) != fields:
            raise CommitError(f"{where}: commit record keys {sorted(raw)}, expected {sorted(fields)}")
        if canonical_digest(raw) != checksum:
            raise CommitError(f"{where}: the commit record's checksum does not match its content (edited or torn); "
                              "do not trust this dataset. Re-run the write with force=True")
        record = cls(**raw)
        if record.state not in STATES or record.format != COMMIT_FORMAT:
            raise CommitError(f"{where}: unknown state {record.state!r} or format {record.format!r}")
        return record


def strict_json(data: bytes, *, where: str, what: str = "metadata file") -> Any:
    """Parse metadata JSON strictly (:mod:`kuration.canonical.strict_json`): a reader must not guess."""
    return parse_strict_json(data, where=where, what=what, error=CommitError)


def read_commit(destination: Destination) -> CommitRecord | None:
    """The destination's commit record; None when there is none."""
    data = destination.read(COMMIT_FILE)
    if data is None:
        return None
    return CommitRecord.parse(data, where=destination.where(COMMIT_FILE))


def publish_writing(destination: Destination, *, run_fingerprint: str, marker: bytes) -> None:
    """Step 2: readers reject the directory from here until :func:`publish_committed`."""
    record = CommitRecord("writing", run_fingerprint, sha256_hex(marker))
    destination.write_metadata(COMMIT_FILE, record.to_bytes())
    destination.write_metadata(SPEC_MARKER_FILE, marker)


def publish_committed(destination: Destination, *, run_fingerprint: str, marker: bytes, manifest: bytes,
                      config: bytes) -> CommitRecord:
    """Steps 4 and 5: manifest and config made durable, then the committed record, last."""
    destination.write_metadata(MANIFEST_FILE, manifest)
    destination.write_metadata(CONFIG_FILE, config)
    record = CommitRecord("committed", run_fingerprint, sha256_hex(marker), sha256_hex(manifest), sha256_hex(config))
    destination.write_metadata(COMMIT_FILE, record.to_bytes())
    return record


__all__ = [
    "CHECKPOINT_DIR", "COMMIT_FILE", "CONFIG_FILE", "CommitError", "CommitRecord", "MANIFEST_FILE", "RESUME_DIR",
    "SPEC_MARKER_FILE", "STATES", "is_writer_leftover", "publish_committed", "publish_writing",
    "read_commit", "strict_json",
]
