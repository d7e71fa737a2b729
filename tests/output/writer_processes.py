"""Dataset writes in forked child processes, for crash and race tests: a writer SIGKILLed
after a while or at a chosen rename, and two writers released onto one destination at once;
and any other call, a write with a fault injected into it or a test's own reads of an object
store between the writers (:func:`in_a_child`).

Children are forked (not spawned) so they inherit the parent's scored corpus; each ends with
``os._exit`` so nothing of pytest runs in the child."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback

from kuration.output.destinations import FsspecDestination, LocalDestination
from kuration.output.lease import LeaseError

FORK = multiprocessing.get_context("fork")


def _kill_on_rename(name: str, occurrence: int) -> None:
    """In this (child) process, SIGKILL ourselves at the ``occurrence``-th rename (or hard
    link: how a publish record takes its name) onto a file called ``name``: its temp file is
    complete, the rename never happens."""
    seen = [0]

    def killing(real):
        def step(src, dst, *args, **kwargs):
            if os.path.basename(os.fspath(dst)) == name:
                seen[0] += 1
                if seen[0] == occurrence:
                    os.kill(os.getpid(), signal.SIGKILL)
            return real(src, dst, *args, **kwargs)
        return step

    os.replace, os.link = killing(os.replace), killing(os.link)


def gc_killed_at_unlink(out, keep: int, unlinks: int) -> None:
    """In a forked child: gc, SIGKILLed right after its ``unlinks``-th unlink of a file (the
    first is the first removed version's commit record)."""
    from kuration.output.version_gc import collect_garbage

    real, seen = os.unlink, [0]

    def unlink(path, *args, **kwargs):
        real(path, *args, **kwargs)
        seen[0] += 1
        if seen[0] == unlinks:
            os.kill(os.getpid(), signal.SIGKILL)

    os.unlink = unlink
    collect_garbage(out, keep)
    os._exit(0)


def _write_in_child(corpus, out, plan, kwargs, kill_on_rename=None):
    if kill_on_rename is not None:
        _kill_on_rename(*kill_on_rename)
    corpus.write(out, plan=plan, **kwargs)
    os._exit(0)


def run_writer(corpus, out, plan, kill_after=None, kill_on_rename=None, **kwargs) -> tuple[bool, float]:
    """Run one write in a forked child; SIGKILL it after ``kill_after`` seconds, or at the
    rename ``kill_on_rename`` = (file name, occurrence). Returns (finished before the kill,
    seconds it ran)."""
    child = FORK.Process(target=_write_in_child, args=(corpus, out, plan, kwargs, kill_on_rename))
    start = time.perf_counter()
    child.start()
    if kill_after is not None:
        child.join(kill_after)
        if child.is_alive():
            os.kill(child.pid, signal.SIGKILL)
    child.join()
    return child.exitcode == 0, time.perf_counter() - start


def _call_in_child(function, args, sender):
    try:
        sender.send((True, function(*args)))
    except Exception:  # sent to the parent, which raises it
        sender.send((False, traceback.format_exc()))
    os._exit(0)


def in_a_child(function, *args):
    """``function(*args)`` called in a forked child; what it returns (an error it raised is
    raised here as an AssertionError with its traceback).

    A test that forks writers must read an object store this way too, never in its own
    process: a forked child that drops an s3fs session it inherited closes the session's
    pooled connections, which removes their sockets from the epoll set the child shares
    with its parent, so on a server that keeps connections alive (radosgw; moto closes
    each) the parent's next request on one of them waits about 15 s, or for good."""
    receiver, sender = FORK.Pipe(duplex=False)
    child = FORK.Process(target=_call_in_child, args=(function, args, sender))
    child.start()
    sender.close()
    try:
        ok, result = receiver.recv()
    except EOFError:
        ok, result = False, "the child died before it answered"
    child.join()
    if not ok:
        raise AssertionError(f"{function.__name__} failed in a child process:\n{result}")
    return result


def _meet_at_the_lease(barrier) -> None:
    """In this (child) process, make every destination wait at ``barrier`` before it takes its
    lease: both writers have passed the destination checks and the preflight, so they race
    for the lease itself, not for whichever reaches the destination first (a writer that
    arrives after the other committed is refused for another reason, which is not this test)."""
    for cls in (LocalDestination, FsspecDestination):
        real = cls.lease

        def lease(self, _real=real):
            barrier.wait()
            return _real(self)

        cls.lease = lease


def _racing_writer(corpus, out, plan, barrier):
    _meet_at_the_lease(barrier)
    try:
        corpus.write(out, plan=plan)
    except LeaseError:
        os._exit(3)
    os._exit(0)


def race_two_writers(corpus, out) -> list[int]:
    """Two writer processes released at the same instant onto one destination's lease: exit codes."""
    plan = corpus.plan()
    barrier = FORK.Barrier(2)
    children = [FORK.Process(target=_racing_writer, args=(corpus, out, plan, barrier)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    return sorted(child.exitcode for child in children)
