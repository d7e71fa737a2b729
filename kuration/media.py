"""Media providers: decode lazy media references into arrays, in bounded batches.

A media column holds references (a path, a key, ``file#index``), never pixels. A provider,
registered by name, turns a batch of references into one ``(N, *shape)`` array of the
declared dtype. Registration by name is also how worker processes rebuild providers.

Built in: ``npy_index``, whose references are ``<path>.npy#<row>`` relative to the
adapter's root (local or fsspec URL); each file is read once per batch.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from kuration import storage
from kuration.errors import KurationError
from kuration.schema import MediaSpec


class MediaError(KurationError, ValueError):
    """A media reference cannot be decoded into its declared dtype and shape."""


class MediaProvider(Protocol):
    def decode(self, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray: ...


_PROVIDERS: dict[str, Callable[..., MediaProvider]] = {}


def register_media_provider(name: str, factory: Callable[..., MediaProvider]) -> None:
    """Register ``factory`` under ``name`` (what a schema's ``media.<col>.provider`` names)."""
    _PROVIDERS[name] = factory


def get_media_provider(name: str, **options) -> MediaProvider:
    if name not in _PROVIDERS:
        raise MediaError(f"no media provider named {name!r}; registered: {sorted(_PROVIDERS)}. "
                         "Call kuration.media.register_media_provider first (in every worker process).")
    return _PROVIDERS[name](**options)


class NpyIndexProvider:
    """References ``frames/rec_01.npy#17``: row 17 of a ``.npy`` array under the root."""

    def decode(self, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray:
        out = np.zeros((len(refs), *spec.shape), dtype=spec.dtype)
        by_file: dict[str, list[tuple[int, int]]] = {}
        for i, ref in enumerate(refs):
            path, sep, row = str(ref).rpartition("#")
            if not sep or not path or not row.isdecimal():
                raise MediaError(f"{source_id}: media {spec.name!r}, reference {i}: {ref!r} is not '<file>.npy#<row>'")
            by_file.setdefault(path, []).append((i, int(row)))
        for path, wanted in by_file.items():
            url = storage.join_url(root, *path.split("/"))
            try:
                array = np.load(io.BytesIO(storage.read_bytes(url)), allow_pickle=False)
            except FileNotFoundError:
                raise MediaError(f"{source_id}: media {spec.name!r}: file {url} not found") from None
            if array.shape[1:] != spec.shape:
                raise MediaError(
                    f"{source_id}: media {spec.name!r}: {url} holds items of shape {list(array.shape[1:])}, "
                    f"declared {list(spec.shape)}"
                )
            for i, row in wanted:
                if row >= len(array):
                    raise MediaError(f"{source_id}: media {spec.name!r}, reference {i}: row {row} beyond {len(array)} in {url}")
                out[i] = array[row]
        return out


register_media_provider("npy_index", NpyIndexProvider)


def decode_in_batches(
    provider: MediaProvider, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str, batch_size: int = 256
):
    """Yield ``(start, array)`` for consecutive batches of at most ``batch_size`` references,
    so memory stays bounded by one batch whatever the track length."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for start in range(0, len(refs), batch_size):
        yield start, provider.decode(refs[start: start + batch_size], spec, root=root, source_id=source_id)
