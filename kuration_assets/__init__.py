"""Dagster assets for seed 000 (scoring, budget plan, shards, dataset manifest).

This package is part of the single code location from the start so the merge in
``kuration_definitions`` has its final shape; its assets land with the input-side,
budget and output issues. Until then it contributes no definitions.
"""

from dagster import Definitions

defs = Definitions()

__all__ = ["defs"]
