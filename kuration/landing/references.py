"""The references between a landing zone's files, each checked: :func:`landing_references`.

A landing zone's files name each other. The strategy reads schema fields; the output spec
reads schema fields and media columns, the features the strategy computes and the media
providers the plugins register; the quality policy requires output modalities; the rollout
recipe reads output modalities. Each file can be valid alone and the set still fail at the
first stage that follows one of these references, possibly after a dataset was committed.
This module finds every such problem at once, as :class:`LandingFinding`\\ s that
:func:`kuration.landing.open_landing_zone` raises and ``kuration check-landing`` prints.

It also decides what happens to the rollout store (:func:`rollout_plan`): built, disabled,
or skipped as "not configured" when ``curation.json`` has no ``rollouts`` and the output spec
does not have the default recipe's modalities, so that a first run of one's own data never
fails on a stage it did not ask for.

What it does not do: read files (it is given what was read), or check a file alone (each
file's own parser does that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kuration.checks import CheckResult, first
from kuration.errors import shown
from kuration.landing.curation_config import CURATION_FILE, RolloutSettings
from kuration.output.spec import OutputSpec
from kuration.scoring.features import FeatureError, parse_feature_key
from kuration.scoring.strategy import Strategy
from kuration.sources.media import media_provider_factory, media_provider_names
from kuration.sources.schema import Schema

Level = Literal["error", "warning", "info"]
LEVELS: tuple[Level, ...] = ("error", "warning", "info")
#: What the writer adds to a span's meta besides the strategy's features
#: (:func:`kuration.output.write_workers.span_meta`): a ``segment:`` modality may read these too.
SPAN_META = ("priority", "span_index")


@dataclass(frozen=True)
class LandingFinding:
    """One thing found about a landing zone: its ``level``, a stable ``code``
    (``<step>.<what>``) and a one-paragraph ``message`` naming the file, row or field and how
    to fix it."""

    level: Level
    code: str
    message: str

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"a finding's level must be one of {list(LEVELS)}, got {self.level!r}")

    @property
    def step(self) -> str:
        return self.code.partition(".")[0]

    def render(self) -> str:
        """One line: the level, the code and the message (white space folded)."""
        return f"{self.level.upper():<7} {self.code}: {' '.join(self.message.split())}"

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "code": self.code, "step": self.step, "message": self.message}


@dataclass(frozen=True)
class LandingFiles:
    """Where each file of a landing zone is, for the messages: URLs, or names as the user
    wrote them."""

    curation: str = CURATION_FILE
    schema: str = "schema.json"
    strategy: str = "strategy.json"
    output_spec: str = "output_spec.json"
    quality: str = "quality.json"


def strategy_references(strategy: Strategy, schema: Schema, *, files: LandingFiles) -> list[LandingFinding]:
    """Every feature key of ``strategy`` (priority, predicates, tags) that does not resolve
    against ``schema``: a field it lacks, a component out of range, a ``fn.`` feature no
    plugin registered."""
    keys = [(key, f"strategy.priority[{key!r}]") for key in strategy.priority]
    keys += [(p.feature, f"strategy.predicates[{i}].feature") for i, p in enumerate(strategy.predicates)]
    keys += [(f"tag.{tag}", f"strategy.tags[{i}]") for i, tag in enumerate(strategy.tags)]
    found = []
    for key, path in keys:
        try:
            parse_feature_key(key, schema)
        except FeatureError as exc:
            found.append(LandingFinding("error", "settings.strategy_invalid",
                                        f"{files.strategy}: {path}: {exc} (against {files.schema})"))
    return found


def spec_references(spec: OutputSpec, schema: Schema, strategy: Strategy | None, *,
                    files: LandingFiles) -> list[LandingFinding]:
    """The output spec against the schema (each ``field:`` / ``media:`` source, its shape and
    dtype), the segment features (each ``segment:`` source is a feature the strategy computes;
    not checked without a ``strategy``) and the media providers (each ``media:`` column's
    provider is registered)."""
    found = [LandingFinding("error", "settings.output_spec_invalid", f"{files.output_spec}: {problem} (against "
                                                                      f"{files.schema})")
             for problem in spec.problems_against(schema)]
    computed = [*strategy.feature_keys(), *SPAN_META] if strategy is not None else []
    for name, modality in spec.of_kind("segment").items():
        if strategy is not None and modality.key not in computed:
            found.append(LandingFinding(
                "error", "references.segment_feature",
                f"{files.output_spec}: output.modalities.{name}.source {modality.source!r} reads the span's feature "
                f"{modality.key!r}, which {files.strategy} does not compute (it computes "
                f"{first(map(repr, computed), shown=8)}); read one of those, or add the feature to the strategy's "
                "priority, predicates or tags"))
    for name, modality in spec.of_kind("media").items():
        media = schema.media.get(modality.key)
        if media is not None and media_provider_factory(media.provider) is None:
            found.append(LandingFinding(
                "error", "references.media_provider",
                f"{files.output_spec}: output.modalities.{name} decodes media column {modality.key!r} with provider "
                f"{media.provider!r} ({files.schema}), which is not registered (registered: "
                f"{media_provider_names()}); declare the plugin that registers it in {files.curation} 'plugins'"))
    return found


def quality_references(required: Sequence[str] | None, spec: OutputSpec, *,
                       files: LandingFiles) -> list[LandingFinding]:
    """Each modality the quality policy requires is one the output spec declares."""
    missing = [name for name in required or () if name not in spec.modalities]
    if not missing:
        return []
    return [LandingFinding(
        "error", "references.quality_modality",
        f"{files.quality}: required_modalities names {shown(missing)}, which {files.output_spec} does not declare (it "
        f"declares {sorted(spec.modalities)}); the dataset_quality gate would always fail. Require declared "
        "modalities, or add them to the output spec")]


# -- the rollout store -------------------------------------------------------------------------

#: What :func:`rollout_plan` decided.
RolloutStatus = Literal["build", "disabled", "not configured"]


@dataclass(frozen=True)
class RolloutPlan:
    """What becomes of the rollout store: ``status`` ``build`` (with ``settings``, the
    configured ones or the defaults), ``disabled`` (``rollouts.enabled`` false) or ``not
    configured`` (no ``rollouts`` anywhere, and the output spec lacks the default recipe's
    modalities). ``reason`` says why in one sentence, for the run summary and the metadata."""

    status: RolloutStatus
    settings: RolloutSettings
    reason: str = ""

    @property
    def builds(self) -> bool:
        return self.status == "build"

    def skipped(self, what: str) -> CheckResult | None:
        """A passing check result saying ``what`` was not checked because the store is not
        configured; None when it is (configured, or built with the defaults, or disabled:
        a disabled store that a run still asks for is that run's error to raise)."""
        if self.status != "not configured":
            return None
        return CheckResult(f"rollout store not configured, so {what} has nothing to check: {self.reason}",
                           figures={"status": self.status})


def recipe_modalities(settings: RolloutSettings) -> tuple[str, ...]:
    """The output modalities the built-in recipe with ``settings`` reads from every shard."""
    return tuple(dict.fromkeys([settings.position, *([settings.battery] if settings.battery else []),
                                *settings.state_modalities]))


def rollout_plan(settings: RolloutSettings | None, spec: OutputSpec, *,
                 files: LandingFiles) -> tuple[RolloutPlan, list[LandingFinding]]:
    """What becomes of the rollout store, and what is wrong with the configured recipe.

    Not configured (``settings`` None): the defaults when the spec has their modalities,
    else skipped (an ``info`` finding). Configured and enabled: every modality the recipe
    reads must be declared, the position a float ``[3]`` and the battery a float scalar
    (``error`` findings, naming the modality); a payload modality the spec lacks warns (only
    ``field_retention_policy`` full reads it)."""
    if settings is None:
        defaults = RolloutSettings()
        missing = [m for m in recipe_modalities(defaults) if m not in spec.modalities]
        if not missing:
            return RolloutPlan("build", defaults), []
        reason = (f"{files.curation} has no 'rollouts', and {files.output_spec} lacks the default rollout recipe's "
                  f"modalit{'y' if len(missing) == 1 else 'ies'} {shown(missing)}; to build a replay store, add "
                  "'rollouts' to curation.json naming the position and state modalities")
        return (RolloutPlan("not configured", defaults, reason),
                [LandingFinding("info", "rollouts.not_configured", f"rollout store not configured: {reason}")])
    if not settings.enabled:
        reason = f"rollouts.enabled is false in the curation settings ({files.curation} or KURATION_ROLLOUTS_ENABLED)"
        return RolloutPlan("disabled", settings, reason), [LandingFinding("info", "rollouts.disabled",
                                                                          f"rollout store disabled: {reason}")]
    return RolloutPlan("build", settings), _recipe_problems(settings, spec, files)


def _recipe_problems(settings: RolloutSettings, spec: OutputSpec, files: LandingFiles) -> list[LandingFinding]:
    found = []
    roles = {settings.position: "rollouts.position", **({settings.battery: "rollouts.battery"}
                                                         if settings.battery else {})}
    for name in recipe_modalities(settings):
        role = roles.get(name, "rollouts.state_modalities")
        if name not in spec.modalities:
            found.append(LandingFinding(
                "error", "rollouts.missing_modality",
                f"{files.curation}: {role} names modality {name!r}, which {files.output_spec} does not declare (it "
                f"declares {sorted(spec.modalities)}); name a declared modality, add it to the output spec, or set "
                "rollouts.enabled false"))
    wanted: dict[str, tuple[Any, str]] = {settings.position: ((3,), "a float [3] (x, y, z)")}
    if settings.battery:
        wanted[settings.battery] = ((), "a float scalar")
    for name, (shape, what) in wanted.items():
        modality = spec.modalities.get(name)
        if modality is not None and (modality.numpy_dtype.kind != "f" or modality.shape != shape):
            found.append(LandingFinding(
                "error", "rollouts.modality_shape",
                f"{files.curation}: {roles[name]} {name!r} must be {what}, but {files.output_spec} declares it "
                f"{modality.dtype}{list(modality.shape)}"))
    if settings.payload_modality and settings.payload_modality not in spec.modalities:
        found.append(LandingFinding(
            "warning", "rollouts.payload_modality",
            f"{files.curation}: rollouts.payload_modality {settings.payload_modality!r} is not declared in "
            f"{files.output_spec}; a store built with field_retention_policy 'full' would fail. Set it to null or "
            "to a declared modality"))
    return found


def landing_references(schema: Schema, strategy: Strategy, spec: OutputSpec, *,
                       required_modalities: Sequence[str] | None, rollouts: RolloutSettings | None,
                       files: LandingFiles = LandingFiles()) -> tuple[RolloutPlan, list[LandingFinding]]:
    """Every reference between the files checked (strategy against schema; spec against
    schema, segment features and media providers; quality policy against spec; rollout
    recipe against spec), and the rollout plan. ``required_modalities`` is the quality
    policy's (``None``: no policy or no such gate). Plugins must be loaded first: a ``fn.``
    feature or a media provider they register is looked up."""
    found = strategy_references(strategy, schema, files=files)
    found += spec_references(spec, schema, strategy, files=files)
    found += quality_references(required_modalities, spec, files=files)
    plan, rollout_findings = rollout_plan(rollouts, spec, files=files)
    return plan, found + rollout_findings


__all__ = ["LEVELS", "SPAN_META", "LandingFiles", "LandingFinding", "Level", "RolloutPlan", "RolloutStatus",
           "landing_references", "quality_references", "recipe_modalities", "rollout_plan", "spec_references",
           "strategy_references"]
