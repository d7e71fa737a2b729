"""PyTorch over the numpy reader: :class:`ShardDataset`, one shard per item, and
:func:`pad_collate` for batches of ragged shards. Needs the ``[torch]`` extra
(``pip install "kuration[torch]"``); ``import kuration`` never imports torch, only importing
this module does.

::

    from torch.utils.data import DataLoader
    from kuration.torch import ShardDataset, pad_collate

    ds = ShardDataset("out/", split="train")                 # modalities -> tensors
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=pad_collate)

:class:`ShardDataset` is map-style. Item ``i`` is the ``i``-th shard of the split in manifest
order (sorted by source, entity and span when written, so stable across runs and machines):
a dict of tensors, one per modality in its declared dtype and rank (``_present`` as
``torch.bool``), read by :func:`kuration.read.read_shard_arrays`, so everything
:func:`kuration.read.iter_shards` checks is checked here. Each shard's size and SHA-256 are
checked before it is decoded on its first read in a process, and again whenever its file
changes (``verify="once"``, the default here: :mod:`kuration.read.verified_once`), so later
epochs read at ``np.load`` speed; ``verify=True`` hashes every read, ``verify=False`` none.
``include_meta=True`` adds ``_meta``, the plain-dict manifest entry; ``transform`` gets the
item last and returns what the loader yields.

Workers. The dataset pickles without the manifest it loaded, and a forked worker drops the
one it inherited: each DataLoader worker loads the dataset again on its first item (no file
or socket is opened in ``__init__`` and kept; an object-store filesystem must not be used
across a fork), and refuses to go on if the manifest changed since the dataset was created
(another shard list, or another SHA-256 for one), so every worker reads the same items the
parent counted.

Batching. With ``short_policy="keep"`` shards differ in length, and the default collate
cannot stack them: pass ``collate_fn=pad_collate`` (or write with ``short_policy="pad"``, or
a shard length that divides every span). What this module does not do: shuffle, sample, or
split a shard into windows; a ``Sampler`` or ``transform`` does that.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from kuration.errors import InputError
from kuration.output.spec import PRESENT
from kuration.read.committed import CommittedDataset, DatasetIntegrityError
from kuration.read.verified_once import Verify, checked_verify
from kuration.read.loaders import (
    DatasetLike, Registry, ShardEntry, open_entries, read_shard_arrays, selected_modalities, shard_entries,
)

#: The key of the manifest entry in an item, with ``include_meta=True``.
META = "_meta"


def _fingerprint(entries: Sequence[ShardEntry]) -> str:
    """What every worker must find again: the shards, in order, and their recorded SHA-256s."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(f"{entry['path']}\0{entry['sha256']}\n".encode())
    return digest.hexdigest()


class ShardDataset(Dataset[Any]):
    """One item per shard of ``dataset`` (a directory or URL, the path of its manifest, a
    loaded dataset, or a legacy manifest dict with ``root=``), of ``split`` or all splits.
    ``modalities``, ``trim``, ``verify``, ``container``, ``registry`` and ``root`` mean what
    they mean for :func:`kuration.read.iter_shards`. A dataset root with versions is read at
    the version current when the ``ShardDataset`` is created, in every worker and epoch."""

    def __init__(self, dataset: DatasetLike, split: str | None = None,
                 transform: Callable[[dict[str, Any]], Any] | None = None, include_meta: bool = False, *,
                 modalities: Iterable[str] | None = None, trim: bool = True, verify: Verify = "once",
                 container: str | None = None, registry: Registry | None = None,
                 root: str | os.PathLike[str] | None = None) -> None:
        if transform is not None and not callable(transform):
            raise InputError(f"transform: must be callable (item -> anything), got {type(transform).__name__}")
        source, entries = open_entries(dataset, split=split, container=container, registry=registry, root=root)
        if isinstance(dataset, (str, os.PathLike)):
            # Pinned: a worker loads the version this was created on, even after a newer one is
            # published at the root (kuration.output.versions), so a training job never mixes two.
            dataset = source.reference if isinstance(source, CommittedDataset) else source.destination.url
        self._source: dict[str, Any] = {"dataset": dataset, "split": split, "container": container,
                                        "registry": registry, "root": root}
        # checked now, in the parent, not first in a worker
        self._modalities = selected_modalities(source.spec, modalities)
        self.transform, self.include_meta, self.trim = transform, include_meta, trim
        self.verify = checked_verify(verify)
        self._length = len(entries)
        self._fingerprint = _fingerprint(entries)
        self._entries: list[ShardEntry] | None = entries
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self._length

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_entries"] = None  # a worker loads the dataset itself, on its first item
        return state

    def _loaded(self) -> list[ShardEntry]:
        # A forked worker inherits the parent's entries, and with them its object-store
        # filesystem, which must not be used across a fork (s3fs's event loop): load again.
        if self._entries is None or self._pid != os.getpid():
            self._pid = os.getpid()
            entries = shard_entries(**self._source)
            if _fingerprint(entries) != self._fingerprint:
                raise DatasetIntegrityError(
                    f"{self._source['dataset']!s:.200}: the dataset changed since this ShardDataset was created (its "
                    "shard list or a shard's SHA-256 differs), so a worker would read other items than the parent "
                    "counted; create the ShardDataset again")
            self._entries = entries
        return self._entries

    def __getitem__(self, index: int) -> Any:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"ShardDataset index must be an integer, got {type(index).__name__}")
        if not -self._length <= index < self._length:
            raise IndexError(f"ShardDataset index {index} out of range for {self._length} shards")
        entry = self._loaded()[int(index)]
        arrays = read_shard_arrays(entry, verify=self.verify, trim=self.trim, modalities=self._modalities)
        item: dict[str, Any] = {name: torch.from_numpy(array) for name, array in arrays.items()}
        if self.include_meta:
            item[META] = entry.meta()
        return self.transform(item) if self.transform is not None else item

    def __repr__(self) -> str:
        return f"ShardDataset({self._source['dataset']!s:.200}, split={self._source['split']!r}, shards={self._length})"


def pad_collate(batch: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Items of different lengths (``short_policy="keep"``) as one batch: each tensor padded
    with zeros at the end of its first axis to the longest item's rows, then stacked to
    ``(batch, rows, *shape)``. ``_present`` is padded with ``False``, so it also marks the
    padding; without a presence mask, ``_lengths`` (int64, each item's rows) is added.
    ``_meta`` stays a list of dicts. Items must hold the same keys."""
    if not batch:
        raise InputError("pad_collate: an empty batch")
    keys = list(batch[0])
    for i, item in enumerate(batch):
        if list(item) != keys:
            raise InputError(f"pad_collate: item {i} holds {sorted(item)}, item 0 holds {sorted(keys)}")
    out: dict[str, Any] = {}
    lengths = None
    for key in keys:
        values = [item[key] for item in batch]
        if key == META:
            out[key] = values
            continue
        if not all(isinstance(v, torch.Tensor) and v.dim() >= 1 for v in values):
            raise InputError(f"pad_collate: {key!r} must be a tensor with a row axis in every item")
        rows = [len(v) for v in values]
        lengths = rows if lengths is None else lengths
        longest = max(rows)
        stacked = values[0].new_zeros((len(values), longest, *values[0].shape[1:]))
        for i, value in enumerate(values):
            stacked[i, : len(value)] = value
        out[key] = stacked
    if PRESENT not in out and lengths is not None:
        out["_lengths"] = torch.tensor(lengths, dtype=torch.int64)
    return out


__all__ = ["META", "ShardDataset", "pad_collate"]
