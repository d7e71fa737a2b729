"""Source adapters: one protocol (:class:`SourceAdapter`), several storages.

* :class:`ParquetTickAdapter` — the default: one Parquet file per source, one row per
  (tick, entity), local or any fsspec URL.
* :class:`RobomimicHDF5Adapter` — the demos of a robomimic-layout HDF5 file.
* :class:`ZarrReplayAdapter` — the episodes of a diffusion_policy replay-buffer Zarr store.
* :class:`CuratedDatasetAdapter` — a committed training dataset read back, one source per
  admitted span, so an artifact can be curated again.

The episode-store adapters import h5py and zarr, and the curated-dataset adapter the read
side, only when first used (every scoring worker process pays for what it imports); the
episode stores' media providers (``hdf5_rows``, ``zarr_rows``) register when their module
is imported, and :mod:`kuration.sources.media` imports it on first use of the name.
"""

from typing import TYPE_CHECKING

from kuration.lazy_exports import type_checking_exports

if TYPE_CHECKING:
    from kuration.sources.parquet import ParquetTickAdapter
    from kuration.sources.protocol import STRONG_KINDS, SourceAdapter, SourceIdentity
    from kuration.sources.ticks import SourceError, TickDataError, Ticks

# The curated-dataset adapter reads through kuration.read and kuration.output, which import
# this package: naming it above, even for type checkers, would close an import cycle. The
# episode-store adapters go with it (each import h5py or zarr).
_ABOVE = {
    "CuratedDatasetAdapter": "kuration.sources.curated",
    "CuratedSource": "kuration.sources.curated",
    "HDF5_ROWS_PROVIDER": "kuration.sources.robomimic_hdf5",
    "HDF5RowsProvider": "kuration.sources.robomimic_hdf5",
    "RobomimicHDF5Adapter": "kuration.sources.robomimic_hdf5",
    "ZARR_ROWS_PROVIDER": "kuration.sources.zarr_replay",
    "ZarrReplayAdapter": "kuration.sources.zarr_replay",
    "ZarrRowsProvider": "kuration.sources.zarr_replay",
}

__getattr__ = type_checking_exports(__name__, __file__, also=_ABOVE)

__all__ = [
    "CuratedDatasetAdapter",
    "CuratedSource",
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
