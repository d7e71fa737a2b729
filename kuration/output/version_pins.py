"""Reader pins: a marker that keeps one version of a dataset root from garbage collection.

A training job that reads an older version for hours (or a ``ShardDataset`` whose workers
re-open the version they were created on) pins it::

    ROOT/pins/<holder>.json   {version, holder, created, expires (UTC, ISO 8601), format, checksum}

:func:`kuration.output.version_gc.collect_garbage` never removes a version an unexpired pin
names. A pin expires by itself (``ttl_seconds``), so a reader that crashed without unpinning
holds a version for a bounded time only; a reader that runs longer pins again (same holder:
the pin is replaced). A pin file that does not parse or whose checksum does not match makes
gc refuse to run at all (fail closed: gc cannot tell which version it protects).

Pinning writes into the root, so it needs write access there; it takes no lease (a reader
never waits for a writer). The race with a gc that is removing the version being pinned is
closed on both sides: :func:`pin_version` writes the pin first and then checks that the
version is still committed (gc deletes a version's commit record first), and gc re-reads
the pins after deleting a commit record and puts it back when a pin appeared meanwhile.
A reader without write access cannot pin: it relies on ``keep_versions``.

What this module does not do: remove versions (:mod:`.version_gc`), or pin a plain
seed-layout root (``v0``), which gc never touches.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from kuration.canonical.hashing import canonical_digest, readable_json
from kuration.errors import CommitError, InputError
from kuration.output.commit_protocol import is_writer_leftover, strict_json
from kuration.output.versions import DatasetRoot, version_number

PINS_DIR = "pins"
PIN_FORMAT = 1
_HOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _iso(moment: _dt.datetime) -> str:
    return moment.isoformat(timespec="seconds")


def check_holder(holder: str) -> str:
    """``holder`` if it is a safe file name; an :class:`InputError` saying what is allowed otherwise."""
    if not isinstance(holder, str) or not _HOLDER.fullmatch(holder):
        raise InputError(f"pin holder {holder!r}: a holder name is 1 to 128 characters, letters, digits, '.', '_' "
                         "and '-', starting with a letter or digit (e.g. 'train-job-42')")
    return holder


@dataclass(frozen=True)
class VersionPin:
    """``holder`` keeps ``version`` from gc until ``expires`` (UTC, ISO 8601)."""

    version: str
    holder: str
    created: str
    expires: str
    format: int = PIN_FORMAT

    def to_bytes(self) -> bytes:
        body = asdict(self)
        return readable_json({**body, "checksum": canonical_digest(body)})

    def expires_at(self) -> _dt.datetime:
        return _dt.datetime.fromisoformat(self.expires)

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> VersionPin:
        raw = strict_json(data, where=where, what="version pin")
        checksum = raw.pop("checksum", None) if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or set(raw) != set(cls.__dataclass_fields__) or canonical_digest(raw) != checksum:
            raise CommitError(f"{where}: not a version pin, or one edited by hand (its keys or checksum do not match); "
                              "gc cannot tell which version it keeps, so it removes nothing. Delete the file if its "
                              "holder is gone, or pin again with `kuration pin`")
        pin = cls(**raw)
        problem = _field_problem(pin)
        if problem is not None:
            raise CommitError(f"{where}: an unreadable version pin ({problem}); gc removes nothing while it is there")
        if pin.format != PIN_FORMAT or f"{pin.holder}.json" != where.rsplit("/", 1)[-1]:
            raise CommitError(f"{where}: a version pin of format {pin.format!r} for holder {pin.holder!r}, not this "
                              f"file's (format {PIN_FORMAT}); gc removes nothing while it is there")
        return pin


def _moment(text: str) -> _dt.datetime | None:
    """``text`` as a moment in time, when it is an ISO 8601 time with its UTC offset."""
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.utcoffset() is not None else None


def _field_problem(pin: VersionPin) -> str | None:
    """What is wrong with a checksummed pin's fields (their checksum only proves they were
    written together, not by Kuration); None when each has its type and form. An expiry
    without a UTC offset is refused: gc could not order it against now."""
    fields = (pin.version, pin.holder, pin.created, pin.expires)
    if not all(isinstance(value, str) for value in fields) or type(pin.format) is not int:
        return "version, holder, created and expires must be strings and format an integer"
    for name in ("created", "expires"):
        if _moment(getattr(pin, name)) is None:
            return f"{name} {getattr(pin, name)!r} is not an ISO 8601 time with its UTC offset"
    try:
        version_number(pin.version)
        check_holder(pin.holder)
    except (CommitError, InputError) as exc:
        return str(exc)
    return None


def _pin_file(holder: str) -> str:
    return f"{PINS_DIR}/{check_holder(holder)}.json"


def _committed(root: DatasetRoot, version: str) -> bool:
    try:
        record = root.commit_record(version)
    except CommitError:
        return False
    return record is not None and record.state == "committed"


def _current(root: DatasetRoot) -> str:
    current = root.current()
    if current is None:
        raise CommitError(f"{root.url}: no version is published, so there is no current version to pin; name one "
                          "(version=, or --version)")
    return current.version


def pin_version(root: str | os.PathLike[str], version: str | None = None, *, holder: str,
                ttl_seconds: float) -> VersionPin:
    """Keep the committed ``version`` of ``root`` (None: the current one) from gc for
    ``ttl_seconds`` (a pin by ``holder`` replaces that holder's earlier pin). Refuses a
    version that is not committed."""
    dataset_root = DatasetRoot(root)
    relative = _pin_file(holder)
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, (int, float)) or not 0 < ttl_seconds < 10**9:
        raise InputError(f"ttl_seconds must be a positive number of seconds, got {ttl_seconds!r}")
    version = _current(dataset_root) if version is None else version
    if not _committed(dataset_root, version):
        raise CommitError(f"{dataset_root.version_url(version)}: not a committed version (see `kuration versions "
                          f"{dataset_root.url}`); only a committed version can be pinned")
    created = _now()
    pin = VersionPin(version, holder, _iso(created), _iso(created + _dt.timedelta(seconds=ttl_seconds)))
    dataset_root.destination.write_metadata(relative, pin.to_bytes())
    if not _committed(dataset_root, version):  # a gc removed it between our check and our pin
        dataset_root.destination.remove(relative)
        raise CommitError(f"{dataset_root.version_url(version)}: removed by gc while it was being pinned; pin a kept "
                          f"version (see `kuration versions {dataset_root.url}`)")
    return pin


def unpin_version(root: str | os.PathLike[str], holder: str) -> None:
    """Drop ``holder``'s pin (none: nothing to do)."""
    DatasetRoot(root).destination.remove(_pin_file(holder))


def read_pins(root: DatasetRoot) -> list[VersionPin]:
    """Every pin of ``root``, expired or not, by holder; a torn or edited pin raises."""
    pins = []
    for relative in root.destination.files_under(PINS_DIR):
        name = relative.rsplit("/", 1)[-1]
        if is_writer_leftover(name):  # a pin write killed before its move: never a pin
            continue
        where = root.destination.where(relative)
        data = root.destination.read(relative)
        if data is None:  # unpinned between the listing and the read
            continue
        pins.append(VersionPin.parse(data, where=where))
    return sorted(pins, key=lambda pin: pin.holder)


def active_pins(root: str | os.PathLike[str] | DatasetRoot, now: _dt.datetime | None = None) -> list[VersionPin]:
    """The pins of ``root`` that have not expired at ``now`` (default: now)."""
    dataset_root = root if isinstance(root, DatasetRoot) else DatasetRoot(root)
    moment = now or _now()
    return [pin for pin in read_pins(dataset_root) if pin.expires_at() > moment]


@contextmanager
def pinned_version(root: str | os.PathLike[str], *, holder: str, ttl_seconds: float,
                   version: str | None = None) -> Iterator[str]:
    """``with pinned_version(root, holder="job-7", ttl_seconds=86400) as ref:`` pins the
    current version (or ``version``) for the block and yields its reference ``ROOT@vN``,
    which every reader takes; the pin is dropped on exit, however the block ends."""
    pin = pin_version(root, version, holder=holder, ttl_seconds=ttl_seconds)
    try:
        yield f"{DatasetRoot(root).url}@{pin.version}"
    finally:
        unpin_version(root, holder)


__all__ = ["PINS_DIR", "VersionPin", "active_pins", "check_holder", "pin_version", "pinned_version", "read_pins",
           "unpin_version"]
