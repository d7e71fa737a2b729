"""Crash injection: a writer process is SIGKILLed at random moments of a write. After every
kill no reader accepts a partial dataset, a dataset committed before the write is intact
byte for byte when the kill came before publication, and ``resume=True`` (``force=True``
when the kill left the old run's dataset untouched) finishes with shards, manifest and
marker byte-identical to an uninterrupted run.

The default run kills 50 writers (two scenarios of 25); ``pytest -m soak`` runs 400 more.
"""

import multiprocessing
import os
import random
import signal
import time

import pytest

from kuration.output.commit_protocol import CommitError
from kuration.read import load_committed, verify_dataset
from tests.output.test_write_dataset import Corpus, comparable_record, data_files, snapshot

FORK = multiprocessing.get_context("fork")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("crash-corpus"))


def _write_in_child(corpus, out, plan, kwargs):
    corpus.write(out, plan=plan, **kwargs)
    os._exit(0)


def _run(corpus, out, plan, kill_after=None, **kwargs) -> tuple[bool, float]:
    """Run one write in a forked child; SIGKILL it after ``kill_after`` seconds. Returns
    (finished before the kill, seconds it ran)."""
    child = FORK.Process(target=_write_in_child, args=(corpus, out, plan, kwargs))
    start = time.perf_counter()
    child.start()
    if kill_after is not None:
        child.join(kill_after)
        if child.is_alive():
            os.kill(child.pid, signal.SIGKILL)
    child.join()
    return child.exitcode == 0, time.perf_counter() - start


def _crash_and_resume(corpus, tmp_path, kills, seed, previous_plan=None):
    plan = corpus.plan()
    reference = tmp_path / "reference"
    finished, duration = _run(corpus, reference, plan)
    assert finished
    expected = data_files(reference)
    expected_record = comparable_record(reference)
    rng = random.Random(seed)
    outcomes = {"rejected": 0, "previous": 0, "complete": 0}
    for i in range(kills):
        out = tmp_path / f"run{i}"
        previous = None
        if previous_plan is not None:
            assert _run(corpus, out, previous_plan)[0]
            previous = snapshot(out)
        kwargs = {"force": True} if previous is not None else {}
        _run(corpus, out, plan, kill_after=rng.uniform(0.0, duration * 1.1), **kwargs)
        try:
            dataset = load_committed(out)
        except CommitError:
            outcomes["rejected"] += 1  # a partial dataset: rejected, as it must be
        else:
            assert verify_dataset(out).ok, f"kill {i}: a reader accepted a dataset that does not verify"
            if previous is not None and snapshot(out) == previous:
                outcomes["previous"] += 1  # killed before publication: the old dataset is intact
            else:
                assert data_files(out) == expected, f"kill {i}: an accepted dataset is neither the old nor the new one"
                assert dataset.record.state == "committed"
                outcomes["complete"] += 1
        # A kill before publication leaves the old run's dataset, which only force replaces.
        intact = previous is not None and snapshot(out) == previous
        assert _run(corpus, out, plan, **({"force": True} if intact else {"resume": True}))[0], f"kill {i}: rerun failed"
        assert data_files(out) == expected, f"kill {i}: resume did not reproduce the uninterrupted run"
        assert comparable_record(out) == expected_record, f"kill {i}: config or commit differ beyond timestamps and counts"
        assert verify_dataset(out).ok
    return outcomes


def test_kills_during_a_first_write(corpus, tmp_path):
    outcomes = _crash_and_resume(corpus, tmp_path, 25, seed=1)
    assert outcomes["rejected"] > 0  # the kills did land mid-write


def test_kills_while_replacing_a_committed_dataset(corpus, tmp_path):
    outcomes = _crash_and_resume(corpus, tmp_path, 25, seed=2, previous_plan=corpus.plan(train_hours=60 / 3600))
    assert outcomes["rejected"] > 0


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(8))
def test_soak(corpus, tmp_path, seed):
    previous = corpus.plan(train_hours=60 / 3600) if seed % 2 else None
    _crash_and_resume(corpus, tmp_path, 50, seed=100 + seed, previous_plan=previous)


def _racing_writer(corpus, out, plan, barrier):
    from kuration.output.lease import LeaseError

    barrier.wait()
    try:
        corpus.write(out, plan=plan)
    except LeaseError:
        os._exit(3)
    os._exit(0)


def race_two_writers(corpus, out) -> list[int]:
    """Two writer processes released at the same instant onto one destination: exit codes."""
    plan = corpus.plan()
    barrier = FORK.Barrier(2)
    children = [FORK.Process(target=_racing_writer, args=(corpus, out, plan, barrier)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    return sorted(child.exitcode for child in children)


def test_two_concurrent_writers_one_proceeds_the_other_gets_a_lease_error(corpus, tmp_path):
    for attempt in range(3):
        out = tmp_path / f"race{attempt}"
        assert race_two_writers(corpus, out) == [0, 3]  # 3: LeaseError
        assert load_committed(out) and verify_dataset(out).ok
