"""Open a rollout store's zarr group for reading: the one ``zarr.open_group`` that reads a store.

The reader (:class:`~kuration.rollouts.reader.RolloutZarrStoreReader`, which lineage and
packing read through) and validation (:mod:`kuration.rollouts.validation`, which must not
stop at the first problem, so it cannot use the strict reader) both open a store here, and
turn what zarr raises on hostile metadata into :class:`RolloutStoreError` the same way.

What it does not do: judge what it opened. Whether the root attrs and array metadata fit the
schema is :func:`kuration.rollouts.schema.root_attr_problems` and
:func:`~kuration.rollouts.schema.array_problems`; the reader raises the first problem and
validation reports all of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import zarr

from kuration.errors import RolloutStoreError, shown

#: What a direct write or a damaged store is fixed by.
REWRITE_HINT = "rewrite the store with write_rollout_store_atomically"


def zarr_errors() -> tuple[type[BaseException], ...]:
    """What zarr raises on a malformed or missing node: its own errors, JSON and value errors
    from metadata parsing, KeyError/OSError from the store, TypeError from wrong-shaped JSON,
    RuntimeError from a codec fed corrupt bytes (numcodecs' "Zstd decompression error")."""
    import zarr.errors

    return (zarr.errors.BaseZarrError, ValueError, TypeError, KeyError, OSError, AttributeError, IndexError,
            RuntimeError, RecursionError)


def open_store_group(directory: str | os.PathLike[str]) -> tuple[zarr.Group, Any]:
    """The store's root group, opened read-only, and its attrs as parsed (not yet checked).
    :class:`RolloutStoreError` naming ``directory`` when it is not a readable zarr v3 group."""
    try:
        root = zarr.open_group(os.fspath(directory), mode="r", zarr_format=3)
        return root, root.attrs.asdict()
    except zarr_errors() as exc:
        raise RolloutStoreError(f"{os.fspath(directory)}: not a readable zarr v3 group ({type(exc).__name__}: "
                                f"{shown(str(exc), 200)}); {REWRITE_HINT}") from None


def array_node(root: zarr.Group, path: str) -> Any | None:
    """The node at ``path`` below ``root`` (None when absent), its metadata parsed but not
    checked; :class:`RolloutStoreError` ``"<path>: unreadable metadata (...)"`` when zarr
    cannot parse it."""
    try:
        return root.get(path)
    except zarr_errors() as exc:
        raise RolloutStoreError(f"{path}: unreadable metadata ({type(exc).__name__}: {shown(str(exc), 200)})") \
            from None


def group_attrs(root: zarr.Group, group: str) -> dict[str, Any]:
    """The attrs of the table group ``group`` ({} when it is absent or an array);
    :class:`RolloutStoreError` ``"<group>/: group metadata unreadable (...)"``."""
    try:
        node = root.get(group)
        return dict(node.attrs.asdict()) if isinstance(node, zarr.Group) else {}
    except zarr_errors() as exc:
        raise RolloutStoreError(f"{group}/: group metadata unreadable ({type(exc).__name__}: "
                                f"{shown(str(exc), 200)})") from None


def chunk_files(array_dir: Path) -> int:
    """The files below an array's directory other than its ``zarr.json``: its chunk files."""
    return sum(len(files) for _, _, files in os.walk(array_dir)) - (array_dir / "zarr.json").is_file()


__all__ = ["REWRITE_HINT", "array_node", "chunk_files", "group_attrs", "open_store_group", "zarr_errors"]
