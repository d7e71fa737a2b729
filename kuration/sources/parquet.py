"""``ParquetTickAdapter``: one Parquet file per source, one row per (tick, entity).

Reads go through fsspec, so a local folder and ``s3://bucket/prefix`` work alike. Source
ids are file paths relative to the root, posix, sorted; hidden files and folders are
skipped. A vector field is a fixed-size list column (or a list column whose every row has
the declared size). Only the columns the schema declares are converted; others are
ignored whatever they hold. Media references are relative to ``media_root``, which
defaults to the root (a corpus may keep its frames beside the recordings folder and write
references relative to the corpus root; see :mod:`kuration.landing.curation_config`).

Identity: the object's version id or ETag when the filesystem reports one, else a sha256
of the file's bytes for local files (both strong), else a logical ``size:mtime`` token
(weak: nothing cached under it is reused). It covers the Parquet file only, not the media
files its references point at.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import fsspec
from fsspec.implementations.local import LocalFileSystem
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kuration import storage
from kuration.sources.media import MediaDependencies, get_media_provider
from kuration.sources.schema import Schema
from kuration.sources.protocol import SourceIdentity
from kuration.sources.ticks import SourceError, TickDataError, Ticks


class ParquetTickAdapter:
    def __init__(self, root_url: str | os.PathLike[str], schema: Schema, *, pattern: str = "*.parquet",
                 media_root: str | os.PathLike[str] | None = None) -> None:
        self.root_url = os.fspath(root_url)
        self.media_root = self.root_url if media_root is None else os.fspath(media_root)
        self.schema = schema
        self.pattern = pattern
        self._fs, self._root = fsspec.core.url_to_fs(self.root_url)

    def __repr__(self) -> str:
        if self.media_root == self.root_url:
            return f"ParquetTickAdapter({self.root_url!r})"
        return f"ParquetTickAdapter({self.root_url!r}, media_root={self.media_root!r})"

    def _path(self, source_id: str) -> str:
        return f"{self._root.rstrip('/')}/{source_id}"

    def list_sources(self) -> list[str]:
        if not self._fs.isdir(storage.fresh_path(self._fs, self._root)):
            raise SourceError(f"{self.root_url}: not a directory of recordings (expected one Parquet file per source)")
        # the lister the landing-zone sensor uses, so partitions and sources agree; on s3 a
        # glob of the top level would answer from a cached (possibly stale) listing
        return list(storage.list_files(self.root_url, pattern=self.pattern))

    def read_ticks(self, source_id: str) -> Ticks:
        path = self._path(source_id)
        wanted = _declared_columns(self.schema)
        try:
            # ParquetFile, not read_table: the latter goes through pyarrow.dataset, whose
            # first use imports pandas (150 ms in every fresh worker process). Only the
            # columns the schema declares are decoded; a local file is read natively.
            if isinstance(self._fs, LocalFileSystem):
                table = _read_declared(pq.ParquetFile(path), wanted)
            else:  # fresh: size and ETag from a stale cached listing would fail the read
                with self._fs.open(storage.fresh_path(self._fs, path), "rb") as handle:
                    table = _read_declared(pq.ParquetFile(handle), wanted)
        except FileNotFoundError:
            raise TickDataError(f"{source_id}: no such source under {self.root_url}") from None
        except (pa.ArrowInvalid, OSError) as exc:
            raise TickDataError(f"{source_id}: not a readable Parquet file ({exc})") from None
        raw: dict[str, object] = {}
        for name in table.column_names:
            if name not in wanted:  # undeclared columns are not read, whatever they hold
                continue
            column = table.column(name).combine_chunks()
            if _is_list(column.type) and name != self.schema.tags and not _is_list(column.type.value_type):
                raw[name] = _list_column(source_id, name, column, self.schema)
            elif (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                  or pa.types.is_boolean(column.type)):
                _no_nulls(source_id, name, column)
                raw[name] = column.to_numpy(zero_copy_only=False)
            elif name == self.schema.tags and _is_list(column.type):
                raw[name] = column  # Ticks reads the offsets, touching only tagged rows
            elif name == self.schema.entity and (pa.types.is_string(column.type)
                                                 or pa.types.is_large_string(column.type)
                                                or pa.types.is_integer(column.type)):
                raw[name] = pc.dictionary_encode(column)  # canonical forms once per distinct entity
            else:  # other strings, dictionaries, nested lists: row by row, Ticks checks each
                raw[name] = np.asarray(column.to_pylist() + [None], dtype=object)[:-1]
        return Ticks.from_columns(self.schema, source_id, raw)

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        spec = self.schema.media[column]
        return get_media_provider(spec.provider).decode(refs, spec, root=self.media_root, source_id=source_id)

    def identity(self, source_id: str) -> SourceIdentity:
        """The file's identity, combined with that of every media file its rows reference
        (a changed frame file must change the source's identity, or stale work is reused)."""
        path = self._path(source_id)
        own = _file_identity(self._fs, path, source_id, remote=storage.is_remote(self.root_url), root=self.root_url)
        dependencies = self._media_dependencies(source_id, path)
        if not dependencies:
            return own
        # media may live on another filesystem than the recordings (media_root is its own URL)
        parts = [own]
        for url in dependencies:
            fs, path = fsspec.core.url_to_fs(url)
            parts.append(_file_identity(fs, path, url, remote=storage.is_remote(url), root=self.media_root))
        if not all(p.strong for p in parts):
            return SourceIdentity("logical", " | ".join(p.token() for p in parts))
        digest = hashlib.sha256("\n".join([own.token(),
                                           *(f"{u}={p.token()}"
                                             for u, p in zip(dependencies, parts[1:], strict=True))]).encode())
        return SourceIdentity("fingerprint", digest.hexdigest())

    def _media_dependencies(self, source_id: str, path: str) -> list[str]:
        """Sorted URLs of the files this source's media references read, for providers that
        can say (``dependencies``); reads only the media columns."""
        providers: dict[str, MediaDependencies] = {}
        for name, spec in self.schema.media.items():
            provider = get_media_provider(spec.provider)
            if isinstance(provider, MediaDependencies):
                providers[name] = provider
        wanted = list(providers)
        if not wanted:
            return []
        try:
            with self._fs.open(storage.fresh_path(self._fs, path), "rb") as handle:
                present = set(pq.ParquetFile(handle).schema_arrow.names)
                # a missing media column is read_ticks' error to report, with its row and column
                wanted = [name for name in wanted if name in present]
                if not wanted:
                    return []
                handle.seek(0)
                table = pq.read_table(handle, columns=wanted)
        except (pa.ArrowInvalid, OSError) as exc:
            raise TickDataError(f"{source_id}: cannot read media columns {wanted} ({exc})") from None
        urls: set[str] = set()
        for name in wanted:
            refs = sorted({r for r in table.column(name).to_pylist() if r is not None})
            urls.update(providers[name].dependencies(refs, self.schema.media[name], root=self.media_root))
        return sorted(urls)


def _file_identity(fs: fsspec.AbstractFileSystem, path: str, name: str, *, remote: bool, root: str) -> SourceIdentity:
    try:
        # fresh: a cached listing's entry may predate a rewrite (a stale identity would
        # reuse stale cached work), and it lacks the VersionId a HEAD reports
        info = fs.info(storage.fresh_path(fs, path))
    except FileNotFoundError:
        raise TickDataError(f"{name}: no such file under {root}") from None
    for key, kind in (("VersionId", "version"), ("ETag", "etag"), ("etag", "etag")):
        if info.get(key):
            return SourceIdentity(kind, str(info[key]).strip('"'))
    if not remote:
        with fs.open(path, "rb") as handle:
            return SourceIdentity("content_sha256", storage.sha256_of_stream(handle)[1])
    stamp = info.get("mtime") or info.get("LastModified") or info.get("created")
    return SourceIdentity("logical", f"{name}:{info.get('size')}:{stamp}")


def _read_declared(file: pq.ParquetFile, wanted: set[str]) -> pa.Table:
    return file.read(columns=[name for name in file.schema_arrow.names if name in wanted])


def _declared_columns(schema: Schema) -> set[str]:
    names = {schema.time, *schema.all_fields(), *schema.media}
    return names | {n for n in (schema.entity, schema.tags) if n}


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)


def _no_nulls(source_id: str, name: str, column: pa.Array) -> None:
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise TickDataError(f"{source_id}: column {name!r}, row {row}: null value; every row needs a value")


def _list_column(source_id: str, name: str, column: pa.Array, schema: Schema) -> object:
    """A flat list column as ``(N, size)`` numpy, after checking nulls and per-row lengths."""
    spec = schema.all_fields().get(name)
    _no_nulls(source_id, name, column)
    values = column.flatten()
    if pa.types.is_fixed_size_list(column.type):
        lengths = np.full(len(column), column.type.list_size)
    else:
        lengths = np.asarray(column.value_lengths().to_numpy(zero_copy_only=False))
    if spec is not None and len(lengths):
        bad = np.flatnonzero(lengths != spec.size)
        if len(bad):
            r = int(bad[0])
            raise TickDataError(
                f"{source_id}: column {name!r}, row {r}: expected shape {list(spec.shape)} ({spec.size} values), got "
                f"{int(lengths[r])}"
            )
    if values.null_count:  # a null inside a vector would otherwise come back as NaN
        item = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        row = int(np.searchsorted(np.cumsum(lengths), item, side="right"))
        raise TickDataError(f"{source_id}: column {name!r}, row {row}: null element inside the list; every element "
                            "needs a value")
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_boolean(values.type)):
        return np.asarray(column.to_pylist() + [None], dtype=object)[:-1]  # Ticks names the bad row
    flat = values.to_numpy(zero_copy_only=False)
    if spec is None or not len(column):
        return flat.reshape((len(column), *(spec.shape if spec else (-1,))))
    return flat.reshape(len(column), spec.size)
