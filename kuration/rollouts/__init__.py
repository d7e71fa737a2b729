"""Rollout replay stores (seed 004): the curated train split as an offline-RL replay store.

Layout, names and the checks of what a store declares: :mod:`kuration.rollouts.schema`.
Input records: :mod:`kuration.rollouts.records`; records to tables:
:mod:`kuration.rollouts.normalize`; tables to zarr: :mod:`kuration.rollouts.writer`.
Reading: :mod:`kuration.rollouts.reader`, which lineage, packing and the typed projections
read through (:class:`StoreRows`); validation: :mod:`kuration.rollouts.validation`.
Generation from a committed dataset: :mod:`kuration.rollouts.generation`, with the built-in
recipe in :mod:`kuration.rollouts.demo_recipe`.
"""

from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.demo_recipe import MotionDirectionRecipe
from kuration.rollouts.generation import RolloutGeneration, RolloutRecipe, rollout_records_from_dataset
from kuration.rollouts.packing import pack_rollout_zarr_stores
from kuration.rollouts.promote import write_rollout_store_atomically
from kuration.rollouts.read_model import CandidateView, StepView
from kuration.rollouts.reader import RolloutZarrStoreReader
from kuration.rollouts.records import (
    CandidateShell,
    RolloutChainBatch,
    RolloutSourceRef,
    RolloutStepRecord,
    RolloutTargetRecord,
    RolloutWriteRecord,
)
from kuration.rollouts.schema import (
    DEFAULT_RETURN_SEMANTICS,
    INVALID_REASON_VERSION,
    Q_H_ARRAY_NAMES,
    Q_H_REWARD_METRIC,
    Q_H_TD_SEMANTICS,
    ROLLOUT_ZARR_SCHEMA_ID,
    ROLLOUT_ZARR_SCHEMA_VERSION,
)
from kuration.rollouts.store_rows import StoreRows
from kuration.rollouts.validation import RolloutZarrValidationResult, validate_rollout_zarr_store
from kuration.rollouts.writer import RolloutZarrWriteResult, write_rollout_zarr_store

__all__ = [
    "DEFAULT_RETURN_SEMANTICS", "INVALID_REASON_VERSION", "Q_H_ARRAY_NAMES", "Q_H_REWARD_METRIC", "Q_H_TD_SEMANTICS",
    "ROLLOUT_ZARR_SCHEMA_ID", "ROLLOUT_ZARR_SCHEMA_VERSION", "CandidateShell", "CandidateView", "MotionDirectionRecipe",
    "RolloutChainBatch", "RolloutGeneration", "RolloutRecipe", "RolloutSourceRef", "RolloutStepRecord",
    "RolloutTargetRecord", "RolloutWriteRecord", "RolloutZarrStoreConfig", "RolloutZarrStoreReader",
    "RolloutZarrValidationResult", "RolloutZarrWriteResult", "StepView", "StoreRows", "pack_rollout_zarr_stores",
    "rollout_records_from_dataset", "validate_rollout_zarr_store", "write_rollout_store_atomically",
    "write_rollout_zarr_store",
]
