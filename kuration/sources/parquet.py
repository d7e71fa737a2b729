"""``ParquetTickAdapter``: one Parquet file per source, one row per (tick, entity).

Reads go through fsspec, so a local folder and ``s3://bucket/prefix`` work alike. Source
ids are file paths relative to the root, posix, sorted. A vector field is a fixed-size
list column (or a list column whose every row has the declared size).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kuration import storage
from kuration.errors import KurationError
from kuration.media import get_media_provider
from kuration.schema import Schema
from kuration.sources.protocol import SourceIdentity
from kuration.sources.ticks import TickDataError, Ticks


class ParquetTickAdapter:
    def __init__(self, root_url: str | os.PathLike[str], schema: Schema, *, pattern: str = "*.parquet") -> None:
        self.root_url = os.fspath(root_url)
        self.schema = schema
        self.pattern = pattern
        self._fs, self._root = fsspec.core.url_to_fs(self.root_url)

    def __repr__(self) -> str:
        return f"ParquetTickAdapter({self.root_url!r})"

    def _path(self, source_id: str) -> str:
        return f"{self._root.rstrip('/')}/{source_id}"

    def list_sources(self) -> list[str]:
        if not self._fs.isdir(self._root):
            raise KurationError(f"{self.root_url}: not a directory of recordings")
        root = self._root.rstrip("/")
        found = self._fs.glob(f"{root}/**/{self.pattern}") + self._fs.glob(f"{root}/{self.pattern}")
        ids = {p[len(root) + 1:] for p in (str(f).replace("\\", "/") for f in found) if p.startswith(root + "/")}
        return sorted(i for i in ids if not any(part.startswith(".") for part in i.split("/")))

    def read_ticks(self, source_id: str) -> Ticks:
        path = self._path(source_id)
        try:
            with self._fs.open(path, "rb") as handle:
                table = pq.read_table(handle)
        except FileNotFoundError:
            raise TickDataError(f"{source_id}: no such source under {self.root_url}") from None
        except (pa.ArrowInvalid, OSError) as exc:
            raise TickDataError(f"{source_id}: not a readable Parquet file ({exc})") from None
        raw: dict[str, object] = {}
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                raw[name] = _list_column(source_id, name, column, self.schema)
            elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_binary(column.type):
                raw[name] = np.asarray(column.to_pylist(), dtype=object)
            else:
                if column.null_count:
                    row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                    raise TickDataError(f"{source_id}: column {name!r}, row {row}: null value")
                raw[name] = column.to_numpy(zero_copy_only=False)
        return Ticks.from_columns(self.schema, source_id, raw)

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        spec = self.schema.media[column]
        return get_media_provider(spec.provider).decode(refs, spec, root=self.root_url, source_id=source_id)

    def identity(self, source_id: str) -> SourceIdentity:
        path = self._path(source_id)
        info = self._fs.info(path)
        for key, kind in (("VersionId", "version"), ("ETag", "etag"), ("etag", "etag")):
            if info.get(key):
                return SourceIdentity(kind, str(info[key]).strip('"'))
        if not storage.is_remote(self.root_url):
            digest = hashlib.sha256()
            with self._fs.open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            return SourceIdentity("content_sha256", digest.hexdigest())
        return SourceIdentity("logical", f"{source_id}:{info.get('size')}:{info.get('mtime') or info.get('LastModified')}")


def _list_column(source_id: str, name: str, column: pa.Array, schema: Schema) -> object:
    if name in (schema.tags,):
        return column.to_pylist()
    spec = schema.all_fields().get(name)
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise TickDataError(f"{source_id}: column {name!r}, row {row}: null value")
    lengths = np.asarray(column.value_lengths()) if not pa.types.is_fixed_size_list(column.type) else None
    if spec is not None and lengths is not None and len(lengths):
        bad = np.flatnonzero(lengths != spec.size)
        if len(bad):
            r = int(bad[0])
            raise TickDataError(
                f"{source_id}: column {name!r}, row {r}: expected shape {list(spec.shape)} ({spec.size} values), got {int(lengths[r])}"
            )
    flat = column.flatten().to_numpy(zero_copy_only=False)
    if not len(column):
        return flat.reshape((0, *(spec.shape if spec else (0,))))
    return flat.reshape(len(column), -1)
