"""Pack several rollout stores into one: concatenate their factual tables, renumber row ids and
foreign keys, merge vocabularies, rebuild ``q_h/``, and archive each input's manifest and row
mapping so every row still resolves to where it was acquired
(:func:`kuration.rollouts.lineage.acquisition_row_context`).

Every input is validated first (a store that fails validation is refused with its errors).
Inputs must agree on what their numbers mean: schema version, the reason-code table and its
version, the state/position/target/payload widths, the discount gamma and the return, target
protocol and label semantics. A mismatch is refused naming the field and the two values; the
packed store would otherwise mix incomparable labels or returns.

Inputs are read through :class:`~kuration.rollouts.reader.RolloutZarrStoreReader` (the
``StoreRows`` surface): their factual columns, vocabularies, root attrs and checked sidecar.

What it does not do: deduplicate rows (packing the same store twice keeps both copies, each
mapped to its own archived range) or read the inputs' sources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kuration.canonical.hashing import canonical_digest
from kuration.errors import RolloutInputError, RolloutStoreError, shown
from kuration.rollouts import schema
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.lineage import PACKING_VERSION, mapping_digest, read_store_metadata
from kuration.rollouts.normalize import RolloutTables
from kuration.rollouts.reader import RolloutZarrStoreReader
from kuration.rollouts.validation import validate_rollout_zarr_store
from kuration.rollouts.writer import RolloutZarrWriteResult, write_rollout_tables

#: Config fields every input must share (the meaning of labels, returns and reason bits).
#: Lineage fields (split manifest hash, source dataset version, oracle) may differ: each
#: row keeps its own through the archived manifests.
SHARED_CONFIG_FIELDS = ("return_semantics", "discount_gamma", "target_protocol_version", "reason_code_version",
                        "reason_codes", "label_support_semantics", "field_retention_policy")
#: Widths every input must share; ``A`` (the widest shell) is recomputed.
SHARED_WIDTHS = ("P", "D_s", "D_t", "payload")

#: Foreign-key columns and the table whose offset shifts them.
_FOREIGN_KEYS: dict[str, str] = {
    "targets/source_id": "sources", "rollouts/source_id": "sources", "rollouts/target_id": "targets",
    "rollouts/first_step": "steps", "steps/rollout_id": "rollouts", "steps/candidate_start": "candidates",
    "steps/selected_candidate_id": "candidates", "steps/next_step_id": "steps", "candidates/step_id": "steps",
}


#: Every vocabulary name and the table group it is read from (the first that holds it; the
#: candidates' strategy and mixture lists are the rollouts', which validation checks).
_VOCABULARY_TABLES: dict[str, str] = {
    name: next(table for table, names in schema.VOCABULARIES.items() if name in names.values())
    for names in schema.VOCABULARIES.values() for name in names.values()}


@dataclass(frozen=True)
class _Input:
    store_dir: Path
    attrs: dict[str, Any]
    vocabularies: dict[str, list[str]]
    manifest: dict[str, Any]
    manifest_sha256: str
    columns: dict[str, np.ndarray]


def _load(store_dir: Path) -> _Input:
    result = validate_rollout_zarr_store(store_dir)
    if not result.ok:
        shown_errors = "; ".join(result.errors[:5]) + (f"; ... ({len(result.errors)} errors)"
                                                       if len(result.errors) > 5 else "")
        raise RolloutStoreError(f"{store_dir}: cannot pack a store that fails validation: {shown_errors}")
    reader = RolloutZarrStoreReader(store_dir)
    metadata = read_store_metadata(reader)
    columns = {spec.path: reader.array(spec.path) for spec in schema.ARRAYS
               if spec.group in schema.TABLES and reader.has_array(spec.path)}
    vocabularies = {name: reader.vocabulary(table, name) for name, table in _VOCABULARY_TABLES.items()}
    return _Input(store_dir=store_dir, attrs=metadata.attrs, vocabularies=vocabularies, manifest=metadata.manifest,
                  manifest_sha256=metadata.manifest_sha256, columns=columns)


def _check_compatible(inputs: Sequence[_Input]) -> None:
    first = inputs[0]
    for other in inputs[1:]:
        for key in ("schema_id", "schema_version"):
            if other.attrs.get(key) != first.attrs.get(key):
                raise RolloutInputError(f"pack_rollout_zarr_stores: {other.store_dir} has {key} "
                                        f"{shown(other.attrs.get(key))} but {first.store_dir} has "
                                        f"{shown(first.attrs.get(key))}; pack stores of one schema")
        for section, keys in (("config", SHARED_CONFIG_FIELDS), ("widths", SHARED_WIDTHS)):
            for key in keys:
                mine, theirs = first.attrs[section].get(key), other.attrs[section].get(key)
                if mine != theirs:
                    raise RolloutInputError(f"pack_rollout_zarr_stores: {section}.{key} differs: {shown(theirs)} in "
                                            f"{other.store_dir} vs {shown(mine)} in {first.store_dir}; stores with "
                                            "different label, return, reason or shape semantics cannot share one "
                                            "q_h/ view")


def _merged_vocabularies(inputs: Sequence[_Input]) -> tuple[dict[str, list[str]], list[dict[str, np.ndarray]]]:
    """Each vocabulary as the union of the inputs' (first seen first), and per input a lookup
    table old code -> new code for each vocabulary."""
    names = sorted({name for columns in schema.VOCABULARIES.values() for name in columns.values()})
    merged: dict[str, list[str]] = {name: [] for name in names}
    recode: list[dict[str, np.ndarray]] = []
    for item in inputs:
        tables = {}
        for name in names:
            words = item.vocabularies[name]
            index = {word: code for code, word in enumerate(merged[name])}
            lookup = np.empty(len(words), dtype=np.int32)
            for code, word in enumerate(words):
                if word not in index:
                    index[word] = len(merged[name])
                    merged[name].append(word)
                lookup[code] = index[word]
            tables[name] = lookup
        recode.append(tables)
    return merged, recode


def _offsets(inputs: Sequence[_Input]) -> list[dict[str, int]]:
    out, running = [], dict.fromkeys(schema.TABLES, 0)
    for item in inputs:
        out.append(dict(running))
        for table in schema.TABLES:
            running[table] += int(item.columns[schema.table_arrays(table)[0].path].shape[0])
    return out


def concatenate_tables(inputs: Sequence[_Input]) -> tuple[dict[str, np.ndarray], dict[str, list[str]],
                                                          list[dict[str, list[int]]]]:
    """The packed factual columns, merged vocabularies and each input's row ranges."""
    vocabularies, recode = _merged_vocabularies(inputs)
    offsets = _offsets(inputs)
    columns: dict[str, np.ndarray] = {}
    for spec in schema.ARRAYS:
        if spec.group not in schema.TABLES:
            continue
        present = [spec.path in item.columns for item in inputs]
        if not any(present):
            continue
        if not all(present) and spec.unavailable is None:
            raise RolloutInputError(f"pack_rollout_zarr_stores: {spec.path} is in some inputs only and has no "
                                    "unavailable value to fill the others with; pack stores with one retention "
                                    "policy")
        parts = []
        for item, offset, lookups in zip(inputs, offsets, recode, strict=True):
            rows = int(item.columns[schema.table_arrays(spec.group)[0].path].shape[0])
            part = item.columns.get(spec.path)
            if part is None:
                part = np.full((rows,), spec.unavailable, dtype=spec.dtype)
            elif spec.name == schema.table_arrays(spec.group)[0].name:
                part = part + offset[spec.group]
            elif spec.path in _FOREIGN_KEYS:
                shift = offset[_FOREIGN_KEYS[spec.path]]
                part = np.where(part == -1, -1, part + shift) if spec.unavailable == -1 else part + shift
            elif spec.name in schema.VOCABULARIES.get(spec.group, {}):
                part = lookups[schema.VOCABULARIES[spec.group][spec.name]][part]
            parts.append(np.asarray(part, dtype=spec.dtype))
        columns[spec.path] = np.concatenate(parts, axis=0)
    ranges = [{table: [offset[table], int(item.columns[schema.table_arrays(table)[0].path].shape[0])]
               for table in schema.TABLES} for item, offset in zip(inputs, offsets, strict=True)]
    return columns, vocabularies, ranges


def packing_block(inputs: Sequence[_Input], ranges: Sequence[Mapping[str, list[int]]]) -> dict[str, Any]:
    """The root attrs ``packing`` archive (format in :mod:`kuration.rollouts.lineage`)."""
    return {"version": PACKING_VERSION, "inputs": [
        {"manifest": item.manifest, "manifest_sha256": item.manifest_sha256, "packing": item.attrs.get("packing"),
         "rows": dict(rows), "mapping_sha256": mapping_digest(item.manifest_sha256, rows)}
        for item, rows in zip(inputs, ranges, strict=True)]}


def pack_rollout_zarr_stores(inputs: Sequence[str | os.PathLike[str]], store_dir: str | os.PathLike[str], *,
                             q_h_chunk_states: int | None = None, selected_payload_chunk_steps: int | None = None,
                             invocation: Mapping[str, Any] | None = None) -> RolloutZarrWriteResult:
    """Pack the validated stores ``inputs`` (in that order) into a new store at ``store_dir``
    (replaced, like a direct write) and return its write result.

    Rows of input ``k`` follow those of inputs ``0..k-1``; ids and foreign keys are shifted,
    vocabulary codes re-coded into merged vocabularies, ``q_h/`` rebuilt (``A`` is the widest
    shell of all inputs). The config (minus lineage fields that may differ) is the inputs'
    shared config; ``split_manifest_hash`` / ``source_dataset_version`` / ``oracle_id`` are
    the common value, or ``"packed:<digest>"`` of the sorted distinct values when inputs differ
    (each row keeps its own through the archive). Root attrs ``packing`` archive each input's
    manifest and row mapping; the sidecar's ``lineage.caller.packing_sha256`` binds that block.

    Raises :class:`RolloutInputError` for fewer than one input, the output among the inputs,
    or inputs that disagree on semantics (see :data:`SHARED_CONFIG_FIELDS`,
    :data:`SHARED_WIDTHS`), and :class:`RolloutStoreError` for an input that fails validation.
    """
    directories = [Path(os.fspath(item)).resolve() for item in inputs]
    if not directories:
        raise RolloutInputError("pack_rollout_zarr_stores: no input stores to pack")
    output = Path(os.fspath(store_dir)).resolve()
    if output in directories:
        raise RolloutInputError(f"pack_rollout_zarr_stores: the output {output} is also an input; pack into a new "
                                "directory")
    loaded = [_load(directory) for directory in directories]
    _check_compatible(loaded)
    columns, vocabularies, ranges = concatenate_tables(loaded)
    block = packing_block(loaded, ranges)
    first_config = loaded[0].attrs["config"]
    config_fields = {key: first_config[key] for key in SHARED_CONFIG_FIELDS}
    for key in ("split_manifest_hash", "source_dataset_version", "oracle_id"):
        values = sorted({str(item.attrs["config"].get(key)) for item in loaded})
        config_fields[key] = values[0] if len(values) == 1 else f"packed:{canonical_digest(values)}"
    config = RolloutZarrStoreConfig(store_dir=str(output), q_h_chunk_states=q_h_chunk_states,
                                    selected_payload_chunk_steps=selected_payload_chunk_steps, **config_fields)
    counts = {table: int(columns[schema.table_arrays(table)[0].path].shape[0]) for table in schema.TABLES}
    widths = dict(loaded[0].attrs["widths"])
    shell = columns["steps/candidate_count"]
    widths["A"] = int(shell.max()) if shell.size else 0
    group_vocabularies = {group: {name: vocabularies[name] for name in names.values()}
                          for group, names in schema.VOCABULARIES.items()}
    tables = RolloutTables(columns=columns, vocabularies=group_vocabularies, widths=widths, counts=counts)
    context = {"invocation": dict(invocation or {}) or None,
               "generation": {"packed_from": [item.manifest_sha256 for item in loaded]},
               "lineage": {"packing_sha256": canonical_digest(block)}}
    # The archive goes into the root attrs in the writer's final commit, with the manifest
    # digest: no crash window leaves a store whose manifest names a packing it lacks.
    return write_rollout_tables(config, tables, manifest_context=context, extra_root_attrs={"packing": block})


__all__ = ["SHARED_CONFIG_FIELDS", "SHARED_WIDTHS", "concatenate_tables", "pack_rollout_zarr_stores", "packing_block"]
