"""Datasets the inspection tests share: written by the real writer from the demo corpus
(``Corpus``), and built directly with the commit protocol where a test needs what the writer
never writes (no shards at all, hostile strings in the config)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kuration.canonical.hashing import readable_json
from kuration.output.commit_protocol import publish_committed
from kuration.output.destinations import LocalDestination
from tests.output.committed_datasets import spec_for
from tests.output.corpus import version_dir

#: A source id and an error that would run as script if a report did not escape them.
HOSTILE = "<script>alert('x')</script>"


def copy_dataset(out: Path, to: Path) -> Path:
    """The dataset root ``out`` copied whole to ``to`` (its versions and publish log)."""
    return Path(shutil.copytree(out, to, symlinks=True))


def plain_copy(out: Path, to: Path) -> Path:
    """The current version of ``out`` copied alone to ``to``: a plain seed-layout dataset
    (a version folder copied alone loads as one). Tests that re-chain a dataset's commit
    record (``rechain_shard``, ``recommit``) change such a copy: a published version is never
    rewritten, and its publish record pins its commit record, so readers would refuse it."""
    return Path(shutil.copytree(version_dir(out), to, symlinks=True))


def publish(out: Path, *, entries: list[dict[str, Any]] | None = None, config: dict[str, Any] | None = None,
            budget: dict[str, Any] | None = None) -> Path:
    """A committed dataset of ``entries`` (none by default) with the builder's output spec."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"format": 1, "output": spec_for("npz").to_dict(), "entries": entries or []}
    if budget is not None:
        manifest["budget"] = budget
    publish_committed(LocalDestination(out), run_fingerprint="f" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json(config if config is not None else {"job": {}}))
    return out


def hostile_config() -> dict[str, Any]:
    return {"job": {"schema": {"sample_hz": 10.0}, "skipped_sources": {HOSTILE: f"failed: {HOSTILE}"},
                    "executor": HOSTILE},
            "provenance": {"sources": {HOSTILE: "fingerprint:<b>bold</b>"}}}
