"""The read side: committed datasets only, every shard verified before it is returned;
``load_committed(..., untrusted=True)`` for artifacts someone else wrote."""

from kuration.read.committed import (
    CommittedDataset, DatasetIntegrityError, DatasetVerification, load_committed, read_shard, verify_dataset,
)
from kuration.read.isolated import IsolatedDecoderError

__all__ = ["CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "IsolatedDecoderError", "load_committed",
           "read_shard", "verify_dataset"]
