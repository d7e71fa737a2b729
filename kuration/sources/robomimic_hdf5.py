"""``RobomimicHDF5Adapter``: the demos of one robomimic-layout HDF5 file as sources.

The layout (robomimic, MimicGen, LIBERO and others write it)::

    data/                      attrs: total, env_args (ignored here)
      demo_0/                  attrs: num_samples (optional)
        actions   (T, A)
        rewards   (T,)
        dones     (T,)
        obs/<key> (T, ...)     e.g. obs/robot0_eef_pos, obs/agentview_image
      demo_1/ ...
    mask/<filter_key>          optional: names of the demos in a subset ("train", "valid")

Sources are the demo group names, ``demo_N``, sorted by N (``demo_2`` before ``demo_10``).
Each demo is one single-entity track of ``T`` steps.

Column mapping. A schema column ``name`` reads the dataset ``columns[name]`` (a path
relative to the demo group) when given; otherwise ``name`` itself when the demo has it
(``actions``, ``rewards``, ``dones``), else ``<obs_group>/name`` (``obs/robot0_eef_pos``
for a field named ``robot0_eef_pos``). Schema names stay plain, so they can name output
modalities; the file's paths stay in the mapping.

Time. The schema's time column is filled by the adapter with the step index
(``0..T-1`` ticks, or ``k / sample_hz`` seconds) unless ``columns`` maps it to a dataset.
``T`` is the demo's ``num_samples`` attribute when present, else the length of the first
declared field; any dataset of another length is an error naming demo, column and row.

Media. A media column over an image dataset (``obs/agentview_image``) is not read with
the ticks: its references are ``data/demo_N/<path>#<row>`` and the ``hdf5_rows`` provider
reads only the rows a batch asks for. Declare ``provider: hdf5_rows`` for such columns.
A media column over a string dataset holds references for the provider the schema
names, relative to the folder that holds the HDF5 file.

Identity is a per-demo fingerprint: sha256 over the bytes of every dataset the schema
maps, for that demo only (see :mod:`kuration.sources._episodic`). It is strong, and
unchanged when other demos are appended or edited. Computing it reads the demo once.

Paths or fsspec URLs both work: a local file is opened by h5py directly, a URL through
``fsspec.open`` (h5py reads the file-like object; remote reads are ranged, not a
download). This module does not write robomimic files nor read ``env_args``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import fsspec
import h5py
import numpy as np

from kuration import storage
from kuration.sources.media import get_media_provider, register_media_provider
from kuration.sources.schema import Schema
from kuration.sources import _episodic
from kuration.sources.protocol import SourceIdentity
from kuration.sources.ticks import SourceError, TickDataError, Ticks

#: Name under which :class:`HDF5RowsProvider` is registered.
HDF5_ROWS_PROVIDER = "hdf5_rows"

_DEMO = re.compile(r"demo_(\d+)")
_FINGERPRINT_TAG = "kuration.sources.robomimic_hdf5/1"


@contextmanager
def open_hdf5(url: str, storage_options: Mapping[str, Any] | None = None) -> Iterator[h5py.File]:
    """Open an HDF5 file read-only from a local path or an fsspec URL.

    Raises :class:`SourceError` naming the file when it is missing or not HDF5."""
    if not storage.is_remote(url):
        path = storage.local_path(url)
        try:
            handle = h5py.File(path, "r")
        except FileNotFoundError:
            raise SourceError(f"{url}: no such HDF5 file") from None
        except OSError as exc:
            raise SourceError(f"{url}: not a readable HDF5 file ({exc})") from None
        with handle:
            yield handle
        return
    try:
        fobj = fsspec.open(url, "rb", **dict(storage_options or {})).open()
    except FileNotFoundError:
        raise SourceError(f"{url}: no such HDF5 file") from None
    try:
        try:
            handle = h5py.File(fobj, "r")
        except OSError as exc:
            raise SourceError(f"{url}: not a readable HDF5 file ({exc})") from None
        with handle:
            yield handle
    finally:
        fobj.close()


class RobomimicHDF5Adapter:
    """Demos ``data/demo_N`` of a robomimic HDF5 file, one single-entity source each.

    ``columns`` maps schema column names to dataset paths relative to a demo group; see the
    module docstring for the default rule. ``filter_key`` restricts the sources to the
    demos listed in ``mask/<filter_key>``. ``storage_options`` go to ``fsspec.open`` for
    URLs (e.g. S3 credentials or endpoint)."""

    def __init__(
        self,
        path_or_url: str | os.PathLike[str],
        schema: Schema,
        *,
        obs_group: str = "obs",
        columns: Mapping[str, str] | None = None,
        filter_key: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = os.fspath(path_or_url)
        self.schema = schema
        self.obs_group = obs_group.strip("/")
        self.columns = _episodic.check_schema(schema, "RobomimicHDF5Adapter", columns or {})
        self.filter_key = filter_key
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        return f"RobomimicHDF5Adapter({self.url!r})"

    def _open(self):
        return open_hdf5(self.url, self.storage_options)

    def list_sources(self) -> list[str]:
        with self._open() as f:
            return self._demo_names(f)

    def _demo_names(self, f: h5py.File) -> list[str]:
        data = f.get("data")
        if not isinstance(data, h5py.Group):
            raise SourceError(f"{self.url}: no 'data' group; a robomimic file holds data/demo_0, data/demo_1, ...")
        numbers = {k: int(m.group(1)) for k in data
                   if (m := _DEMO.fullmatch(k)) and data.get(k, getclass=True) is h5py.Group}
        names = list(numbers)
        if self.filter_key is not None:
            mask = f.get(f"mask/{self.filter_key}")
            if not isinstance(mask, h5py.Dataset):
                have = sorted(f["mask"]) if isinstance(f.get("mask"), h5py.Group) else []
                raise SourceError(f"{self.url}: no filter key mask/{self.filter_key}; the file has {have}")
            listed = _episodic.as_strings(mask[()])
            unknown = sorted(set(listed) - set(names))
            if unknown:
                raise SourceError(f"{self.url}: mask/{self.filter_key} lists demos not in data/: {unknown[:5]}")
            names = listed
        return sorted(set(names), key=numbers.__getitem__)

    def _demo(self, f: h5py.File, source_id: str) -> h5py.Group:
        names = self._demo_names(f)
        if source_id not in names:
            subset = f" in mask/{self.filter_key}" if self.filter_key is not None else ""
            raise TickDataError(
                f"{source_id}: no such source{subset} in {self.url}; sources are demo_N, "
                f"e.g. {names[:3]} ({len(names)} in all)"
            )
        return f["data"][source_id]

    def _dataset(self, demo: h5py.Group, source_id: str, name: str) -> tuple[str, h5py.Dataset]:
        """The dataset a schema column reads, as (path relative to the demo, dataset)."""
        if name in self.columns:
            candidates = [self.columns[name]]
        else:
            candidates = [name, f"{self.obs_group}/{name}"] if self.obs_group else [name]
        for path in candidates:
            node = demo.get(path)
            if isinstance(node, h5py.Dataset):
                return path, node
        obs = demo.get(self.obs_group)
        have = sorted(k for k in demo if isinstance(demo[k], h5py.Dataset))
        have += [f"{self.obs_group}/{k}" for k in sorted(obs)] if isinstance(obs, h5py.Group) else []
        how = "mapped by columns=" if name in self.columns else "looked up as "
        raise TickDataError(
            f"{source_id}: missing column {name!r}: no dataset {' or '.join(candidates)} in {demo.name} "
            f"({how}{candidates}); the demo has {have}. Map it with columns={{{name!r}: '<path>'}}."
        )

    def read_ticks(self, source_id: str) -> Ticks:
        schema = self.schema
        with self._open() as f:
            demo = self._demo(f, source_id)
            datasets = {
                name: self._dataset(demo, source_id, name)
                for name in _episodic.declared_columns(schema) if name != schema.time or name in self.columns
            }
            n = demo.attrs.get("num_samples")
            if n is None:
                n = datasets[next(iter(schema.fields))][1].shape[0]
            n = int(n)
            raw: dict[str, Any] = {}
            for name, (path, ds) in datasets.items():
                if name in schema.media and _episodic.is_numeric(ds.dtype):
                    provider = schema.media[name].provider
                    raw[name] = _episodic.media_refs(
                        source_id, name, provider, HDF5_ROWS_PROVIDER, f"{demo.name.lstrip('/')}/{path}", 0,
                        ds.shape[0], ds.dtype
                    )
                elif name in schema.media or name == schema.tags:
                    raw[name] = _episodic.as_strings(ds[()])
                else:
                    raw[name] = ds[()]
        if schema.time not in raw:
            raw[schema.time] = _episodic.synthesized_time(schema, n)
        return Ticks.from_columns(schema, source_id, raw)

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        spec = self.schema.media[column]
        if spec.provider == HDF5_ROWS_PROVIDER:
            provider = get_media_provider(spec.provider, storage_options=self.storage_options)
            return provider.decode(refs, spec, root=self.url, source_id=source_id)
        # references stored in the file for another provider are relative to the file's folder
        root = storage.parent_url(self.url)
        return get_media_provider(spec.provider).decode(refs, spec, root=root, source_id=source_id)

    def identity(self, source_id: str) -> SourceIdentity:
        schema = self.schema
        digest = _episodic.Fingerprint(_FINGERPRINT_TAG)
        with self._open() as f:
            demo = self._demo(f, source_id)
            n = demo.attrs.get("num_samples")
            digest.add_meta(num_samples=None if n is None else int(n))
            for name in sorted(_episodic.declared_columns(schema)):
                if name == schema.time and name not in self.columns:
                    continue
                path, ds = self._dataset(demo, source_id, name)
                digest.add_array(name, path, ds, 0, ds.shape[0])
        return SourceIdentity("fingerprint", digest.hexdigest())


class HDF5RowsProvider(_episodic.ArrayRowsProvider):
    """References ``<dataset path>#<row>`` into the HDF5 file at ``root``; reads only the
    rows a batch names (one open of the file per batch)."""

    form, node, array_type = "'<dataset path>#<row>'", "dataset", h5py.Dataset

    def open(self, root: str):
        return open_hdf5(root, self.storage_options)


register_media_provider(HDF5_ROWS_PROVIDER, HDF5RowsProvider)
