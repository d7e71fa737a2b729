"""Rollout stores under an ``s3://`` URL (kuration.rollouts.remote): written and validated
locally, published root ``zarr.json`` last, read back and validated over S3; a publication
cut short leaves no store a reader accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuration.errors import RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, validate_rollout_zarr_store, write_rollout_store_atomically
from kuration.rollouts.remote import ROOT_METADATA, publish_rollout_store
from tests.rollouts.store_factory import all_files, make_records


def _keys(s3_client, bucket: str, prefix: str) -> list[str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket[len("s3://"):], Prefix=prefix)
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def _objects(s3_client, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix``, by its key relative to it."""
    name = bucket[len("s3://"):]
    return {key[len(prefix):]: s3_client.get_object(Bucket=name, Key=key)["Body"].read()
            for key in _keys(s3_client, bucket, prefix)}


def test_a_store_is_published_to_s3_and_read_back_as_written(bucket, s3_client, tmp_path):
    url = f"{bucket}/rollouts/rollouts.zarr"
    written = write_rollout_store_atomically(url, make_records(0, chains=3))
    assert written.store_dir == url and written.manifest_path == f"{url}/rollout_manifest.json"
    local = write_rollout_store_atomically(tmp_path / "local.zarr", make_records(0, chains=3))
    # the objects are the local store's files, byte for byte, and no staging is left beside them
    assert _objects(s3_client, bucket, "rollouts/rollouts.zarr/") == all_files(Path(local.store_dir))
    assert all(key.startswith("rollouts/rollouts.zarr/") for key in _keys(s3_client, bucket, ""))
    assert written.manifest_sha256 == local.manifest_sha256

    report = validate_rollout_zarr_store(url)
    assert report.ok and report.store_dir == url and report.num_rollouts == written.num_rollouts == 3
    reader = RolloutZarrStoreReader(url)
    assert reader.source == url and reader.counts["steps"] == written.num_steps

    # a second build replaces the store whole: every object is the new store's
    again = write_rollout_store_atomically(url, make_records(1, chains=5))
    second = write_rollout_store_atomically(tmp_path / "second.zarr", make_records(1, chains=5))
    assert _objects(s3_client, bucket, "rollouts/rollouts.zarr/") == all_files(Path(second.store_dir))
    assert again.manifest_sha256 != written.manifest_sha256 and validate_rollout_zarr_store(url).num_rollouts == 5


def test_a_publication_cut_short_leaves_no_store_a_reader_accepts(bucket, s3_client, s3fs_fs, tmp_path,
                                                                    monkeypatch):
    url = f"{bucket}/rollouts.zarr"
    write_rollout_store_atomically(url, make_records(0))
    local = write_rollout_store_atomically(tmp_path / "next.zarr", make_records(1, chains=5))

    def lost_connection(*args, **kwargs):
        raise OSError("connection reset by peer")

    # the one single-file upload, the root zarr.json's (the rest goes up as one batch), never arrives
    monkeypatch.setattr(s3fs_fs, "put_file", lost_connection)
    with pytest.raises(OSError, match="connection reset"):
        publish_rollout_store(local.store_dir, url)
    monkeypatch.undo()
    keys = _keys(s3_client, bucket, "rollouts.zarr/")
    assert keys and "rollouts.zarr/rollout_manifest.json" in keys and f"rollouts.zarr/{ROOT_METADATA}" not in keys

    report = validate_rollout_zarr_store(url)
    assert not report.ok and report.errors == [
        f"{url}: no rollout store here (no zarr.json: never built, or its publication did not finish); "
        "re-materialize rollout_store"]
    with pytest.raises(RolloutStoreError, match="no rollout store here"):
        RolloutZarrStoreReader(url)
    # the next build publishes a whole store again
    write_rollout_store_atomically(url, make_records(1, chains=5))
    assert validate_rollout_zarr_store(url).ok


def test_a_damaged_object_fails_validation_naming_the_url(bucket, s3_client):
    url = f"{bucket}/rollouts.zarr"
    write_rollout_store_atomically(url, make_records(0))
    key = "rollouts.zarr/rollout_manifest.json"
    name = bucket[len("s3://"):]
    body = s3_client.get_object(Bucket=name, Key=key)["Body"].read()
    s3_client.put_object(Bucket=name, Key=key, Body=body.replace(b'"', b"'", 1))
    report = validate_rollout_zarr_store(url)
    assert not report.ok and report.store_dir == url
    assert any("rollout_manifest.json" in error for error in report.errors), report.errors
    assert not any(".kuration-rollout-copy-" in error for error in report.errors), report.errors
