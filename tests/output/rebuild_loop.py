"""Thirty rebuilds of one dataset root while a reader process reads it in a loop (issue 25):
the harness the local, S3 and Ceph tests share (``test_reader_during_rebuilds.py`` in
``tests/output``, ``tests/remote`` and ``tests/ceph``).

The reader is a forked process that calls ``iter_shards(root, verify=True)`` over every
shard of the current version, again and again, until it is stopped, and writes one line
per pass to a log file: when the pass started and ended, the version it read and a digest
of what it read (each shard's path and verified SHA-256, so its raw bytes, and its decoded
arrays), or the error it got.

The rebuilds are what the pipeline runs (``resume=True, on_other_run="replace"``), each in a
forked writer: ten SIGKILLed at random moments spread over a whole write (each followed by
the rerun that finishes it), five refused before the lease (media the adapter cannot decode, found by the
preflight; a ``segment:`` value the modality's dtype cannot hold, found at planning), five
failing mid-write (a fault injected into the adapter's third ``read_ticks``), and ten that
succeed. Each writing rebuild takes one of three plans cut into different spans, never the
plan of the current version nor of an unfinished newest one, so every success is a new
version that writes all its shards (a kill then lands in real work) and every injected
fault fires on a fresh version (a resume of a half-written one may have no third read).

After every rebuild the harness records the current version, with the digest of its
content when it first becomes current and the window in which it was current, and checks
the publish log names exactly those versions. A version the reader read must be one of
them, with that digest, read within that window. The rebuild's own child surveys the root
after its write (and a rerun before it too, for the kill before it), so the test process
never holds an object-store session the writers it forks would inherit
(:func:`~tests.output.writer_processes.in_a_child` says why it must not).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import statistics
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kuration.output import OutputSpec
from kuration.output.versions import DatasetRoot
from kuration.read import iter_shards
from kuration.sources.media import MediaError
from tests.output.corpus import SPEC, Corpus
from tests.output.writer_processes import FORK, in_a_child, run_writer

#: The rebuild the pipeline makes: the same run is finished, another one replaced.
RERUN = {"resume": True, "on_other_run": "replace"}
#: The thirty rebuilds, before they are shuffled.
REBUILDS = (["kill"] * 10 + ["undecodable-media"] * 3 + ["segment-dtype"] * 2 + ["fault-mid-write"] * 5
            + ["success"] * 10)
#: Three plans' budgets, cut into different spans: no shard of one is a shard of another
#: (24, 32 and 24 shards).
PLANS = ({}, {"train_hours": 60 / 3600, "span_seconds": 5.0},
         {"train_hours": 30 / 3600, "test_hours": 30 / 3600, "span_seconds": 8.0})
#: Three smaller ones (12, 10 and 9 shards), still of all three sources: for a slower store.
SMALL_PLANS = ({"train_hours": 15 / 3600, "test_hours": 10 / 3600},
               {"train_hours": 15 / 3600, "test_hours": 10 / 3600, "span_seconds": 5.0},
               {"train_hours": 16 / 3600, "test_hours": 8 / 3600, "span_seconds": 8.0})
_VERSION_IN = re.compile(r"/versions/(v[0-9]+)/")
#: wind.max is fractional in every span, which int8 cannot hold: refused at planning.
_WHOLE_WIND = OutputSpec.from_dict({**SPEC, "modalities": {
    **SPEC["modalities"], "wind": {"dtype": "int8", "shape": [], "source": "segment:wind.max"}}})


def read_pass(ref: str) -> tuple[str, int, str]:
    """One pass of ``iter_shards(ref, verify=True)`` over every shard: (the version read,
    how many shards, a digest over each shard's path, verified SHA-256 and decoded arrays)."""
    digest, versions, shards = hashlib.sha256(), set(), 0
    for arrays, meta in iter_shards(ref, verify=True, with_meta=True):
        found = _VERSION_IN.search(f"{meta['dataset']}/")  # the version whose manifest listed it
        versions.add(found.group(1) if found else meta["dataset"])
        digest.update(f"{meta['path']}\0{meta['sha256']}\0".encode())
        for name in sorted(arrays):
            array = np.ascontiguousarray(arrays[name])
            digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
            digest.update(array.tobytes())
        shards += 1
    if len(versions) != 1:
        raise AssertionError(f"one pass read the shards of {sorted(versions)}, not of one version")
    return versions.pop(), shards, digest.hexdigest()


def _read_until_stopped(root: str, log: Path, stop, pause: float, parent: int) -> None:
    with log.open("a") as out:
        while not stop.wait(pause) and os.getppid() == parent:  # never outlive a test process killed on a timeout
            start = time.time()
            try:
                version, shards, digest = read_pass(root)
                row: dict = {"version": version, "shards": shards, "digest": digest}
            except Exception:  # the reader must see none: every one is reported, with its traceback
                row = {"error": traceback.format_exc()}
            out.write(json.dumps({**row, "start": start, "end": time.time()}) + "\n")
            out.flush()
    os._exit(0)


@dataclass(frozen=True)
class Survey:
    """The root after a rebuild: its newest version and that version's state (None: no
    commit record yet), the current version, every published one, and what
    :func:`read_pass` reads of the current version when it is not ``known``."""

    newest: str
    newest_state: str | None
    current: str
    published: tuple[str, ...]
    read: tuple[str, int, str] | None


def survey(root: str, known: str | None) -> Survey:
    dataset_root = DatasetRoot(root)
    newest = dataset_root.versions()[-1]
    record = dataset_root.commit_record(newest)
    published = tuple(entry.version for entry in dataset_root.publish_log())
    assert published, f"{root}: nothing is published"
    read = read_pass(f"{root}@{published[-1]}") if published[-1] != known else None
    return Survey(newest, None if record is None else record.state, published[-1], published, read)


@dataclass(frozen=True)
class Rebuild:
    """What a rebuild's child reports: the survey before its write (only after a kill),
    the write's error ("" when it finished) and seconds, and the survey after it."""

    before: Survey | None
    error: str
    seconds: float
    after: Survey


def _rebuild_and_survey(corpus: Corpus, root: str, plan, kwargs: dict, inject: Callable[[], None],
                        known: str | None, survey_first: bool) -> Rebuild:
    """In a forked child: survey ``root`` (when ``survey_first``), run ``inject()`` and the
    write, survey ``root`` again. ``known``: the last current version the parent read."""
    before = survey(root, known) if survey_first else None
    inject()
    start, error = time.perf_counter(), ""
    try:
        corpus.write(root, plan=plan, **kwargs)
    except Exception as exc:  # what the write raised is the result
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    return Rebuild(before, error, seconds, survey(root, before.current if before else known))


class ReaderProcess:
    """A forked process reading ``root`` pass after pass into ``log`` until :meth:`stop`,
    ``pause`` seconds between two passes (on an object store a pass is a few dozen
    requests, which the writers' wait behind)."""

    def __init__(self, root: str, log: Path, *, pause: float = 0.0) -> None:
        self.log = log
        self._stop = FORK.Event()
        self._process = FORK.Process(target=_read_until_stopped, args=(root, log, self._stop, pause, os.getpid()))

    def start(self, timeout: float = 30.0) -> None:
        """Start it, and return once it finished its first pass."""
        self._process.start()
        deadline = time.monotonic() + timeout
        while not (self.log.exists() and self.log.read_text().count("\n")):
            assert self._process.is_alive() and time.monotonic() < deadline, "the reader never finished a pass"
            time.sleep(0.02)

    def stop(self) -> list[dict]:
        """Stop it after its pass in progress; every pass it made."""
        self._stop.set()
        self._process.join(60)
        assert self._process.exitcode == 0, f"the reader process ended with {self._process.exitcode}"
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@dataclass
class CurrentVersion:
    """A version that was current: what it holds, and a window that holds its time as
    current (from the start of the rebuild that published it to the end of the one that
    published the next)."""

    version: str
    shards: int
    digest: str
    since: float
    until: float = math.inf


@dataclass
class RebuildLoop:
    """Thirty rebuilds of ``root`` from ``corpus`` (see the module doc), shuffled by ``seed``;
    ``after_kill(root)`` runs after each SIGKILL (on an object store: remove the lease the
    killed writer left).

    The kills are spread over a whole write: the k-th of the ten (in a shuffled order)
    lands at a random moment of the k-th tenth of 1.1 times the median time of the whole
    writes so far (which share the cores with the reader), so some land while the
    version's shards are written however the machine's load stretches each phase."""

    corpus: Corpus
    root: str
    seed: int
    after_kill: Callable[[str], None] = lambda root: None
    budgets: tuple[dict, ...] = PLANS
    current: list[CurrentVersion] = field(default_factory=list)
    plan_of: dict[str, int] = field(default_factory=dict)
    unfinished: int | None = None
    #: Where the kills landed: how many before the new version, mid-write, after its commit, after its publish.
    kills: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.plans = [self.corpus.plan(**budget) for budget in self.budgets]
        self._rng = random.Random(self.seed)
        kills = REBUILDS.count("kill")
        self._kill_moments = [(k + self._rng.random()) / kills for k in range(kills)]
        self._rng.shuffle(self._kill_moments)
        self._write_seconds: list[float] = []

    def first_version(self) -> None:
        """Write v1 (plan 0) and record it."""
        self._success(-1, time.time(), plan=0)

    def run(self) -> None:
        """The thirty rebuilds, in a shuffled order."""
        order = list(REBUILDS)
        self._rng.shuffle(order)
        for i, kind in enumerate(order):
            started, before = time.time(), self.current[-1].version
            getattr(self, "_" + kind.replace("-", "_"))(i, started)
            if kind not in ("kill", "success"):
                assert self.current[-1].version == before, f"rebuild {i} ({kind}) changed the current version"

    def _next_plan(self) -> int:
        """A plan other than the current version's and the unfinished newest one's."""
        taken = {self.plan_of[self.current[-1].version], self.unfinished}
        return next(i for i in range(len(self.plans)) if i not in taken)

    def _rebuild(self, plan: int, *, inject: Callable[[], None] = lambda: None, survey_first: bool = False,
                 **kwargs) -> Rebuild:
        known = self.current[-1].version if self.current else None
        return in_a_child(_rebuild_and_survey, self.corpus, self.root, self.plans[plan], {**RERUN, **kwargs}, inject,
                          known, survey_first)

    def _observe(self, root: Survey, started: float, plan: int | None) -> Survey:
        """After a rebuild of ``plan`` (None: one that must not publish) that began at
        ``started``: record the current version if it is a new one."""
        if root.read is not None:
            assert plan is not None, f"{root.current} became current in a rebuild that must not publish"
            assert root.current not in self.plan_of, f"{root.current} was current before"
            if self.current:
                self.current[-1].until = time.time()
            self.current.append(CurrentVersion(*root.read, since=started))
            self.plan_of[root.current] = plan
            self.unfinished = None  # the newest version is this committed one
        assert list(root.published) == [c.version for c in self.current], (
            f"the publish log names {list(root.published)}, the rebuilds made {list(self.plan_of)} current")
        return root

    def _success(self, i: int, started: float, plan: int | None = None) -> None:
        plan = self._next_plan() if plan is None else plan
        before = self.current[-1].version if self.current else None
        rebuild = self._rebuild(plan)
        assert rebuild.error == "", f"rebuild {i} failed: {rebuild.error}"
        self._write_seconds.append(rebuild.seconds)
        assert self._observe(rebuild.after, started, plan).current != before, f"rebuild {i}: no new version"

    def _kill(self, i: int, started: float) -> None:
        plan = self._next_plan()
        moment = self._kill_moments.pop() * 1.1 * statistics.median(self._write_seconds)
        run_writer(self.corpus, self.root, self.plans[plan], kill_after=moment, **RERUN)
        self.after_kill(self.root)
        known = set(self.plan_of)
        rerun = self._rebuild(plan, survey_first=True)
        assert rerun.before is not None and rerun.error == "", f"rebuild {i}: the rerun failed: {rerun.error}"
        self.kills[self._where_the_kill_landed(self._observe(rerun.before, started, plan), known)] += 1
        assert self.plan_of[self._observe(rerun.after, started, plan).current] == plan, (
            f"rebuild {i}: the rerun did not publish its plan")

    @staticmethod
    def _where_the_kill_landed(root: Survey, known: set[str]) -> str:
        """"before" (no new version yet), "mid-write", "committed" (not yet published) or
        "published" (``known``: the versions current before the kill)."""
        if root.newest in known or root.newest_state is None:
            return "before"
        if root.newest_state != "committed":
            return "mid-write"
        return "published" if root.current == root.newest else "committed"

    def _undecodable_media(self, i: int, started: float) -> None:
        def no_codec(column, refs, *, source_id):
            raise MediaError(f"{refs[0]!r}: the codec is not installed", reference=0)

        rebuild = self._rebuild(self._next_plan(), inject=lambda: setattr(self.corpus.adapter, "decode_media",
                                                                          no_codec))
        assert rebuild.error.startswith("MediaError: ") and "the codec is not installed" in rebuild.error, (
            f"rebuild {i}: {rebuild.error!r}")
        self._observe(rebuild.after, started, None)

    def _segment_dtype(self, i: int, started: float) -> None:
        rebuild = self._rebuild(self._next_plan(), spec=_WHOLE_WIND)
        assert rebuild.error.startswith("MissingValueError: ") and "which int8 cannot hold" in rebuild.error, (
            f"rebuild {i}: {rebuild.error!r}")
        self._observe(rebuild.after, started, None)

    def _fault_mid_write(self, i: int, started: float) -> None:
        plan = self._next_plan()
        adapter = self.corpus.adapter
        real, reads = adapter.read_ticks, []

        def failing(source):  # the preflight's read, one more source written, then a fault
            reads.append(source)
            if len(reads) == 3:
                raise RuntimeError("injected fault reading a recording")
            return real(source)

        rebuild = self._rebuild(plan, inject=lambda: setattr(adapter, "read_ticks", failing))
        assert rebuild.error == "RuntimeError: injected fault reading a recording", f"rebuild {i}: {rebuild.error!r}"
        assert self._observe(rebuild.after, started, None).newest_state == "writing", (
            f"rebuild {i}: the fault did not land mid-write")
        self.unfinished = plan  # its version stays unfinished: the next writing rebuild takes another plan

    def check(self, passes: list[dict]) -> dict[str, int]:
        """Every pass read a version that was current, as it was, while it was (and the
    publish log named only those, checked after each rebuild); counts."""
        errors = [p["error"] for p in passes if "error" in p]
        assert not errors, f"{len(errors)} of {len(passes)} reader passes failed; the first:\n{errors[0]}"
        current = {c.version: c for c in self.current}
        for p in passes:
            seen = current.get(p["version"])
            assert seen is not None, f"the reader read {p['version']}, which was never current"
            assert (p["shards"], p["digest"]) == (seen.shards, seen.digest), (
                f"the reader's {p['version']} differs from the version that was current")
            assert p["start"] <= seen.until and p["end"] >= seen.since, (
                f"the reader read {p['version']} outside the time it was current")
        return {"passes": len(passes), "versions_read": len({p["version"] for p in passes}),
                "versions_published": len(self.current)}


def rebuild_while_reading(rebuilds: RebuildLoop, log: Path, *, pause: float = 0.0) -> dict[str, int]:
    """Write ``rebuilds``' first version, then run its thirty rebuilds while a reader
    process reads the root (``pause`` seconds between passes, logged to ``log``); what
    :meth:`RebuildLoop.check` counts, and ``kills_mid_write``."""
    rebuilds.first_version()
    reader = ReaderProcess(rebuilds.root, log, pause=pause)
    reader.start()
    try:
        rebuilds.run()
    finally:
        passes = reader.stop()
    return {**rebuilds.check(passes), "kills_mid_write": rebuilds.kills["mid-write"]}

