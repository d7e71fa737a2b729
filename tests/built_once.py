"""Expensive test states built once per test session and handed out as fresh copies.

A curated Dagster instance takes a whole graph run to build; many tests only need one as
it was left, and change it from there. :func:`build_once` builds such a state in a folder of
the session's temporary directory and keeps a byte-for-byte copy of it beside; each
:meth:`BuiltOnce.fresh` puts that copy back at the very path it was built at, so a test sees
exactly what a fresh build would have left there, absolute paths included: the instance's
sqlite event logs record materialization metadata with the storage root's and the landing
zone's paths, and the universe table records every recording's absolute path under a digest
of its rows. A copy somewhere else would point back at the original (and rewriting those
paths would change what the digest covers), so copies are only ever put back in place.

It does not share state between tests that run at the same time: tests in one session run
one after another, and each pytest-xdist worker has a session directory of its own.
Whoever calls :meth:`BuiltOnce.fresh` owns the folder until the next call; the state must be
left closed (no open instance, no server still writing) when the test ends.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class BuiltOnce(Generic[T]):
    """A state built at ``live``, its untouched copy at ``template``, and what the build returned."""

    live: Path
    template: Path
    #: what the build function returned (say, what the run printed)
    built: T
    #: seconds the build took, for a test's timing notes
    seconds: float

    def fresh(self) -> Path:
        """The state as it was built, back at ``live`` (whatever the last test left there is gone)."""
        if self.live.exists():
            shutil.rmtree(self.live)
        shutil.copytree(self.template, self.live, symlinks=True)
        return self.live


def build_once(folder: Path, build: Callable[[Path], T]) -> BuiltOnce[T]:
    """Run ``build(folder / "live")`` (it creates and fills that folder), then keep a copy of
    what it left under ``folder / "template"``."""
    live, template = folder / "live", folder / "template"
    started = time.monotonic()
    built = build(live)
    seconds = time.monotonic() - started
    shutil.copytree(live, template, symlinks=True)
    return BuiltOnce(live=live, template=template, built=built, seconds=seconds)
