"""Dagster resources: where curation reads recordings from and writes artifacts to.

Both take a local path or an fsspec URL (``s3://bucket/prefix`` with the ``[s3]`` extra).
They wrap :mod:`kuration.storage`; they hold no logic of their own.
"""

from __future__ import annotations

import os
from typing import Optional

from dagster import ConfigurableResource
from pydantic import Field

from kuration import storage

DEFAULT_STORAGE_ROOT = "kuration_data/storage"
DEFAULT_LANDING_ZONE = "kuration_data/landing"


class StorageRootResource(ConfigurableResource):
    """The root every artifact is written under (universe.parquet, splits/, datasets, ...)."""

    url: str = Field(description="Local folder or fsspec URL, e.g. /data/kuration or s3://bucket/kuration")

    def path(self, *parts: str) -> str:
        return storage.join_url(self.url, *parts)


class LandingZoneResource(ConfigurableResource):
    """Where new recordings and the ``universe.csv`` describing them arrive."""

    url: str = Field(description="Local folder or fsspec URL of the landing zone")
    universe_csv: Optional[str] = Field(
        default="universe.csv",
        description="The universe file, relative to the landing zone; null to enumerate the folder instead",
    )
    source_pattern: str = Field(
        default="*", description="Without a universe_csv: which files are sources (one sample each), e.g. *.parquet"
    )
    one_file_per_row: bool = Field(
        default=False, description="Require a distinct materialized_path per universe row (one file per sample)"
    )

    def universe_csv_url(self) -> Optional[str]:
        return storage.join_url(self.url, self.universe_csv) if self.universe_csv else None


def resources_from_env() -> dict[str, ConfigurableResource]:
    """Resources configured by ``KURATION_STORAGE_ROOT`` and ``KURATION_LANDING_ZONE``.

    Relative defaults resolve against the working directory (the repo root when started
    by the scripts in ``scripts/``)."""
    return {
        "storage_root": StorageRootResource(url=os.environ.get("KURATION_STORAGE_ROOT", DEFAULT_STORAGE_ROOT)),
        "landing_zone": LandingZoneResource(url=os.environ.get("KURATION_LANDING_ZONE", DEFAULT_LANDING_ZONE)),
    }


__all__ = ["LandingZoneResource", "StorageRootResource", "resources_from_env"]
