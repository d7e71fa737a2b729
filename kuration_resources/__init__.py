"""Dagster resources: where curation reads recordings from and writes artifacts to.

Both take a local path or an fsspec URL (``s3://bucket/prefix`` with the ``[s3]`` extra).
They wrap :mod:`kuration.storage`; they hold no logic of their own.
"""

from __future__ import annotations

import os
from typing import Optional

from dagster import ConfigurableResource, InitResourceContext
from dagster_aws.s3 import S3Resource
from pydantic import Field

from kuration import storage
from kuration.output.spec import OutputSpec
from kuration.settings import CurationSettings, load_curation_settings, load_output_spec
from kuration.sources.parquet import ParquetTickAdapter

DEFAULT_STORAGE_ROOT = "kuration_data/storage"
DEFAULT_LANDING_ZONE = "kuration_data/landing"


class StorageRootResource(ConfigurableResource):
    """The root every artifact is written under (universe.parquet, splits/, datasets, ...).

    For an ``s3://`` root, ``s3`` (a dagster-aws ``S3Resource``) gives the credentials and
    endpoint; for the run they are the defaults of every ``s3://`` URL it touches (the
    landing zone's too). Unset, they come from the environment (``AWS_*``,
    ``FSSPEC_S3_ENDPOINT_URL``)."""

    url: str = Field(description="Local folder or fsspec URL, e.g. /data/kuration or s3://bucket/kuration")
    s3: Optional[S3Resource] = Field(
        default=None, description="dagster-aws S3Resource with the endpoint and credentials for s3:// URLs")

    def path(self, *parts: str) -> str:
        return storage.join_url(self.url, *parts)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._restore_s3 = storage.use_s3_options(s3_fsspec_options(self.s3)) if self.s3 is not None else None

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        restore = getattr(self, "_restore_s3", None)
        if restore is not None:
            restore()


def s3_fsspec_options(s3: S3Resource) -> dict:
    """The s3fs options an ``S3Resource`` stands for (only what it sets)."""
    client = {k: v for k, v in {"endpoint_url": s3.endpoint_url, "region_name": s3.region_name,
                                "verify": s3.verify}.items() if v is not None}
    if s3.use_ssl is False:
        client["use_ssl"] = False
    options: dict = {"client_kwargs": client} if client else {}
    if s3.aws_access_key_id:
        options.update(key=s3.aws_access_key_id, secret=s3.aws_secret_access_key)
    if s3.aws_session_token:
        options["token"] = s3.aws_session_token
    if s3.profile_name:
        options["profile"] = s3.profile_name
    if s3.use_unsigned_session:
        options["anon"] = True
    return options


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

    def resolve(self, value: str) -> str:
        """``value`` as a URL: a URL or an absolute path as given, anything else relative to the landing zone."""
        return value if ("://" in value or value.startswith("/")) else storage.join_url(self.url, value)


class CurationResource(ConfigurableResource):
    """How recordings are read and scored: the schema and strategy files, the segment
    window, and where in the landing zone the recordings live."""

    schema_file: str = Field(default="schema.json", description="Schema file, relative to the landing zone, or a URL")
    strategy_file: str = Field(default="strategy.json",
                               description="Strategy file, relative to the landing zone, or a URL")
    recordings: str = Field(default="recordings", description="Landing-zone folder with one Parquet file per source")
    source_pattern: str = Field(default="*.parquet", description="Which files in it are sources")
    segment_window: float = Field(default=10.0, description="Segment length (segment_unit)")
    segment_stride: float = Field(default=5.0, description="Step between segment starts (segment_unit)")
    segment_unit: str = Field(default="seconds", description="seconds | steps")
    workers: int = Field(default=1, description="Local worker processes for a multi-source run")
    output_spec_file: str = Field(
        default="output_spec.json",
        description="Output spec (what a shard holds), relative to the landing zone, or a URL")


    def recordings_url(self, landing: LandingZoneResource) -> str:
        return landing.resolve(self.recordings)

    def settings(self, landing: LandingZoneResource) -> CurationSettings:
        return load_curation_settings(
            landing.resolve(self.schema_file), landing.resolve(self.strategy_file),
            window=self.segment_window, stride=self.segment_stride, unit=self.segment_unit,
        )

    def output_spec(self, landing: LandingZoneResource, settings: CurationSettings) -> OutputSpec:
        return load_output_spec(landing.resolve(self.output_spec_file), settings.schema)

    def adapter(self, landing: LandingZoneResource, settings: CurationSettings) -> ParquetTickAdapter:
        return ParquetTickAdapter(self.recordings_url(landing), settings.schema, pattern=self.source_pattern)


def resources_from_env() -> dict[str, ConfigurableResource]:
    """Resources configured by ``KURATION_STORAGE_ROOT`` and ``KURATION_LANDING_ZONE``.

    Relative defaults resolve against the working directory (the repo root when started
    by the scripts in ``scripts/``)."""
    return {
        "storage_root": StorageRootResource(url=os.environ.get("KURATION_STORAGE_ROOT", DEFAULT_STORAGE_ROOT)),
        "landing_zone": LandingZoneResource(url=os.environ.get("KURATION_LANDING_ZONE", DEFAULT_LANDING_ZONE)),
        "curation": CurationResource(),
    }


__all__ = ["CurationResource", "LandingZoneResource", "StorageRootResource", "resources_from_env", "s3_fsspec_options"]
