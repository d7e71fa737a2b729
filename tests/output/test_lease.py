"""The destination lease names its holder, even when the holder has not recorded itself yet."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.output.lease import HOLDER_WAIT, LEASE_FILE, DestinationLease, LeaseError, _recorded_holder


class RawHolder:
    """Holds the lock file's flock the way a writer does in the instant before it records itself."""

    def __init__(self, out):
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / LEASE_FILE
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def record(self, data: bytes) -> None:
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))

    def close(self) -> None:
        os.close(self.fd)


def test_a_recorded_holder_is_named(tmp_path):
    with DestinationLease(tmp_path / "out"):
        with pytest.raises(LeaseError, match=rf"another writer holds this destination \(pid {os.getpid()} on "
                                             rf"{socket.gethostname()} since \d{{4}}-"):
            DestinationLease(tmp_path / "out").acquire()
    DestinationLease(tmp_path / "out").acquire().release()  # released


def test_a_holder_that_has_not_recorded_itself_is_named_by_its_lock_file(tmp_path):
    holder = RawHolder(tmp_path / "out")
    try:
        started = time.monotonic()
        with pytest.raises(LeaseError, match=r"held by a writer that has not recorded itself yet; lock file "
                                             rf".*out/{LEASE_FILE}, created or last written at \d{{4}}-\d\d-\d\dT"):
            DestinationLease(tmp_path / "out").acquire()
        # it waits HOLDER_WAIT for the record, then answers; the upper bound only catches a hang
        # (a tight one flakes on shared cores: speed is for bench/)
        assert HOLDER_WAIT <= time.monotonic() - started < HOLDER_WAIT + 30
    finally:
        holder.close()


def test_a_holder_that_records_itself_while_the_second_writer_waits_is_named(tmp_path):
    holder = RawHolder(tmp_path / "out")
    late = json.dumps({"pid": os.getpid(), "host": "rig-7", "since": "2026-01-01T00:00:00+00:00"}).encode()
    timer = threading.Timer(HOLDER_WAIT / 5, holder.record, args=(late,))
    timer.start()
    try:
        with pytest.raises(LeaseError, match=rf"\(pid {os.getpid()} on rig-7 since 2026-01-01T00:00:00\+00:00\)"):
            DestinationLease(tmp_path / "out").acquire()
    finally:
        timer.join()
        holder.close()


def test_the_record_a_crashed_writer_left_is_not_taken_for_the_holder(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    holder = RawHolder(tmp_path / "out")
    holder.record(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "since": "then"}).encode())
    try:
        with pytest.raises(LeaseError, match="has not recorded itself yet"):
            DestinationLease(tmp_path / "out").acquire()
    finally:
        holder.close()


@pytest.mark.parametrize("record", [
    b"", b"{", b"[" * 100_000, b'{"pid": 1, "pid": 2, "host": "h", "since": "s"}', b'{"pid": 1e999}',
    b'{"pid": "7", "host": "h", "since": "s"}', b'{"pid": 99999999999, "host": "h", "since": "s"}', b"\xff\xfe",
])
def test_a_torn_or_crafted_record_never_escapes_as_another_error(tmp_path, record):
    holder = RawHolder(tmp_path / "out")
    holder.record(record)
    try:
        with pytest.raises(LeaseError, match="has not recorded itself yet"):
            DestinationLease(tmp_path / "out").acquire()
    finally:
        holder.close()


def test_release_clears_the_record(tmp_path):
    lease = DestinationLease(tmp_path / "out").acquire()
    assert json.loads((tmp_path / "out" / LEASE_FILE).read_bytes())["pid"] == os.getpid()
    lease.release()
    assert (tmp_path / "out" / LEASE_FILE).read_bytes() == b""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(
    st.sampled_from(["pid", "host", "since", "x"]),
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300) | st.lists(st.integers()))))
def test_a_hostile_lock_record_is_named_or_ignored_never_raised(tmp_path, data):
    """Whatever another process left in the lock file, reading it gives a holder with plain,
    bounded fields or none: no parser error escapes into the lease error."""
    path = tmp_path / LEASE_FILE
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        holder = _recorded_holder(fd, path)
    finally:
        os.close(fd)
    if holder is not None:
        assert 0 < holder["pid"] < 2**31 and len(holder["host"]) <= 255 and len(holder["since"]) <= 64
