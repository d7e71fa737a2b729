"""Reading a dataset directory, fail closed: only a committed, checksum-consistent dataset
is accepted, and every shard is checked against its recorded size and SHA-256.

:func:`load_committed` refuses a directory (local or an object-store URL) whose commit
record is missing, not ``committed``, torn or edited, or whose manifest or config does not
hash to what the record pins; it also refuses duplicate JSON keys, NaN/Infinity, numbers
beyond range, nesting deeper than 64 levels, and a manifest whose structure is not what the
writer writes (every entry an object with a ``path`` inside its split's folder, ``bytes``,
``sha256``, ``split`` and ``n_steps`` of the right types, and a pooled entry's ``stored_at``
inside the root's ``shards/``; an ``output`` spec). Where an entry's bytes lie is
:func:`locate_shard`'s answer (:func:`kuration.output.shard_pool.shard_location`): in the
version folder, or, for a pooled entry of a version opened through its root (``ROOT``,
``ROOT@vN``), in the root's shard pool; a pooled version folder opened alone is refused. Locally, every
component of a metadata or shard path is opened without following symlinks and only
regular files are read: a split folder replaced by a link to elsewhere, a fifo or a device
is refused. :func:`verify_dataset` checks every shard and returns a structured result (what
the ``dataset_integrity`` check reports). :func:`read_shard` decodes one shard, and refuses
one that is malformed inside, or whose real step count is not the manifest's, with
:class:`DatasetIntegrityError` naming it; it is :func:`fetch_shard` (read once, size and
SHA-256 checked) then :func:`decode_shard`, which :mod:`kuration.read.loaders` runs on
read-ahead threads. Both take any :class:`ShardSource` (a committed dataset, or a legacy
manifest dict the loaders rebased). Nothing here repairs.

Untrusted artifacts. The commit chain is integrity, not authentication: whoever can rewrite
a shard can rewrite its size and SHA-256 and the records above them. ``npz`` and ``json``
shards are safe to decode from anyone (their readers are bounded by the shard's size and the
declared shapes). ``hdf5`` and ``parquet`` shards are decoded by native libraries that parse
the file's own metadata; a crafted HDF5 shard kept ``read_shard`` busy indefinitely. For an
artifact you did not write, load it with ``untrusted=True``: those two containers are then
decoded in a worker process with a time limit and a memory cap
(:mod:`kuration.read.isolated`), and a shard that overruns fails with the shard named.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kuration import storage
from kuration.checks import CheckResult, count
from kuration.errors import CommitError, shown
from kuration.canonical.hashing import sha256_hex
from kuration.numbers import finite_float, format_bytes, whole_number
from kuration.output.commit_protocol import (
    COMMIT_FILE, CONFIG_FILE, MANIFEST_FILE, CommitRecord, read_commit, strict_json,
)
from kuration.output.containers import CONTAINER_TYPES, get_container
from kuration.output.containers.protocol import ShardArrays, ShardContainer, ShardFormatError
from kuration.output.destinations import Destination, open_destination
from kuration.output.spec import CONTAINERS, OutputSpec, OutputSpecError
from kuration.output.shard_pool import (
    STORED_AT, ShardLocation, is_pooled, pooled_outside, shard_location, stored_at_problem,
)
from kuration.output.versions import locate_dataset, resolve_dataset
from kuration.read.isolated import decode_isolated
from kuration.read.verified_once import Verify, checked_verify, remember, trusted
from kuration.splits.stages import EXCLUSIVE_STAGES

_SHA256 = re.compile(r"[0-9a-f]{64}")
_Checked = TypeVar("_Checked", bound=CheckResult)
#: What every manifest entry records.
_ENTRY_KEYS_IN_ORDER = ("path", "bytes", "sha256", "split", "n_steps")
_ENTRY_KEYS = frozenset(_ENTRY_KEYS_IN_ORDER)


class DatasetIntegrityError(CommitError):
    """A shard is missing, its bytes do not match what the manifest records, or they do not
    decode to what the manifest and the output spec declare."""


@dataclass(frozen=True)
class CommittedDataset:
    destination: Destination
    record: CommitRecord
    manifest: Mapping[str, Any]
    config: Mapping[str, Any]
    spec: OutputSpec
    #: Decode ``hdf5`` and ``parquet`` shards in a worker with a time limit (see the module doc).
    untrusted: bool = False
    #: Seconds an isolated decode may take; None: :func:`kuration.read.isolated.decode_timeout`.
    decode_timeout: float | None = None
    #: The dataset root this is ``version`` of, when opened through it (``ROOT``, ``ROOT@vN``):
    #: where pooled shards lie (:mod:`kuration.output.shard_pool`). None: a plain dataset, or
    #: a version folder opened alone.
    dataset_root: Destination | None = None
    version: str | None = None

    @property
    def root(self) -> str:
        return self.destination.url

    @property
    def reference(self) -> str:
        """What opens this dataset again, however the root's current version moves on:
        ``ROOT@vN`` for a version opened through its root, else the folder."""
        if self.dataset_root is not None and self.version is not None:
            return f"{self.dataset_root.url}@{self.version}"
        return self.destination.url

    @property
    def entries(self) -> list[Mapping[str, Any]]:
        return list(self.manifest["entries"])

    def shard_path(self, entry: Mapping[str, Any]) -> str:
        """The full path or URL of ``entry``'s bytes (in the version folder, or the root's pool)."""
        return locate_shard(self, entry).where


class ShardSource(Protocol):
    """What :func:`read_shard` reads from: a :class:`CommittedDataset`, or a legacy manifest
    dict rebased onto a directory (:mod:`kuration.read.loaders`)."""

    @property
    def destination(self) -> Destination: ...
    @property
    def spec(self) -> OutputSpec: ...
    @property
    def untrusted(self) -> bool: ...
    @property
    def decode_timeout(self) -> float | None: ...
    @property
    def dataset_root(self) -> Destination | None: ...


def locate_shard(dataset: ShardSource, entry: Mapping[str, Any]) -> ShardLocation:
    """Where ``entry``'s bytes lie (:func:`kuration.output.shard_pool.shard_location`): every
    read of a shard goes through here."""
    return shard_location(dataset.dataset_root, dataset.destination, entry)


def _required(destination: Destination, name: str) -> bytes:
    data = destination.read(name)
    if data is None:
        raise CommitError(f"{destination.where(name)}: missing; the dataset is incomplete")
    return data




def load_committed(out: str | os.PathLike[str], *, untrusted: bool = False,
                   decode_timeout: float | None = None, extra_containers: Collection[str] = (),
                   version: str | None = None) -> CommittedDataset:
    """The committed dataset at ``out`` (a directory or URL, or the path of its manifest).
    A dataset root with versions (:mod:`kuration.output.versions`) opens its current
    version; ``version="v3"`` (or ``out="ROOT@v3"``) opens that one.
    ``untrusted=True`` for an artifact someone else wrote: see the module doc.
    ``extra_containers``: container names besides the four built-in ones that entries may
    record (the names of a reader's own container registry, :func:`kuration.read.iter_shards`)."""
    if decode_timeout is not None and not (finite_float(decode_timeout) or 0) > 0:
        raise ValueError("load_committed: decode_timeout must be a positive number of seconds, got "
                         f"{shown(decode_timeout)}")
    resolved = locate_dataset(_dataset_dir(out), version)
    destination = open_destination(resolved.folder)
    record = read_commit(destination)
    if record is None:
        raise CommitError(f"{destination.url}: no {COMMIT_FILE}, so this is not a committed dataset (a writer may have "
                          "stopped before its first commit); write it again, with resume=True to keep finished shards")
    if record.state != "committed":
        raise CommitError(f"{destination.url}: {COMMIT_FILE} says state={record.state!r}: a writer is running or was "
                          "interrupted. Readers reject it until the writer commits; re-run the write with resume=True "
                          "to finish it")
    manifest_bytes = _required(destination, MANIFEST_FILE)
    config_bytes = _required(destination, CONFIG_FILE)
    if sha256_hex(manifest_bytes) != record.manifest_sha256:
        raise CommitError(f"{destination.where(MANIFEST_FILE)}: does not match the SHA-256 pinned by {COMMIT_FILE} "
                          "(changed after the commit); do not trust this dataset")
    if sha256_hex(config_bytes) != record.config_sha256:
        raise CommitError(f"{destination.where(CONFIG_FILE)}: does not match the SHA-256 pinned by {COMMIT_FILE}")
    manifest = strict_json(manifest_bytes, where=destination.where(MANIFEST_FILE))
    config = strict_json(config_bytes, where=destination.where(CONFIG_FILE))
    if not isinstance(config, dict):
        raise CommitError(f"{destination.where(CONFIG_FILE)}: must be a JSON object, found {type(config).__name__}")
    spec = checked_manifest(manifest, destination.where(MANIFEST_FILE), extra_containers=extra_containers)
    dataset_root = open_destination(resolved.root) if resolved.root is not None else None
    check_shard_folders(dataset_root, destination, manifest["entries"])
    return CommittedDataset(destination, record, manifest, config, spec, untrusted, decode_timeout, dataset_root,
                            resolved.version)


def check_shard_folders(dataset_root: Destination | None, folder: Destination,
                        entries: Sequence[Mapping[str, Any]]) -> None:
    """Every folder that holds the entries' bytes is a real folder (locally: no link), and a
    pooled entry has its root's pool to be read from (else the error says to open ``ROOT@vN``)."""
    pooled = [entry for entry in entries if is_pooled(entry)]
    folder.check_folders({entry["path"].rsplit("/", 1)[0] for entry in entries if not is_pooled(entry)})
    if not pooled:
        return
    if dataset_root is None:
        raise pooled_outside(folder, pooled[0]["path"], pooled[0][STORED_AT])
    dataset_root.check_folders({entry[STORED_AT].rsplit("/", 1)[0] for entry in pooled})


def _dataset_dir(out: str | os.PathLike[str]) -> str:
    """The dataset's directory, given it or the path of its manifest."""
    text = os.fspath(out).rstrip("/")
    if text.endswith("/" + MANIFEST_FILE) or text == MANIFEST_FILE:
        text = text[: -len(MANIFEST_FILE)].rstrip("/") or "."
    return text


def checked_manifest(manifest: Any, where: str, *, extra_containers: Collection[str] = ()) -> OutputSpec:
    """The manifest's output spec, after checking the structure every reader relies on
    (entry containers: the built-in names, or one of ``extra_containers``)."""
    if not isinstance(manifest, dict):
        raise CommitError(f"{where}: must be a JSON object, found {type(manifest).__name__}")
    if not isinstance(manifest.get("entries"), list):
        raise CommitError(f"{where}: has no entries list (found {shown(manifest.get('entries'))})")
    if "output" not in manifest:
        raise CommitError(f"{where}: has no output spec ('output'), so its shards cannot be decoded")
    try:
        spec = OutputSpec.from_dict(manifest["output"])
    except OutputSpecError as exc:
        raise CommitError(f"{where}: {exc}") from None
    containers = frozenset((*CONTAINERS, *extra_containers))
    paths: dict[str, int] = {}
    stored: dict[str, int] = {}
    for i, entry in enumerate(manifest["entries"]):
        # The location is formatted only for a bad entry: a manifest may hold 100,000 good ones.
        problem = _entry_problem(entry, spec, containers)
        if problem is not None:
            raise CommitError(f"{where}: entries[{i}]{problem}")
        first = paths.setdefault(entry["path"], i)
        if first != i:
            raise CommitError(f"{where}: entries[{i}].path {entry['path']!r} is also entries[{first}]'s; each shard is "
                              "listed once")
        if STORED_AT in entry and (first := stored.setdefault(entry[STORED_AT], i)) != i:
            raise CommitError(f"{where}: entries[{i}].stored_at {entry[STORED_AT]!r} is also entries[{first}]'s; each "
                              "pool object holds one shard")
    return spec


def check_entry(entry: Any, spec: OutputSpec, where: str, *, extra_containers: Collection[str] = ()) -> None:
    """One manifest entry has what readers use, of the right types, consistent with ``spec``."""
    problem = _entry_problem(entry, spec, frozenset((*CONTAINERS, *extra_containers)))
    if problem is not None:
        raise CommitError(f"{where}{problem}")


def _entry_problem(entry: Any, spec: OutputSpec, containers: frozenset[str]) -> str | None:
    """What is wrong with one manifest entry, as the rest of its error message after its
    location (``.<field>: ...`` or ``: ...``); None when it is sound."""
    if not isinstance(entry, dict):
        return f": must be an object, found {type(entry).__name__}"
    if not entry.keys() >= _ENTRY_KEYS:
        missing = [k for k in _ENTRY_KEYS_IN_ORDER if k not in entry]
        return f": lacks {missing}; an entry records path, bytes, sha256, split and n_steps"
    split = entry["split"]
    if split not in EXCLUSIVE_STAGES:
        return f".split: must be one of {list(EXCLUSIVE_STAGES)}, got {shown(split)}"
    try:
        parts = storage.relative_parts(entry["path"], where="", error=CommitError)
    except CommitError as exc:
        return f".path{exc}"
    if len(parts) < 2 or parts[0] != split:
        return f".path: {shown(entry['path'])} is not inside its split's folder {split + '/'!r}"
    if STORED_AT in entry and (problem := stored_at_problem(entry[STORED_AT])) is not None:
        return f".stored_at{problem}"
    size = whole_number(entry["bytes"])
    if size is None or size < 0:
        return f".bytes: must be a whole number of bytes, got {shown(entry['bytes'])}"
    if not isinstance(entry["sha256"], str) or not _SHA256.fullmatch(entry["sha256"]):
        return f".sha256: must be 64 lowercase hex digits, got {shown(entry['sha256'])}"
    rows = entry.get("rows", spec.shard_length)
    n_steps = whole_number(entry["n_steps"])
    if whole_number(rows) is None or not 0 <= rows <= spec.shard_length:
        return (f".rows: must be a whole number from 0 to the shard length {spec.shard_length}, got "
                f"{shown(rows)}")
    if n_steps is None or not 0 <= n_steps <= rows:
        return f".n_steps: must be a whole number from 0 to the shard's rows ({rows}), got {shown(entry['n_steps'])}"
    container = entry.get("container", spec.container)
    if not isinstance(container, str) or container not in containers:
        known = [*CONTAINERS, *sorted(containers - set(CONTAINERS))]
        return f".container: must be one of {known}, got {shown(container)}"
    return None


@dataclass(frozen=True)
class DatasetVerification(CheckResult):
    """The ``dataset_integrity`` answer: ``shards`` and ``bytes`` the manifest lists,
    ``bad_shards`` the ones that are missing or differ (in manifest order)."""

    shards: int = 0
    bytes: int = 0
    bad_shards: tuple[str, ...] = ()


def load_for_check(out: str | os.PathLike[str], write_hint: str,
                   failed: Callable[[str, tuple[str, ...]], _Checked], *,
                   version: str | None = None) -> CommittedDataset | _Checked:
    """The committed dataset at ``out`` (its ``version``, else the current one), or, when
    :func:`load_committed` refuses it, the check's failed answer ``failed(verdict, errors)``:
    nothing committed there yet (``write_hint`` says how to commit one), or a broken chain."""
    try:
        return load_committed(out, version=version)
    except CommitError as exc:
        try:
            destination = open_destination(resolve_dataset(_dataset_dir(out), version))
        except CommitError:
            return failed(str(exc), (str(exc),))
        # Neither file: nothing was ever committed here. A manifest without its commit record
        # is a broken chain (the record went missing after the commit), not an absent dataset.
        if destination.read(COMMIT_FILE) is None and destination.read(MANIFEST_FILE) is None:
            message = (f"no dataset is committed at {destination.url} (no {COMMIT_FILE} or {MANIFEST_FILE}: "
                       f"nothing was written there, or a writer stopped before its first commit); {write_hint}")
            return failed(message, (message,))
        return failed(f"commit chain broken: {exc}", (str(exc),))


def verify_dataset(out: str | os.PathLike[str], *, write_hint: str = "write the dataset there first",
                   version: str | None = None) -> DatasetVerification:
    """The commit chain and every shard's size and SHA-256 of the dataset at ``out`` (its
    ``version``, else the current one); names each bad shard. Never raises for what it
    finds: a broken chain or a bad shard fails the result. Reads only. ``write_hint`` says
    how to commit a dataset, for the verdict when none is committed."""
    dataset = load_for_check(out, write_hint, DatasetVerification, version=version)
    if isinstance(dataset, DatasetVerification):
        return dataset
    bad, errors, total = [], [], 0
    figures: dict[str, int] = {}
    for entry in dataset.entries:
        try:
            location = locate_shard(dataset, entry)
            matches = location.destination.shard_matches(location.relative, entry)
        except CommitError as exc:
            bad.append(entry["path"])
            errors.append(str(exc))
            continue
        if not matches:
            bad.append(entry["path"])
            where = location.describe() if location.pooled else entry["path"]
            errors.append(f"{where}: missing, or its size or SHA-256 differs (manifest: {entry['bytes']} "
                          f"bytes, sha256 {entry['sha256'][:12]}...)")
        total += entry["bytes"]
        figures[f"{entry['split']}_shards"] = figures.get(f"{entry['split']}_shards", 0) + 1
        figures[f"{entry['split']}_steps"] = figures.get(f"{entry['split']}_steps", 0) + entry["n_steps"]
    shards = len(dataset.entries)
    if errors:
        verdict = f"{len(bad):,} of {count(shards, 'shard')} bad; first: {errors[0]}"
    else:
        verdict = (f"{count(shards, 'shard')}, {format_bytes(total)} verified: every size and SHA-256 matches, "
                   "commit chain intact")
    return DatasetVerification(verdict, tuple(errors), figures={"shards": shards, "bytes": total, **figures,
                                                                "bad_shards": len(bad)},
                               shards=shards, bytes=total, bad_shards=tuple(bad))


def read_shard(dataset: ShardSource, entry: Mapping[str, Any], *, verify: Verify = True,
               container: ShardContainer | None = None) -> ShardArrays:
    """One shard's arrays, restored to the declared dtypes and shapes (size and SHA-256
    checked first unless ``verify=False``); :class:`DatasetIntegrityError` naming the shard
    when it is missing, changed, or does not decode to what the manifest declares (for an
    untrusted dataset, also when its isolated decode overruns; ``IsolatedDecoderError`` when
    the worker cannot be started at all). ``container``: the implementation to decode with
    (default: the built-in one the entry records). It is :func:`fetch_shard` then
    :func:`decode_shard`; readers that overlap the two (hash the next shard while this one
    decodes) call them apart."""
    extra = () if container is None else (container.name,)
    check_entry(entry, dataset.spec, f"{dataset.destination.where(MANIFEST_FILE)}: entry", extra_containers=extra)
    data, hashed = fetch_shard_hashed(dataset, entry, verify=checked_verify(verify))
    return decode_shard(dataset, entry, data, container=container, verified=hashed)


def fetch_shard(dataset: ShardSource, entry: Mapping[str, Any], *, verify: Verify = True,
                allocate: Callable[[int], bytearray] = bytearray) -> bytearray:
    """The bytes of the shard ``entry`` (a checked entry) names (:func:`fetch_shard_hashed`)."""
    return fetch_shard_hashed(dataset, entry, verify=verify, allocate=allocate)[0]


def fetch_shard_hashed(dataset: ShardSource, entry: Mapping[str, Any], *, verify: Verify = True,
                       allocate: Callable[[int], bytearray] = bytearray) -> tuple[bytearray, bool]:
    """The bytes of the shard ``entry`` (a checked entry) names, read once into a writable
    buffer from ``allocate(size)`` (the decoded arrays view it), and whether they were hashed
    by this read. Their size and SHA-256 are checked against the entry unless
    ``verify=False``; with ``verify="once"``, only when this process has not verified this
    file for this entry since it last changed (:mod:`kuration.read.verified_once`). Safe to
    call on another thread (hashlib and file reads release the GIL)."""
    try:
        location = locate_shard(dataset, entry)
        stamp = _change_stamp(location) if verify == "once" else None
        data = location.destination.read_buffer(location.relative, allocate)
    except CommitError as exc:  # reached through a link, not a regular file, no pool: a shard problem
        raise DatasetIntegrityError(str(exc)) from None
    if data is None:
        raise DatasetIntegrityError(f"{location.describe()}: missing; re-run the write with resume=True to rebuild it")
    hashed = bool(verify) and not trusted(location.where, entry["sha256"], entry["bytes"], stamp)
    if hashed and (len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]):
        raise DatasetIntegrityError(f"{location.describe()}: size or SHA-256 differs from the manifest; the shard was "
                                    "changed or is corrupt. Re-run the write with resume=True to rebuild it")
    if hashed:
        remember(location.where, entry["sha256"], entry["bytes"], stamp)
    return data, hashed


def _change_stamp(location: ShardLocation) -> tuple[int, ...] | None:
    """The shard file's change stamp; None (verify every read) from a destination written
    before ``Destination.change_stamp`` existed, rather than failing its reads."""
    stamp = getattr(location.destination, "change_stamp", None)
    return None if stamp is None else stamp(location.relative)


def decode_shard(dataset: ShardSource, entry: Mapping[str, Any], data: bytes | bytearray, *,
                 container: ShardContainer | None = None, verified: bool = False) -> ShardArrays:
    """``data`` (what :func:`fetch_shard` returned for ``entry``) decoded by ``container``
    (default: the built-in container the entry records), its real step count and rows
    checked against the entry. ``verified``: ``data`` was checked against the entry's
    SHA-256, so the container may skip its own checksums."""
    spec = dataset.spec

    def where() -> str:  # for an error message only: formatting it costs more than a good shard's checks
        return locate_shard(dataset, entry).describe()

    name = entry.get("container", spec.container)
    if container is None:
        container = get_container(name)
    elif container.name != name:
        raise DatasetIntegrityError(f"{where()}: the manifest records container {name!r}, but the reader was given "
                                    f"{container!r} (a {container.name!r} container)")
    try:
        if dataset.untrusted and not container.safe_for_untrusted:
            if type(container) is not CONTAINER_TYPES.get(name):
                raise DatasetIntegrityError(
                    f"{where()}: the dataset was loaded untrusted, and {container!r} is neither safe for untrusted "
                    "bytes nor a built-in container the isolated decoder can run; decode it with the built-in "
                    f"{name!r} container, or load the dataset trusted")
            shard = decode_isolated(spec, name, data, timeout=dataset.decode_timeout)
        else:
            shard = container.read(data, spec.modalities, presence=spec.presence_mask, max_rows=spec.shard_length,
                                   verified=verified)
    except ShardFormatError as exc:
        raise DatasetIntegrityError(f"{where()}: {exc}. Its size and SHA-256 match the manifest, so it was written "
                                    "damaged or the dataset was crafted (the checksums prove integrity, not who wrote "
                                    "them): do not train on it; rebuild the dataset with force=True") from None
    recorded = (entry["n_steps"], entry.get("rows", shard.rows))
    if (shard.n_steps, shard.rows) != recorded:
        raise DatasetIntegrityError(
            f"{where()}: holds {shard.n_steps} real steps in {shard.rows} rows, but the manifest records {recorded[0]} "
            f"in {recorded[1]}; the manifest and the shard disagree, so neither can be trusted"
        )
    return shard


__all__ = ["CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "ShardSource", "check_entry",
           "check_shard_folders", "checked_manifest", "decode_shard", "fetch_shard", "fetch_shard_hashed",
           "load_committed", "locate_shard", "read_shard", "verify_dataset"]
