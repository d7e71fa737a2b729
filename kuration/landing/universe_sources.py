"""Do the universe's source ids name recordings? :func:`check_universe_sources`.

A universe ``source`` id is a posix path relative to the recordings root (the curation
settings' ``recordings`` folder, itself relative to the landing zone): the id
``site_a/flight_001.parquet`` is the recording ``<recordings root>/site_a/flight_001.parquet``,
and it is under that id that the recording is scored. An id that names no recording is
never scored, so its samples reach no dataset, and the recording it meant is scored as a
source that belongs to no split. Nothing downstream can tell the two apart, so this check
fails before anything is resolved.

The commonest cause is an id written against another folder: relative to the landing zone
(``recordings/site_a/flight_001.parquet``) or with part of the path missing. When the
unmatched ids match recordings once a common prefix is removed or added, or once an
extension is added, the check says so as a hint.

This module compares two lists of ids; it does not list folders itself except in
:func:`check_stored_universe_sources`, which reads the stored universe and lists the
recordings root for the ``universe_sources`` asset check.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kuration.checks import CheckResult, count, first
from kuration.errors import KurationError
from kuration.landing.recordings import list_recordings
from kuration.splits.artifacts import load_universe

#: How many unmatched ids (and unlisted recordings) a message names.
SHOWN = 3


@dataclass(frozen=True)
class UniverseSourcesCheck(CheckResult):
    """The check's answer; ``unmatched`` lists every universe source id that names no
    recording, ``unlisted`` every recording no universe source names (both sorted)."""

    unmatched: tuple[str, ...] = ()
    unlisted: tuple[str, ...] = ()


def check_universe_sources(universe_sources: Iterable[str], recordings: Iterable[str], *,
                           recordings_url: str, pattern: str | None = None) -> UniverseSourcesCheck:
    """Whether every id in ``universe_sources`` is one of ``recordings``, the source ids of
    the files under ``recordings_url`` (posix paths relative to it, as
    :func:`kuration.landing.recordings.list_recordings` gives them; a mapping's keys are taken).

    Fails (an error) when a universe source id names no recording, naming the first few
    and saying where ids resolve from, with a hint when the ids look relative to another
    folder. Recordings the universe does not name are a warning: they will be scored but
    belong to no split. ``pattern`` (the file pattern the recordings were listed with) is
    only quoted in the messages."""
    wanted = sorted(set(universe_sources))
    present = set(recordings)
    unmatched = tuple(s for s in wanted if s not in present)
    unlisted = tuple(sorted(present.difference(wanted)))
    where = f"under {recordings_url}" + (f" matching {pattern!r}" if pattern else "")
    figures = {"universe_sources": len(wanted), "recordings": len(present), "unmatched_sources": len(unmatched),
               "unlisted_recordings": len(unlisted)}
    errors: list[str] = []
    warnings: list[str] = []
    verdict = f"{count(len(wanted), 'universe source')}, each names a recording {where}"
    if unmatched:
        missing = first((repr(s) for s in unmatched), len(unmatched), shown=SHOWN)
        verb = "names" if len(unmatched) == 1 else "name"
        total = count(len(wanted), "universe source")
        found = (f"{count(len(present), 'recording')} {where}" if present
                 else f"no recording {where} (is the recordings folder right, and are the recordings there?)")
        hint = _hint(unmatched, present, recordings_url)
        fix = (f"Hint: {hint}" if hint else "Fix the ids in universe.csv's source column, or the recordings folder")
        errors.append(
            f"{len(unmatched):,} of the {total} {verb} no recording ({missing}); found {found}. Universe source ids "
            f"are paths relative to the recordings root {recordings_url} (the `recordings` setting of curation.json, "
            f"relative to the landing zone). {fix}"
        )
        verdict = f"{len(unmatched):,} of {total} {verb} no recording {where}: {missing}"
    if unlisted:
        extra = first((repr(s) for s in unlisted), len(unlisted), shown=SHOWN)
        warnings.append(
            f"{count(len(unlisted), 'recording')} {where} {'is' if len(unlisted) == 1 else 'are'} in no universe "
            f"row ({extra}); they will be scored but belong to no split, which fails the budget check. Add them to "
            "universe.csv, or move them out of the recordings root"
        )
        if not unmatched:
            verdict += f"; {count(len(unlisted), 'recording')} in no universe row ({extra})"
    return UniverseSourcesCheck(verdict, tuple(errors), tuple(warnings), figures, unmatched, unlisted)


def _hint(unmatched: tuple[str, ...], present: set[str], recordings_url: str) -> str | None:
    """What the unmatched ids have in common with the recordings, if anything: a prefix
    too many, a prefix missing, or a missing extension (the most frequent explanation)."""
    extra: Counter[str] = Counter()  # "recordings/" in "recordings/a.parquet" vs "a.parquet"
    missing: Counter[str] = Counter()  # "recordings/" in "a.parquet" vs "recordings/a.parquet"
    extension: Counter[str] = Counter()  # ".parquet" in "a" vs "a.parquet"
    by_tail: dict[str, set[str]] = {}
    by_stem: dict[str, set[str]] = {}
    for rec in present:
        for cut in _cuts(rec):
            by_tail.setdefault(rec[cut:], set()).add(rec[:cut])
        stem, ext = os.path.splitext(rec)
        if ext:
            by_stem.setdefault(stem, set()).add(ext)
    for source in unmatched:
        extra.update({source[:cut] for cut in _cuts(source) if source[cut:] in present})
        missing.update(by_tail.get(source, ()))
        extension.update(by_stem.get(source, ()))
    ranked = [(n, kind, value) for kind, counter in (("extra", extra), ("missing", missing),
                                                     ("extension", extension))
              for value, n in counter.items()]
    if not ranked:
        return None
    n, kind, value = max(ranked, key=lambda r: (r[0], r[1] == "extra", r[2]))
    of = f"{n:,} of the {count(len(unmatched), 'unmatched id')}"
    if kind == "extra":
        folder = value.rstrip("/")
        why = (f"the ids carry the recordings folder {folder!r} itself, so they look relative to the landing zone, "
               "not to the recordings root" if recordings_url.rstrip("/").endswith("/" + folder)
               else "the ids look relative to a folder above the recordings root")
        return (f"{of} match a recording once the prefix {value!r} is removed: {why}. Remove {value!r} from the ids "
                "in universe.csv, or point the recordings folder at the folder the ids are relative to")
    if kind == "missing":
        deeper = f"{recordings_url.rstrip('/')}/{value.rstrip('/')}"
        return (f"{of} match a recording once the prefix {value!r} is added: the ids look relative to {deeper}, a "
                f"folder below the recordings root. Point the recordings folder there, or prefix the ids with "
                f"{value!r}")
    return f"{of} match a recording once the extension {value!r} is added: write the ids with their extension"


def _cuts(path: str) -> list[int]:
    """Where each proper tail of ``path`` after a ``/`` starts: ``a/b/c`` -> [2, 4]."""
    return [i + 1 for i, ch in enumerate(path) if ch == "/" and i + 1 < len(path)]


def check_stored_universe_sources(root: str | os.PathLike[str], recordings_url: str, *,
                                  pattern: str = "*.parquet") -> UniverseSourcesCheck:
    """:func:`check_universe_sources` on the universe stored under ``root`` against the
    recordings listed under ``recordings_url`` (files matching ``pattern``). Never raises
    on a missing or unreadable universe or listing: that fails the check."""
    try:
        universe = load_universe(root)
    except KurationError as exc:
        return UniverseSourcesCheck.cannot_check("the universe's source ids", exc)
    try:
        recordings = list_recordings(recordings_url, pattern=pattern)
    except (OSError, ValueError) as exc:
        return UniverseSourcesCheck.cannot_check(f"the recordings under {recordings_url}", exc)
    return check_universe_sources(universe.source_names, recordings, recordings_url=recordings_url, pattern=pattern)


__all__ = ["UniverseSourcesCheck", "check_stored_universe_sources", "check_universe_sources"]
