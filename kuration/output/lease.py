"""The destination lease: one writer per dataset directory, from planning the write to the final commit
(the preflight, which only reads, runs before it).

Locally the lease is an exclusive ``flock`` on ``<out>/.kuration-writer.lock``. The kernel
releases it when the writer's process exits, however it exits (a SIGKILL included), so a
crashed writer never leaves a stale lock behind. The file records who holds it, for the
message a second writer gets.

The holder takes the lock first and records itself right after, so a second writer can
find the lock held and the record not yet written (or still the record of a writer that
crashed before it). It re-reads the record for up to :data:`HOLDER_WAIT` seconds; when no
live holder has recorded itself by then, the error says so and names the lock file and when
it was last written. A holder clears its record on release.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from kuration.errors import LeaseError
from kuration.canonical.strict_json import parse_strict_json

LEASE_FILE = ".kuration-writer.lock"
#: How long a second writer waits for the holder to record itself before naming the lock
#: file instead: the holder writes its record right after taking the lock, in microseconds.
HOLDER_WAIT = 0.5


class DestinationLease:
    """``with DestinationLease(out):`` holds the destination exclusively for the block."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.path = Path(out) / LEASE_FILE
        self._fd: int | None = None

    def acquire(self) -> DestinationLease:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = _describe_holder(fd, self.path)
            finally:
                os.close(fd)
            raise LeaseError(
                f"{self.path.parent}: another writer holds this destination ({holder}); wait for it to finish. Two "
                "writers must never interleave one dataset"
            ) from None
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}).encode()
        # written over the old record, then cut to length: the file is never empty meanwhile
        os.pwrite(fd, record, 0)
        os.ftruncate(fd, len(record))
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)  # so the next holder's record is never mistaken for ours
            finally:
                os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> DestinationLease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _describe_holder(fd: int, path: Path) -> str:
    """Who holds the lock, from its record; re-read until a live holder has recorded itself
    or :data:`HOLDER_WAIT` has passed."""
    deadline = time.monotonic() + HOLDER_WAIT
    while True:
        holder = _recorded_holder(fd, path)
        if holder is not None:
            return f"pid {holder['pid']} on {holder['host']} since {holder['since']}"
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    try:
        written = _dt.datetime.fromtimestamp(os.fstat(fd).st_mtime, _dt.timezone.utc).isoformat(timespec="seconds")
    except OSError:
        written = "an unknown time"
    return (f"held by a writer that has not recorded itself yet; lock file {path}, created or last written at "
            f"{written}")


def _recorded_holder(fd: int, path: Path) -> dict[str, Any] | None:
    """The record in the lock file when it is complete and not left by a writer of this host
    that is no longer running; None otherwise."""
    try:
        data = parse_strict_json(os.pread(fd, 4096, 0), where=str(path), what="lease record", error=LeaseError)
    except (OSError, LeaseError):
        return None
    if not isinstance(data, dict):
        return None
    pid, host, since = data.get("pid"), data.get("host"), data.get("since")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31 or not isinstance(host, str) \
            or not isinstance(since, str):
        return None
    if host == socket.gethostname() and not _running(pid):
        return None  # a crashed holder's record: the live holder has not overwritten it yet
    return {"pid": pid, "host": host[:255], "since": since[:64]}


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    return True


__all__ = ["DestinationLease", "HOLDER_WAIT", "LEASE_FILE", "LeaseError"]
