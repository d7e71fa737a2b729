"""The destination lease: one writer per dataset directory, from preflight to the final commit.

Locally the lease is an exclusive ``flock`` on ``<out>/.kuration-writer.lock``. The kernel
releases it when the writer's process exits, however it exits (a SIGKILL included), so a
crashed writer never leaves a stale lock behind. The file records who holds it, for the
message a second writer gets.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
from pathlib import Path

from kuration.errors import KurationError

LEASE_FILE = ".kuration-writer.lock"


class LeaseError(KurationError, RuntimeError):
    """Another writer holds the destination."""


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
            holder = _read_holder(fd)
            os.close(fd)
            raise LeaseError(
                f"{self.path.parent}: another writer holds this destination ({holder}); wait for it to finish. Two "
                "writers must never interleave one dataset"
            ) from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> DestinationLease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {data.get('pid')} on {data.get('host')} since {data.get('since')}"
    except (OSError, ValueError):
        return "holder unknown"


__all__ = ["DestinationLease", "LEASE_FILE", "LeaseError"]
