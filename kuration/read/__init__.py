"""The read side: committed datasets only, every shard verified before it is returned;
``load_committed(..., untrusted=True)`` for artifacts someone else wrote. :func:`iter_shards`
(with :func:`shard_entries` and :func:`read_shard_arrays`) turns a dataset back into numpy
arrays; :mod:`kuration.torch` wraps it for PyTorch."""

from kuration.read.committed import (
    CommittedDataset, DatasetIntegrityError, DatasetVerification, load_committed, read_shard, verify_dataset,
)
from kuration.read.isolated import IsolatedDecoderError
from kuration.read.loaders import LegacyManifest, ShardEntry, iter_shards, read_shard_arrays, shard_entries
from kuration.read.presence import ShardPresence, check_shard_presence

__all__ = ["CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "IsolatedDecoderError", "LegacyManifest",
           "ShardEntry", "ShardPresence", "check_shard_presence", "iter_shards", "load_committed", "read_shard",
           "read_shard_arrays", "shard_entries", "verify_dataset"]
