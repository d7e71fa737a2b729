"""A landing zone, opened once: :func:`open_landing_zone` returns one frozen :class:`LandingZone`.

Opening reads every settings file of the landing zone exactly once (``curation.json``,
``schema.json``, ``strategy.json``, ``output_spec.json`` and ``quality.json`` when there is
one), resolves the curation settings by the one precedence rule (defaults <
``curation.json`` < ``KURATION_*`` < explicit overrides:
:func:`kuration.landing.curation_config.resolve_curation_config`), imports the plugins,
builds the schema, strategy, segmenter, output spec, source adapter and quality policy, and
checks every reference between the files (:mod:`kuration.landing.references`). What it
returns carries a fingerprint of all of it, so two runs (or two steps of one run) can tell
whether they curated with the same settings.

Everything downstream starts from this object: the Dagster assets (through one resource),
``kuration run``, ``kuration check-landing`` and a notebook::

    zone = open_landing_zone("landing/")
    scored = zone.score()                       # every recording, with curation.json's workers
    plan = zone.plan(scored)                    # its split rule over universe.csv, its budget
    zone.write(plan, "out/dataset")             # verified shards, the commit record last

What this module does not do: read the recordings or ``universe.csv`` when opening (they are
data, listed and read on demand: :meth:`LandingZone.list_recordings`,
:meth:`LandingZone.universe`), or re-read a file after opening (:meth:`LandingZone.with_overrides`
re-resolves what was read).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kuration import storage
from kuration.canonical.hashing import canonical_digest
from kuration.errors import InputError
from kuration.inspect.quality import QualityPolicy, QualityResult, advisory_quality, advisory_quality_of
from kuration.landing.curation_config import (
    ENV_PREFIX, CurationConfig, CurationFile, curation_config_to_dict, read_curation_file, resolve_curation_config,
    resolve_in_landing,
)
from kuration.landing.plugins import LoadedPlugin, load_plugins
from kuration.landing.recordings import list_recordings, universe_token
from kuration.landing.references import LandingFiles, LandingFinding, RolloutPlan, landing_references
from kuration.landing.settings import CurationSettings, declared
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.scoring.segments import Segmenter, SegmenterError
from kuration.scoring.strategy import Strategy, StrategyError
from kuration.sources.parquet import ParquetTickAdapter
from kuration.sources.schema import Schema, SchemaError
from kuration.splits.artifacts import SplitRequest
from kuration.splits.universe import Universe
from kuration.splits.universe_csv import read_landing_universe

if TYPE_CHECKING:
    import pyarrow as pa

    from kuration.budget.options import BudgetOptions
    from kuration.budget.plan import BudgetPlan
    from kuration.output.write_dataset import DatasetWriteResult
    from kuration.scoring.score_sources import ScoringResult

#: What a missing plugin should be installed in, for the PluginError's message, by default.
THIS_ENVIRONMENT = "this Python environment"


class LandingZoneError(InputError):
    """The files of a landing zone do not fit together; the message lists every problem
    (``kuration check-landing`` prints each as a finding)."""


class LandingZoneChangedError(LandingZoneError):
    """A landing zone's settings changed while a run was using them: a step opened another
    version than the run's first one, and would have mixed the two."""


@dataclass(frozen=True)
class LandingLayout:
    """Which file of the landing zone holds what: names relative to it, or URLs.
    ``universe_csv`` None means the universe is the recordings themselves (one sample per
    file); ``one_file_per_row`` asks each universe row for its own file."""

    schema: str = "schema.json"
    strategy: str = "strategy.json"
    output_spec: str = "output_spec.json"
    quality: str = "quality.json"
    universe_csv: str | None = "universe.csv"
    one_file_per_row: bool = False

    def universe_csv_url(self, landing_url: str) -> str | None:
        """The universe file in the landing zone at ``landing_url``, or None (the recordings are the universe)."""
        return storage.join_url(landing_url, self.universe_csv) if self.universe_csv else None


@dataclass(frozen=True)
class _Read:
    """What opening read from storage, once; what :meth:`LandingZone.with_overrides` re-resolves."""

    curation: CurationFile | None
    schema: Any
    strategy: Any
    output_spec: Any
    quality: Any  # None: no quality policy file
    environ: tuple[tuple[str, str], ...]
    plugin_environment: str


@dataclass(frozen=True)
class LandingZone:
    """A landing zone's settings, loaded once and checked against each other; see the module
    docstring. ``findings`` holds what the reference checks noted without failing (warnings,
    the rollout store's status); ``fingerprint`` is a digest of every resolved setting, file
    and plugin (the same files with the same overrides give the same one)."""

    url: str
    layout: LandingLayout
    config: CurationConfig
    schema: Schema
    strategy: Strategy
    segmenter: Segmenter
    spec: OutputSpec
    adapter: ParquetTickAdapter
    quality_policy: QualityPolicy | None
    plugins: tuple[LoadedPlugin, ...]
    rollouts: RolloutPlan
    findings: tuple[LandingFinding, ...]
    fingerprint: str
    overrides: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    _read: _Read = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    # -- where things are ----------------------------------------------------------------------

    def resolve(self, value: str) -> str:
        """``value`` as a URL: a URL or an absolute path as given, anything else relative to the landing zone."""
        return resolve_in_landing(self.url, value)

    @property
    def recordings_url(self) -> str:
        return self.config.recordings_url(self.url)

    @property
    def media_root(self) -> str:
        """Where media references resolve: ``media_root`` in the landing zone, else the recordings root."""
        return self.config.media_root_url(self.url)

    @property
    def quality_url(self) -> str:
        return self.resolve(self.layout.quality)

    @property
    def universe_csv_url(self) -> str | None:
        return self.layout.universe_csv_url(self.url)

    @property
    def settings(self) -> CurationSettings:
        return CurationSettings(self.schema, self.strategy, self.segmenter)

    def describe(self) -> str:
        return f"landing zone {self.url}: settings from {self.config.describe()}; fingerprint {self.fingerprint[:12]}"

    # -- the data, read on demand --------------------------------------------------------------

    def list_recordings(self) -> dict[str, str]:
        """``{source_id: change token}`` of the recordings the sources are: the one listing the
        sensor, the scoring partitions and the universe's token agree on."""
        return list_recordings(self.recordings_url, pattern=self.config.source_pattern)

    def universe_token(self, recordings: Mapping[str, str] | None = None) -> str | None:
        """:func:`kuration.landing.recordings.universe_token` of this landing zone; the
        recordings (listed when not given) only count without a ``universe.csv``."""
        csv_url = self.universe_csv_url
        if csv_url is not None:
            return universe_token(csv_url, ())
        return universe_token(None, self.list_recordings() if recordings is None else recordings)

    def universe(self) -> Universe:
        """Every addressable sample: ``universe.csv``, or without one every recording (one sample each)."""
        if self.layout.universe_csv:
            return read_landing_universe(self.url, universe_csv=self.layout.universe_csv,
                                         one_file_per_row=self.layout.one_file_per_row)
        return read_landing_universe(self.recordings_url, universe_csv=None, source_pattern=self.config.source_pattern)

    # -- requests built from the settings ------------------------------------------------------

    def split_request(self, *, from_split_column: bool = False, ad_aware: bool = False, leakage: str = "error",
                      extend_baked: bool = False) -> SplitRequest:
        """The split the settings ask for (``split`` of ``curation.json``; a ``splits_json``
        resolves against the landing zone), or the universe's own split column."""
        rule = self.config.split
        source: dict[str, Any] = {"from_split_column": True} if from_split_column else {
            "strategy": rule.strategy, "splits_json": self.resolve(rule.splits_json) if rule.splits_json else None}
        return SplitRequest(**source, seed=rule.seed, val_ratio=rule.val_ratio, test_ratio=rule.test_ratio,
                            group_by=rule.group_by, ad_aware=ad_aware, leakage=leakage, extend_baked=extend_baked)

    def budget_options(self, *, span_steps: int | None = None, clip_aggregate: str | None = None,
                       seed: int = 0) -> BudgetOptions:
        """The hours budget the settings ask for, priced by the output spec's shard length."""
        return self.config.budget.options(self.spec.chunking, span_steps=span_steps, clip_aggregate=clip_aggregate,
                                          seed=seed)

    def quality_check(self, dataset: str | os.PathLike[str], *, policy_json: str | None = None,
                      policy_file: str | None = None) -> QualityResult:
        """The advisory quality verdict on ``dataset``: the landing zone's policy (read when
        opening), or ``policy_json`` / another ``policy_file`` when given."""
        if policy_json is None and (policy_file is None or self.resolve(policy_file) == self.quality_url):
            return advisory_quality_of(dataset, self.quality_policy, policy_url=self.quality_url)
        return advisory_quality(dataset, policy_json=policy_json,
                                policy_url=self.resolve(policy_file or self.layout.quality))

    # -- the same settings, from Python --------------------------------------------------------

    def score(self, **options: Any) -> ScoringResult:
        """Score every recording (:func:`kuration.scoring.score_sources`) with the settings'
        segmenter, strategy and ``workers``; ``options`` are ``score_sources``' others."""
        from kuration.scoring.score_sources import score_sources

        return score_sources(self.adapter, segmenter=self.segmenter, strategy=self.strategy,
                             **{"workers": self.config.workers, **options})

    def split_assignments(self) -> pa.Table:
        """The settings' split resolved over the universe in memory, leakage policy enforced
        (:func:`kuration.splits.artifacts.resolve_split_request`): one row per sample and stage."""
        from kuration.splits.artifacts import resolve_split_request

        return resolve_split_request(self.universe(), self.split_request()).stage_table()

    def plan(self, scored: ScoringResult, *, split_assignments: pa.Table | None = None) -> BudgetPlan:
        """The settings' budget filled from ``scored`` (:func:`kuration.budget.plan_budget`),
        each split from its own pool: ``split_assignments``, by default :meth:`split_assignments`."""
        from kuration.budget.plan import plan_budget

        assignments = self.split_assignments() if split_assignments is None else split_assignments
        return plan_budget(scored.segments, self.budget_options(), strategy=self.strategy,
                           split_assignments=assignments)

    def write(self, plan: BudgetPlan, out: str | os.PathLike[str], *, job: Mapping[str, Any] | None = None,
              **options: Any) -> DatasetWriteResult:
        """Write ``plan`` as a committed dataset at ``out``
        (:func:`kuration.output.write_dataset.write_planned_dataset`) with the settings'
        adapter, schema, output spec, ``write_workers`` and ``keep_versions`` (retention after
        the publish). ``options`` are the other
        :class:`~kuration.output.write_plan.WriteOptions` fields (``force=True``,
        ``resume=True``, ...), and a ``write_workers`` given here wins; ``job`` is merged into
        ``config.json``'s ``job``."""
        from kuration.output.write_dataset import write_planned_dataset
        from kuration.output.write_plan import WriteOptions

        chosen = WriteOptions(**{"write_workers": self.config.write_workers,
                                 "keep_versions": self.config.keep_versions, **options})
        return write_planned_dataset(out, plan, adapter=self.adapter, schema=self.schema, spec=self.spec, job=job,
                                     options=chosen)

    # -- versions ------------------------------------------------------------------------------

    def with_overrides(self, label: str, overrides: Mapping[str, Any] | None) -> LandingZone:
        """This landing zone with ``overrides`` (shaped like ``curation.json``) winning over
        its settings, by the same precedence rule; nothing is read again. ``label`` names them
        in errors and in ``config.origin``."""
        if not overrides:
            return self
        return _assemble(self.url, self.layout, self._read, (*self.overrides, (label, dict(overrides))))

    def require_fingerprint(self, expected: str, *, pinned_by: str) -> LandingZone:
        """This landing zone, if its fingerprint is ``expected``; else
        :class:`LandingZoneChangedError` saying that its files changed since ``pinned_by``
        (a run) opened them."""
        if self.fingerprint != expected:
            raise LandingZoneChangedError(
                f"the landing zone {self.url} changed while {pinned_by} was using it: it was opened with settings "
                f"fingerprint {expected[:12]}..., and now reads as {self.fingerprint[:12]}... (settings from "
                f"{self.config.describe()}). A step would mix the two versions, so it stops here. Launch a new run "
                "to curate with the files as they are now")
        return self


def open_landing_zone(url: str | os.PathLike[str], *, config: str | os.PathLike[str] | None = None,
                      overrides: Mapping[str, Any] | None = None, layout: LandingLayout | None = None,
                      environ: Mapping[str, str] | None = None,
                      plugin_environment: str = THIS_ENVIRONMENT) -> LandingZone:
    """Open the landing zone at ``url`` (a folder or an fsspec URL): read each settings file
    once, resolve the settings, load the plugins, check every reference between the files.

    ``config`` names the settings file instead of ``<url>/curation.json`` (as
    ``KURATION_CONFIG`` does); ``overrides`` (shaped like ``curation.json``) win over it and
    over the ``KURATION_*`` variables of ``environ`` (default ``os.environ``). ``layout``
    names the other files. ``plugin_environment`` says, in a missing plugin's message, where
    to install it. Raises a file's own error (``SchemaError``, ``StrategyError``, ...) naming
    it, :class:`~kuration.landing.curation_config.CurationConfigError`,
    :class:`~kuration.landing.plugins.PluginError`, or :class:`LandingZoneError` listing every
    reference that does not hold."""
    url = os.fspath(url)
    layout = layout or LandingLayout()
    environ = os.environ if environ is None else environ
    read = _Read(
        curation=read_curation_file(url, config_url=None if config is None else os.fspath(config), environ=environ),
        schema=_read_json(url, layout.schema, "schema", SchemaError),
        strategy=_read_json(url, layout.strategy, "strategy", StrategyError),
        output_spec=_read_json(url, layout.output_spec, "output spec", OutputSpecError),
        quality=_read_quality(resolve_in_landing(url, layout.quality)),
        environ=tuple(sorted((k, v) for k, v in environ.items() if k.startswith(ENV_PREFIX))),
        plugin_environment=plugin_environment,
    )
    return _assemble(url, layout, read, (("overrides", dict(overrides)),) if overrides else ())


def _read_json(url: str, name: str, what: str, error: type[InputError]) -> Any:
    return storage.read_json(resolve_in_landing(url, name), what=what, error=error)


def _read_quality(url: str) -> Any:
    """The quality policy file's JSON, or None when there is none (a policy is optional)."""
    from kuration.canonical.strict_json import parse_strict_json

    if not storage.exists(url):
        return None
    return parse_strict_json(storage.read_bytes(url), where=url, what="quality policy", error=InputError)


def _assemble(url: str, layout: LandingLayout, read: _Read,
              overrides: Sequence[tuple[str, Mapping[str, Any]]]) -> LandingZone:
    """The landing zone ``read`` describes, with ``overrides``: settings resolved, plugins
    loaded, each file built, every reference checked, fingerprinted."""
    environ = dict(read.environ)
    config = resolve_curation_config(read.curation, environ=environ, overrides=overrides)
    declared_in = read.curation.url if read.curation is not None else "curation.json"
    plugins = load_plugins(config.plugins, declared_in=declared_in, environ=environ,
                           environment=read.plugin_environment)
    files = LandingFiles(curation=declared_in, schema=resolve_in_landing(url, layout.schema),
                         strategy=resolve_in_landing(url, layout.strategy),
                         output_spec=resolve_in_landing(url, layout.output_spec),
                         quality=resolve_in_landing(url, layout.quality))
    schema = declared(files.schema, read.schema, SchemaError, Schema.from_dict)
    strategy = declared(files.strategy, read.strategy, StrategyError, Strategy.from_dict)
    spec = declared(files.output_spec, read.output_spec, OutputSpecError, OutputSpec.from_dict)
    quality = None if read.quality is None else QualityPolicy.from_dict(read.quality, where=files.quality)
    try:
        segmenter = Segmenter(config.segment_window, config.segment_stride, unit=config.segment_unit,
                              sample_hz=schema.sample_hz)
    except SegmenterError as exc:
        raise SegmenterError(f"{exc}. Set segment_window, segment_stride and segment_unit in the curation settings "
                             f"({config.describe()})") from None
    plan, findings = landing_references(schema, strategy, spec, rollouts=config.rollouts, files=files,
                                        required_modalities=quality.required_modalities if quality else None)
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise LandingZoneError(f"the files of the landing zone {url} do not fit together "
                               f"({len(errors)} problem{'s' if len(errors) > 1 else ''}; `kuration check-landing "
                               f"{url}` lists them with the rest):\n" + "\n".join(f"- {f.message}" for f in errors))
    adapter = ParquetTickAdapter(config.recordings_url(url), schema, pattern=config.source_pattern,
                                 media_root=config.media_root_url(url))
    fingerprint = canonical_digest({
        "landing": url, "layout": asdict(layout), "settings": curation_config_to_dict(config),
        "schema": schema.to_dict(), "strategy": read.strategy, "output_spec": spec.to_dict(),
        "quality": None if quality is None else quality.to_dict(), "plugins": [p.module for p in plugins],
    })
    return LandingZone(url, layout, config, schema, strategy, segmenter, spec, adapter, quality, plugins, plan,
                       tuple(findings), fingerprint, tuple(overrides), read)


__all__ = ["THIS_ENVIRONMENT", "LandingLayout", "LandingZone", "LandingZoneChangedError", "LandingZoneError",
           "open_landing_zone"]
