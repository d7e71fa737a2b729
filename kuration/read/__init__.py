"""The read side: committed datasets only, every shard verified before it is returned."""

from kuration.read.committed import (
    CommittedDataset, DatasetIntegrityError, DatasetVerification, load_committed, read_shard, verify_dataset,
)

__all__ = ["CommittedDataset", "DatasetIntegrityError", "DatasetVerification", "load_committed", "read_shard",
           "verify_dataset"]
