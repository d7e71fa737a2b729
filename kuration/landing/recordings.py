"""Watching a landing zone: which recordings are there, and which are new or changed.

A change token is what a listing gives for free: an object store's ETag or version, or a
local file's size and modification time. It is not a source identity (that may hash the
content) but it is enough to notice that a file appeared or was rewritten, which is all
a sensor polling every few seconds can afford.

A recording's *name* is its source id without the recording's extension
(``wind_farm/flight_005.parquet`` is ``wind_farm/flight_005``): what the scoring partitions
are keyed by and what a stored segment file is named after. Source ids (with the extension)
stay the ids of the universe, the split, the budget and the shards.

:func:`plan_tick` is what the new-recordings sensor decides on each tick, as plain data: which
partitions to add or rename, whether the universe changed, which scoring runs to ask for and
the next cursor. The Dagster sensor only lists, asks the instance and turns this into requests.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuration import storage
from kuration.errors import RecordingError
from kuration.canonical.hashing import canonical_digest


#: A recording extension: letters first (so ``flight.2024`` keeps its date), at most 8 long,
#: after a character that is not a dot (``.hidden`` is a name, not an extension).
RECORDING_EXTENSION = re.compile(r"(?<=[^.])\.[A-Za-z][A-Za-z0-9]{0,7}\Z")


class RecordingNameError(RecordingError):
    """Two recordings share a name (``a.parquet`` and ``a.npz``), or a name matches no recording."""


def recording_name(source_id: str) -> str:
    """The source id without its recording extension: the last path part's last suffix when
    it looks like one, letters first and at most 8 long (``site/run.v2.parquet`` is
    ``site/run.v2``; ``flight.2024`` keeps its date; folders keep their dots; a hidden-looking
    ``.x`` or an id without a suffix is its own name). Shard names start from it too
    (:func:`kuration.output.shard_files.recording_stem`)."""
    folder, file = posixpath.split(source_id)
    return posixpath.join(folder, RECORDING_EXTENSION.sub("", file)) if folder else RECORDING_EXTENSION.sub("", file)


def recording_names(source_ids: Iterable[str]) -> dict[str, str]:
    """``{name: source_id}`` for every source id; refuses two ids with one name, since their
    partitions and stored segment files would be one."""
    by_name: dict[str, str] = {}
    clashes: list[str] = []
    for source_id in sorted(source_ids):
        name = recording_name(source_id)
        if name in by_name:
            clashes.append(f"{by_name[name]!r} and {source_id!r} are both {name!r}")
        else:
            by_name[name] = source_id
    if clashes:
        raise RecordingNameError(
            f"recordings whose names collide: {'; '.join(clashes)}. A recording is named by its path without the "
            "extension (the scoring partition and the stored segment file); rename or move one of each pair, or "
            "narrow the source pattern (curation.json `source_pattern`) to one of the formats")
    return by_name


def source_ids_for_names(names: Iterable[str], source_ids: Iterable[str], *, where: str = "") -> list[str]:
    """The source id of each recording name, given the current listing ``source_ids`` (in
    the order of ``names``). A name that matches no recording is refused with every such name:
    silently leaving a partition's source out would plan a budget without it. ``where`` names
    the listing (the recordings root) in the message."""
    by_name = recording_names(source_ids)
    names = list(names)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise RecordingNameError(
            f"{len(unknown)} scoring partition(s) name no recording{f' under {where}' if where else ''}: {shown}. "
            "Restore the recording, or delete the partition (the sources partitions of scored_segments; "
            "`kuration run` and the sensor replace partitions still keyed by a path with its extension)")
    return [by_name[n] for n in names]


@dataclass(frozen=True)
class PartitionUpdate:
    """How to bring the scoring partitions in line with a recordings listing. ``add``: the
    name of every listed recording without a partition, sorted; ``replace``: keys
    of an earlier release that are a listed recording's source id with its extension, to
    delete before their names are added. A key naming no listed recording stays: it is not
    this listing's to drop, and whatever reads it refuses it by name."""

    add: tuple[str, ...]
    replace: tuple[str, ...]


def partition_update(existing_keys: Iterable[str], source_ids: Iterable[str]) -> PartitionUpdate:
    by_name = recording_names(source_ids)
    existing = list(existing_keys)
    listed = set(by_name.values())
    replace = tuple(k for k in existing if k not in by_name and k in listed)
    kept = set(existing) - set(replace)
    return PartitionUpdate(add=tuple(n for n in by_name if n not in kept), replace=replace)


def contiguous_blocks(ordered_keys: Iterable[str], wanted: Iterable[str]) -> list[list[str]]:
    """``wanted`` split into runs of keys adjacent in ``ordered_keys`` (the partitions in
    their order), each run in that order: one partition range per run covers exactly its
    keys, where a range over the whole of ``wanted`` would also cover the keys between."""
    wanted = set(wanted)
    blocks: list[list[str]] = []
    previous_wanted = False
    for key in ordered_keys:
        if key in wanted:
            if previous_wanted:
                blocks[-1].append(key)
            else:
                blocks.append([key])
        previous_wanted = key in wanted
    missing = wanted - {k for block in blocks for k in block}
    if missing:
        raise ValueError(f"keys not among the ordered keys: {sorted(missing)}")
    return blocks


def universe_token(universe_csv_url: str | None, recordings: Iterable[str]) -> str | None:
    """What tells one universe from another without reading it: ``universe.csv``'s change
    token (None while the csv is missing), or without a csv (the universe is the recordings
    themselves) a digest of the recordings' ids, which a rewrite leaves alone and an added or
    removed recording changes; ``recordings`` is only read then."""
    if universe_csv_url is not None:
        return file_token(universe_csv_url)
    return canonical_digest(sorted(recordings))


def list_recordings(url: str | os.PathLike[str], *, pattern: str = "*.parquet") -> dict[str, str]:
    """``{source_id: change token}`` for files under ``url`` whose name matches ``pattern``.

    Source ids are posix paths relative to ``url`` (what ``ParquetTickAdapter`` lists);
    hidden files and folders are skipped. A missing folder is empty."""
    return {rel: change_token(info) for rel, info in storage.list_files(url, pattern=pattern).items()}


def change_token(info: Mapping) -> str:
    for key in ("VersionId", "ETag", "etag", "md5Hash"):
        if info.get(key):
            return f"{key}:{str(info[key]).strip(chr(34))}"
    mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
    return f"size:{info.get('size')}:mtime:{mtime}"


@dataclass(frozen=True)
class LandingDiff:
    new: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def to_score(self) -> tuple[str, ...]:
        return tuple(sorted(self.new + self.changed))


def diff_recordings(previous: Mapping[str, str], current: Mapping[str, str]) -> LandingDiff:
    return LandingDiff(
        new=tuple(sorted(set(current) - set(previous))),
        changed=tuple(sorted(s for s in current if s in previous and previous[s] != current[s])),
        removed=tuple(sorted(set(previous) - set(current))),
    )


def file_token(url: str | os.PathLike[str]) -> str | None:
    """The change token of one file, or None when it does not exist."""
    fs, path = storage.url_to_fs(os.fspath(url))
    try:
        # fresh: s3fs would answer from a listing cached earlier (list_recordings caches
        # one), which may predate another writer's rewrite
        return change_token(fs.info(storage.fresh_path(fs, path)))
    except FileNotFoundError:
        return None


# -- what a sensor tick asks for ---------------------------------------------------------------

#: How many names a multi-recording run's label lists before "and N more", and its longest value.
_LABELLED_NAMES = 5
_LABEL_CHARS = 200


@dataclass(frozen=True)
class ScoringRun:
    """One scoring run a tick asks for: ``partitions`` (recording names adjacent in the
    partitions' order: one partition, or a range one run scores), why (``change``: ``new
    recording`` or ``rewritten``), a ``run_key`` naming each recording's token (so a
    re-evaluation does not ask again) and a ``label`` for the run's tag."""

    partitions: tuple[str, ...]
    change: str
    run_key: str
    label: str


@dataclass(frozen=True)
class TickPlan:
    """What one tick of the new-recordings sensor asks for. ``universe_change`` says why the
    universe and split are re-materialized (None: they are not), under ``universe_run_key``;
    ``partitions`` brings the scoring partitions in line with the listing; ``scoring`` are the
    runs; ``cursor`` is the next tick's; ``skip_reason`` is set when nothing runs."""

    universe_change: str | None
    universe_run_key: str
    partitions: PartitionUpdate
    scoring: tuple[ScoringRun, ...]
    cursor: str
    skip_reason: str = ""


def plan_tick(listing: Mapping[str, str], existing_partitions: Sequence[str], *, universe_token: str | None,
              universe_csv: bool, cursor: str | None, recorded: Callable[[Mapping[str, str]], Mapping[str, Any]],
              scoring_asset: str) -> TickPlan:
    """The tick for ``listing`` (``{source_id: change token}``) against the scoring partitions
    ``existing_partitions`` and the previous ``cursor`` (None on a first tick or after a reset:
    then ``recorded({source_id: name})`` gives what the instance recorded, as a cursor would).
    ``universe_csv`` says whether the universe is a csv (else the recordings themselves);
    ``scoring_asset`` prefixes a multi-recording run's key. Raises
    :class:`RecordingNameError` when two recordings share a name."""
    names = {source_id: name for name, source_id in recording_names(listing).items()}
    update = partition_update(existing_partitions, listing)
    previous = json.loads(cursor) if cursor else recorded(names)
    diff = diff_recordings(previous.get("recordings", {}), listing)
    why = None
    if universe_token and universe_token != previous.get("universe"):
        why = ("universe.csv changed" if universe_csv
               else f"{len(diff.new)} recording(s) added, {len(diff.removed)} removed" if cursor
               else "the recordings differ from the last universe materialization's")
    # the partitions as they will be once this tick's requests apply: deletions leave gaps,
    # additions are appended in order, so a tick's new recordings are one contiguous range
    ordered = [k for k in existing_partitions if k not in update.replace] + list(update.add)
    runs = [_scoring_run(block, change, {names[s]: (s, listing[s]) for s in source_ids}, scoring_asset)
            for change, source_ids in (("new recording", diff.new), ("rewritten", diff.changed))
            for block in contiguous_blocks(ordered, [names[s] for s in source_ids])]
    since = "since the last tick" if cursor else "since their latest materializations"
    skip = "" if why or runs else f"all {len(listing)} recording(s) and the universe unchanged {since}"
    return TickPlan(why, f"universe:{universe_token}", update, tuple(runs),
                    json.dumps({"recordings": dict(listing), "universe": universe_token}, sort_keys=True), skip)


def _scoring_run(block: Sequence[str], change: str, listed: Mapping[str, tuple[str, str]],
                 scoring_asset: str) -> ScoringRun:
    if len(block) == 1:
        (name,) = block
        source_id, token = listed[name]
        return ScoringRun((name,), change, f"{source_id}:{token}", name)
    shown = ", ".join(block[:_LABELLED_NAMES]) + (f" and {len(block) - _LABELLED_NAMES} more"
                                                  if len(block) > _LABELLED_NAMES else "")
    label = f"{len(block)}: {shown}"
    if len(label) > _LABEL_CHARS:
        label = label[: _LABEL_CHARS - 3] + "..."
    return ScoringRun(tuple(block), change, f"{scoring_asset}:{canonical_digest([listed[n] for n in block])}", label)
