"""The atomic promotion of a rollout store: :func:`write_rollout_store_atomically`.

This is the runner path (the only one the ``rollout_store`` asset uses). A direct
:func:`~kuration.rollouts.writer.write_rollout_zarr_store` removes the destination and then
writes it, so a crash in between leaves nothing usable. Here:

1. stale siblings left by killed runs are cleaned (and an interrupted promotion is rolled
   back, see below);
2. the store is written to a temp sibling ``.kuration-tmp.<name>.<pid>-<token>.tmp`` in the
   destination's folder (same filesystem, so the renames are atomic);
3. the temp store is re-opened with :class:`RolloutZarrStoreReader`: its counts and its
   manifest digest (root attrs, sidecar and the write result) must agree, and the full
   validation must pass; a store that fails is removed and never promoted;
4. promotion: the old store is renamed to ``.kuration-tmp.<name>.<pid>-<token>-old.tmp``,
   the temp store renamed in, the folder fsynced, the old store removed.

A reader therefore sees the old store or the new one. The one window where the destination
name is briefly absent is between the two renames of step 4; a run killed there leaves the
old store under its ``-old`` name, and the next run (or :func:`recover_interrupted_promotion`)
renames it back before doing anything else.

Only siblings of a *dead* writer are cleaned: the pid in the name is checked on this host,
so two runners on one destination do not remove each other's work (the rename race between
two live runners is not arbitrated: run one runner per destination). A remote URL
(``s3://...``) has no atomic directory rename: the store is written, verified and promoted
as above in a local temp folder, published to the URL root ``zarr.json`` last
(:func:`~kuration.rollouts.remote.publish_rollout_store`), then downloaded again and
validated there, so what is promoted is what a reader of the URL gets.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kuration.errors import RolloutStoreError
from kuration.rollouts.reader import RolloutZarrStoreReader
from kuration.rollouts.remote import publish_rollout_store
from kuration.rollouts.records import RolloutChainInput
from kuration.rollouts.schema import MANIFEST_FILENAME
from kuration.rollouts.validation import RolloutZarrValidationResult, validate_rollout_zarr_store
from kuration.rollouts.writer import RolloutZarrWriteResult, write_rollout_zarr_store
from kuration.storage import TEMP_PREFIX, fsync_directory, is_remote, join_url, local_path, remove_tree, temp_name

#: ``<pid>-<12 hex>`` for a temp store, ``...-old`` for a store being replaced.
_TOKEN = re.compile(r"^(?P<pid>[0-9]+)-[0-9a-f]{12}(?P<old>-old)?$")


def write_rollout_store_atomically(store_dir: str | os.PathLike[str], records: Iterable[RolloutChainInput],
                                   **writer_options: Any) -> RolloutZarrWriteResult:
    """Write ``records`` (records and batches, as :func:`write_rollout_zarr_store` takes them)
    to a temp sibling of the local directory ``store_dir``, verify it, and promote it
    atomically over ``store_dir``; a remote URL is published instead (see the module docstring). ``writer_options`` are
    :func:`write_rollout_zarr_store`'s keyword options. Returns the write result with
    ``store_dir`` and ``manifest_path`` pointing at the promoted store. A failed write or
    verification raises and leaves the previous store untouched."""
    return write_validated_rollout_store(store_dir, records, **writer_options)[0]


def write_validated_rollout_store(store_dir: str | os.PathLike[str], records: Iterable[RolloutChainInput],
                                  **writer_options: Any) -> tuple[RolloutZarrWriteResult, RolloutZarrValidationResult]:
    """:func:`write_rollout_store_atomically`, also returning the validation that let the
    store be promoted (its ``store_dir`` the promoted one: the rename changes no byte), so a
    caller that reports it (the ``rollout_validation`` check) does not read the store again.
    For a remote ``store_dir``, that validation is of the published store, read back."""
    if is_remote(store_dir):
        return _write_remote(os.fspath(store_dir), records, **writer_options)
    final = local_path(store_dir).absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    recover_interrupted_promotion(final)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    temp = final.parent / temp_name(final.name, token)
    try:
        result = write_rollout_zarr_store(temp, records, **writer_options)
        validation = _verify(temp, result)
    except BaseException:
        remove_tree(temp)
        raise
    old = final.parent / temp_name(final.name, f"{token}-old")
    if final.exists():
        os.rename(final, old)
    os.rename(temp, final)
    fsync_directory(final.parent)
    remove_tree(old)
    final = final.resolve()
    return (dataclasses.replace(result, store_dir=str(final), manifest_path=str(final / MANIFEST_FILENAME)),
            dataclasses.replace(validation, store_dir=final))


def _write_remote(url: str, records: Iterable[RolloutChainInput], **writer_options: Any
                  ) -> tuple[RolloutZarrWriteResult, RolloutZarrValidationResult]:
    staging = Path(tempfile.mkdtemp(prefix=".kuration-rollout-staging-"))
    try:
        written, _ = write_validated_rollout_store(staging / posixpath.basename(url.rstrip("/")), records,
                                                   **writer_options)
        publish_rollout_store(written.store_dir, url)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    published = validate_rollout_zarr_store(url, validate_selected_payload=True)
    if not published.ok:
        raise RolloutStoreError(f"{url}: the published store fails validation when read back ({len(published.errors)} "
                                f"errors: {'; '.join(published.errors[:10])}); re-materialize rollout_store")
    return (dataclasses.replace(written, store_dir=url, manifest_path=join_url(url, MANIFEST_FILENAME)), published)


def recover_interrupted_promotion(store_dir: str | os.PathLike[str]) -> list[str]:
    """Clean the siblings of ``store_dir`` that dead runners left, and return their names.

    A temp store of a dead runner is removed. A replaced store (``-old``) of a dead runner is
    renamed back to ``store_dir`` when ``store_dir`` is absent (the runner died between its
    two renames), and removed otherwise. Siblings of live processes are left alone."""
    final = local_path(store_dir).absolute()
    prefix = f"{TEMP_PREFIX}{final.name}."
    if not final.parent.is_dir():
        return []
    cleaned: list[str] = []
    stale = []
    for sibling in sorted(final.parent.iterdir()):
        name = sibling.name
        if not name.startswith(prefix) or not name.endswith(".tmp"):
            continue
        match = _TOKEN.match(name[len(prefix):-len(".tmp")])
        if match is None or _alive(int(match["pid"])):
            continue
        stale.append((sibling, match["old"] is not None))
    for sibling, is_old in sorted(stale, key=lambda item: not item[1]):  # the old stores first
        if is_old and not final.exists():
            os.rename(sibling, final)
            fsync_directory(final.parent)
        else:
            remove_tree(sibling)
        cleaned.append(sibling.name)
    return cleaned


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False
    return True


def _verify(temp: Path, result: RolloutZarrWriteResult) -> RolloutZarrValidationResult:
    reader = RolloutZarrStoreReader(temp)
    manifest = reader.manifest()
    counts = reader.counts
    written = {"rollouts": result.num_rollouts, "steps": result.num_steps, "candidates": result.num_candidates,
               "sources": result.num_sources, "targets": result.num_targets}
    if counts != written:
        raise RolloutStoreError(f"{temp}: re-opened store counts {counts} differ from the write's {written}; "
                                "not promoted")
    digests = {manifest["attrs"]["manifest_sha256"], manifest["sidecar_sha256"], result.manifest_sha256}
    if len(digests) != 1:
        raise RolloutStoreError(f"{temp}: manifest digests disagree (root attrs, sidecar, write result: "
                                f"{sorted(digests)}); not promoted")
    report = validate_rollout_zarr_store(str(temp), validate_selected_payload=True)
    if not report.ok:
        shown_errors = "; ".join(str(e) for e in list(report.errors)[:10])
        raise RolloutStoreError(f"{temp}: the written store fails validation ({len(report.errors)} errors: "
                                f"{shown_errors}); not promoted")
    return report


__all__ = ["recover_interrupted_promotion", "write_rollout_store_atomically", "write_validated_rollout_store"]
