"""Media providers: decode lazy media references into arrays, in bounded batches.

A media column holds references (a path, a key, ``file#index``), never pixels. A provider,
registered by name, turns a batch of references into one ``(N, *shape)`` array of the
declared dtype. Registration by name is also how worker processes rebuild providers.

Built in: ``npy_index``, whose references are ``<path>.npy#<row>`` relative to the
adapter's root (local or fsspec URL); each file is read once per batch. Adapters over
episode stores register their own (``hdf5_rows``, ``zarr_rows``).

Contract every provider keeps: a ``None`` reference is an absent entity's slot (see
:mod:`kuration.tracks`) and decodes to zeros; anything else that cannot be decoded into
the declared dtype and shape raises :class:`MediaError` naming the source, the column and
the reference. Providers never resize, convert colour spaces or guess.
"""

from __future__ import annotations

import importlib
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
    """Decodes references. A provider whose references name files may also offer
    ``dependencies(refs, spec, *, root) -> list[str]`` (the URLs a batch would read), so an
    adapter can fold those files into the source's identity."""

    def decode(self, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray: ...


_PROVIDERS: dict[str, Callable[..., MediaProvider]] = {}


def register_media_provider(name: str, factory: Callable[..., MediaProvider]) -> None:
    """Register ``factory`` under ``name`` (what a schema's ``media.<col>.provider`` names)."""
    _PROVIDERS[name] = factory


#: Providers whose module registers them on import, imported on first use of the name.
_REGISTERED_ON_IMPORT = {"hdf5_rows": "kuration.sources.robomimic_hdf5", "zarr_rows": "kuration.sources.zarr_replay"}


def get_media_provider(name: str, **options) -> MediaProvider:
    if name not in _PROVIDERS and name in _REGISTERED_ON_IMPORT:
        importlib.import_module(_REGISTERED_ON_IMPORT[name])
    if name not in _PROVIDERS:
        raise MediaError(f"no media provider named {name!r}; registered: {sorted(_PROVIDERS)}. "
                         "Call kuration.media.register_media_provider first (in every worker process).")
    return _PROVIDERS[name](**options)


def group_row_refs(
    refs: Sequence[str | None], spec: MediaSpec, *, source_id: str, form: str
) -> tuple[np.ndarray, dict[str, list[tuple[int, int]]]]:
    """The zeroed output batch, and ``{path: [(batch position, row)]}`` for the references.

    ``None`` (an absent entity's slot) stays zero; it is masked by ``_present`` downstream.
    ``form`` describes the reference syntax for error messages."""
    out = np.zeros((len(refs), *spec.shape), dtype=spec.dtype)
    by_path: dict[str, list[tuple[int, int]]] = {}
    for i, ref in enumerate(refs):
        if ref is None:
            continue
        path, row = parse_row_ref(ref, spec, source_id, i, form)
        by_path.setdefault(path, []).append((i, row))
    return out, by_path


class NpyIndexProvider:
    """References ``frames/rec_01.npy#17``: row 17 of a ``.npy`` array under the root."""

    def dependencies(self, refs: Sequence[str], spec: MediaSpec, *, root: str) -> list[str]:
        paths = {str(ref).rpartition("#")[0] for ref in refs if ref is not None}
        return sorted(storage.join_url(root, *p.split("/")) for p in paths if p)

    def decode(self, refs: Sequence[str | None], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray:
        out, by_file = group_row_refs(refs, spec, source_id=source_id, form="'<file>.npy#<row>'")
        for path, wanted in by_file.items():
            url = storage.join_url(root, *path.split("/"))
            try:
                array = np.load(io.BytesIO(storage.read_bytes(url)), allow_pickle=False)
            except FileNotFoundError:
                raise MediaError(f"{source_id}: media {spec.name!r}: file {url} not found") from None
            except (ValueError, OSError) as exc:
                raise MediaError(f"{source_id}: media {spec.name!r}: {url} is not a readable .npy array ({exc})") from None
            fill_rows(out, array, wanted, spec, source_id, url)
        return out


def parse_row_ref(ref: object, spec: MediaSpec, source_id: str, index: int, form: str) -> tuple[str, int]:
    """Split ``<where>#<row>`` into ``(where, row)``, or raise naming the reference."""
    path, sep, row = str(ref).rpartition("#")
    if not isinstance(ref, str) or not sep or not path or not row.isdecimal():
        raise MediaError(f"{source_id}: media {spec.name!r}, reference {index}: {ref!r} is not {form}")
    return path, int(row)


def fill_rows(
    out: np.ndarray, array, wanted: list[tuple[int, int]], spec: MediaSpec, source_id: str, where: str
) -> None:
    """Copy ``array[row]`` into ``out[i]`` for each ``(i, row)``, checking shape, dtype and range.

    ``array`` is anything indexable with a sorted list of rows that has ``shape`` and
    ``dtype`` (a numpy, h5py or zarr array), so only the wanted rows are read."""
    if tuple(array.shape[1:]) != spec.shape:
        raise MediaError(
            f"{source_id}: media {spec.name!r}: {where} holds items of shape {list(array.shape[1:])}, "
            f"declared {list(spec.shape)}"
        )
    if not np.can_cast(array.dtype, out.dtype, casting="same_kind"):
        raise MediaError(f"{source_id}: media {spec.name!r}: {where} holds {array.dtype}, declared {spec.dtype}")
    for i, row in wanted:
        if row >= array.shape[0]:
            raise MediaError(
                f"{source_id}: media {spec.name!r}, reference {i}: row {row} out of range, {where} has {array.shape[0]} rows"
            )
    rows = sorted({row for _, row in wanted})
    if not rows:
        return
    if rows[-1] - rows[0] < 2 * len(rows):  # dense: one contiguous read
        block = np.asarray(array[rows[0]: rows[-1] + 1])
        offset = {row: row - rows[0] for row in rows}
    else:  # sparse: read only the wanted rows (increasing, as h5py requires)
        block = np.asarray(array[rows])
        offset = {row: k for k, row in enumerate(rows)}
    for i, row in wanted:
        out[i] = block[offset[row]]


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
