"""Dagster assets for seed 004 (the Zarr rollout replay store).

Part of the single code location from the start; its ``rollout_store`` asset and checks
land with the rollout issue. Until then it contributes no definitions.
"""

from dagster import Definitions

defs = Definitions()

__all__ = ["defs"]
