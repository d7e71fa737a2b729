"""``curation.json``: the curation settings that travel with the data.

A landing zone carries one ``curation.json`` beside its ``universe.csv``, ``schema.json``,
``strategy.json`` and ``output_spec.json``. Every run reads it (a run launched by hand, by
the sensor or by a schedule), so they all curate the same way; before this file, settings
set in code or in one run's config were lost on the next sensor-launched run. ::

    {
      "plugins": ["my_team.kuration_plugins"],
      "recordings": "recordings",          # the recordings root, relative to the landing zone ("." allowed)
      "media_root": ".",                    # where media references resolve; default: the recordings root
      "source_pattern": "*.parquet",
      "segment_window": 10, "segment_stride": 5, "segment_unit": "seconds",
      "workers": 2, "write_workers": 2,
      "keep_versions": 3,                   # dataset versions kept after a publish (gc: kuration.output.version_gc)
      "budget": {"train_hours": 4, "val_hours": 1, "test_hours": 0.5, "span_seconds": 60},
      "split": {"strategy": "stratified", "seed": 0, "val_ratio": 0.2, "test_ratio": 0.2, "group_by": "group"},
      "rollouts": {"enabled": true, "position": "pos", "battery": "battery",
                   "state_modalities": ["pos", "vel", "battery"], "payload_modality": "frame"}
    }

Every key is optional; a missing file means every default (:data:`DEFAULTS`). Unknown keys
and values of the wrong type are a :class:`CurationConfigError` naming the file and the key.

**Where relative references resolve** (one rule for every file):

- ``recordings`` and ``media_root`` resolve against the landing zone (a URL or an absolute
  path is taken as given);
- a universe ``source`` id is a path relative to the recordings root, the same id the
  recordings adapter lists;
- a media reference in a recording resolves against the media root, which defaults to the
  recordings root. A corpus that keeps ``frames/`` beside ``recordings/`` and writes its
  references relative to the corpus root sets ``"media_root": "."``.

**Environment overrides** win over the file, so one deployment can change a setting without
editing the data: ``KURATION_<KEY>`` for a top-level key (``KURATION_WORKERS=4``, ``KURATION_WRITE_WORKERS=2``,
``KURATION_RECORDINGS=.``, ``KURATION_KEEP_VERSIONS=5``), ``KURATION_BUDGET_<KEY>`` and ``KURATION_SPLIT_<KEY>`` for the
nested ones (``KURATION_BUDGET_TRAIN_HOURS=0.5``; ``none`` clears ``span_seconds``), and
``KURATION_ROLLOUTS_ENABLED=false``. ``KURATION_CONFIG`` names another settings file to read
instead of the landing zone's.
``KURATION_PLUGINS`` is read by :mod:`kuration.landing.plugins`, which adds its modules to
``plugins``. Explicit overrides (a Dagster resource or run config field that is set, or the
``overrides`` of :func:`kuration.landing.open_landing_zone`) win over both.

**One precedence rule**, in one function (:func:`resolve_curation_config`): the defaults,
then the file, then the ``KURATION_*`` variables, then each explicit override in order.
Everything that needs a setting gets it from there; nothing else reads the file to learn one
field. What this module does not do: load plugins, or read the other files of the landing zone
(:mod:`kuration.landing.zone` opens all of them together).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from kuration import storage
from kuration.errors import InputError, check_keys, shown

if TYPE_CHECKING:
    from kuration.budget.options import BudgetOptions, ShardChunking

#: The settings file's name in a landing zone.
CURATION_FILE = "curation.json"
#: Names another settings file to read instead of ``<landing zone>/curation.json``.
CONFIG_ENV = "KURATION_CONFIG"
ENV_PREFIX = "KURATION_"
SPLIT_STRATEGIES = ("stratified", "random")
GROUP_BY = ("group", "source")
SEGMENT_UNITS = ("seconds", "steps")
#: More local worker processes than any machine has cores is a typo, not a setting.
MAX_WORKERS = 4096
#: More versions than a root could hold in a lifetime of rebuilds is a typo, not a setting.
MAX_KEEP_VERSIONS = 100_000


class CurationConfigError(InputError):
    """``curation.json`` or a ``KURATION_*`` override is invalid; the message names the file
    or variable and the key."""


@dataclass(frozen=True)
class BudgetSettings:
    """How many hours each split is filled to, in spans of ``span_seconds`` (``None``: whole tracks)."""

    train_hours: float = 4.0
    val_hours: float = 1.0
    test_hours: float = 0.5
    span_seconds: float | None = 60.0

    def requested_hours(self) -> dict[str, float]:
        return {"train": self.train_hours, "val": self.val_hours, "test": self.test_hours}

    def options(self, chunking: ShardChunking | None, *, span_steps: int | None = None,
                clip_aggregate: str | None = None, seed: int = 0) -> BudgetOptions:
        """This budget as the plan's request, priced by ``chunking`` (the output spec's shard
        length and short policy); ``span_steps`` cuts spans by steps (leave ``span_seconds``
        None then: the two are exclusive, and :class:`~kuration.budget.BudgetOptions` says so)."""
        from kuration.budget.options import BudgetOptions

        return BudgetOptions(train_hours=self.train_hours, val_hours=self.val_hours, test_hours=self.test_hours,
                             span_seconds=self.span_seconds, span_steps=span_steps, clip_aggregate=clip_aggregate,
                             seed=seed, chunking=chunking)


@dataclass(frozen=True)
class SplitRule:
    """How the split is computed: a seeded ``stratified`` or ``random`` split of groups (or
    sources), or a rule / baked ``splits_json`` (relative to the landing zone)."""

    strategy: str | None = "stratified"
    seed: int = 0
    val_ratio: float = 0.2
    test_ratio: float = 0.2
    group_by: str = "group"
    splits_json: str | None = None


@dataclass(frozen=True)
class RolloutSettings:
    """Whether ``kuration run`` builds the rollout replay store, and which output modalities
    the built-in motion-direction recipe reads (:class:`kuration.rollouts.MotionDirectionRecipe`):
    a dataset whose modalities are named otherwise maps them here, or sets ``enabled`` false.

    ``CurationConfig.rollouts`` is ``None`` when no layer configures them (no ``rollouts`` in
    the file, no ``KURATION_ROLLOUTS_*``, no override): then the store is built with these
    defaults when the output spec has their modalities, and skipped as "not configured"
    otherwise (:func:`kuration.landing.references.rollout_plan`)."""

    enabled: bool = True
    position: str = "pos"
    battery: str | None = "battery"
    state_modalities: tuple[str, ...] = ("pos", "vel", "battery")
    payload_modality: str | None = "frame"
    site_half_extent_m: float = 160.0
    ground_level_m: float = 0.0


@dataclass(frozen=True)
class CurationConfig:
    plugins: tuple[str, ...] = ()
    recordings: str = "recordings"
    media_root: str | None = None
    source_pattern: str = "*.parquet"
    segment_window: float = 10.0
    segment_stride: float = 5.0
    segment_unit: str = "seconds"
    workers: int = 1
    #: Worker processes that write and hash the dataset's shards (``write_workers=`` of the
    #: dataset writer); the dataset is byte-identical whatever the count.
    write_workers: int = 1
    #: How many versions of the dataset root a publish keeps (the current one counts as one;
    #: pinned and newer ones are always kept): :mod:`kuration.output.version_gc`.
    keep_versions: int = 3
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    split: SplitRule = field(default_factory=SplitRule)
    #: ``None``: not configured by any layer (see :class:`RolloutSettings`).
    rollouts: RolloutSettings | None = None
    #: Where these settings came from: the file read (or "defaults"), then each override applied.
    origin: tuple[str, ...] = ("defaults",)

    def recordings_url(self, landing_url: str) -> str:
        return resolve_in_landing(landing_url, self.recordings)

    def media_root_url(self, landing_url: str) -> str:
        """Where media references resolve: ``media_root`` in the landing zone, else the recordings root."""
        return resolve_in_landing(landing_url, self.media_root) if self.media_root else self.recordings_url(landing_url)

    def describe(self) -> str:
        return " + ".join(self.origin)


DEFAULTS = CurationConfig()


def resolve_in_landing(landing_url: str, value: str) -> str:
    """``value`` as a URL: a URL or an absolute path as given, anything else relative to the
    landing zone (``.`` is the landing zone itself)."""
    if "://" in value or value.startswith("/"):
        return value
    parts = [part for part in value.replace("\\", "/").split("/") if part not in ("", ".")]
    return storage.join_url(landing_url, *parts) if parts else landing_url


# -- parsing -----------------------------------------------------------------------------------

def _number(where: str, key: str, value: Any, *, minimum: float, inclusive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CurationConfigError(f"{where}: {key} must be a finite number, got {shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # an int past the float range, from Python (a file's is refused by strict JSON)
        raise CurationConfigError(f"{where}: {key} must be a finite number, got {shown(value)}") from None
    if not math.isfinite(value):
        raise CurationConfigError(f"{where}: {key} must be a finite number, got {shown(value)}")
    if value < minimum or (not inclusive and value == minimum):
        relation = ">=" if inclusive else ">"
        raise CurationConfigError(f"{where}: {key} must be {relation} {minimum:g}, got {shown(value)}")
    return float(value)


def _integer(where: str, key: str, value: Any, *, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CurationConfigError(f"{where}: {key} must be an integer, got {shown(value)}")
    if not minimum <= value <= maximum:
        raise CurationConfigError(f"{where}: {key} must be between {minimum} and {maximum}, got {shown(value)}")
    return value


def _text(where: str, key: str, value: Any, *, choices: tuple[str, ...] | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CurationConfigError(f"{where}: {key} must be a non-empty string, got {shown(value)}")
    if choices is not None and value not in choices:
        raise CurationConfigError(f"{where}: {key} must be one of {list(choices)}, got {shown(value)}")
    return value


def _object(where: str, key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CurationConfigError(f"{where}: {key} must be a JSON object, got {shown(value)}")
    return value


def _budget(where: str, data: Mapping[str, Any], base: BudgetSettings) -> BudgetSettings:
    check_keys(data, [f.name for f in fields(BudgetSettings)], where=f"{where}: budget", error=CurationConfigError)
    values: dict[str, Any] = {}
    for key in ("train_hours", "val_hours", "test_hours"):
        if key in data:
            values[key] = _number(where, f"budget.{key}", data[key], minimum=0.0, inclusive=True)
    if "span_seconds" in data:
        span = data["span_seconds"]
        values["span_seconds"] = None if span is None else _number(where, "budget.span_seconds", span,
                                                                   minimum=0.0, inclusive=False)
    return replace(base, **values)


def _split(where: str, data: Mapping[str, Any], base: SplitRule) -> SplitRule:
    check_keys(data, [f.name for f in fields(SplitRule)], where=f"{where}: split", error=CurationConfigError)
    values: dict[str, Any] = {}
    if "strategy" in data:
        values["strategy"] = _text(where, "split.strategy", data["strategy"], choices=SPLIT_STRATEGIES)
    if "splits_json" in data:
        values["splits_json"] = None if data["splits_json"] is None else _text(where, "split.splits_json",
                                                                               data["splits_json"])
        if values["splits_json"] is not None and "strategy" not in data:
            values["strategy"] = None  # a rule file replaces the default computed split
    if "seed" in data:
        values["seed"] = _integer(where, "split.seed", data["seed"], minimum=0, maximum=2**63 - 1)
    for key in ("val_ratio", "test_ratio"):
        if key in data:
            values[key] = _number(where, f"split.{key}", data[key], minimum=0.0, inclusive=True)
            if values[key] >= 1.0:
                raise CurationConfigError(f"{where}: split.{key} must be < 1, got {data[key]!r}")
    if "group_by" in data:
        values["group_by"] = _text(where, "split.group_by", data["group_by"], choices=GROUP_BY)
    rule = replace(base, **values)
    if rule.val_ratio + rule.test_ratio >= 1.0:
        raise CurationConfigError(f"{where}: split.val_ratio + split.test_ratio must be < 1 (train gets the rest), "
                                  f"got {rule.val_ratio:g} + {rule.test_ratio:g}")
    if (rule.strategy is None) == (rule.splits_json is None):
        raise CurationConfigError(f"{where}: split needs exactly one of strategy or splits_json, got "
                                  f"strategy={rule.strategy!r}, splits_json={rule.splits_json!r}")
    return rule


def _rollouts(where: str, data: Mapping[str, Any], base: RolloutSettings) -> RolloutSettings:
    check_keys(data, [f.name for f in fields(RolloutSettings)], where=f"{where}: rollouts", error=CurationConfigError)
    values: dict[str, Any] = {}
    if "enabled" in data:
        if not isinstance(data["enabled"], bool):
            raise CurationConfigError(f"{where}: rollouts.enabled must be true or false, got {shown(data['enabled'])}")
        values["enabled"] = data["enabled"]
    if "position" in data:
        values["position"] = _text(where, "rollouts.position", data["position"])
    for key in ("battery", "payload_modality"):
        if key in data:
            values[key] = None if data[key] is None else _text(where, f"rollouts.{key}", data[key])
    if "state_modalities" in data:
        names = data["state_modalities"]
        if not isinstance(names, list) or not names:
            raise CurationConfigError(f"{where}: rollouts.state_modalities must be a non-empty list of modality "
                                      f"names, got {shown(names)}")
        values["state_modalities"] = tuple(_text(where, f"rollouts.state_modalities[{i}]", name)
                                           for i, name in enumerate(names))
    if "site_half_extent_m" in data:
        values["site_half_extent_m"] = _number(where, "rollouts.site_half_extent_m", data["site_half_extent_m"],
                                               minimum=0.0, inclusive=False)
    if "ground_level_m" in data:
        values["ground_level_m"] = _number(where, "rollouts.ground_level_m", data["ground_level_m"],
                                           minimum=-math.inf, inclusive=True)
    return replace(base, **values)


def curation_config_from_dict(data: Mapping[str, Any], *, where: str = CURATION_FILE,
                              base: CurationConfig = DEFAULTS) -> CurationConfig:
    """``base`` with the keys of ``data`` applied; every key is checked."""
    check_keys(data, [f.name for f in fields(CurationConfig) if f.name != "origin"], where=where,
               error=CurationConfigError)
    values: dict[str, Any] = {}
    if "plugins" in data:
        plugins = data["plugins"]
        if not isinstance(plugins, list):
            raise CurationConfigError(f"{where}: plugins must be a list of module names, got {shown(plugins)}")
        values["plugins"] = tuple(_text(where, f"plugins[{i}]", name) for i, name in enumerate(plugins))
    for key in ("recordings", "source_pattern"):
        if key in data:
            values[key] = _text(where, key, data[key])
    if "media_root" in data:
        values["media_root"] = None if data["media_root"] is None else _text(where, "media_root", data["media_root"])
    for key in ("segment_window", "segment_stride"):
        if key in data:
            values[key] = _number(where, key, data[key], minimum=0.0, inclusive=False)
    if "segment_unit" in data:
        values["segment_unit"] = _text(where, "segment_unit", data["segment_unit"], choices=SEGMENT_UNITS)
    for key in ("workers", "write_workers"):
        if key in data:
            values[key] = _integer(where, key, data[key], minimum=1, maximum=MAX_WORKERS)
    if "keep_versions" in data:
        values["keep_versions"] = _integer(where, "keep_versions", data["keep_versions"], minimum=1,
                                           maximum=MAX_KEEP_VERSIONS)
    if "budget" in data:
        values["budget"] = _budget(where, _object(where, "budget", data["budget"]), base.budget)
    if "split" in data:
        values["split"] = _split(where, _object(where, "split", data["split"]), base.split)
    if "rollouts" in data:
        values["rollouts"] = _rollouts(where, _object(where, "rollouts", data["rollouts"]),
                                       base.rollouts or RolloutSettings())
    return replace(base, **values)


# -- environment overrides ---------------------------------------------------------------------

_TOP_LEVEL_ENV = ("recordings", "media_root", "source_pattern", "segment_window", "segment_stride", "segment_unit",
                  "workers", "write_workers", "keep_versions")
_NESTED_ENV = {"budget": [f.name for f in fields(BudgetSettings)], "split": [f.name for f in fields(SplitRule)],
               "rollouts": ["enabled"]}
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_TEXT_KEYS = {"recordings", "media_root", "source_pattern", "segment_unit", "strategy", "group_by", "splits_json"}
_NULLABLE = {"media_root", "span_seconds", "splits_json", "strategy"}


def _env_value(variable: str, key: str, text: str) -> Any:
    """The JSON value an override's text stands for: text for text keys, ``none`` for null, else a number."""
    stripped = text.strip()
    if key in _NULLABLE and stripped.lower() in ("none", "null", ""):
        return None
    if key in _TEXT_KEYS:
        return stripped
    if key == "enabled":
        if stripped.lower() not in _BOOLEANS:
            raise CurationConfigError(f"{variable}={shown(text)}: {key} must be true or false")
        return _BOOLEANS[stripped.lower()]
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        raise CurationConfigError(f"{variable}={shown(text)}: {key} must be a number") from None


def _env_overrides(environ: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """``[(variable, {key: value})]`` for every ``KURATION_*`` variable that overrides a setting."""
    overrides: list[tuple[str, dict[str, Any]]] = []
    for key in _TOP_LEVEL_ENV:
        variable = f"{ENV_PREFIX}{key.upper()}"
        if variable in environ:
            overrides.append((variable, {key: _env_value(variable, key, environ[variable])}))
    for section, keys in _NESTED_ENV.items():
        for key in keys:
            variable = f"{ENV_PREFIX}{section.upper()}_{key.upper()}"
            if variable in environ:
                overrides.append((variable, {section: {key: _env_value(variable, key, environ[variable])}}))
    return overrides


def apply_env_overrides(config: CurationConfig, environ: Mapping[str, str] | None = None) -> CurationConfig:
    """``config`` with every ``KURATION_*`` override in ``environ`` (default ``os.environ``) applied."""
    environ = os.environ if environ is None else environ
    for variable, data in _env_overrides(environ):
        config = curation_config_from_dict(data, where=f"environment variable {variable}", base=config)
        config = replace(config, origin=(*config.origin, variable))
    return config


def curation_config_url(landing_url: str, environ: Mapping[str, str] | None = None) -> str:
    """The settings file a landing zone's runs read: ``$KURATION_CONFIG`` or ``<landing>/curation.json``."""
    environ = os.environ if environ is None else environ
    named = environ.get(CONFIG_ENV, "").strip()
    return named if named else storage.join_url(landing_url, CURATION_FILE)


@dataclass(frozen=True)
class CurationFile:
    """The settings file as read: where it is and its JSON object, not yet checked."""

    url: str
    data: Mapping[str, Any]


def read_curation_file(landing_url: str | os.PathLike[str], *, config_url: str | None = None,
                       environ: Mapping[str, str] | None = None) -> CurationFile | None:
    """The settings file of a landing zone, read once: ``config_url``, else ``$KURATION_CONFIG``,
    else ``<landing>/curation.json``. A missing ``curation.json`` in the landing zone is
    ``None`` (every default); a file named explicitly must exist."""
    environ = os.environ if environ is None else environ
    explicit = config_url or environ.get(CONFIG_ENV, "").strip() or None
    url = explicit or curation_config_url(os.fspath(landing_url), environ)
    if not explicit and not storage.exists(url):
        return None
    return CurationFile(url, storage.read_json(url, what="curation settings", error=CurationConfigError))


def resolve_curation_config(file: CurationFile | None = None, *, environ: Mapping[str, str] | None = None,
                            overrides: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> CurationConfig:
    """The curation settings by the one precedence rule: :data:`DEFAULTS`, then ``file``
    (:func:`read_curation_file`), then the ``KURATION_*`` variables of ``environ`` (default
    ``os.environ``), then each ``(label, settings)`` of ``overrides`` in order, a later one
    winning. An override is shaped like ``curation.json`` (``{"budget": {"train_hours": 2}}``)
    and every key it names is applied as given (``None`` included: leave a key out to keep
    the layer below); its errors and ``origin`` name it by ``label``."""
    config = DEFAULTS
    if file is not None:
        config = replace(curation_config_from_dict(file.data, where=file.url), origin=(file.url,))
    config = apply_env_overrides(config, environ)
    for label, data in overrides:
        if data:
            config = curation_config_from_dict(data, where=label, base=config)
            config = replace(config, origin=(*config.origin, label))
    return config


def load_curation_config(landing_url: str | os.PathLike[str], *, config_url: str | None = None,
                         environ: Mapping[str, str] | None = None) -> CurationConfig:
    """The curation settings of a landing zone: :func:`read_curation_file` resolved by
    :func:`resolve_curation_config` with the environment's overrides.

    A missing ``curation.json`` in the landing zone means the defaults; a file named
    explicitly (``config_url`` or ``$KURATION_CONFIG``) must exist."""
    environ = os.environ if environ is None else environ
    return resolve_curation_config(read_curation_file(landing_url, config_url=config_url, environ=environ),
                                   environ=environ)


def curation_config_to_dict(config: CurationConfig) -> dict[str, Any]:
    """The JSON object of ``config`` (what :func:`curation_config_from_dict` reads back)."""
    return {
        "plugins": list(config.plugins), "recordings": config.recordings, "media_root": config.media_root,
        "source_pattern": config.source_pattern, "segment_window": config.segment_window,
        "segment_stride": config.segment_stride, "segment_unit": config.segment_unit, "workers": config.workers,
        "write_workers": config.write_workers, "keep_versions": config.keep_versions,
        "budget": {f.name: getattr(config.budget, f.name) for f in fields(BudgetSettings)},
        "split": {f.name: getattr(config.split, f.name) for f in fields(SplitRule)},
        # left out when not configured, so the dict reads back as not configured
        **({} if config.rollouts is None else {"rollouts": {
            f.name: list(v) if isinstance(v := getattr(config.rollouts, f.name), tuple) else v
            for f in fields(RolloutSettings)}}),
    }


__all__ = [
    "CONFIG_ENV", "CURATION_FILE", "DEFAULTS", "BudgetSettings", "CurationConfig", "CurationConfigError",
    "CurationFile", "RolloutSettings", "SplitRule",
    "apply_env_overrides", "curation_config_from_dict", "curation_config_to_dict", "curation_config_url",
    "load_curation_config", "read_curation_file", "resolve_curation_config", "resolve_in_landing",
]
