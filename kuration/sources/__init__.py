"""Source adapters: one protocol (:class:`SourceAdapter`), several storages.

* :class:`ParquetTickAdapter` — the default: one Parquet file per source, one row per
  (tick, entity), local or any fsspec URL.
* :class:`RobomimicHDF5Adapter` — the demos of a robomimic-layout HDF5 file.
* :class:`ZarrReplayAdapter` — the episodes of a diffusion_policy replay-buffer Zarr store.

Importing this package also registers the episode stores' media providers
(``hdf5_rows``, ``zarr_rows``) next to :mod:`kuration.media`'s ``npy_index``.
"""

from kuration.sources.parquet import ParquetTickAdapter
from kuration.sources.protocol import STRONG_KINDS, SourceAdapter, SourceIdentity
from kuration.sources.robomimic_hdf5 import HDF5_ROWS_PROVIDER, HDF5RowsProvider, RobomimicHDF5Adapter
from kuration.sources.ticks import SourceError, TickDataError, Ticks
from kuration.sources.zarr_replay import ZARR_ROWS_PROVIDER, ZarrReplayAdapter, ZarrRowsProvider

__all__ = [
    "HDF5_ROWS_PROVIDER",
    "STRONG_KINDS",
    "ZARR_ROWS_PROVIDER",
    "HDF5RowsProvider",
    "ParquetTickAdapter",
    "RobomimicHDF5Adapter",
    "SourceAdapter",
    "SourceError",
    "SourceIdentity",
    "TickDataError",
    "Ticks",
    "ZarrReplayAdapter",
    "ZarrRowsProvider",
]
