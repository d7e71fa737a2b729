"""Dagster resources: where curation reads recordings from and writes artifacts to.

Both take a local path or an fsspec URL (``s3://bucket/prefix`` with the ``[s3]`` extra).
They wrap :mod:`kuration.storage`; they hold no logic of their own.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional

from dagster import ConfigurableResource, InitResourceContext
from dagster_aws.s3 import S3Resource
from pydantic import Field

from kuration import storage
from kuration.landing.recordings import list_recordings as list_landing_recordings, universe_token
from kuration.landing.curation_config import CurationConfig, curation_config_from_dict, load_curation_config
from kuration.output.spec import OutputSpec
from kuration.landing.plugins import load_plugins
from kuration.landing.settings import CurationSettings, load_curation_settings, load_output_spec
from kuration.sources.parquet import ParquetTickAdapter

DEFAULT_STORAGE_ROOT = "kuration_data/storage"
DEFAULT_LANDING_ZONE = "kuration_data/landing"


class StorageRootResource(ConfigurableResource):
    """The root every artifact is written under (universe.parquet, splits/, datasets, ...).
    For an `s3://` root, `s3` (a dagster-aws `S3Resource`) gives the credentials and
    endpoint; for the run they are the defaults of every `s3://` URL it touches (the
    landing zone's too). Unset, they come from the environment (`AWS_*`,
    `FSSPEC_S3_ENDPOINT_URL`)."""

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
    """Where new recordings and the `universe.csv` describing them arrive."""

    url: str = Field(description="Local folder or fsspec URL of the landing zone")
    universe_csv: Optional[str] = Field(
        default="universe.csv",
        description="The universe file, relative to the landing zone; null to enumerate the folder instead",
    )
    source_pattern: Optional[str] = Field(
        default=None, description="Without a universe_csv: which files under the recordings root are samples (one "
                                  "each), e.g. *.parquet; null: the curation settings' source_pattern")
    one_file_per_row: bool = Field(
        default=False, description="Require a distinct materialized_path per universe row (one file per sample)"
    )

    def universe_csv_url(self) -> Optional[str]:
        return storage.join_url(self.url, self.universe_csv) if self.universe_csv else None

    def resolve(self, value: str) -> str:
        """``value`` as a URL: a URL or an absolute path as given, anything else relative to the landing zone."""
        return value if ("://" in value or value.startswith("/")) else storage.join_url(self.url, value)


class CurationResource(ConfigurableResource):
    """How recordings are read and scored: the schema, strategy and output spec files, and
    the curation settings of the landing zone's `curation.json`
    (`kuration.landing.curation_config`, with its `KURATION_*` environment overrides).
    A field left unset (null) takes its value from those settings, so runs launched by hand,
    by the sensor and by a schedule agree; a field set here wins, for this resource's runs."""

    schema_file: str = Field(default="schema.json", description="Schema file, relative to the landing zone, or a URL")
    strategy_file: str = Field(default="strategy.json",
                               description="Strategy file, relative to the landing zone, or a URL")
    recordings: Optional[str] = Field(
        default=None, description="The recordings root, relative to the landing zone; null: curation.json")
    media_root: Optional[str] = Field(
        default=None, description="Where media references resolve, relative to the landing zone; null: curation.json "
                                  "(whose default is the recordings root)")
    source_pattern: Optional[str] = Field(default=None, description="Which files are sources; null: curation.json")
    segment_window: Optional[float] = Field(default=None,
                                            description="Segment length (segment_unit); null: curation.json")
    segment_stride: Optional[float] = Field(
        default=None, description="Step between segment starts (segment_unit); null: curation.json")
    segment_unit: Optional[str] = Field(default=None, description="seconds | steps; null: curation.json")
    workers: Optional[int] = Field(default=None, description="Local worker processes for a multi-source run; "
                                                             "null: curation.json")
    write_workers: Optional[int] = Field(
        default=None, description="Worker processes that write and hash the dataset's shards (the dataset is "
                                  "byte-identical whatever the count); null: curation.json")
    output_spec_file: str = Field(
        default="output_spec.json",
        description="Output spec (what a shard holds), relative to the landing zone, or a URL")

    def config(self, landing: LandingZoneResource) -> CurationConfig:
        """The landing zone's curation settings with this resource's set fields over them.

        Their plugins are loaded too (once per process): a plugin added to ``curation.json``
        after the code location loaded is imported by the next run that reads the settings."""
        loaded = load_landing_plugins(landing.url)
        overrides = {name: getattr(self, name) for name in _CONFIG_FIELDS if getattr(self, name) is not None}
        if not overrides:
            return loaded
        config = curation_config_from_dict(overrides, where="the curation resource's config", base=loaded)
        return replace(config, origin=(*config.origin, "resource config"))

    def recordings_url(self, landing: LandingZoneResource) -> str:
        return self.config(landing).recordings_url(landing.url)

    def list_recordings(self, landing: LandingZoneResource) -> dict[str, str]:
        """``{source_id: change token}`` of the recordings the sources are: the one listing the
        sensor, the scoring partitions and the universe's token agree on."""
        config = self.config(landing)
        return list_landing_recordings(config.recordings_url(landing.url), pattern=config.source_pattern)

    def universe_token(self, landing: LandingZoneResource) -> Optional[str]:
        """The landing zone's ``kuration.landing.recordings.universe_token`` (its recordings are listed only
        without a csv)."""
        csv_url = landing.universe_csv_url()
        return universe_token(csv_url, () if csv_url else self.list_recordings(landing))

    def settings(self, landing: LandingZoneResource) -> CurationSettings:
        config = self.config(landing)
        return load_curation_settings(
            landing.resolve(self.schema_file), landing.resolve(self.strategy_file),
            window=config.segment_window, stride=config.segment_stride, unit=config.segment_unit,
        )

    def output_spec(self, landing: LandingZoneResource, settings: CurationSettings) -> OutputSpec:
        return load_output_spec(landing.resolve(self.output_spec_file), settings.schema)

    def adapter(self, landing: LandingZoneResource, settings: CurationSettings) -> ParquetTickAdapter:
        config = self.config(landing)
        return ParquetTickAdapter(config.recordings_url(landing.url), settings.schema, pattern=config.source_pattern,
                                  media_root=config.media_root_url(landing.url))


def load_landing_plugins(landing_url: str) -> CurationConfig:
    """The landing zone's curation settings, after importing every plugin they, the
    ``KURATION_PLUGINS`` variable and the installed entry points declare (raises
    :class:`kuration.landing.plugins.PluginError` naming the one that fails)."""
    config = load_curation_config(landing_url)
    load_plugins(config.plugins, declared_in=config.origin[0], environment=CODE_LOCATION_ENVIRONMENT)
    return config


#: The one asset group of the code location. The UI draws a lineage graph of several groups
#: as collapsed group boxes; with one group its first view shows every asset and edge. The
#: stages are the jobs (curate_splits ... build_rollouts), which select assets by name.
ASSET_GROUP = "curation"

#: What a missing plugin should be installed in, for the PluginError's message.
CODE_LOCATION_ENVIRONMENT = "the Dagster code location's environment (the Python that runs dagster)"

#: The resource fields that stand for a curation.json key of the same name.
_CONFIG_FIELDS = ("recordings", "media_root", "source_pattern", "segment_window", "segment_stride", "segment_unit",
                  "workers", "write_workers")


def resources_from_env() -> dict[str, ConfigurableResource]:
    """Resources configured by ``KURATION_STORAGE_ROOT`` and ``KURATION_LANDING_ZONE``.

    Relative defaults resolve against the working directory (the repo root when started
    by the scripts in ``scripts/``)."""
    return {
        "storage_root": StorageRootResource(url=os.environ.get("KURATION_STORAGE_ROOT", DEFAULT_STORAGE_ROOT)),
        "landing_zone": LandingZoneResource(url=os.environ.get("KURATION_LANDING_ZONE", DEFAULT_LANDING_ZONE)),
        "curation": CurationResource(),
    }


__all__ = ["ASSET_GROUP", "CODE_LOCATION_ENVIRONMENT", "CurationResource", "LandingZoneResource", "StorageRootResource",
           "load_landing_plugins", "resources_from_env", "s3_fsspec_options"]
