"""Source adapters: one protocol (:class:`SourceAdapter`), several storages."""

from kuration.sources.parquet import ParquetTickAdapter
from kuration.sources.protocol import STRONG_KINDS, SourceAdapter, SourceIdentity
from kuration.sources.ticks import TickDataError, Ticks

__all__ = ["STRONG_KINDS", "ParquetTickAdapter", "SourceAdapter", "SourceIdentity", "TickDataError", "Ticks"]
