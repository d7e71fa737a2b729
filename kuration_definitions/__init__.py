"""The one Dagster code location: every asset package's ``Definitions``, merged.

``workspace.yaml`` points here. Resources come from ``KURATION_STORAGE_ROOT`` and
``KURATION_LANDING_ZONE`` (see :func:`kuration_resources.resources_from_env`).
"""

from dagster import Definitions

import kuration_assets
import rollout_assets
import splits_assets
from kuration_resources import resources_from_env


def build_definitions() -> Definitions:
    return Definitions.merge(
        splits_assets.defs,
        kuration_assets.defs,
        rollout_assets.defs,
        Definitions(resources=resources_from_env()),
    )


defs = build_definitions()

__all__ = ["build_definitions", "defs"]
