"""Rollout stores under a remote URL (``s3://...``, any fsspec store): published from a local
store, and read from a local copy.

An object store has no atomic directory rename, so the local runner's promotion
(:mod:`kuration.rollouts.promote`) cannot work there. A remote store is instead written and
validated in a local folder, then published by :func:`publish_rollout_store`, which keeps the
store's root ``zarr.json`` (what makes the folder a zarr group, and the first thing every
reader opens) out of the way until the rest is in place:

1. the old store's root ``zarr.json`` is deleted first, then the rest of the old store;
2. every file of the new store but its root ``zarr.json`` is uploaded;
3. the root ``zarr.json`` is uploaded last.

A reader that opens the store therefore finds the old store, no store (between 1 and 3: it
fails, naming the URL), or the new one whole; a publication killed half-way leaves no root
``zarr.json``, so the partial store is refused until the next build publishes a whole one.
Readers and the validator work on a local copy (:func:`downloaded_rollout_store`): the
whole store is downloaded once per reader or validation. Run one publisher per destination:
two at once are not arbitrated.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fsspec

from kuration.errors import RolloutStoreError
from kuration.rollouts._chunks import list_store_files
from kuration.storage import fresh_path, remove_tree

#: The store's root metadata: published last, removed first.
ROOT_METADATA = "zarr.json"


def publish_rollout_store(local_dir: str | os.PathLike[str], url: str) -> None:
    """Replace the store at the remote ``url`` with the finished local store ``local_dir``,
    its root ``zarr.json`` last (see the module docstring). Raises what the store raises
    (``OSError``): the store at ``url`` is then absent, never partly old and partly new."""
    source = Path(local_dir)
    files = sorted(list_store_files(source))
    if ROOT_METADATA not in files:
        raise RolloutStoreError(f"{source}: no {ROOT_METADATA} here, so no finished rollout store to publish")
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    old_root = f"{root}/{ROOT_METADATA}"
    if fs.exists(fresh_path(fs, old_root)):
        fs.rm_file(old_root)
    remove_tree(url)
    rest = [name for name in files if name != ROOT_METADATA]
    if rest:
        fs.put([str(source / name) for name in rest], [f"{root}/{name}" for name in rest])
    fs.put_file(str(source / ROOT_METADATA), old_root)
    fs.invalidate_cache(root)


@contextmanager
def downloaded_rollout_store(url: str) -> Iterator[Path]:
    """A local copy of the whole store at the remote ``url``, removed on exit. A store that
    is not there (no root ``zarr.json``: never built, or its publication did not finish) or
    cannot be read raises :class:`RolloutStoreError` naming the URL."""
    folder = Path(tempfile.mkdtemp(prefix=".kuration-rollout-copy-"))
    try:
        yield download_rollout_store(url, folder / "store")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def download_rollout_store(url: str, destination: Path) -> Path:
    """Copy every object of the store at the remote ``url`` into the new local folder
    ``destination``; see :func:`downloaded_rollout_store`."""
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    try:
        if not fs.exists(fresh_path(fs, f"{root}/{ROOT_METADATA}")):
            raise RolloutStoreError(f"{url}: no rollout store here (no {ROOT_METADATA}: never built, or its "
                                    "publication did not finish); re-materialize rollout_store")
        keys = [key for key in fs.find(fresh_path(fs, root)) if key.startswith(f"{root}/")]
        targets = [destination / key[len(root) + 1:] for key in keys]
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
        if keys:
            fs.get(keys, [str(t) for t in targets])
    except OSError as exc:
        raise RolloutStoreError(f"{url}: cannot download the rollout store ({type(exc).__name__}: {exc})") from None
    return destination


__all__ = ["download_rollout_store", "downloaded_rollout_store", "publish_rollout_store"]
