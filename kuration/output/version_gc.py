"""Retention of a dataset root's versions: ``keep_versions`` and ``kuration gc ROOT``.

Plan, then act. :func:`plan_gc` only reads: for every version folder it says whether gc
removes it and why it is kept. :func:`decide_retention` is the rule, a pure function:

- the current version (the publish log's newest record) is kept, and so is every version
  newer than it (staged for an audit, or being written);
- a version an unexpired reader pin names (:mod:`.version_pins`) is kept, whatever else;
- of the committed versions older than the current one, the newest ``keep - 1`` are kept
  (the current one counts as one of ``keep``), the rest removed;
- a folder older than the current one that holds no committed dataset (a killed or
  failed build, a version gc was removing when it was killed) is removed;
- nothing published yet: nothing is removed. A plain seed-layout dataset at the root
  (``v0``) is never touched.

:func:`collect_garbage` takes the root's writer lease for its whole run (no writer plans a
version, or links shards from one, while versions are removed); :func:`collect_under_lease`
is the same for a caller that holds it already (a write that just published). Removing a
version deletes its ``dataset.commit.json`` first, so a version half removed by a SIGKILL
is no longer committed: readers refuse it and the next gc removes the rest as debris.
The record is first copied aside (``dataset.commit.json.gc-set-aside``): when a reader
pins the version while gc removes it, gc puts the record back, and when gc was killed in
that moment, the next gc does (a pinned version is never left uncommitted for longer than
until the next gc, which runs after every publish). Then the version's folder goes. Kept
versions share shard files with removed ones (hard links locally): removing a name never
touches another name's bytes. On an object store the shards lie in the root's pool
(:mod:`.shard_pool`), which every version shares: once the versions are removed, the pool
objects no version left names go (:mod:`.pool_sweep`).

What it does not do: touch the publish log (it is history; a reader asking for a removed
version is told gc removed it) or decide ``keep`` (``keep_versions`` in ``curation.json``,
or ``--keep``).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kuration.errors import CommitError, InputError
from kuration.output.commit_protocol import COMMIT_FILE, is_writer_leftover
from kuration.output.destinations import Destination
from kuration.output.pool_sweep import PoolSweep, sweep_pool
from kuration.output.version_pins import PINS_DIR, VersionPin, active_pins, read_pins
from kuration.output.versions import VERSIONS_DIR, DatasetRoot, PublishRecord, version_number

#: How many versions a root keeps by default (``keep_versions`` in ``curation.json``).
DEFAULT_KEEP_VERSIONS = 3


def check_keep(keep: int) -> int:
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InputError(f"keep_versions must be an integer >= 1 (the current version counts as one), got {keep!r}")
    return keep


@dataclass(frozen=True)
class VersionFate:
    """Whether gc removes ``version``, and why (``why``: every reason it is kept, or why it goes)."""

    version: str
    removed: bool
    why: str


@dataclass(frozen=True)
class GcPlan:
    """What a gc of ``root`` with ``keep`` does: one fate per version folder, oldest first.
    ``note`` says why nothing is removed when nothing is published; ``expired_pins`` are
    the holders whose pins have expired (their files go too)."""

    root: str
    keep: int
    current: str | None
    fates: tuple[VersionFate, ...]
    note: str = ""
    expired_pins: tuple[str, ...] = ()

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(f.version for f in self.fates if f.removed)

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(f.version for f in self.fates if not f.removed)


@dataclass(frozen=True)
class GcResult:
    """What a gc did (``dry_run``: what it would do). ``late_pins``: versions the plan would
    remove that a reader pinned while gc ran, so they were kept; ``pool``: what the sweep of
    the root's shard pool removed."""

    plan: GcPlan
    removed: tuple[str, ...]
    dry_run: bool = False
    late_pins: tuple[str, ...] = ()
    #: The shard pool's objects no version left names, removed after the versions (:mod:`.pool_sweep`).
    pool: PoolSweep = PoolSweep()


def decide_retention(states: Mapping[str, str], current: str | None, pins: Sequence[VersionPin],
                     keep: int) -> tuple[VersionFate, ...]:
    """The rule (module docstring), over ``states`` (version -> ``"committed"``, or any other
    state: ``writing``, ``empty``, ``torn``), the ``current`` version, the active ``pins``."""
    check_keep(keep)
    order = sorted(states, key=version_number)
    if current is None:
        return tuple(VersionFate(v, False, "nothing is published yet") for v in order)
    now = version_number(current)
    older_committed = [v for v in reversed(order) if version_number(v) < now and states[v] == "committed"]
    within = set(older_committed[:keep - 1])
    fates = []
    for version in order:
        number = version_number(version)
        reasons = [f"pinned by {p.holder} until {p.expires}" for p in pins if p.version == version]
        if number == now:
            reasons.insert(0, "current")
        elif number > now:
            reasons.insert(0, "newer than current")
        elif version in within:
            reasons.append(f"within keep_versions={keep}")
        if reasons:
            fates.append(VersionFate(version, False, "; ".join(reasons)))
        elif states[version] == "committed":
            fates.append(VersionFate(version, True, f"older than the newest {keep} committed versions"))
        else:
            fates.append(VersionFate(version, True, f"never committed ({states[version]}): a killed or failed build"))
    return tuple(fates)


def _state(root: DatasetRoot, version: str) -> str:
    try:
        record = root.commit_record(version)
    except CommitError:
        return "torn"
    return "empty" if record is None else record.state


def plan_gc(root: str | os.PathLike[str] | DatasetRoot, keep: int = DEFAULT_KEEP_VERSIONS, *,
            now: _dt.datetime | None = None) -> GcPlan:
    """What gc would do to ``root`` (reads only). A torn or edited pin raises: gc cannot
    tell which version it keeps."""
    dataset_root = root if isinstance(root, DatasetRoot) else DatasetRoot(root)
    check_keep(keep)
    moment = now or _dt.datetime.now(_dt.timezone.utc)
    pins = read_pins(dataset_root)
    active = [pin for pin in pins if pin.expires_at() > moment]
    current = dataset_root.current()
    states = {version: _state(dataset_root, version) for version in dataset_root.versions()}
    fates = decide_retention(states, current.version if current else None, active, keep)
    note = "" if current else (f"{dataset_root.url}: nothing is published yet, so no version is old; gc removes "
                               "nothing")
    return GcPlan(dataset_root.url, keep, current.version if current else None, fates, note,
                  tuple(pin.holder for pin in pins if pin not in active))


#: Where gc keeps a version's commit record while it removes the version: the version is
#: uncommitted for readers from the moment the record itself is gone, yet a pin that
#: arrives meanwhile (or is found by the next gc, after a SIGKILL) gets it back.
SET_ASIDE_COMMIT = f"{COMMIT_FILE}.gc-set-aside"


def _remove_version(root: DatasetRoot, version: str) -> bool:
    """Remove ``version``'s folder, its commit record first (kept aside until the folder
    goes); False (nothing removed) when a reader pinned it since the plan was made."""
    folder = f"{VERSIONS_DIR}/{version}"
    record = root.destination.read(f"{folder}/{COMMIT_FILE}")
    if record is not None:
        root.destination.write_metadata(f"{folder}/{SET_ASIDE_COMMIT}", record)
        root.destination.remove(f"{folder}/{COMMIT_FILE}")
    if any(pin.version == version for pin in active_pins(root)):  # pinned meanwhile: put it back
        _restore_set_aside(root, version)
        return False
    root.destination.remove_tree(folder)
    return True


def _restore_set_aside(root: DatasetRoot, version: str) -> bool:
    """Put back the commit record a gc set aside for ``version`` (a gc killed between
    setting it aside and finding the version pinned); True when there was one."""
    folder = f"{VERSIONS_DIR}/{version}"
    record = root.destination.read(f"{folder}/{SET_ASIDE_COMMIT}")
    if record is None:
        return False
    if root.destination.read(f"{folder}/{COMMIT_FILE}") is None:
        root.destination.write_metadata(f"{folder}/{COMMIT_FILE}", record)
    root.destination.remove(f"{folder}/{SET_ASIDE_COMMIT}")
    return True


def _sweep_pins(root: DatasetRoot, expired: Sequence[str]) -> None:
    """Expired pins and the temp files of killed pin writes."""
    for holder in expired:
        root.destination.remove(f"{PINS_DIR}/{holder}.json")
    for relative in root.destination.files_under(PINS_DIR):
        if is_writer_leftover(relative.rsplit("/", 1)[-1]):
            root.destination.remove(relative)


def collect_under_lease(destination: Destination, keep: int = DEFAULT_KEEP_VERSIONS, *, dry_run: bool = False,
                        progress: Callable[[str], None] | None = None) -> GcResult:
    """:func:`collect_garbage` for a caller that holds the root's lease already.
    ``progress(version)`` is called after each version is removed."""
    root = DatasetRoot(destination.url)
    plan = plan_gc(root, keep)
    if dry_run:
        return _dry(root, plan)
    restored = tuple(fate.version for fate in plan.fates
                     if not fate.removed and _restore_set_aside(root, fate.version))
    if restored:  # a killed gc's pinned versions are committed again: plan with their true state
        plan = plan_gc(root, keep)
    removed, late = [], []
    for version in plan.removed:
        if not _remove_version(root, version):
            late.append(version)
            continue
        removed.append(version)
        if progress is not None:
            progress(version)
    _sweep_pins(root, plan.expired_pins)
    # last: the pool objects no version left names (the versions' commit records went first)
    pool = sweep_pool(root.destination, _dataset_folders(root, root.versions()))
    return GcResult(plan, tuple(removed), late_pins=tuple(late), pool=pool)


def _dataset_folders(root: DatasetRoot, versions: Sequence[str]) -> list[str]:
    """The folders (relative to the root) of ``versions``, and the root itself when it holds a plain dataset."""
    return [f"{VERSIONS_DIR}/{v}" for v in versions] + ([""] if root.has_plain_dataset() else [])


def _dry(root: DatasetRoot, plan: GcPlan) -> GcResult:
    """What gc would do: the plan, and the pool objects the kept versions do not name."""
    pool = sweep_pool(root.destination, _dataset_folders(root, plan.kept), dry_run=True)
    return GcResult(plan, plan.removed, dry_run=True, pool=pool)


def publish_and_collect(root: DatasetRoot, version: str, keep: int) -> tuple[PublishRecord, GcResult]:
    """Make the committed ``version`` current (unless it is already) and keep ``keep``
    versions, in one hold of the root's lease: a publish step's whole job."""
    check_keep(keep)
    with root.destination.lease():
        current = root.current()
        if current is None or current.version != version:
            current = root.publish(version)
        return current, collect_under_lease(root.destination, keep)


def collect_garbage(root: str | os.PathLike[str], keep: int = DEFAULT_KEEP_VERSIONS, *, dry_run: bool = False,
                    progress: Callable[[str], None] | None = None) -> GcResult:
    """Remove the versions of ``root`` that :func:`plan_gc` says go, under the root's lease
    (a :class:`~kuration.errors.LeaseError` naming the holder when a writer has it).
    ``dry_run``: plan only, change nothing (no lease taken)."""
    check_keep(keep)  # before the lease: a bad setting touches nothing
    dataset_root = DatasetRoot(root)
    if dry_run:
        return _dry(dataset_root, plan_gc(dataset_root, keep))
    with dataset_root.destination.lease():
        return collect_under_lease(dataset_root.destination, keep, progress=progress)


__all__ = ["DEFAULT_KEEP_VERSIONS", "GcPlan", "GcResult", "VersionFate", "check_keep", "collect_garbage",
           "collect_under_lease", "decide_retention", "plan_gc", "publish_and_collect"]
