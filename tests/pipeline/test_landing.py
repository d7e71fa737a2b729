"""Watching the landing zone: listing recordings with cheap change tokens, and diffing."""

import os
import time

import fsspec

from kuration.landing.recordings import diff_recordings, file_token, list_recordings


def _touch(path, data=b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_lists_matching_files_relative_and_sorted(tmp_path):
    for name in ("site_b/r2.parquet", "site_a/r1.parquet", "r0.parquet", "notes.txt", ".tmp/x.parquet",
                 "site_a/.r9.parquet"):
        _touch(tmp_path / name)
    assert list(list_recordings(tmp_path)) == ["r0.parquet", "site_a/r1.parquet", "site_b/r2.parquet"]
    assert list_recordings(tmp_path / "missing") == {}


def test_a_rewritten_file_changes_its_token(tmp_path):
    path = tmp_path / "r.parquet"
    _touch(path, b"one")
    before = list_recordings(tmp_path)["r.parquet"]
    _touch(path, b"two, longer")
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert list_recordings(tmp_path)["r.parquet"] != before
    assert file_token(path) == list_recordings(tmp_path)["r.parquet"]
    assert file_token(tmp_path / "nope.parquet") is None


def test_tokens_work_on_an_fsspec_url():
    fs = fsspec.filesystem("memory")
    fs.pipe("/landing-test/site/a.parquet", b"abc")
    fs.pipe("/landing-test/site/b.parquet", b"abcd")
    tokens = list_recordings("memory://landing-test")
    assert list(tokens) == ["site/a.parquet", "site/b.parquet"]
    assert tokens["site/a.parquet"] != tokens["site/b.parquet"]  # sizes differ


def test_diff_names_new_changed_and_removed():
    diff = diff_recordings({"a": "1", "b": "1", "c": "1"}, {"a": "1", "b": "2", "d": "1"})
    assert diff.new == ("d",) and diff.changed == ("b",) and diff.removed == ("c",)
    assert diff.to_score == ("b", "d")
    assert diff_recordings({"a": "1"}, {"a": "1"}).to_score == ()
