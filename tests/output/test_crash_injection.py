"""Crash injection: a writer process is SIGKILLed at random moments of a write. After every
kill no reader accepts a partial dataset, and readers of a root that had a current version
still read it, byte for byte, whatever moment the kill came at (versions never change once
committed, and only the publish record makes a new one current). The rerun the pipeline
makes (``resume=True, on_other_run="replace"``) finishes with shards, manifest and marker
byte-identical to an uninterrupted run.

The default run kills 50 writers (two scenarios of 25); ``pytest -m soak`` runs 400 more.
Random kills rarely land inside a metadata write or the publish step, so each is also
killed on purpose (between its temp file and its rename or link): the rerun must leave no
debris, only what the committed versions and the publish log cover plus the documented
folders.
"""

import random
from pathlib import Path

import pytest

from kuration.output.commit_protocol import (
    CHECKPOINT_DIR, COMMIT_FILE, CONFIG_FILE, MANIFEST_FILE, SPEC_MARKER_FILE, CommitError,
)
from kuration.output.lease import LEASE_FILE
from kuration.output.versions import PUBLISHED_DIR, VERSIONS_DIR, DatasetRoot
from kuration.budget.plan_store import ADMITTED_FILE, BUDGET_DIR, ITEMS_FILE
from kuration.read import load_committed, verify_dataset
from kuration.read.dataset_plan import plan_pin
from tests.output.corpus import Corpus, comparable_record, data_files, snapshot, version_dir
from tests.output.writer_processes import race_two_writers, run_writer

#: The rerun a pipeline makes after any failure: the same run is finished, another replaced.
RERUN = {"resume": True, "on_other_run": "replace"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("crash-corpus"))


def _covered(out: Path, version: str) -> set[str]:
    """The files of ``version``'s commit: its metadata, the shards its manifest lists, its plan."""
    dataset = load_committed(out, version=version)
    covered = {COMMIT_FILE, MANIFEST_FILE, CONFIG_FILE, SPEC_MARKER_FILE} | {e["path"] for e in dataset.entries}
    pin = plan_pin(dataset)  # budget/budget.json, which pins the plan's two tables
    if pin is not None:
        covered |= {pin["path"], *(f"{BUDGET_DIR}/{name}" for name in (ITEMS_FILE, ADMITTED_FILE))}
    return {f"{VERSIONS_DIR}/{version}/{name}" for name in covered}


def debris(out) -> list[str]:
    """Files under the root ``out`` that are neither covered by a committed version's commit
    nor a publish record nor in a documented folder (checkpoints) nor the local lease file
    (a version that is not committed fails here: the rerun must have finished it)."""
    out = Path(out)
    covered = {LEASE_FILE} | {f"{PUBLISHED_DIR}/{p.name}" for p in (out / PUBLISHED_DIR).glob("[0-9]*.json")}
    for version in DatasetRoot(out).versions():
        covered |= _covered(out, version)
    files = (p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() or p.is_symlink())
    return sorted(f for f in files if f not in covered and not f.startswith(f"{CHECKPOINT_DIR}/"))


def _what_readers_see(out, previous, expected, outcomes, i) -> None:
    """After kill ``i``: nothing (no version was current yet), the previous version byte for
    byte, or the new one complete; never an error where a version was current."""
    try:
        load_committed(out)
    except CommitError:
        assert previous is None, f"kill {i}: readers lost the version that was current"
        outcomes["rejected"] += 1  # nothing was published yet, and nothing partial is accepted
        return
    assert verify_dataset(out).ok, f"kill {i}: a reader accepted a dataset that does not verify"
    if previous is not None and snapshot(version_dir(out)) == previous:
        outcomes["previous"] += 1  # readers still read the version that was current
    else:
        assert data_files(out) == expected, f"kill {i}: an accepted dataset is neither the old nor the new one"
        outcomes["complete"] += 1


def _crash_and_resume(corpus, tmp_path, kills, seed, previous_plan=None):
    plan = corpus.plan()
    reference = tmp_path / "reference"
    finished, duration = run_writer(corpus, reference, plan)
    assert finished
    expected = data_files(reference)
    expected_record = comparable_record(reference)
    rng = random.Random(seed)
    outcomes = {"rejected": 0, "previous": 0, "complete": 0}
    for i in range(kills):
        out = tmp_path / f"run{i}"
        previous = None
        if previous_plan is not None:
            assert run_writer(corpus, out, previous_plan)[0]
            previous = snapshot(version_dir(out))
        kwargs = {"force": True} if previous is not None else {}
        run_writer(corpus, out, plan, kill_after=rng.uniform(0.0, duration * 1.1), **kwargs)
        _what_readers_see(out, previous, expected, outcomes, i)
        assert run_writer(corpus, out, plan, **RERUN)[0], f"kill {i}: rerun failed"
        assert data_files(out) == expected, f"kill {i}: resume did not reproduce the uninterrupted run"
        assert comparable_record(out) == expected_record, (
            f"kill {i}: config or commit differ beyond timestamps and counts")
        assert verify_dataset(out).ok
        assert debris(out) == [], f"kill {i}: the rerun left files its commit does not cover"
    return outcomes


def test_kills_during_a_first_write(corpus, tmp_path):
    outcomes = _crash_and_resume(corpus, tmp_path, 25, seed=1)
    assert outcomes["rejected"] > 0  # the kills did land mid-write


def test_kills_while_replacing_a_committed_dataset(corpus, tmp_path):
    """Slow (about 45 s): each of the 25 kills first commits the old dataset, then runs a
    killed writer and a rerun, each a forked process."""
    # The old dataset is cut into other spans (5 s, not 10 s), so no shard of it matches a
    # new content key and the replacement writes every shard: with matching spans nearly all
    # shards are shared, the new version takes a few milliseconds and random kills rarely
    # land in it. Kills during a reuse are covered by the resumes.
    previous_plan = corpus.plan(train_hours=60 / 3600, span_seconds=5.0)
    outcomes = _crash_and_resume(corpus, tmp_path, 25, seed=2, previous_plan=previous_plan)
    assert outcomes["rejected"] == 0 and outcomes["previous"] > 0  # mid-write kills: readers kept the old one


@pytest.mark.parametrize("replacing", [False, True], ids=["first-write", "replacing"])
@pytest.mark.parametrize("name, occurrence", [
    (COMMIT_FILE, 1), (SPEC_MARKER_FILE, 1), (MANIFEST_FILE, 1), (CONFIG_FILE, 1), (COMMIT_FILE, 2),
    ("publish-record", 1),
], ids=["writing-record", "marker", "manifest", "config", "committed-record", "publish-record"])
def test_a_kill_inside_a_metadata_write_leaves_no_debris_after_the_rerun(corpus, tmp_path, name, occurrence, replacing):
    plan = corpus.plan()
    reference = tmp_path / "reference"
    assert run_writer(corpus, reference, plan)[0]
    out = tmp_path / "out"
    previous = None
    if replacing:
        assert run_writer(corpus, out, corpus.plan(train_hours=60 / 3600))[0]
        previous = load_committed(out).manifest
    if name == "publish-record":
        name = f"{2 if replacing else 1:08d}.json"
    finished, _ = run_writer(corpus, out, plan, kill_on_rename=(name, occurrence),
                             **({"force": True} if replacing else {}))
    assert not finished
    left = [p.name for p in out.rglob("*.tmp")]
    assert left, "the kill landed between the temp file and its rename, so a temp file is left"
    # Wherever the kill landed, readers see what was current before: the old version, or nothing.
    if previous is not None:
        assert load_committed(out).manifest == previous and verify_dataset(out).ok
    else:
        with pytest.raises(CommitError):
            load_committed(out)
    assert run_writer(corpus, out, plan, **RERUN)[0]
    assert data_files(out) == data_files(reference) and verify_dataset(out).ok
    assert debris(out) == []


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(8))
def test_soak(corpus, tmp_path, seed):
    previous = corpus.plan(train_hours=60 / 3600) if seed % 2 else None
    _crash_and_resume(corpus, tmp_path, 50, seed=100 + seed, previous_plan=previous)


def test_two_concurrent_writers_one_proceeds_the_other_gets_a_lease_error(corpus, tmp_path):
    for attempt in range(3):
        out = tmp_path / f"race{attempt}"
        assert race_two_writers(corpus, out) == [0, 3]  # 3: LeaseError
        assert load_committed(out) and verify_dataset(out).ok
