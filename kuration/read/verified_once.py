"""``verify="once"``: hash each shard on its first read in a process, trust it after that
while its file is unchanged.

Training reads a dataset for many epochs; hashing every shard every epoch costs as much as
reading it. Under ``verify="once"`` a shard whose size and SHA-256 matched its manifest entry
is remembered with its file's change stamp (device, inode, size, mtime and ctime in
nanoseconds, :meth:`Destination.change_stamp`). A later read of the same file for the same
entry skips the hash while the stamp is the same; any rewrite, replacement, ``touch`` or
change of size makes the next read hash it again. The stamp is taken before the read it
belongs to, so a file changed during that read is hashed on the next one.

What it does not catch: bytes changed in place by something that also restores the file's
mtime *and* ctime (which needs the clock or the disk changed under the filesystem). An
object-store shard has no stamp without an extra request, so it is verified on every read.
The memory is per process, and a forked worker (a DataLoader's) starts with its parent's.
"""

from __future__ import annotations

import threading
from typing import Literal, Union

from kuration.errors import InputError

#: What ``verify=`` takes: True (every read), False (none: trusted artifacts only), "once".
Verify = Union[bool, Literal["once"]]

_lock = threading.Lock()
_stamps: dict[tuple[str, str, int], tuple[int, ...]] = {}


def checked_verify(verify: object) -> Verify:
    """``verify`` when it is True, False or ``"once"``; an :class:`InputError` otherwise."""
    if verify is True or verify is False or verify == "once":
        return verify
    raise InputError(f"verify={verify!r}: use True (hash every read), 'once' (hash the first read of each shard in "
                     "this process, then trust it while its file is unchanged) or False (trusted artifacts only)")


def trusted(where: str, entry_sha256: str, entry_bytes: int, stamp: tuple[int, ...] | None) -> bool:
    """Whether the file at ``where`` was verified against this entry in this process and
    has the same ``stamp`` now (never, without a stamp)."""
    if stamp is None:
        return False
    with _lock:
        return _stamps.get((where, entry_sha256, entry_bytes)) == stamp


def remember(where: str, entry_sha256: str, entry_bytes: int, stamp: tuple[int, ...] | None) -> None:
    """Record that the file at ``where``, with ``stamp`` taken before the read, matched the entry."""
    if stamp is not None:
        with _lock:
            _stamps[where, entry_sha256, entry_bytes] = stamp


def forget_all() -> None:
    """Forget every shard verified so far in this process: the next read of each hashes it."""
    with _lock:
        _stamps.clear()
