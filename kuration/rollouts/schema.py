"""The persisted layout of a rollout replay store, version 1: the one place its names live.

Writer, reader, validation and packing all read this table; none spells an array name of its
own. A store is a zarr v3 group (``zarr.open_group`` opens it) holding:

- five **factual tables** (``sources/``, ``targets/``, ``rollouts/``, ``steps/``,
  ``candidates/``), authoritative. Every array in a table has the table's row count on its
  first axis. Row ids are positions: ``<table>/<id column>[i] == i``. Strings (strategy ids,
  shard paths, termination reasons) are int32 codes into a vocabulary list kept in the
  group's attrs (zarr v3 has no stable string type); SHA-256 digests are ``uint8[32]`` rows.
- the **derived view** ``q_h/``: padded ``S x A`` arrays rebuilt from ``steps/`` and
  ``candidates/`` (S state rows, A the widest shell). It is a validated cache: validation
  rebuilds it and compares.
- root **attrs**: the schema id and version, the config, the counts, the reason-code table
  and ``manifest_sha256``, the SHA-256 of the canonical JSON of the sidecar
  ``rollout_manifest.json`` inside the store directory.

Unavailable values: NaN for floats, -1 for integer counts and ids (a measured 0 stays 0). An
optional array may be absent from a store; absent means unavailable for every row.

Beside the layout are the pure checks of what a store declares against it:
:func:`root_attr_problems` (the root attrs) and :func:`array_problems` (one array's dtype and
shape against the attrs ``counts`` and ``widths``). Each returns a list of sentences; the
reader raises the first, validation reports them all, so the two cannot disagree on what a
well-formed store is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kuration.errors import shown

ROLLOUT_ZARR_SCHEMA_ID = "kuration.rollout_zarr_store"
ROLLOUT_ZARR_SCHEMA_VERSION = 1

#: The return family recorded on ``q_h/``: the discounted return of the factual selected
#: chain, ``G_t = r_t + gamma * G_{t+1}``, with the discount applied only to non-terminal
#: transitions (``G`` of a terminal step is its reward).
DEFAULT_RETURN_SEMANTICS = "selected_discounted_return_v1"
#: The candidate field the ``q_h/`` view trains on: the one-step oracle label.
Q_H_REWARD_METRIC = "label"
#: The TD contract on ``q_h/``: reward and linkage describe the factual selected action
#: only; unselected candidates carry one-step labels, never TD targets.
Q_H_TD_SEMANTICS = "selected_transition_td_v1"
#: Version of the invalid-reason bit table (the table itself is in the root attrs).
INVALID_REASON_VERSION = "kuration.invalid_reason.v1"
#: Default target protocol: the target is a recorded future state, an input the oracle
#: labels against, never a label itself.
DEFAULT_TARGET_PROTOCOL = "recorded_future_state_v1"
#: The relation between actor-valid rows and finite labels: labels exist only on valid
#: actions (``label_valid`` implies ``valid_action``).
DEFAULT_LABEL_SUPPORT = "subset_of_action_v1"
MANIFEST_FILENAME = "rollout_manifest.json"

TABLES = ("sources", "targets", "rollouts", "steps", "candidates")
Q_H_GROUP = "q_h"


@dataclass(frozen=True)
class ArraySpec:
    """One persisted array. ``trailing`` names the dimensions after the row axis: an int is
    fixed, a string is a width recorded in the root attrs ``widths`` (``"P"`` position
    width, ``"D_s"`` state width, ``"D_t"`` target width, ``"A"`` the q_h shell width,
    ``"payload"`` the payload's shape). ``unavailable`` is the sentinel an unavailable value
    is written as (None: the column has no unavailable value)."""

    group: str
    name: str
    dtype: str
    trailing: tuple[int | str, ...] = ()
    required: bool = True
    unavailable: float | int | None = None
    doc: str = ""

    @property
    def path(self) -> str:
        return f"{self.group}/{self.name}"


_NAN = float("nan")

ARRAYS: tuple[ArraySpec, ...] = (
    # sources/: one row per source (a committed dataset shard and entity)
    ArraySpec("sources", "source_id", "int64", doc="row id"),
    ArraySpec("sources", "shard_sha256", "uint8", (32,), doc="SHA-256 the dataset manifest records for the shard"),
    ArraySpec("sources", "shard_path_code", "int32", doc="code into attrs shard_paths (path in the dataset)"),
    ArraySpec("sources", "entity_code", "int32", doc="code into attrs entities"),
    ArraySpec("sources", "split_code", "int32", doc="code into attrs splits"),
    ArraySpec("sources", "n_states", "int32", doc="recorded (non-pad) states in the shard"),
    # targets/: one row per target a chain aims at
    ArraySpec("targets", "target_id", "int64", doc="row id"),
    ArraySpec("targets", "source_id", "int64", doc="the source the target was taken from"),
    ArraySpec("targets", "kind_code", "int32", doc="code into attrs kinds"),
    ArraySpec("targets", "value", "float32", ("D_t",), doc="the target vector"),
    ArraySpec("targets", "label_valid", "bool", doc="the target state can give labels"),
    # rollouts/: one row per chain
    ArraySpec("rollouts", "rollout_id", "int64", doc="row id"),
    ArraySpec("rollouts", "source_id", "int64"),
    ArraySpec("rollouts", "target_id", "int64"),
    ArraySpec("rollouts", "strategy_code", "int32", doc="code into attrs strategy_ids"),
    ArraySpec("rollouts", "mixture_code", "int32", doc="code into attrs mixture_ids"),
    ArraySpec("rollouts", "first_step", "int64", doc="step id of the chain's first step; its steps are contiguous"),
    ArraySpec("rollouts", "num_steps", "int32"),
    ArraySpec("rollouts", "termination_code", "int32", doc="code into attrs termination_reasons"),
    # steps/: one row per state / selected transition
    ArraySpec("steps", "step_id", "int64", doc="row id"),
    ArraySpec("steps", "rollout_id", "int64"),
    ArraySpec("steps", "step_index", "int32", doc="0-based position in the chain"),
    ArraySpec("steps", "source_row", "int64", doc="the state's row in the source shard"),
    ArraySpec("steps", "state", "float32", ("D_s",)),
    ArraySpec("steps", "candidate_start", "int64", doc="candidate id of shell index 0; the shell is contiguous"),
    ArraySpec("steps", "candidate_count", "int32", doc="the shell's width"),
    ArraySpec("steps", "selected_candidate_id", "int64"),
    ArraySpec("steps", "selected_shell_index", "int32"),
    ArraySpec("steps", "reward", "float32", doc="explicit reward of the selected action; must be finite"),
    ArraySpec("steps", "terminal", "bool", doc="True exactly on a chain's last step"),
    ArraySpec("steps", "next_step_id", "int64", unavailable=-1, doc="-1 on a terminal step"),
    ArraySpec("steps", "audit_valid_candidates", "int32", required=False, unavailable=-1),
    ArraySpec("steps", "audit_selected_margin", "float32", required=False, unavailable=_NAN),
    ArraySpec("steps", "selected_payload", "uint8", ("payload",), required=False,
              doc="heavy payload of the selected transition, kept by field_retention_policy='full'"),
    # candidates/: one row per candidate action, full shells
    ArraySpec("candidates", "candidate_id", "int64", doc="row id"),
    ArraySpec("candidates", "step_id", "int64"),
    ArraySpec("candidates", "shell_index", "int32"),
    ArraySpec("candidates", "action_id", "int32"),
    ArraySpec("candidates", "position", "float32", ("P",)),
    ArraySpec("candidates", "valid_action", "bool"),
    ArraySpec("candidates", "reason_bits", "uint32", doc="0 exactly where valid_action"),
    ArraySpec("candidates", "label", "float32", unavailable=_NAN, doc="one-step oracle label; NaN if unavailable"),
    ArraySpec("candidates", "label_valid", "bool"),
    ArraySpec("candidates", "strategy_code", "int32", doc="hot provenance: the chain's strategy"),
    ArraySpec("candidates", "mixture_code", "int32", doc="hot provenance: the chain's mixture"),
    # q_h/: derived, padded S x A (pad: id -1, masks False, labels and positions NaN)
    ArraySpec("q_h", "candidate_ids", "int64", ("A",), unavailable=-1),
    ArraySpec("q_h", "valid_action_mask", "bool", ("A",)),
    ArraySpec("q_h", "q_train_mask", "bool", ("A",),
              doc="valid action, label-valid target and a finite label"),
    ArraySpec("q_h", "one_step_labels", "float32", ("A",), unavailable=_NAN),
    ArraySpec("q_h", "reason_bits", "uint32", ("A",)),
    ArraySpec("q_h", "positions", "float32", ("A", "P"), unavailable=_NAN),
    ArraySpec("q_h", "step_ids", "int64"),
    ArraySpec("q_h", "source_ids", "int64"),
    ArraySpec("q_h", "target_ids", "int64"),
    ArraySpec("q_h", "selected_action_index", "int32"),
    ArraySpec("q_h", "td_reward", "float32"),
    ArraySpec("q_h", "td_next_state", "int64", unavailable=-1),
    ArraySpec("q_h", "td_discount", "float32", doc="gamma on non-terminal transitions, 0 on terminal ones"),
    ArraySpec("q_h", "td_terminal", "bool"),
    ArraySpec("q_h", "td_return", "float64", doc="discounted return of the selected chain from this state"),
)

#: Every array of the derived view, in a fixed order.
Q_H_ARRAY_NAMES: tuple[str, ...] = tuple(spec.name for spec in ARRAYS if spec.group == Q_H_GROUP)

#: Vocabulary attrs per table group: the code column each one decodes.
VOCABULARIES: dict[str, dict[str, str]] = {
    "sources": {"shard_path_code": "shard_paths", "entity_code": "entities", "split_code": "splits"},
    "targets": {"kind_code": "kinds"},
    "rollouts": {"strategy_code": "strategy_ids", "mixture_code": "mixture_ids",
                 "termination_code": "termination_reasons"},
    "candidates": {"strategy_code": "strategy_ids", "mixture_code": "mixture_ids"},
}

#: Root attrs every store carries.
REQUIRED_ROOT_ATTRS = ("schema_id", "schema_version", "config", "counts", "widths", "reason_codes",
                       "manifest_sha256")


def spec_of(path: str) -> ArraySpec:
    """The spec of ``group/name``; ``KeyError`` names the unknown path."""
    for spec in ARRAYS:
        if spec.path == path:
            return spec
    raise KeyError(path)


def table_arrays(group: str) -> tuple[ArraySpec, ...]:
    return tuple(spec for spec in ARRAYS if spec.group == group)


# -- what a store declares, against the layout ---------------------------------------------

#: The widths every store declares (``payload`` is null or a shape, checked apart).
DECLARED_WIDTHS = ("P", "D_s", "D_t", "A")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def root_attr_problems(attrs: Any) -> list[str]:
    """Every way the root attrs ``attrs`` break the schema, one sentence each (empty: none):
    the schema id and version, a missing :data:`REQUIRED_ROOT_ATTRS` entry, ``counts`` that
    do not map exactly :data:`TABLES` to row counts, ``widths`` without
    :data:`DECLARED_WIDTHS` as ints (``payload`` null or a shape), ``config`` that is not an
    object, a ``reason_codes`` table not of the form ``{"version": ..., "bits": {name: 0..31}}``
    and a ``manifest_sha256`` that is not a SHA-256 hex digest.

    What it does not judge: the config's values (validation's provenance checks) and whether
    the digest matches the sidecar (validation reads the sidecar)."""
    if not isinstance(attrs, Mapping):
        return [f"root attrs: found {shown(attrs)}; expected a JSON object"]
    problems = []
    if attrs.get("schema_id") != ROLLOUT_ZARR_SCHEMA_ID:
        problems.append(f"root attrs schema_id: found {shown(attrs.get('schema_id'))}; expected "
                        f"{ROLLOUT_ZARR_SCHEMA_ID!r} (this is not a rollout store, or its write did not finish)")
    version = attrs.get("schema_version")
    if version != ROLLOUT_ZARR_SCHEMA_VERSION or isinstance(version, bool):
        problems.append(f"root attrs schema_version: found {shown(version)}; expected {ROLLOUT_ZARR_SCHEMA_VERSION}, "
                        "the only version this Kuration reads (rewrite the store with it)")
    problems += [f"root attrs: required attr {name!r} is missing; the write did not finish"
                 for name in REQUIRED_ROOT_ATTRS if name not in attrs and name not in ("schema_id", "schema_version")]
    if "counts" in attrs:
        problems += _count_problems(attrs["counts"])
    if "widths" in attrs:
        problems += _width_problems(attrs["widths"])
    if "config" in attrs and not isinstance(attrs["config"], Mapping):
        problems.append(f"root attrs config: found {shown(attrs['config'])}; expected an object")
    if "reason_codes" in attrs and declared_reason_mask(attrs["reason_codes"]) is None:
        problems.append(f"root attrs reason_codes: found {shown(attrs['reason_codes'])}; expected "
                        '{"version": <reason code version>, "bits": {<reason name>: <bit 0..31>}}')
    digest = attrs.get("manifest_sha256")
    if "manifest_sha256" in attrs and not (isinstance(digest, str) and _SHA256_HEX.match(digest)):
        problems.append(f"root attrs manifest_sha256: {shown(digest)} is not a SHA-256 hex digest")
    return problems


def _count_problems(counts: Any) -> list[str]:
    if not isinstance(counts, Mapping):
        return [f"root attrs counts: found {shown(counts)}; expected an object with keys {list(TABLES)}"]
    problems = []
    unexpected = sorted(map(str, set(counts) - set(TABLES)))
    if unexpected:
        problems.append(f"root attrs counts: unexpected keys {shown(unexpected)}; expected exactly {list(TABLES)}")
    problems += [f"root attrs counts.{table}: found {shown(counts.get(table))}; expected a row count >= 0"
                 for table in TABLES if not _natural(counts.get(table))]
    return problems


def _width_problems(widths: Any) -> list[str]:
    if not isinstance(widths, Mapping):
        return [f"root attrs widths: found {shown(widths)}; expected an object of widths {list(DECLARED_WIDTHS)}"]
    problems = [f"root attrs widths.{name}: found {shown(widths.get(name))}; expected a width >= 0"
                for name in DECLARED_WIDTHS if not _natural(widths.get(name))]
    payload = widths.get("payload")
    if payload is not None and (not isinstance(payload, list) or not all(_natural(n) for n in payload)):
        problems.append(f"root attrs widths.payload: found {shown(payload)}; expected null or a list of ints >= 0")
    return problems


def declared_reason_mask(codes: Any) -> int | None:
    """The OR of every bit of a root attrs ``reason_codes`` table
    (``{"version": ..., "bits": {name: bit}}``), or None when it is not in that form."""
    if not (isinstance(codes, Mapping) and isinstance(codes.get("bits"), Mapping)
            and isinstance(codes.get("version"), str)):
        return None
    bits = list(codes["bits"].values())
    if not all(isinstance(bit, int) and not isinstance(bit, bool) and 0 <= bit < 32 for bit in bits):
        return None
    mask = 0
    for bit in bits:
        mask |= 1 << bit
    return mask


def declared_counts(attrs: Any) -> dict[str, int]:
    """The row counts the root attrs declare, the well-formed ones only (a malformed one is
    a :func:`root_attr_problems` sentence)."""
    counts = attrs.get("counts") if isinstance(attrs, Mapping) else None
    if not isinstance(counts, Mapping):
        return {}
    return {table: counts[table] for table in TABLES if _natural(counts.get(table))}


def expected_rows(spec: ArraySpec, attrs: Any) -> int | None:
    """The rows ``spec`` must have: its table's count (``steps`` for ``q_h/``), or None when
    the attrs declare none."""
    return declared_counts(attrs).get("steps" if spec.group == Q_H_GROUP else spec.group)


def expected_trailing(spec: ArraySpec, attrs: Any) -> tuple[int, ...] | None:
    """The shape past the row axis the attrs ``widths`` give ``spec``, or None when they do
    not declare one it needs (``payload`` is null in a store that keeps no payload)."""
    widths = attrs.get("widths") if isinstance(attrs, Mapping) else None
    out: list[int] = []
    for dim in spec.trailing:
        width = dim if isinstance(dim, int) else (widths.get(dim) if isinstance(widths, Mapping) else None)
        if isinstance(width, list) and all(_natural(n) for n in width):
            out.extend(width)
        elif _natural(width):
            out.append(width)  # type: ignore[arg-type]
        else:
            return None
    return tuple(out)


class ArrayMetadata(Protocol):
    """What :func:`array_problems` reads of an array: its metadata, never its chunks."""

    @property
    def dtype(self) -> Any: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


def array_problems(spec: ArraySpec, node: ArrayMetadata | Any | None, attrs: Any) -> list[str]:
    """Every way the stored node ``node`` (a zarr array's metadata; None: absent) breaks
    ``spec`` in a store with root attrs ``attrs``, one sentence each starting with the path:
    a required array missing, a group where an array belongs, the dtype, the row count
    against ``counts`` and the trailing shape against ``widths``. An absent optional array
    is no problem: it reads as its unavailable sentinel."""
    path = spec.path
    if node is None:
        if not spec.required:
            return []
        layout = "rows x " + " x ".join(map(str, spec.trailing)) if spec.trailing else "one value a row"
        return [f"{path}: required array is missing; expected {spec.dtype} with {layout} (the store is incomplete)"]
    dtype, shape = getattr(node, "dtype", None), getattr(node, "shape", None)
    if dtype is None or not isinstance(shape, tuple):
        return [f"{path}: is a {type(node).__name__}; expected a {spec.dtype} array"]
    problems = []
    if str(dtype) != spec.dtype:
        problems.append(f"{path}: dtype {dtype}, expected {spec.dtype}")
    rows, trailing = expected_rows(spec, attrs), expected_trailing(spec, attrs)
    table = "steps" if spec.group == Q_H_GROUP else spec.group
    if not shape:
        problems.append(f"{path}: no row axis; expected {rows if rows is not None else 'n'} rows")
    elif rows is not None and shape[0] != rows:
        whole = "" if trailing is None else f": shape {tuple(shape)}, expected {(rows, *trailing)}"
        problems.append(f"{path}: {shape[0]} rows, expected {rows} (attrs counts.{table}){whole}")
    if trailing is None:
        problems.append(f"{path}: trailing widths {list(spec.trailing)} not declared in attrs widths")
    elif shape and tuple(shape[1:]) != trailing:
        problems.append(f"{path}: trailing shape {list(shape[1:])}, expected {list(trailing)} from attrs widths")
    return problems


__all__ = [
    "ARRAYS", "DECLARED_WIDTHS", "DEFAULT_LABEL_SUPPORT", "DEFAULT_RETURN_SEMANTICS", "DEFAULT_TARGET_PROTOCOL",
    "INVALID_REASON_VERSION", "MANIFEST_FILENAME", "Q_H_ARRAY_NAMES", "Q_H_GROUP", "Q_H_REWARD_METRIC",
    "Q_H_TD_SEMANTICS", "REQUIRED_ROOT_ATTRS", "ROLLOUT_ZARR_SCHEMA_ID", "ROLLOUT_ZARR_SCHEMA_VERSION", "TABLES",
    "VOCABULARIES", "ArrayMetadata", "ArraySpec", "array_problems", "declared_counts", "declared_reason_mask",
    "expected_rows", "expected_trailing", "root_attr_problems", "spec_of", "table_arrays",
]
