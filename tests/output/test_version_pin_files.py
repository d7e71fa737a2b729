"""Hostile pin files: ``ROOT/pins/<holder>.json`` is written by readers' jobs, so gc parses
what anyone with write access to the root left there. Every malformed pin, including one
whose checksum was recomputed over wrong fields, is refused with a CommitError naming the
file, and gc then removes nothing; never another exception type, never a pin gc misorders."""

import datetime as _dt
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.canonical.hashing import canonical_digest
from kuration.errors import CommitError
from kuration.output.version_pins import VersionPin, active_pins, read_pins
from kuration.output.versions import DatasetRoot

WHERE = "ROOT/pins/job.json"
GOOD = {"version": "v2", "holder": "job", "created": "2026-12-03T10:00:00+00:00",
        "expires": "2026-12-04T10:00:00+00:00", "format": 1}


def _sealed(body) -> bytes:
    """``body`` with a checksum that matches it, as a tool that knows the format writes it."""
    return json.dumps({**body, "checksum": canonical_digest(body)}).encode()


def test_a_well_formed_pin_parses_and_round_trips():
    pin = VersionPin.parse(_sealed(GOOD), where=WHERE)
    assert pin == VersionPin("v2", "job", GOOD["created"], GOOD["expires"])
    assert VersionPin.parse(pin.to_bytes(), where=WHERE) == pin


@pytest.mark.parametrize("data", [
    b"", b"{", b"\xff\xfe", b"null", b"[]", b'"v2"', b"42",
    b'{"version": "v2", "version": "v3"}',                       # duplicate key
    b'{"version": NaN}', b'{"format": 1e999}', b'{"format": 123456789012345678901234567890}',
    b"[" * 200 + b"]" * 200,                                      # nesting past the parser's bound
], ids=["empty", "torn", "not-utf8", "null", "list", "string", "number", "duplicate-key", "nan",
        "huge-float", "huge-int", "deep"])
def test_bytes_that_are_not_a_pin_object_are_refused_naming_the_file(data):
    with pytest.raises(CommitError, match=r"ROOT/pins/job\.json"):
        VersionPin.parse(data, where=WHERE)


@pytest.mark.parametrize("field, value, why", [
    ("version", 2, "must be strings"),
    ("version", "v0", "not a version name"),
    ("version", "../v2", "not a version name"),
    ("holder", ["job"], "must be strings"),
    ("created", None, "must be strings"),
    ("created", "yesterday", "created 'yesterday' is not an ISO 8601 time"),
    ("expires", 1767225600, "must be strings"),
    ("expires", "2026-12-04T10:00:00", "expires .* with its UTC offset"),   # naive: gc cannot order it
    ("expires", "tomorrow", "expires 'tomorrow' is not an ISO 8601 time"),
    ("format", True, "format an integer"),
    ("format", "1", "format an integer"),
    ("format", 1.0, "format an integer"),
], ids=lambda value: repr(value)[:20])
def test_a_checksummed_pin_with_a_wrong_field_is_refused_naming_the_field(field, value, why):
    with pytest.raises(CommitError, match=rf"ROOT/pins/job\.json: an unreadable version pin \(.*{why}"):
        VersionPin.parse(_sealed({**GOOD, field: value}), where=WHERE)


@pytest.mark.parametrize("body, why", [
    ({**GOOD, "format": 2}, "format 2"),
    ({**GOOD, "holder": "other"}, "for holder 'other', not this file's"),
    ({**GOOD, "extra": 1}, "keys or checksum do not match"),
    ({key: value for key, value in GOOD.items() if key != "expires"}, "keys or checksum do not match"),
])
def test_a_pin_of_another_format_holder_or_key_set_is_refused(body, why):
    with pytest.raises(CommitError, match=why):
        VersionPin.parse(_sealed(body), where=WHERE)


@pytest.mark.parametrize("checksum", [None, 7, "0" * 64, canonical_digest({**GOOD, "version": "v3"})])
def test_a_missing_or_wrong_checksum_is_refused(checksum):
    data = json.dumps({**GOOD, "checksum": checksum}).encode()
    with pytest.raises(CommitError, match="edited by hand"):
        VersionPin.parse(data, where=WHERE)


def test_an_expiry_in_another_offset_is_ordered_by_its_instant(tmp_path):
    (tmp_path / "pins").mkdir(parents=True)
    body = {**GOOD, "expires": "2026-12-04T12:00:00+05:00"}   # 07:00 UTC
    (tmp_path / "pins" / "job.json").write_bytes(_sealed(body))
    root = DatasetRoot(tmp_path)
    utc = _dt.timezone.utc
    assert [p.holder for p in active_pins(root, _dt.datetime(2026, 12, 4, 6, 59, tzinfo=utc))] == ["job"]
    assert active_pins(root, _dt.datetime(2026, 12, 4, 7, 0, tzinfo=utc)) == []


def test_a_pin_that_is_a_symlink_is_refused_and_a_fifo_is_never_opened(tmp_path):
    """A link in pins/ could point gc at a file it must not read (a FIFO blocks, /dev/zero
    never ends): reads go through no symlink, and only regular files are listed as pins."""
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(_sealed(GOOD))
    root_dir = tmp_path / "root"
    (root_dir / "pins").mkdir(parents=True)
    (root_dir / "pins" / "job.json").symlink_to(outside)
    with pytest.raises(CommitError):
        read_pins(DatasetRoot(root_dir))
    (root_dir / "pins" / "job.json").unlink()
    os.mkfifo(root_dir / "pins" / "job.json")
    assert read_pins(DatasetRoot(root_dir)) == []


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=30),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(overrides=st.dictionaries(st.sampled_from(sorted(GOOD)), _JSON, max_size=5))
def test_any_checksummed_body_parses_to_a_well_typed_pin_or_is_refused(overrides):
    """Whatever a tool seals, parse either refuses it with a CommitError or returns a pin whose
    expiry is an aware time gc can compare with now (no TypeError inside gc later)."""
    try:
        pin = VersionPin.parse(_sealed({**GOOD, **overrides}), where=WHERE)
    except CommitError:
        return
    assert pin.expires_at().utcoffset() is not None
    assert isinstance(pin.version, str) and type(pin.format) is int
