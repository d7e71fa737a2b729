"""Rollout generation: a committed dataset's train split turned into rollout records by a
pluggable :class:`RolloutRecipe`, with the lineage that binds them to what they came from.

:func:`rollout_records_from_dataset` loads the committed dataset, checks it can serve the
recipe (every required modality declared), reads the split's shards (each verified against
the size and SHA-256 its manifest records) and hands each shard's arrays to the recipe. The
result, :class:`RolloutGeneration`, holds the recipe's chains (records, or columnar
:class:`~kuration.rollouts.records.RolloutChainBatch` es, as the recipe made them) and what
the store writer needs beyond them (:meth:`RolloutGeneration.writer_options`).

Lineage rules, each refused with :class:`~kuration.errors.RolloutInputError` when broken:

- every record's (and batch's) source is a shard of the dataset, carrying the SHA-256 the dataset
  manifest records for it (the recipe may not invent another);
- ``split_manifest_hash`` is the SHA-256 of the baked ``splits.json`` under ``splits_root``
  (:func:`kuration.splits.artifacts.read_split_assignments`), and the dataset must have
  been written from that split: its ``config.json`` provenance records either the
  assignments' identity (:func:`kuration.budget.split_pools.split_assignments_identity`,
  from ``write_dataset(split_assignments=...)``) or the splits.json digest its stored plan
  was made over (``origin: "splits_json"``, from ``write_planned_dataset(split=...)``);
- offline RL trains on the train split only: any other split is refused unless
  ``allow_non_train=True``, which the lineage records.

What it deliberately does not do: write the store (:mod:`kuration.rollouts.writer`), or
check a recipe's labels beyond the item types and sources (the writer checks the store
contract, a batch's columns included).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from kuration.budget.split_pools import split_assignments_identity
from kuration.errors import KurationError, RolloutInputError, shown
from kuration.canonical.hashing import canonical_digest, canonical_json, code_fingerprint
from kuration.output.spec import PRESENT
from kuration.read.committed import CommittedDataset, load_committed
from kuration.read.loaders import iter_shards, shard_entries
from kuration.rollouts.records import RolloutChainBatch, RolloutChainInput, RolloutSourceRef, RolloutWriteRecord
from kuration.rollouts.schema import INVALID_REASON_VERSION
from kuration.splits.artifacts import read_split_assignments
from kuration.splits.stages import EXCLUSIVE_STAGES

_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The split offline RL trains on.
TRAIN_SPLIT = "train"
#: Reason bits are stored in a uint32.
_REASON_BITS = 32


@runtime_checkable
class RolloutRecipe(Protocol):
    """How one committed shard becomes rollout chains. Pass your own object with these
    members to :func:`rollout_records_from_dataset`; :class:`~kuration.rollouts.demo_recipe.MotionDirectionRecipe`
    is the built-in one.

    - ``recipe_id``: a stable name of the recipe and its version (``"motion_direction_v1"``);
      bump it when its meaning changes.
    - ``params()``: every option that changes the records, JSON-able; fingerprinted with
      :func:`kuration.canonical.hashing.canonical_digest` into the lineage.
    - ``reason_codes``: the invalid-reason table, name -> bit position (0..31); the bits a
      recipe sets on candidates mean these names. The table is versioned with the recipe:
      a recipe that changes a bit's meaning bumps its ``recipe_id`` (the store records the
      table itself and :data:`~kuration.rollouts.schema.INVALID_REASON_VERSION`).
    - ``required_modalities``: the modalities ``records_for_shard`` cannot do without; a
      dataset that does not declare one is refused before any shard is read. A modality it
      only uses when the shard has it (the built-in recipe's ``payload_modality``, kept with
      ``field_retention_policy="full"``) is not listed.
    - ``field_retention_policy``: ``"compact"`` (no heavy payloads) or ``"full"`` (the
      records carry ``selected_payload``); handed to the store writer.
    - ``records_for_shard(arrays, source)``: the chains of one shard, as a list of
      :class:`~kuration.rollouts.records.RolloutWriteRecord` (one chain each) and/or
      :class:`~kuration.rollouts.records.RolloutChainBatch` (many chains as columns: the
      fast form for a recipe that computes whole arrays; the writer stores both alike). A
      shard with no chains gives an empty list, never a batch of zero chains. ``arrays``
      maps each declared modality to its rows, trimmed to the shard's recorded steps (pad
      rows cut away), plus ``"_present"`` (bool, one per row: the entity is recorded on the
      row) when the dataset has a presence mask. Every item's ``source`` must be
      ``source``. Raise :class:`~kuration.errors.RolloutInputError` for arrays it cannot use.
    """

    @property
    def recipe_id(self) -> str: ...

    @property
    def reason_codes(self) -> Mapping[str, int]: ...

    @property
    def required_modalities(self) -> tuple[str, ...]: ...

    @property
    def field_retention_policy(self) -> str: ...

    def params(self) -> Mapping[str, Any]: ...

    def records_for_shard(self, arrays: Mapping[str, np.ndarray],
                          source: RolloutSourceRef) -> Sequence[RolloutChainInput]: ...


@dataclass(frozen=True)
class RolloutLineage:
    """What a generation was made from, as recorded in the store's manifest sidecar.

    ``dataset_manifest_sha256`` is the SHA-256 the dataset's commit record pins for its
    manifest (the dataset's version: its manifest records every shard's SHA-256);
    ``dataset_run_fingerprint`` the writer run that committed it. ``split_manifest_hash``
    is the SHA-256 of the baked ``splits.json`` (None when no split was bound), and
    ``split_identity`` the assignments identity checked against the dataset's provenance
    (None when no ``splits_root`` was given). ``recipe_params_sha256`` is the canonical
    digest of the recipe's id and params; ``recipe_code`` the recipe's code fingerprint."""

    dataset: str
    dataset_manifest_sha256: str
    dataset_run_fingerprint: str
    split: str
    allow_non_train: bool
    split_manifest_hash: str | None
    split_identity: Mapping[str, Any] | None
    shards: int
    recipe_id: str
    recipe_params: Mapping[str, Any]
    recipe_params_sha256: str
    recipe_code: Mapping[str, Any] | None
    reason_code_version: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset, "dataset_manifest_sha256": self.dataset_manifest_sha256,
            "dataset_run_fingerprint": self.dataset_run_fingerprint, "split": self.split,
            "allow_non_train": self.allow_non_train, "split_manifest_hash": self.split_manifest_hash,
            "split_identity": None if self.split_identity is None else dict(self.split_identity),
            "shards": self.shards, "recipe_id": self.recipe_id, "recipe_params": dict(self.recipe_params),
            "recipe_params_sha256": self.recipe_params_sha256,
            "recipe_code": None if self.recipe_code is None else dict(self.recipe_code),
            "reason_code_version": self.reason_code_version,
        }


@dataclass(frozen=True)
class RolloutGeneration:
    """The chains of one generation, its lineage, and the recipe's reason-code table and
    retention policy. :meth:`writer_options` gives the keyword arguments of
    ``write_rollout_zarr_store`` that the generation decides.

    ``records`` holds what the recipe returned, shard by shard in manifest order:
    :class:`~kuration.rollouts.records.RolloutWriteRecord` s and/or
    :class:`~kuration.rollouts.records.RolloutChainBatch` es (the built-in recipe gives one
    batch per shard), which the writer takes as they are. So ``len(records)`` is not the
    number of chains: use :attr:`num_chains` and :attr:`num_steps`, or
    :meth:`chain_records` for one record per chain."""

    records: tuple[RolloutChainInput, ...]
    lineage: RolloutLineage
    reason_codes: Mapping[str, int]
    field_retention_policy: str

    @property
    def num_chains(self) -> int:
        """How many chains the generation holds (each batch counts its chains)."""
        return sum(len(item.chain_lengths) if isinstance(item, RolloutChainBatch) else 1 for item in self.records)

    @property
    def num_steps(self) -> int:
        """How many steps the chains hold in all."""
        return sum(int(np.sum(item.chain_lengths)) if isinstance(item, RolloutChainBatch) else len(item.steps)
                   for item in self.records)

    def chain_records(self) -> tuple[RolloutWriteRecord, ...]:
        """One :class:`~kuration.rollouts.records.RolloutWriteRecord` per chain, in store
        order (batches expanded with ``to_records()``): the per-chain view for inspection.
        It builds an object per step, so it is far slower than handing ``records`` to the
        writer."""
        return tuple(record for item in self.records
                     for record in (item.to_records() if isinstance(item, RolloutChainBatch) else (item,)))

    def writer_options(self) -> dict[str, Any]:
        """``reason_codes``, ``split_manifest_hash`` (only when one was bound: the writer
        keeps its own "unknown" default otherwise), ``source_dataset_version`` (the dataset
        manifest's SHA-256), ``field_retention_policy`` and ``manifest_context``
        (``{"generation": lineage}``), for ``write_rollout_zarr_store(store_dir, records,
        **options)``."""
        options: dict[str, Any] = {
            "reason_codes": dict(self.reason_codes),
            "source_dataset_version": self.lineage.dataset_manifest_sha256,
            "field_retention_policy": self.field_retention_policy,
            "manifest_context": {"generation": self.lineage.to_dict()},
        }
        if self.lineage.split_manifest_hash is not None:
            options["split_manifest_hash"] = self.lineage.split_manifest_hash
        return options


def _checked_recipe(recipe: Any) -> tuple[str, dict[str, Any], dict[str, int], tuple[str, ...], str]:
    """The recipe's id, params, reason codes, required modalities and retention policy,
    each checked; :class:`RolloutInputError` names the member that is wrong."""
    missing = [name for name in ("recipe_id", "params", "reason_codes", "required_modalities",
                                 "field_retention_policy", "records_for_shard") if not hasattr(recipe, name)]
    if missing:
        raise RolloutInputError(f"recipe: {type(recipe).__name__} lacks {missing}; a recipe implements the "
                                "RolloutRecipe protocol (kuration.rollouts.RolloutRecipe)")
    recipe_id = recipe.recipe_id
    if not isinstance(recipe_id, str) or not recipe_id:
        raise RolloutInputError(f"recipe.recipe_id: must be a non-empty string, got {shown(recipe_id)}")
    where = f"recipe {recipe_id!r}"
    params = recipe.params()
    if not isinstance(params, Mapping):
        raise RolloutInputError(f"{where}: params() must return a mapping, got {type(params).__name__}")
    try:
        canonical_json(params)
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{where}: params() must be JSON-able (finite numbers, strings, lists, objects with "
                                f"string keys): {exc}") from None
    codes = recipe.reason_codes
    if not isinstance(codes, Mapping) or not codes:
        raise RolloutInputError(f"{where}: reason_codes must be a non-empty mapping name -> bit, got {shown(codes)}")
    bits: dict[int, str] = {}
    for name, bit in codes.items():
        if not isinstance(name, str) or not name or isinstance(bit, bool) or not isinstance(bit, int) \
                or not 0 <= bit < _REASON_BITS:
            raise RolloutInputError(f"{where}: reason_codes[{name!r}] = {shown(bit)}; each name maps to a bit "
                                    f"position 0..{_REASON_BITS - 1}")
        if bit in bits:
            raise RolloutInputError(f"{where}: reason_codes {bits[bit]!r} and {name!r} share bit {bit}; each reason "
                                    "needs its own bit")
        bits[bit] = name
    modalities = recipe.required_modalities
    if isinstance(modalities, str) or not all(isinstance(m, str) for m in modalities):
        raise RolloutInputError(f"{where}: required_modalities must be a tuple of modality names, got "
                                f"{shown(modalities)}")
    retention = recipe.field_retention_policy
    if not isinstance(retention, str) or not retention:
        raise RolloutInputError(f"{where}: field_retention_policy must be a policy name, got {shown(retention)}")
    return recipe_id, dict(params), dict(codes), tuple(modalities), retention


def _open_dataset(dataset: str | os.PathLike[str] | CommittedDataset) -> CommittedDataset:
    if isinstance(dataset, CommittedDataset):
        return dataset
    if not isinstance(dataset, (str, os.PathLike)):
        raise RolloutInputError(f"dataset: expected a committed dataset's directory or URL (or a CommittedDataset), "
                                f"got {type(dataset).__name__}; rollouts are generated from committed datasets only, "
                                "so their lineage can be proven")
    return load_committed(dataset)


def _split_binding(loaded: CommittedDataset, splits_root: str | os.PathLike[str] | None,
                   split_manifest_hash: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """The splits.json SHA-256 the store binds to, and the split identity checked against
    the dataset's provenance (when ``splits_root`` is given)."""
    if split_manifest_hash is not None and (not isinstance(split_manifest_hash, str)
                                            or not _SHA256.fullmatch(split_manifest_hash)):
        raise RolloutInputError(f"split_manifest_hash: must be the 64 lowercase hex digits of splits.json's SHA-256, "
                                f"got {shown(split_manifest_hash)}")
    if splits_root is None:
        return split_manifest_hash, None
    try:
        assignments, digest = read_split_assignments(splits_root)
        identity = split_assignments_identity(assignments)
    except (KurationError, OSError, pa.ArrowException) as exc:  # BudgetError: a malformed assignments table
        raise RolloutInputError(f"splits_root {os.fspath(splits_root)}: {exc}") from None
    if split_manifest_hash is not None and split_manifest_hash != digest:
        raise RolloutInputError(f"split_manifest_hash {split_manifest_hash[:12]}... is not the SHA-256 of the baked "
                                f"splits.json under {os.fspath(splits_root)} ({digest[:12]}...); pass one of them, or "
                                "the hash of the split the dataset was written from")
    provenance = loaded.config.get("provenance")
    recorded = provenance.get("split") if isinstance(provenance, Mapping) else None
    where = f"{loaded.root}: config.json provenance.split"
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("sha256"), str):
        raise RolloutInputError(
            f"{where} records no split identity (the dataset was not written from resolved split assignments), so "
            f"it cannot be bound to the split under {os.fspath(splits_root)}; re-materialize the dataset with "
            "write_dataset(..., split_assignments=read_split_assignments(root)[0]), or pass split_manifest_hash "
            "alone to record a split without proving it")
    # write_dataset(split_assignments=...) records the assignments' identity; a dataset
    # written from a stored plan (the Dagster asset) records the splits.json digest the plan
    # was made over (origin "splits_json"). Either proves the split.
    if recorded.get("origin") == "splits_json":
        expected, what = digest, "baked splits.json"
    else:
        expected, what = identity["sha256"], "split assignments"
    if recorded.get("sha256") != expected:
        raise RolloutInputError(
            f"{where} is {str(recorded.get('sha256'))[:12]}..., but the {what} under "
            f"{os.fspath(splits_root)} is {expected[:12]}...: the dataset was written from another split. "
            "Re-materialize the dataset from the current split (or point splits_root at the split it was written "
            "from)")
    return digest, identity


def _holds_no_chains(batch: RolloutChainBatch) -> bool:
    """``chain_lengths`` is an empty sequence; anything stranger is left to the writer's
    column checks, which name what they found."""
    try:
        return len(batch.chain_lengths) == 0
    except TypeError:  # a scalar or an object without a length
        return False


def _checked_records(records: Any, source: RolloutSourceRef, recipe_id: str) -> list[RolloutChainInput]:
    """The recipe's items for one shard, each a record or a batch of that shard's chains.
    A batch's columns are the writer's to check; a batch of no chains is refused here,
    where the recipe and shard can be named."""
    where = f"recipe {recipe_id!r} on {source.shard_path}"
    if not isinstance(records, (list, tuple)):
        raise RolloutInputError(f"{where}: records_for_shard must return a list of RolloutWriteRecord and/or "
                                f"RolloutChainBatch, got {type(records).__name__}")
    for i, item in enumerate(records):
        if not isinstance(item, (RolloutWriteRecord, RolloutChainBatch)):
            raise RolloutInputError(f"{where}: item {i} is a {type(item).__name__}, not a RolloutWriteRecord or "
                                    "RolloutChainBatch")
        kind = "record" if isinstance(item, RolloutWriteRecord) else "batch"
        if item.source != source:
            raise RolloutInputError(f"{where}: {kind} {i} names source {shown(item.source)}; each {kind}'s source "
                                    "must be the shard's (its path and the SHA-256 the dataset manifest records)")
        if isinstance(item, RolloutChainBatch) and _holds_no_chains(item):
            raise RolloutInputError(f"{where}: batch {i} holds no chains; return no batch for a shard without chains")
    return list(records)


def rollout_records_from_dataset(
    dataset: str | os.PathLike[str] | CommittedDataset,
    recipe: RolloutRecipe,
    *,
    split: str = TRAIN_SPLIT,
    allow_non_train: bool = False,
    splits_root: str | os.PathLike[str] | None = None,
    split_manifest_hash: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RolloutGeneration:
    """The rollout records ``recipe`` makes from the ``split`` shards of the committed
    ``dataset`` (a directory or URL, or a loaded :class:`~kuration.read.CommittedDataset`),
    with their lineage; see the module doc for the rules.

    ``splits_root`` (the storage root holding the resolved split) binds the generation to
    its baked ``splits.json`` and proves the dataset was written from it;
    ``split_manifest_hash`` alone records a hash without that proof. ``progress(done,
    total)`` is called after each shard. Shards are read in manifest order, each verified
    (a changed shard raises :class:`~kuration.read.DatasetIntegrityError`)."""
    if split not in EXCLUSIVE_STAGES:
        raise RolloutInputError(f"split: must be one of {list(EXCLUSIVE_STAGES)}, got {shown(split)}")
    if not isinstance(allow_non_train, bool):
        raise RolloutInputError(f"allow_non_train: must be True or False, got {shown(allow_non_train)}")
    if split != TRAIN_SPLIT and not allow_non_train:
        raise RolloutInputError(
            f"split={split!r}: a rollout store trains an offline-RL policy, and training reads the train split only; "
            f"a store built from {split!r} would leak it into training. Pass allow_non_train=True to build one for "
            "evaluation on purpose (the store's lineage records it)")
    recipe_id, params, codes, modalities, retention = _checked_recipe(recipe)
    loaded = _open_dataset(dataset)
    declared = loaded.spec.modalities
    for name in modalities:
        if name not in declared:
            raise RolloutInputError(
                f"{loaded.root}: recipe {recipe_id!r} needs modality {name!r}, which the dataset does not declare (it "
                f"declares {sorted(declared)}); add it to the output spec and re-materialize the dataset, or configure "
                "the recipe to use a modality the dataset has")
    bound_hash, identity = _split_binding(loaded, splits_root, split_manifest_hash)
    entries = shard_entries(loaded, split=split)
    records: list[RolloutChainInput] = []
    for done, (arrays, meta) in enumerate(iter_shards(loaded, split=split, with_meta=True, verify=True), start=1):
        source = RolloutSourceRef(shard_path=meta["path"], shard_sha256=meta["sha256"],
                                  entity=str(meta.get("entity_id", "")), split=meta["split"],
                                  n_states=int(meta["n_steps"]))
        shard_arrays = {name: arrays[name] for name in (*declared, PRESENT) if name in arrays}
        records += _checked_records(recipe.records_for_shard(shard_arrays, source), source, recipe_id)
        if progress is not None:
            progress(done, len(entries))
    record = loaded.record
    lineage = RolloutLineage(
        dataset=loaded.root, dataset_manifest_sha256=str(record.manifest_sha256),
        dataset_run_fingerprint=record.run_fingerprint, split=split, allow_non_train=allow_non_train,
        split_manifest_hash=bound_hash, split_identity=identity, shards=len(entries), recipe_id=recipe_id,
        recipe_params=params, recipe_params_sha256=canonical_digest({"recipe_id": recipe_id, "params": params}),
        recipe_code=code_fingerprint(recipe, state=params), reason_code_version=INVALID_REASON_VERSION,
    )
    return RolloutGeneration(tuple(records), lineage, codes, retention)


__all__ = ["TRAIN_SPLIT", "RolloutGeneration", "RolloutLineage", "RolloutRecipe", "rollout_records_from_dataset"]
