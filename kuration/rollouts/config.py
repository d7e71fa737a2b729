"""The settings of one rollout store: :class:`RolloutZarrStoreConfig`.

The config is what a store *is* (its semantics and lineage), not how it was invoked: every
field except ``store_dir`` is persisted in the root attrs ``config`` and in the manifest
sidecar, so two writes of the same records with the same config give the same bytes wherever
the store lives.

Seed 004's ``RolloutZarrStoreConfig`` is generalized from next-best-view planning (the
table of every difference is in ``docs/rollouts.md``). Kept as named: ``store_dir``,
``return_semantics``, ``discount_gamma``, ``target_protocol_version``,
``reason_code_version``, ``field_retention_policy``, ``split_manifest_hash``,
``q_h_chunk_states``, ``label_support_semantics``. Renamed, the seed's name kept as an alias
(:data:`SEED_ALIASES`: a read-only property here, a keyword
:func:`~kuration.rollouts.writer.write_rollout_zarr_store` accepts):
``source_offline_store_version`` is ``source_dataset_version`` (the source is a committed
Kuration dataset, not a VIN cache); ``oracle_query_mode`` is ``oracle_id`` (the oracle is
pluggable, so the store records which one labelled it); ``selected_depth_chunk_steps`` is
``selected_payload_chunk_steps`` (the heavy selected-transition payload is any uint8 array,
not a depth raster). Added: ``reason_codes``, the bit table the versioned reason bits index
(the seed kept it in code; a generic store must carry it).

Dropped as domain-only, with why:

- ``selected_depth_enabled`` / ``_width_px`` / ``_height_px`` / ``_renderer`` / ``_znear_m`` /
  ``_zfar_m`` / ``_source_resolution``: they describe how a mesh renderer produced a depth
  raster. Here the payload is whatever the recipe recorded; its shape is read from the
  records (root attrs ``widths["payload"]``) and whether it is kept is
  ``field_retention_policy``.
- ``target_eval_crop_max_points`` / ``target_eval_crops_enabled``: point-cloud crops of an
  NBV oracle's evaluation target; no generic recipe has them.
- ``paths``: repository path defaults of the seed's project layout; Kuration's storage root
  comes from the caller (the Dagster resource), so the store only needs ``store_dir``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from kuration.errors import RolloutInputError, check_keys, shown
from kuration.rollouts.schema import (
    DEFAULT_LABEL_SUPPORT,
    DEFAULT_RETURN_SEMANTICS,
    DEFAULT_TARGET_PROTOCOL,
    INVALID_REASON_VERSION,
)

#: The generic invalid-reason table (version :data:`INVALID_REASON_VERSION`): bit position
#: of each reason a recipe may give. A recipe with its own reasons passes its own table.
DEFAULT_REASON_CODES: dict[str, int] = {
    "out_of_bounds": 0,
    "resource_below_reserve": 1,
    "blocked": 2,
    "unreachable": 3,
    "recipe_other": 31,
}

#: Retention policies: ``compact`` drops ``steps/selected_payload``; ``full`` keeps it.
FIELD_RETENTION_POLICIES = ("compact", "full")

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]+$")


@dataclass(frozen=True)
class RolloutZarrStoreConfig:
    """Semantics, lineage and layout settings of one rollout store (see the module docstring
    for how each maps to seed 004). Construction validates every field and raises
    :class:`RolloutInputError` naming the bad one."""

    #: Destination directory (local path). A direct write replaces it; the atomic runner
    #: writes a temp sibling and promotes it. Not persisted (a store may be moved).
    store_dir: str
    #: Versioned return family recorded on ``q_h/`` (``G_t = r_t + gamma * G_{t+1}``).
    return_semantics: str = DEFAULT_RETURN_SEMANTICS
    #: Discount applied only to non-terminal selected transitions; ``0 < gamma <= 1``.
    discount_gamma: float = 1.0
    #: Contract separating target task inputs from oracle labels (the target is an input).
    target_protocol_version: str = DEFAULT_TARGET_PROTOCOL
    #: Version of the invalid-reason bit table ``reason_codes``.
    reason_code_version: str = INVALID_REASON_VERSION
    #: Reason name -> bit position (0..31) in ``candidates/reason_bits``; recorded in the
    #: root attrs ``reason_codes`` as ``{"version": ..., "bits": {...}}``. A candidate
    #: bit outside this table is refused.
    reason_codes: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_REASON_CODES))
    #: ``"compact"`` (no heavy payload) or ``"full"`` (keeps ``steps/selected_payload``).
    field_retention_policy: str = "compact"
    #: Identity of the source dataset (e.g. the SHA-256 of its ``dataset_manifest.json``).
    source_dataset_version: str = "unknown-source-version"
    #: Hash of the baked ``splits.json`` the source rows were taken under.
    split_manifest_hash: str = "unknown-split-manifest"
    #: State rows per chunk of the padded ``q_h/`` S x A arrays; ``None`` chooses rows so a
    #: chunk of the widest one (``positions``) is about 1 MB.
    q_h_chunk_states: int | None = None
    #: Step rows per chunk of ``steps/selected_payload``; ``None`` chooses about 1 MB.
    selected_payload_chunk_steps: int | None = None
    #: Identity of the oracle that produced the one-step labels (name and version).
    oracle_id: str = "unspecified-oracle"
    #: Relation between actor-valid rows and finite labels (labels only on valid actions).
    label_support_semantics: str = DEFAULT_LABEL_SUPPORT

    def __post_init__(self) -> None:
        if not isinstance(self.store_dir, (str, os.PathLike)) or not os.fspath(self.store_dir):
            raise RolloutInputError(f"store_dir: expected a non-empty path, found {shown(self.store_dir)}")
        object.__setattr__(self, "store_dir", os.fspath(self.store_dir))
        for name in ("return_semantics", "target_protocol_version", "reason_code_version",
                     "source_dataset_version", "split_manifest_hash", "oracle_id", "label_support_semantics"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise RolloutInputError(f"{name}: expected a non-empty string, found {shown(value)}")
        gamma = self.discount_gamma
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not math.isfinite(gamma) \
                or not 0.0 < gamma <= 1.0:
            raise RolloutInputError(f"discount_gamma: expected a number with 0 < gamma <= 1, found {shown(gamma)}")
        object.__setattr__(self, "discount_gamma", float(gamma))
        if self.field_retention_policy not in FIELD_RETENTION_POLICIES:
            raise RolloutInputError(f"field_retention_policy: expected one of {list(FIELD_RETENTION_POLICIES)}, "
                                    f"found {shown(self.field_retention_policy)}")
        for name in ("q_h_chunk_states", "selected_payload_chunk_steps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise RolloutInputError(f"{name}: expected None or a positive int, found {shown(value)}")
        object.__setattr__(self, "reason_codes", _checked_reason_codes(self.reason_codes))

    @property
    def source_offline_store_version(self) -> str:
        """Seed 004's name of :attr:`source_dataset_version`."""
        return self.source_dataset_version

    @property
    def oracle_query_mode(self) -> str:
        """Seed 004's name of :attr:`oracle_id`."""
        return self.oracle_id

    @property
    def selected_depth_chunk_steps(self) -> int | None:
        """Seed 004's name of :attr:`selected_payload_chunk_steps`."""
        return self.selected_payload_chunk_steps

    @property
    def declared_reason_mask(self) -> int:
        """The OR of every declared reason bit: a candidate's bits must stay inside it."""
        mask = 0
        for bit in self.reason_codes.values():
            mask |= 1 << bit
        return mask

    def persisted(self) -> dict[str, Any]:
        """The config as recorded in the store (root attrs and sidecar): every field but
        ``store_dir``, so a moved or re-written store keeps its bytes."""
        data = self.to_dict()
        del data["store_dir"]
        return data

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["reason_codes"] = dict(self.reason_codes)
        return data

    @classmethod
    def from_keywords(cls, *, seed_aliases: Mapping[str, Any] | None = None,
                      reason_codes: Mapping[str, int] | None = None, **values: Any) -> RolloutZarrStoreConfig:
        """The config of a writer's keyword options: ``values`` by the field names here,
        ``reason_codes=None`` for :data:`DEFAULT_REASON_CODES`, and ``seed_aliases`` by seed
        004's names (:data:`SEED_ALIASES`; None: not given), each resolved by
        :func:`seed_alias` against its field."""
        defaults = {f.name: f.default for f in fields(cls)}
        for alias, given in (seed_aliases or {}).items():
            name = SEED_ALIASES[alias]
            values[name] = seed_alias(name, values.get(name, defaults[name]), alias, given, default=defaults[name])
        if reason_codes is not None:
            values["reason_codes"] = reason_codes
        return cls(**values)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutZarrStoreConfig:
        """The config from :meth:`to_dict` output; unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise RolloutInputError(f"RolloutZarrStoreConfig: expected a mapping, found {type(data).__name__}")
        check_keys(data, [f.name for f in fields(cls)], where="RolloutZarrStoreConfig", error=RolloutInputError)
        if "store_dir" not in data:
            raise RolloutInputError("RolloutZarrStoreConfig: missing key 'store_dir'")
        return cls(**dict(data))


#: Seed 004's name -> the name here, for every renamed setting whose meaning is unchanged
#: (config fields, and the validation switch of the reader and validator).
SEED_ALIASES: dict[str, str] = {
    "source_offline_store_version": "source_dataset_version",
    "oracle_query_mode": "oracle_id",
    "selected_depth_chunk_steps": "selected_payload_chunk_steps",
    "validate_selected_depth_payload": "validate_selected_payload",
}

_T = TypeVar("_T")


def seed_alias(name: str, value: _T, alias: str, alias_value: _T | None, *, default: _T) -> _T:
    """``value`` of the keyword ``name``, or ``alias_value`` when the caller used seed 004's
    name ``alias`` for it (None: not used). Both given with different values, and ``value``
    not its ``default``, is a :class:`RolloutInputError` naming both."""
    if alias_value is None:
        return value
    if value != default and value != alias_value:
        raise RolloutInputError(f"{name}={shown(value)} and {alias}={shown(alias_value)} (seed 004's name for "
                                f"{name}) disagree; pass one of them")
    return alias_value


def _checked_reason_codes(codes: Any) -> dict[str, int]:
    if not isinstance(codes, Mapping) or not codes:
        raise RolloutInputError(f"reason_codes: expected a non-empty mapping name -> bit, found {shown(codes)}")
    seen: dict[int, str] = {}
    for name, bit in codes.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise RolloutInputError(f"reason_codes: name {shown(name)} must be a non-empty string of "
                                    "letters, digits, '_', '.', ':' or '-'")
        if isinstance(bit, bool) or not isinstance(bit, int) or not 0 <= bit <= 31:
            raise RolloutInputError(f"reason_codes[{name!r}]: expected a bit position 0..31, found {shown(bit)}")
        if bit in seen:
            raise RolloutInputError(f"reason_codes: {name!r} and {seen[bit]!r} share bit {bit}")
        seen[bit] = name
    return {name: int(codes[name]) for name in sorted(codes, key=lambda n: (codes[n], n))}


__all__ = ["DEFAULT_REASON_CODES", "FIELD_RETENTION_POLICIES", "SEED_ALIASES", "RolloutZarrStoreConfig",
           "seed_alias"]
