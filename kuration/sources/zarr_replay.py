"""``ZarrReplayAdapter``: the episodes of a diffusion_policy ``ReplayBuffer`` store as sources.

The layout (``diffusion_policy.common.replay_buffer.ReplayBuffer``)::

    <store>/
      data/<key>          (N_total, ...)  every episode's steps, concatenated
      meta/episode_ends   (E,) int        cumulative end index of each episode

Episode ``i`` is rows ``episode_ends[i-1]..episode_ends[i]-1`` (from 0 for the first).
Sources are ``episode_0000``, ``episode_0001``, ... (zero-padded to at least four digits,
wider when there are more episodes, so string order is episode order). Each episode is
one single-entity track.

Column mapping. A schema column ``name`` reads ``data/<columns[name]>`` when mapped, else
``data/<name>``. The time column is filled with the step index within the episode
(``0..len-1`` ticks, or seconds at ``sample_hz``) unless ``columns`` maps it. A media
column over a numeric array (camera images) is not read with the ticks: its references
are ``data/<key>#<row>`` (row in the whole array) and the ``zarr_rows`` provider reads
only the rows a batch asks for.

Identity is a per-episode fingerprint: sha256 over that episode's rows of every mapped
array (names, keys, dtypes and shapes included). It is strong; appending an episode or
rewriting another one leaves it unchanged. Computing it reads the episode once.

Stores open with ``zarr.open_group(url, mode="r")`` (zarr 3.1): both zarr format 2 (what
diffusion_policy writes) and format 3, local directories, ``*.zip`` files (``.zarr.zip``)
and fsspec URLs (``s3://``, ``memory://``; ``storage_options`` go to fsspec). Arrays
compressed with a codec zarr does not know (diffusion_policy's image codecs need
``imagecodecs`` registered first) fail with the codec named. This module never writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import zarr
import zarr.errors
from zarr.storage import ZipStore

from kuration import storage
from kuration.sources.media import get_media_provider, register_media_provider
from kuration.sources.schema import Schema
from kuration.sources import _episodic
from kuration.sources.protocol import SourceIdentity
from kuration.sources.ticks import SourceError, TickDataError, Ticks

#: Name under which :class:`ZarrRowsProvider` is registered.
ZARR_ROWS_PROVIDER = "zarr_rows"

_FINGERPRINT_TAG = "kuration.sources.zarr_replay/1"


@contextmanager
def open_zarr_group(url: str, storage_options: Mapping[str, Any] | None = None) -> Iterator[zarr.Group]:
    """Open a zarr group read-only (format 2 or 3) from a path, a ``.zip`` file or a URL;
    a zip file is closed again on exit.

    Raises :class:`SourceError` naming the store when there is no group there."""
    zip_store = None
    try:
        if not storage.is_remote(url):
            path = storage.local_path(url)
            if path.suffix == ".zip":
                if not path.is_file():
                    raise FileNotFoundError(str(path))
                zip_store = ZipStore(path, mode="r")
                group = zarr.open_group(store=zip_store, mode="r")
            else:
                group = zarr.open_group(str(path), mode="r")
        else:
            group = zarr.open_group(url, mode="r", storage_options=dict(storage_options or {}) or None)
    except (FileNotFoundError, KeyError, zarr.errors.BaseZarrError) as exc:
        if zip_store is not None:
            zip_store.close()
        raise SourceError(f"{url}: no zarr group here ({exc})") from None
    try:
        yield group
    finally:
        if zip_store is not None:
            zip_store.close()


class ZarrReplayAdapter:
    """Episodes of a diffusion_policy replay-buffer Zarr store, one single-entity source each.

    ``columns`` maps schema column names to keys under ``data/`` (default: the same name)."""

    def __init__(
        self,
        url: str | os.PathLike[str],
        schema: Schema,
        *,
        columns: Mapping[str, str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = os.fspath(url)
        self.schema = schema
        self.columns = _episodic.check_schema(schema, "ZarrReplayAdapter", columns or {})
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        return f"ZarrReplayAdapter({self.url!r})"

    def _open(self):
        return open_zarr_group(self.url, self.storage_options)

    def _episode_ends(self, root: zarr.Group) -> np.ndarray:
        node = root.get("meta/episode_ends")
        if not isinstance(node, zarr.Array):
            raise SourceError(
                f"{self.url}: no meta/episode_ends array; a diffusion_policy replay buffer holds data/<key> "
                "and meta/episode_ends (cumulative end index per episode)"
            )
        ends = np.asarray(node[...])
        if ends.ndim != 1 or ends.dtype.kind not in "iu":
            raise SourceError(f"{self.url}: meta/episode_ends must be a 1-D integer array, got {ends.dtype} "
                              f"{list(ends.shape)}")
        ends = ends.astype(np.int64)
        starts = np.concatenate([[0], ends[:-1]])
        bad = np.flatnonzero(ends < starts)
        if len(bad):
            r = int(bad[0])
            raise SourceError(
                f"{self.url}: meta/episode_ends, row {r}: end {int(ends[r])} is before the previous end "
                f"{int(starts[r])}; ends are cumulative and must never decrease"
            )
        return ends

    @staticmethod
    def _ids(count: int) -> list[str]:
        width = max(4, len(str(max(count - 1, 0))))
        return [f"episode_{i:0{width}d}" for i in range(count)]

    def list_sources(self) -> list[str]:
        with self._open() as root:
            return self._ids(len(self._episode_ends(root)))

    def _span(self, root: zarr.Group, source_id: str) -> tuple[int, int]:
        ends = self._episode_ends(root)
        ids = self._ids(len(ends))
        try:
            i = ids.index(source_id)
        except ValueError:
            raise TickDataError(
                f"{source_id}: no such source in {self.url}; sources are "
                f"{ids[:1] + ['...'] + ids[-1:] if len(ids) > 2 else ids} ({len(ids)} episodes)"
            ) from None
        return (int(ends[i - 1]) if i else 0), int(ends[i])

    def _array(self, root: zarr.Group, source_id: str, name: str, stop: int) -> tuple[str, zarr.Array]:
        key = self.columns.get(name, name)
        node = root.get(f"data/{key}")
        if not isinstance(node, zarr.Array):
            data = root.get("data")
            have = sorted(data.array_keys()) if isinstance(data, zarr.Group) else []
            how = "mapped by columns=" if name in self.columns else "default "
            raise TickDataError(
                f"{source_id}: missing column {name!r}: no array data/{key} in {self.url} ({how}data/{key}); "
                f"data/ has {have}. Map it with columns={{{name!r}: '<key>'}}."
            )
        if node.ndim == 0 or node.shape[0] < stop:
            length = node.shape[0] if node.ndim else 0
            raise TickDataError(
                f"{source_id}: column {name!r}, row {length}: data/{key} has {length} rows but meta/episode_ends "
                f"says this episode ends at row {stop}"
            )
        return f"data/{key}", node

    def read_ticks(self, source_id: str) -> Ticks:
        schema = self.schema
        raw: dict[str, Any] = {}
        with self._open() as root:
            start, stop = self._span(root, source_id)
            for name in _episodic.declared_columns(schema):
                if name == schema.time and name not in self.columns:
                    continue
                path, arr = self._array(root, source_id, name, stop)
                if name in schema.media and _episodic.is_numeric(arr.dtype):
                    raw[name] = _episodic.media_refs(
                        source_id, name, schema.media[name].provider, ZARR_ROWS_PROVIDER, path, start, stop, arr.dtype
                    )
                elif name in schema.media or name == schema.tags:
                    raw[name] = _episodic.as_strings(arr[start:stop])
                else:
                    raw[name] = np.asarray(arr[start:stop])
        if schema.time not in raw:
            raw[schema.time] = _episodic.synthesized_time(schema, stop - start)
        return Ticks.from_columns(schema, source_id, raw)

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        spec = self.schema.media[column]
        options = {"storage_options": self.storage_options} if spec.provider == ZARR_ROWS_PROVIDER else {}
        return get_media_provider(spec.provider, **options).decode(refs, spec, root=self.url, source_id=source_id)

    def identity(self, source_id: str) -> SourceIdentity:
        schema = self.schema
        digest = _episodic.Fingerprint(_FINGERPRINT_TAG)
        with self._open() as root:
            start, stop = self._span(root, source_id)
            digest.add_meta(steps=stop - start)
            for name in sorted(_episodic.declared_columns(schema)):
                if name == schema.time and name not in self.columns:
                    continue
                path, arr = self._array(root, source_id, name, stop)
                digest.add_array(name, path, arr, start, stop)
        return SourceIdentity("fingerprint", digest.hexdigest())


class ZarrRowsProvider(_episodic.ArrayRowsProvider):
    """References ``<array path>#<row>`` into the zarr group at ``root``; reads only the
    rows (and so the chunks) a batch names."""

    form, node, array_type = "'<array path>#<row>'", "array", zarr.Array

    def open(self, root: str):
        return open_zarr_group(root, self.storage_options)


register_media_provider(ZARR_ROWS_PROVIDER, ZarrRowsProvider)
