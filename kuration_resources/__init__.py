"""Dagster resources: the landing zone curation reads from, and the storage root it writes to.

Both take a local path or an fsspec URL (``s3://bucket/prefix`` with the ``[s3]`` extra). The
landing zone resource opens :class:`kuration.landing.LandingZone` once per run; the storage
root wraps :mod:`kuration.storage`. They hold no logic of their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol

from dagster import ConfigurableResource, InitResourceContext
from dagster_aws.s3 import S3Resource
from pydantic import Field

from kuration import storage
from kuration.landing.curation_config import CurationConfig, load_curation_config
from kuration.landing.plugins import load_plugins
from kuration.landing.zone import LandingLayout, LandingZone, open_landing_zone

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


class LandingOverrides(Protocol):
    """A Dagster ``Config`` whose set fields override the landing zone's curation settings
    (``budget_plan``'s amounts, ``resolved_splits``' rule, the dataset's ``write_workers``)."""

    def curation_overrides(self) -> Mapping[str, Any]:
        """The set fields, shaped like ``curation.json`` (unset ones left out)."""
        ...


class LandingZoneResource(ConfigurableResource):
    """The landing zone: where new recordings and the `universe.csv` describing them arrive,
    and the files that say how to curate them. `open()` reads them once per run
    (`kuration.landing.open_landing_zone`): `curation.json` with its `KURATION_*` overrides,
    the schema, strategy, output spec and quality policy, the plugins, every reference between
    them checked. A setting field left unset (null) takes its value from those settings, so runs
    launched by hand, by the sensor and by a schedule agree; a field set here wins, for this
    resource's runs. The run records the landing zone's fingerprint in its tag
    `kuration/landing_fingerprint`; a step that finds other settings fails rather than mix them."""

    url: str = Field(description="Local folder or fsspec URL of the landing zone")
    universe_csv: Optional[str] = Field(
        default="universe.csv",
        description="The universe file, relative to the landing zone; null to enumerate the recordings instead "
                    "(one sample per file matching source_pattern)",
    )
    one_file_per_row: bool = Field(
        default=False, description="Require a distinct materialized_path per universe row (one file per sample)"
    )
    schema_file: str = Field(default="schema.json", description="Schema file, relative to the landing zone, or a URL")
    strategy_file: str = Field(default="strategy.json",
                               description="Strategy file, relative to the landing zone, or a URL")
    output_spec_file: str = Field(
        default="output_spec.json",
        description="Output spec (what a shard holds), relative to the landing zone, or a URL")
    quality_file: str = Field(
        default="quality.json",
        description="The kur-check quality policy, relative to the landing zone, or a URL; optional")
    recordings: Optional[str] = Field(
        default=None, description="The recordings root, relative to the landing zone; null: curation.json")
    media_root: Optional[str] = Field(
        default=None, description="Where media references resolve, relative to the landing zone; null: curation.json "
                                  "(whose default is the recordings root)")
    source_pattern: Optional[str] = Field(
        default=None, description="Which files under the recordings root are recordings (and, without a "
                                  "universe_csv, samples), e.g. *.parquet; null: curation.json")
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

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._context = context

    def open(self, config: Optional[LandingOverrides] = None) -> LandingZone:
        """The landing zone, opened on the first call of the run and the same object after it;
        ``config`` (a run config whose set fields override settings) applies on top, without
        reading anything again."""
        zone = getattr(self, "_zone", None)
        if zone is None:
            zone = open_landing_zone(self.url, layout=self.layout(), plugin_environment=CODE_LOCATION_ENVIRONMENT)
            zone = _pin_to_run(zone.with_overrides("resource config", self.curation_overrides()),
                               getattr(self, "_context", None))
            self._zone = zone
        return zone if config is None else zone.with_overrides("run config", config.curation_overrides())

    def universe_csv_url(self) -> Optional[str]:
        """Where the universe file is (None: the recordings are the universe), without opening anything."""
        return self.layout().universe_csv_url(self.url)

    def layout(self) -> LandingLayout:
        return LandingLayout(schema=self.schema_file, strategy=self.strategy_file, output_spec=self.output_spec_file,
                             quality=self.quality_file, universe_csv=self.universe_csv,
                             one_file_per_row=self.one_file_per_row)

    def curation_overrides(self) -> dict[str, Any]:
        return set_fields(self, _CONFIG_FIELDS)


def set_fields(config: Any, names: Sequence[str]) -> dict[str, Any]:
    """``{name: value}`` of the fields of ``config`` among ``names`` that are set (not None)."""
    return {name: getattr(config, name) for name in names if getattr(config, name) is not None}


#: A run's tag holding the fingerprint of the landing zone its first step opened.
LANDING_FINGERPRINT_TAG = "kuration/landing_fingerprint"


def _pin_to_run(zone: LandingZone, context: Optional[InitResourceContext]) -> LandingZone:
    """``zone``, recorded as the run's landing zone (its fingerprint in the run's tags) when it
    is the first open of the run, or checked against the one recorded (a step in another
    process, a run that ``kuration run`` pinned): :class:`LandingZoneChangedError` when the
    files changed in between. Outside a run (a sensor tick), ``zone`` as it is."""
    if context is None or context.instance is None or context.run is None:
        return zone
    instance, run = context.instance, context.run
    current = instance.get_run_by_id(run.run_id)
    pinned = current.tags.get(LANDING_FINGERPRINT_TAG) if current is not None else None
    if pinned is None:
        instance.add_run_tags(run.run_id, {LANDING_FINGERPRINT_TAG: zone.fingerprint})
        # two steps in two processes may open at once: the tag holds one of them, the other fails below
        current = instance.get_run_by_id(run.run_id)
        pinned = current.tags.get(LANDING_FINGERPRINT_TAG, zone.fingerprint) if current else zone.fingerprint
        if context.log is not None:
            context.log.info(zone.describe())
    return zone.require_fingerprint(pinned, pinned_by=f"run {run.run_id}")


def load_landing_plugins(landing_url: str) -> CurationConfig:
    """The landing zone's curation settings, after importing every plugin they, the
    ``KURATION_PLUGINS`` variable and the installed entry points declare (raises
    :class:`kuration.landing.plugins.PluginError` naming the one that fails). What the code
    location does when it loads; a run opens the whole landing zone (``LandingZoneResource.open``)."""
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
    }


__all__ = ["ASSET_GROUP", "CODE_LOCATION_ENVIRONMENT", "LANDING_FINGERPRINT_TAG", "LandingOverrides",
           "LandingZoneResource", "StorageRootResource", "load_landing_plugins", "resources_from_env",
           "s3_fsspec_options", "set_fields"]
