"""Which version of a dataset root a write goes into, and where its kept shards come from.

A write never changes a committed version (:mod:`.versions`). So, at a root:

- nothing there yet: the write is ``v1`` (and a newest folder a writer was killed in before
  its first record is written into again: it holds only debris);
- ``resume=True`` and the newest version is this run's, interrupted (``state=writing``):
  the write finishes it in place, keeping its finished shards (the seed's resume);
- ``resume=True`` and the newest version is this run's, committed: nothing is written if
  every shard still verifies (the result says ``unchanged``), else a new version keeps the
  shards that verify and rewrites the rest;
- ``resume=True`` and the newest version is another run's (or its record is torn): refused
  with :class:`DifferentRunError`, or with ``on_other_run="replace"`` a new version;
- ``force=True``: a new version, whatever is there; the current one is never touched;
- neither, at a root that holds anything: refused, as the seed says.

Shards a new version keeps come from the newest committed version (or the root itself,
when it is a plain seed-layout dataset): they are shared, not rewritten
(:meth:`~kuration.output.destinations.Destination.share_file`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kuration.errors import CommitError
from kuration.output.commit_protocol import CommitRecord, read_commit
from kuration.output.destinations import Destination
from kuration.output.versions import PLAIN_VERSION, VERSIONS_DIR, DatasetRoot
from kuration.output.write_errors import DifferentRunError


@dataclass(frozen=True)
class ReuseSource:
    """A committed dataset whose shards a write may keep: its folder's destination, its
    commit record, and ``prefix``, the folder's path inside the root ("" for a plain root)."""

    destination: Destination
    record: CommitRecord
    prefix: str


@dataclass(frozen=True)
class WriteTarget:
    """The version a write commits (``version``, its folder's ``destination`` and the
    commit record already there, when the write finishes it in place), where kept shards
    may come from (``sources``: the target itself first when resuming, then the newest
    committed version), and why another run's dataset is set aside ("" when it is not)."""

    root: DatasetRoot
    version: str
    destination: Destination
    record: CommitRecord | None
    sources: tuple[ReuseSource, ...]
    resumed: bool
    replaced: str


def _record(destination: Destination, force: bool, replace: bool) -> tuple[CommitRecord | None, str]:
    """``destination``'s commit record; a torn one raises unless the write may set it aside."""
    try:
        return read_commit(destination), ""
    except CommitError as exc:
        if not (force or replace):
            raise
        return None, str(exc)


def _newest_committed(root: DatasetRoot) -> ReuseSource | None:
    """The newest committed version (or the plain root dataset), whose shards a new version keeps."""
    version = root.newest_committed()
    if version is not None:
        destination = root.version_destination(version)
        record = read_commit(destination)
        return ReuseSource(destination, record, f"{VERSIONS_DIR}/{version}") if record is not None else None
    try:
        record = read_commit(root.destination) if root.has_plain_dataset() else None
    except CommitError:
        return None
    return ReuseSource(root.destination, record, "") if record and record.state == "committed" else None


def _other_run(where: str, record: CommitRecord, run_fingerprint: str) -> str:
    return (f"{where}: holds a {record.state} dataset of another run (run {record.run_fingerprint[:12]}..., this one "
            f"{run_fingerprint[:12]}...: the spec, plan, sources or code changed)")


def write_target(root: DatasetRoot, run_fingerprint: str, *, resume: bool, force: bool,
                 replace: bool) -> WriteTarget:
    """Where this run's write goes (see the module docstring); call it under the root's lease."""
    versions = root.versions()
    newest = versions[-1] if versions else (PLAIN_VERSION if root.has_plain_dataset() else None)
    destination = root.destination if newest == PLAIN_VERSION else (
        root.version_destination(newest) if newest else None)
    record, torn = _record(destination, force, replace) if destination is not None else (None, "")
    previous = _newest_committed(root)
    # A newest folder with no commit record holds only a killed writer's debris: it is reused.
    version = newest if newest not in (None, PLAIN_VERSION) and record is None and not torn else root.next_version()
    fresh = WriteTarget(root, version, root.version_destination(version), None, (previous,) if previous else (),
                        False, torn)
    if not resume or record is None or newest is None or newest == PLAIN_VERSION or destination is None:
        return fresh
    if record.run_fingerprint != run_fingerprint:
        other = _other_run(destination.url, record, run_fingerprint)
        if not replace:
            raise DifferentRunError(f"{other}; resume=True only finishes or re-checks the same run. Pass force=True "
                                    "to write a new version")
        return WriteTarget(fresh.root, fresh.version, fresh.destination, None, fresh.sources, False, other)
    if record.state == "committed":  # the same run, done: kept whole if it verifies (publish decides)
        return WriteTarget(root, newest, destination, record, fresh.sources, True, "")
    here = ReuseSource(destination, record, f"{VERSIONS_DIR}/{newest}")
    return WriteTarget(root, newest, destination, record, (here, *fresh.sources), True, "")


__all__ = ["ReuseSource", "WriteTarget", "write_target"]
