"""Check a landing zone before anything runs: :func:`check_landing_zone`.

A run on a landing zone that is wrong in one place (a typo in ``curation.json``, a plugin
that does not import, a column the schema declares but the recordings lack, media
references written against another folder, universe ids that name no recording) fails
late, or worse, succeeds with nothing in it. This check reads what a run would read, in
the order a run reads it, and reports every problem it finds as a :class:`LandingFinding`:

1. ``curation.json`` (``config``): valid, and where the effective settings come from;
2. the plugins it and the environment declare import (``plugins``);
3. ``schema.json``, ``strategy.json``, ``output_spec.json`` and ``quality.json`` (when there is
   one) load, and every reference between them holds (``settings``, with the codes of
   :mod:`kuration.landing.references`: the strategy and the output spec against the schema,
   the spec's segment features and media providers, the quality policy's modalities, the
   rollout recipe's modalities; and whether the rollout store is not configured);
4. the recordings root holds recordings (``recordings``);
5. a few recordings, spread over the sorted list, read as the schema declares
   (``sample``);
6. a few media references per media column of those recordings decode (``media``), with a
   hint at ``media_root`` when they resolve against another folder;
7. the universe (``universe.csv``, or the recordings themselves) reads, and its source ids
   name recordings (``universe``, through :func:`kuration.landing.universe_sources.check_universe_sources`).

A step that needs what an earlier step failed to give is skipped with an ``info`` finding
saying why. The work is bounded (``sample_limit`` recordings, ``media_refs`` references per
column), so it takes seconds on a large corpus; it proves the sampled parts, not every
recording. It does not score anything, so it cannot say whether the budget fits the
corpus. It never raises on what it reads: an error a step did not expect becomes an
``error`` finding naming the step (``<step>.crashed``).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuration import storage
from kuration.checks import count, first
from kuration.errors import InputError, KurationError, RecordingError, cut
from kuration.inspect.quality import QualityPolicy
from kuration.landing.curation_config import CURATION_FILE, CurationConfig, curation_config_url, load_curation_config
from kuration.landing.plugins import load_plugins
from kuration.landing.recordings import list_recordings
from kuration.landing.references import (
    LEVELS, LandingFiles, LandingFinding, Level, quality_references, rollout_plan, spec_references,
    strategy_references,
)
from kuration.landing.settings import declared, load_schema
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.scoring.segments import Segmenter, SegmenterError
from kuration.scoring.strategy import Strategy, StrategyError
from kuration.sources.media import MediaDependencies, get_media_provider
from kuration.sources.parquet import ParquetTickAdapter
from kuration.sources.schema import Schema, SchemaError
from kuration.sources.ticks import Ticks
from kuration.splits import read_landing_universe
from kuration.landing.universe_sources import check_universe_sources

#: The landing zone's settings files, as the landing zone resource names them by default.
SCHEMA_FILE = "schema.json"
STRATEGY_FILE = "strategy.json"
OUTPUT_SPEC_FILE = "output_spec.json"
QUALITY_FILE = "quality.json"
#: Recordings read by default (the first, the last and one between, in sorted order).
SAMPLE_LIMIT = 3
#: Media references decoded per media column of each sampled recording, by default.
MEDIA_REFS = 4


@dataclass(frozen=True)
class LandingReport:
    """Every finding of :func:`check_landing_zone` on ``landing_url``, in the order found;
    ``ok`` when none is an error (warnings and notes never fail it)."""

    landing_url: str
    findings: tuple[LandingFinding, ...] = field(default_factory=tuple)

    def of_level(self, level: Level) -> tuple[LandingFinding, ...]:
        return tuple(f for f in self.findings if f.level == level)

    @property
    def errors(self) -> tuple[LandingFinding, ...]:
        return self.of_level("error")

    @property
    def warnings(self) -> tuple[LandingFinding, ...]:
        return self.of_level("warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def summary(self) -> str:
        figures = (f"{count(len(self.errors), 'error')}, {count(len(self.warnings), 'warning')}, "
                   f"{count(len(self.of_level('info')), 'note')}")
        verdict = "ready to run" if self.ok else "fix the errors above before running"
        return f"landing zone {self.landing_url}: {figures}; {verdict}"

    def render(self) -> str:
        """Each finding on its own line, then the summary line."""
        return "\n".join([*(f.render() for f in self.findings), self.summary()])

    def to_dict(self) -> dict[str, Any]:
        return {"landing_url": self.landing_url, "ok": self.ok, "summary": self.summary(),
                "findings": [f.to_dict() for f in self.findings]}


class _Findings:
    """The findings gathered so far, and which steps failed (for the skips)."""

    def __init__(self) -> None:
        self.items: list[LandingFinding] = []
        self.failed: set[str] = set()

    def add(self, level: Level, code: str, message: str) -> None:
        self.items.append(LandingFinding(level, code, message))
        if level == "error":
            self.failed.add(code.partition(".")[0])

    def skip(self, step: str, why: str) -> None:
        self.add("info", f"{step}.skipped", f"not checked: {why}")

    def run(self, step: str, body: Callable[[], Any]) -> Any:
        """``body()``, or None with an ``<step>.crashed`` error when it raises something
        the step did not expect (a KeyboardInterrupt or SystemExit still propagates)."""
        try:
            return body()
        except Exception as exc:  # the one place an unexpected failure becomes a finding, naming its step
            self.add("error", f"{step}.crashed", f"the {step} step failed unexpectedly: {type(exc).__name__}: "
                                                 f"{cut(str(exc), 500)}. This is a bug in the check or in a "
                                                 "plugin; please report it with the landing zone's layout")
            return None


def check_landing_zone(landing_url: str | os.PathLike[str], *, config_url: str | None = None,
                       environ: Mapping[str, str] | None = None, universe_csv: str | None = "universe.csv",
                       sample_limit: int = SAMPLE_LIMIT, media_refs: int = MEDIA_REFS,
                       one_file_per_row: bool = False) -> LandingReport:
    """Check the landing zone at ``landing_url`` (a local path or an fsspec URL) as a run
    would read it; see the module docstring for the steps.

    ``config_url`` names the settings file instead of ``<landing>/curation.json`` (as
    ``KURATION_CONFIG`` does); ``environ`` (default ``os.environ``) supplies the
    ``KURATION_*`` overrides and ``KURATION_PLUGINS``. ``universe_csv`` is the universe
    file relative to the landing zone (``None``: the universe is the recordings, one sample
    per file). At most ``sample_limit`` recordings are read and ``media_refs`` references
    decoded per media column of each."""
    if sample_limit < 1 or media_refs < 1:
        raise ValueError(f"sample_limit and media_refs must be >= 1, got {sample_limit} and {media_refs}")
    landing = storage.join_url(os.fspath(landing_url))  # one spelling for every comparison below
    environ = os.environ if environ is None else environ
    found = _Findings()
    if not storage.exists(landing):
        found.add("error", "landing.missing", f"the landing zone {landing} does not exist; give the folder that "
                                              f"holds {CURATION_FILE}, schema.json, universe.csv and the recordings")
        return LandingReport(landing, tuple(found.items))

    config = found.run("config", lambda: _check_config(found, landing, config_url, environ))
    if config is None:
        for step in ("plugins", "settings", "recordings", "sample", "media"):
            found.skip(step, "the curation settings are invalid (config.invalid above)")
    else:
        found.run("plugins", lambda: _check_plugins(found, landing, config, config_url, environ))
    settings = None
    if config is not None:
        if "plugins" in found.failed:
            found.skip("settings", "a plugin failed to import, and the schema or strategy may name what it "
                                   "registers (a media provider, a feature)")
        else:
            settings = found.run("settings", lambda: _check_settings(found, landing, config))
    recordings = None
    if config is not None:
        recordings = found.run("recordings", lambda: _check_recordings(found, landing, config))
    schema = settings.schema if isinstance(settings, _Settings) else None
    ticks: list[Ticks] = []
    adapter = None
    if config is not None:
        if schema is None:
            for step in ("sample", "media"):
                found.skip(step, f"{SCHEMA_FILE} was not loaded (see settings above), so there is nothing to "
                                 "read the recordings against")
        elif not recordings:
            for step in ("sample", "media"):
                found.skip(step, "no recordings were found to read")
        else:
            adapter = ParquetTickAdapter(config.recordings_url(landing), schema, pattern=config.source_pattern,
                                         media_root=config.media_root_url(landing))
            sampled = _spread(sorted(recordings), sample_limit)
            ticks = found.run("sample", lambda: _check_sample(found, adapter, sampled)) or []
            if ticks:
                found.run("media", lambda: _check_media(found, landing, config, adapter, ticks, media_refs))
            else:
                found.skip("media", "no sampled recording could be read")
    found.run("universe", lambda: _check_universe(found, landing, config, recordings, universe_csv,
                                                  one_file_per_row))
    return LandingReport(landing, tuple(found.items))


# -- steps -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Settings:
    schema: Schema


def _check_config(found: _Findings, landing: str, config_url: str | None,
                  environ: Mapping[str, str]) -> CurationConfig | None:
    url = config_url or curation_config_url(landing, environ)
    named = bool(config_url or environ.get("KURATION_CONFIG", "").strip())
    if not named and not storage.exists(url):
        found.add("info", "config.defaults", f"no {CURATION_FILE} in the landing zone ({url}); using the default "
                                             "settings (recordings in 'recordings/', media references relative to "
                                             "it). Write one to change them")
    try:
        config = load_curation_config(landing, config_url=config_url, environ=environ)
    except KurationError as exc:
        found.add("error", "config.invalid", f"{exc}. Fix that file or variable: unknown keys and values of the "
                                             "wrong type are refused")
        return None
    found.add("info", "config.settings",
              f"settings from {config.describe()}: recordings {config.recordings_url(landing)} "
              f"(pattern {config.source_pattern!r}), media root {config.media_root_url(landing)}, segments "
              f"{config.segment_window:g}/{config.segment_stride:g} {config.segment_unit}, "
              f"{count(config.workers, 'worker')}")
    return config


def _check_plugins(found: _Findings, landing: str, config: CurationConfig, config_url: str | None,
                   environ: Mapping[str, str]) -> None:
    declared_in = config.origin[0] if config.origin[0] != "defaults" else (config_url or
                                                                          curation_config_url(landing, environ))
    try:
        loaded = load_plugins(config.plugins, declared_in=declared_in, environ=environ)
    except KurationError as exc:
        found.add("error", "plugins.failed", str(exc))
        return
    if not loaded:
        found.add("info", "plugins.none", f"no plugins declared ({CURATION_FILE} 'plugins', KURATION_PLUGINS or "
                                          "the 'kuration.landing.plugins' entry points)")
    for plugin in loaded:
        found.add("info", "plugins.loaded", f"plugin {plugin.module} imported (declared in {plugin.declared_in}; "
                                            f"{plugin.file or 'a namespace package'})")


def _check_settings(found: _Findings, landing: str, config: CurationConfig) -> _Settings | None:
    """The settings files, each alone and then each reference between them
    (:mod:`kuration.landing.references`, what opening the landing zone checks)."""
    files = LandingFiles(curation=config.origin[0] if config.origin[0] != "defaults" else CURATION_FILE,
                         **{key: storage.join_url(landing, name) for key, name in (
                             ("schema", SCHEMA_FILE), ("strategy", STRATEGY_FILE), ("output_spec", OUTPUT_SPEC_FILE),
                             ("quality", QUALITY_FILE))})
    try:
        schema = load_schema(files.schema)
    except SchemaError as exc:
        found.add("error", "settings.schema_invalid", f"{exc}. The schema says which columns a recording holds")
        found.skip("settings", f"{STRATEGY_FILE} and {OUTPUT_SPEC_FILE} are checked against the schema")
        return None
    found.add("info", "settings.schema", f"{files.schema}: {count(len(schema.fields), 'field')}, "
                                         f"{count(len(schema.media), 'media column')}, {schema.sample_hz:g} Hz")
    strategy = _parsed(found, "settings.strategy_invalid", files.strategy, "strategy", StrategyError,
                       Strategy.from_dict)
    if strategy is not None and _added(found, strategy_references(strategy, schema, files=files)):
        found.add("info", "settings.strategy", f"{files.strategy} loads against the schema")
    try:
        Segmenter(config.segment_window, config.segment_stride, unit=config.segment_unit, sample_hz=schema.sample_hz)
    except SegmenterError as exc:
        found.add("error", "settings.segmenter_invalid",
                  f"{exc}. Set segment_window, segment_stride and segment_unit in {CURATION_FILE} "
                  f"(now {config.segment_window:g}, {config.segment_stride:g}, {config.segment_unit!r})")
    spec = _parsed(found, "settings.output_spec_invalid", files.output_spec, "output spec", OutputSpecError,
                   OutputSpec.from_dict)
    if spec is not None and _added(found, spec_references(spec, schema, strategy, files=files)):
        found.add("info", "settings.output_spec", f"{files.output_spec} loads against the schema")
    if storage.exists(files.quality):
        policy = _parsed(found, "settings.quality_invalid", files.quality, "quality policy", InputError,
                         lambda data: QualityPolicy.from_dict(data, where="quality policy"))
        if policy is not None and spec is not None and _added(
                found, quality_references(policy.required_modalities, spec, files=files)):
            found.add("info", "settings.quality", f"{files.quality}: {count(len(policy.to_dict()), 'gate')}")
    if spec is not None:
        _added(found, rollout_plan(config.rollouts, spec, files=files)[1])
    return _Settings(schema)


def _parsed(found: _Findings, code: str, url: str, what: str, error: type[KurationError],
            build: Callable[[Any], Any]) -> Any:
    """The file at ``url`` read and built alone, or None with a ``code`` error naming it."""
    try:
        return declared(url, storage.read_json(url, what=what, error=error), error, build)
    except error as exc:
        found.add("error", code, str(exc))
        return None


def _added(found: _Findings, findings: Sequence[LandingFinding]) -> bool:
    """Add ``findings``; whether none was an error."""
    for finding in findings:
        found.add(finding.level, finding.code, finding.message)
    return not any(f.level == "error" for f in findings)


def _check_recordings(found: _Findings, landing: str, config: CurationConfig) -> dict[str, str] | None:
    root = config.recordings_url(landing)
    pattern = config.source_pattern
    try:
        present = storage.exists(root)
        recordings = list_recordings(root, pattern=pattern) if present else {}
    except (OSError, ValueError) as exc:
        found.add("error", "recordings.unreadable", f"cannot list the recordings root {root}: {exc}")
        return None
    if recordings:
        found.add("info", "recordings.found", f"{count(len(recordings), 'recording')} under {root} matching "
                                              f"{pattern!r}, e.g. {first(map(repr, sorted(recordings)), shown=2)}")
        return recordings
    problem = "does not exist" if not present else f"holds no file matching {pattern!r}"
    hint = _elsewhere(landing, root, pattern)
    found.add("error", "recordings.none", f"the recordings root {root} {problem}. It is the 'recordings' setting "
                                          f"of {CURATION_FILE} (now {config.recordings!r}), relative to the landing "
                                          f"zone; files are matched by 'source_pattern'{hint}")
    return None


def _elsewhere(landing: str, root: str, pattern: str) -> str:
    """A hint when files matching ``pattern`` sit elsewhere in the landing zone."""
    if _same(root, landing):
        return ""
    try:
        candidates = sorted(list_recordings(landing, pattern=pattern))
    except (OSError, ValueError):
        return ""
    if not candidates:
        return ""
    folder = posixpath.dirname(candidates[0]).split("/")[0] or "."
    return (f". The landing zone holds {count(len(candidates), 'file')} matching {pattern!r} (e.g. "
            f"{candidates[0]!r}): set \"recordings\": {folder!r} in {CURATION_FILE}")


def _check_sample(found: _Findings, adapter: ParquetTickAdapter, sampled: Sequence[str]) -> list[Ticks]:
    read = []
    for source_id in sampled:
        try:
            ticks = adapter.read_ticks(source_id)
        except RecordingError as exc:
            found.add("error", "sample.unreadable", f"recording {source_id!r} does not match {SCHEMA_FILE}: {exc}")
            continue
        read.append(ticks)
        found.add("info", "sample.read", f"recording {source_id!r} reads as the schema declares "
                                         f"({count(len(ticks), 'row')})")
    return read


def _check_media(found: _Findings, landing: str, config: CurationConfig, adapter: ParquetTickAdapter,
                 sampled: Sequence[Ticks], media_refs: int) -> None:
    schema = adapter.schema
    if not schema.media:
        found.add("info", "media.none", f"{SCHEMA_FILE} declares no media columns")
        return
    for ticks in sampled:
        for column, spec in schema.media.items():
            refs = _spread([str(r) for r in dict.fromkeys(ticks.media[column].tolist())], media_refs)
            if not refs:
                continue
            try:
                adapter.decode_media(column, refs, source_id=ticks.source_id)
            except RecordingError as exc:
                reference = getattr(exc, "reference", None)
                ref = refs[reference] if isinstance(reference, int) and 0 <= reference < len(refs) else refs[0]
                found.add("error", "media.unresolved",
                          f"recording {ticks.source_id!r}, media column {column!r}, reference {ref!r}: {exc}. "
                          f"References resolve against the media root {adapter.media_root} ('media_root' in "
                          f"{CURATION_FILE}, relative to the landing zone; default: the recordings root)"
                          f"{_media_root_hint(landing, config, adapter, spec, refs)}")
                continue
            found.add("info", "media.decoded", f"recording {ticks.source_id!r}, media column {column!r}: "
                                               f"{count(len(refs), 'reference')} decode as "
                                               f"{spec.dtype}{list(spec.shape)}")


def _media_root_hint(landing: str, config: CurationConfig, adapter: ParquetTickAdapter, spec: Any,
                     refs: Sequence[str]) -> str:
    """``. Hint: ...`` naming the ``media_root`` under which every file ``refs`` read
    exists, when the provider can say which files those are and one such folder is found."""
    try:
        provider = get_media_provider(spec.provider)
    except KurationError:
        return ""
    if not isinstance(provider, MediaDependencies):
        return ""
    recordings = config.recordings_url(landing)
    for candidate in dict.fromkeys([landing, storage.parent_url(recordings), recordings]):
        if _same(candidate, adapter.media_root):
            continue
        try:
            files = provider.dependencies(refs, spec, root=candidate)
            resolves = bool(files) and all(storage.exists(url) for url in files)
        except (KurationError, OSError, ValueError):
            continue
        if resolves:
            value = _relative_to(landing, candidate)
            return (f". Hint: the references resolve against {candidate}: set \"media_root\": {value!r} in "
                    f"{CURATION_FILE}")
    return ""


def _check_universe(found: _Findings, landing: str, config: CurationConfig | None,
                    recordings: Mapping[str, str] | None, universe_csv: str | None, one_file_per_row: bool) -> None:
    csv_url = storage.join_url(landing, *universe_csv.split("/")) if universe_csv else None
    if csv_url is None or not storage.exists(csv_url):
        absent = f"no {universe_csv} in the landing zone" if universe_csv else "no universe.csv named"
        found.add("info", "universe.enumerated", f"{absent}: the universe is enumerated from the recordings root "
                                                 "(one sample per recording)")
        return
    try:
        universe = read_landing_universe(landing, universe_csv=universe_csv, one_file_per_row=one_file_per_row)
    except KurationError as exc:
        found.add("error", "universe.invalid", f"{exc}")
        return
    if config is None or recordings is None:
        found.add("info", "universe.read", f"{csv_url}: {count(len(universe), 'sample')} from "
                                           f"{count(len(universe.source_names), 'source')}")
        found.skip("universe", "the recordings could not be listed, so the universe's source ids were not matched "
                               "against them")
        return
    result = check_universe_sources(universe.source_names, recordings, recordings_url=config.recordings_url(landing),
                                    pattern=config.source_pattern)
    for message in result.errors:
        found.add("error", "universe.unmatched_sources", message)
    for message in result.warnings:
        found.add("warning", "universe.unlisted_recordings", message)
    if result.ok:
        found.add("info", "universe.sources", f"{csv_url}: {count(len(universe), 'sample')}; {result.verdict}")


# -- helpers -----------------------------------------------------------------------------------

def _spread(items: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` of ``items``, evenly spread from the first to the last (a corpus
    whose folders differ shows it at its ends more often than in its first few files)."""
    if len(items) <= limit:
        return list(items)
    if limit == 1:
        return [items[0]]
    picks = np.linspace(0, len(items) - 1, limit).round().astype(int)
    return [items[i] for i in dict.fromkeys(picks.tolist())]


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _relative_to(landing: str, url: str) -> str:
    """``url`` as a ``media_root`` / ``recordings`` value: relative to the landing zone when
    under it (``.`` for the landing zone itself), else the URL as it is."""
    base = landing.rstrip("/")
    if _same(url, landing):
        return "."
    for sep in ("/", os.sep):
        if url.startswith(base + sep):
            return url[len(base) + 1:].replace(os.sep, "/")
    return url


__all__ = ["LEVELS", "MEDIA_REFS", "SAMPLE_LIMIT", "Level", "LandingFinding", "LandingReport", "check_landing_zone"]
