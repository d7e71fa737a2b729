"""Write a rollout replay store: the zarr I/O half, from normalized tables to files.

:func:`write_rollout_zarr_store` (seed 004's entry point) is the direct write: it gathers its
keyword options into one :class:`~kuration.rollouts.config.RolloutZarrStoreConfig`, normalizes
the records (:func:`kuration.rollouts.normalize.normalize_rollout_records`, no I/O), plans the
write (:func:`plan_rollout_write`: the derived ``q_h/`` view, the sidecar manifest, its digest
and the root attrs, no I/O), then publishes the plan (:func:`publish_rollout_plan`). It
*replaces* ``store_dir`` (remove, then write): a killed direct write leaves a torn store; the
crash-safe path is :func:`kuration.rollouts.promote.write_rollout_store_atomically`, which
writes a temp sibling with this function and promotes it. Everything that can refuse the
input refuses it before the destination is touched.

Layout choices (zarr 3.1.6, zstd level 0; figures in ``bench/README.md``, where ~1M candidate
rows make a 38 MB store of 159 files):

- Every array is chunked on its row axis so a chunk holds about 1 MB uncompressed
  (:data:`TARGET_CHUNK_BYTES`), bounded by the row count: per-chunk codec and file overhead
  stops mattering above a few hundred KB, and 1 MB keeps a 256-row random read cheap.
- Wide arrays (``candidates/position``, ``steps/state``, ``steps/selected_payload`` and the
  padded ``q_h/`` S x A arrays) are written as zarr shards of up to :data:`SHARD_CHUNKS`
  chunks, so a large store stays a few hundred files; their inner chunk stays the unit a
  random read decodes. ``q_h_chunk_states`` (config) sets the q_h inner chunk in rows.
- Writes use ``write_empty_chunks=True``: every chunk exists on disk, so a deleted chunk is
  detectable (zarr 3.1 would silently read it as the fill value).
- Float columns are canonical already (normalization and :func:`build_q_h` make them so), so
  the same records give the same chunk bytes on every CPU.

Determinism: the persisted config excludes ``store_dir`` and the sidecar has no clock time,
so the same records and config give byte-identical stores (every chunk, every ``zarr.json``,
the sidecar) under the same Python/numpy/zarr/Kuration versions. The sidecar's ``runtime``
block names those versions, so ``manifest_sha256`` changes when they do, by design: it
records what wrote the store.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration._version import __version__ as kuration_version
from kuration.canonical.hashing import canonical_digest, canonical_json, readable_json
from kuration.errors import RolloutInputError, check_keys
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.normalize import RolloutTables, normalize_rollout_records
from kuration.rollouts.qh import build_q_h
from kuration.rollouts.records import RolloutChainInput
from kuration.rollouts.schema import (
    ARRAYS,
    DEFAULT_LABEL_SUPPORT,
    DEFAULT_RETURN_SEMANTICS,
    DEFAULT_TARGET_PROTOCOL,
    INVALID_REASON_VERSION,
    MANIFEST_FILENAME,
    Q_H_GROUP,
    Q_H_REWARD_METRIC,
    Q_H_TD_SEMANTICS,
    REQUIRED_ROOT_ATTRS,
    ROLLOUT_ZARR_SCHEMA_ID,
    ROLLOUT_ZARR_SCHEMA_VERSION,
    TABLES,
    ArraySpec,
)
from kuration.storage import is_remote, local_path, remove_tree, write_bytes_atomic

#: Uncompressed bytes a chunk aims at (rows are chosen to reach it, bounded by the row count).
TARGET_CHUNK_BYTES = 1 << 20
#: Most inner chunks one shard file of a wide array holds.
SHARD_CHUNKS = 16
#: Arrays written as zarr shards: the factual arrays with a trailing dimension of their own
#: width, and every padded q_h S x A array.
SHARDED_ARRAYS = frozenset({
    "candidates/position", "steps/state", "steps/selected_payload", "targets/value",
    "q_h/candidate_ids", "q_h/valid_action_mask", "q_h/q_train_mask", "q_h/one_step_labels",
    "q_h/reason_bits", "q_h/positions",
})
#: Keys ``manifest_context`` may carry into the sidecar.
MANIFEST_CONTEXT_KEYS = ("invocation", "generation", "lineage")


@dataclass(frozen=True)
class RolloutZarrWriteResult:
    """Summary of one write. Counts are rows of the materialized tables; ``chunking`` maps
    each array path to ``{"chunks": [...], "shards": [...] | None}`` as written."""

    store_dir: str
    num_rollouts: int
    num_steps: int
    num_candidates: int
    num_sources: int
    num_targets: int
    manifest_path: str
    manifest_sha256: str
    chunking: Mapping[str, Mapping[str, Any]]


# -- write ---------------------------------------------------------------------------------


def _chunk_rows(spec: ArraySpec, shape: tuple[int, ...], config: RolloutZarrStoreConfig) -> int:
    rows = shape[0]
    row_bytes = max(1, int(np.dtype(spec.dtype).itemsize * math.prod(shape[1:])))
    wanted: int | None = None
    if spec.group == Q_H_GROUP and len(shape) > 1:
        wanted = config.q_h_chunk_states
    elif spec.path == "steps/selected_payload":
        wanted = config.selected_payload_chunk_steps
    if wanted is None:
        wanted = max(1, -(-TARGET_CHUNK_BYTES // row_bytes))
    return max(1, min(wanted, rows))


def _layout(spec: ArraySpec, shape: tuple[int, ...], config: RolloutZarrStoreConfig
            ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    rows = _chunk_rows(spec, shape, config)
    chunks = (rows, *shape[1:])
    if spec.path not in SHARDED_ARRAYS or shape[0] <= rows:
        return chunks, None
    per_shard = min(SHARD_CHUNKS, -(-shape[0] // rows))
    return chunks, (rows * per_shard, *shape[1:])


def _fill_value(spec: ArraySpec) -> Any:
    if spec.unavailable is not None:
        return spec.unavailable
    return False if spec.dtype == "bool" else 0


def _write_array(group: Any, spec: ArraySpec, data: np.ndarray, config: RolloutZarrStoreConfig) -> dict[str, Any]:
    from zarr.codecs import ZstdCodec

    # Float columns are canonical already (normalize and build_q_h make them so): no copy here.
    data = np.ascontiguousarray(np.asarray(data, dtype=spec.dtype))
    chunks, shards = _layout(spec, data.shape, config)
    array = group.create_array(spec.name, shape=data.shape, dtype=spec.dtype, chunks=chunks, shards=shards,
                               compressors=ZstdCodec(level=0, checksum=False), fill_value=_fill_value(spec),
                               config={"write_empty_chunks": True})
    array[...] = data
    return {"chunks": list(chunks), "shards": None if shards is None else list(shards)}


def write_rollout_zarr_store(
    store_dir: str | os.PathLike[str],
    records: Iterable[RolloutChainInput],
    *,
    return_semantics: str = DEFAULT_RETURN_SEMANTICS,
    discount_gamma: float = 1.0,
    target_protocol_version: str = DEFAULT_TARGET_PROTOCOL,
    reason_code_version: str = INVALID_REASON_VERSION,
    reason_codes: Mapping[str, int] | None = None,
    field_retention_policy: str = "compact",
    source_dataset_version: str = "unknown-source-version",
    split_manifest_hash: str = "unknown-split-manifest",
    q_h_chunk_states: int | None = None,
    selected_payload_chunk_steps: int | None = None,
    oracle_id: str = "unspecified-oracle",
    label_support_semantics: str = DEFAULT_LABEL_SUPPORT,
    manifest_context: Mapping[str, Any] | None = None,
    source_offline_store_version: str | None = None,
    oracle_query_mode: str | None = None,
    selected_depth_chunk_steps: int | None = None,
) -> RolloutZarrWriteResult:
    """Replace the local directory ``store_dir`` with a rollout store written from ``records``:
    :class:`RolloutWriteRecord` and :class:`RolloutChainBatch` items in any mix, their chains
    stored in the order given (the same chains give the same bytes as records or batches).

    Keyword options are the :class:`RolloutZarrStoreConfig` fields (``reason_codes=None``:
    :data:`~kuration.rollouts.config.DEFAULT_REASON_CODES`), gathered into one config.
    ``source_offline_store_version``, ``oracle_query_mode`` and ``selected_depth_chunk_steps``
    are seed 004's names of ``source_dataset_version``, ``oracle_id`` and
    ``selected_payload_chunk_steps`` (both names with different values are refused).
    ``manifest_context`` may carry ``invocation``, ``generation`` and ``lineage`` JSON objects
    from the caller; they go into the sidecar as given.

    Refused with :class:`RolloutInputError` naming ``records[i].steps[j].<field>`` (a
    record) or ``records[i].<field>[row]`` (a batch), before anything is written: see
    :func:`~kuration.rollouts.normalize.normalize_rollout_records` for every rule.

    Writes the five factual tables, ``q_h/`` (built by :func:`build_q_h` at
    ``discount_gamma``), the sidecar :data:`MANIFEST_FILENAME` and, last, the root attrs
    with ``manifest_sha256``. Remote URLs are refused (local paths only)."""
    if is_remote(store_dir):
        raise RolloutInputError(f"store_dir: {os.fspath(store_dir)!r} is a remote URL; rollout stores are written to "
                                "a local path (write locally, then copy the finished store)")
    config = RolloutZarrStoreConfig.from_keywords(
        store_dir=os.fspath(local_path(store_dir)), return_semantics=return_semantics,
        discount_gamma=discount_gamma, target_protocol_version=target_protocol_version,
        reason_code_version=reason_code_version, reason_codes=reason_codes,
        field_retention_policy=field_retention_policy, source_dataset_version=source_dataset_version,
        split_manifest_hash=split_manifest_hash, q_h_chunk_states=q_h_chunk_states,
        selected_payload_chunk_steps=selected_payload_chunk_steps, oracle_id=oracle_id,
        label_support_semantics=label_support_semantics,
        seed_aliases={"source_offline_store_version": source_offline_store_version,
                      "oracle_query_mode": oracle_query_mode, "selected_depth_chunk_steps": selected_depth_chunk_steps})
    context = _checked_context(manifest_context)
    tables = normalize_rollout_records(records, config=config)
    return publish_rollout_plan(plan_rollout_write(config, tables, manifest_context=context))


def _checked_context(context: Mapping[str, Any] | None) -> dict[str, Any]:
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise RolloutInputError(f"manifest_context: expected a mapping, found {type(context).__name__}")
    check_keys(context, MANIFEST_CONTEXT_KEYS, where="manifest_context", error=RolloutInputError)
    return _json_mapping(context, "manifest_context")


def _json_mapping(values: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``values`` as a dict, refused unless canonical JSON can hold it."""
    try:
        canonical_json(dict(values))
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{name}: not JSON-serializable ({exc}); pass plain dicts, lists, strings and "
                                "finite numbers") from None
    return dict(values)


def build_manifest(config: RolloutZarrStoreConfig, tables: RolloutTables,
                   manifest_context: Mapping[str, Any]) -> dict[str, Any]:
    """The sidecar content: schema, config, counts, widths, reason codes, invocation,
    generation context, lineage and runtime. No clock time, so it is reproducible."""
    import zarr

    columns = tables.columns
    source_paths = tables.vocabularies["sources"]["shard_paths"]
    sources = [
        {"shard_path": source_paths[int(code)], "shard_sha256": bytes(digest).hex()}
        for code, digest in zip(columns["sources/shard_path_code"], columns["sources/shard_sha256"], strict=True)
    ]
    return {
        **_store_identity(config, tables),
        "invocation": manifest_context.get("invocation"),
        "generation": manifest_context.get("generation"),
        "lineage": {
            "split_manifest_hash": config.split_manifest_hash,
            "source_dataset_version": config.source_dataset_version,
            "num_sources": int(tables.counts["sources"]),
            "sources_sha256": canonical_digest(sources),
            "caller": manifest_context.get("lineage"),
        },
        "runtime": {"python": platform.python_version(), "numpy": np.__version__, "zarr": zarr.__version__,
                    "kuration": kuration_version},
    }


def _store_identity(config: RolloutZarrStoreConfig, tables: RolloutTables) -> dict[str, Any]:
    """What both the root attrs and the sidecar record: schema, config, counts, widths and
    the reason-code table."""
    return {
        "schema_id": ROLLOUT_ZARR_SCHEMA_ID,
        "schema_version": ROLLOUT_ZARR_SCHEMA_VERSION,
        "config": config.persisted(),
        "counts": dict(tables.counts),
        "widths": dict(tables.widths),
        "reason_codes": {"version": config.reason_code_version, "bits": dict(config.reason_codes)},
    }


#: Root attrs the writer sets itself; ``extra_root_attrs`` may not name them.
WRITER_ROOT_ATTRS = frozenset({*REQUIRED_ROOT_ATTRS, "manifest_sha256"})


def _checked_root_attrs(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise RolloutInputError(f"extra_root_attrs: expected a mapping, found {type(extra).__name__}")
    if not all(isinstance(key, str) and key for key in extra):
        raise RolloutInputError(f"extra_root_attrs: keys must be non-empty strings, found {sorted(map(repr, extra))}")
    taken = sorted(key for key in extra if key in WRITER_ROOT_ATTRS)
    if taken:
        raise RolloutInputError(f"extra_root_attrs: {taken} are root attrs the writer sets itself; use other names")
    return _json_mapping(extra, "extra_root_attrs")


@dataclass(frozen=True)
class RolloutWritePlan:
    """Everything a write puts on disk, decided before the destination is touched: the config
    (``store_dir`` is where), the normalized factual tables, the derived ``q_h/`` arrays, the
    sidecar manifest and its digest, and the root attrs committed last."""

    config: RolloutZarrStoreConfig
    tables: RolloutTables
    q_h: Mapping[str, np.ndarray]
    manifest: Mapping[str, Any]
    manifest_sha256: str
    root_attrs: Mapping[str, Any]


def plan_rollout_write(config: RolloutZarrStoreConfig, tables: RolloutTables, *,
                       manifest_context: Mapping[str, Any] | None = None,
                       extra_root_attrs: Mapping[str, Any] | None = None) -> RolloutWritePlan:
    """The plan of writing already-normalized ``tables`` (no I/O): ``q_h/`` at the config's
    gamma, the manifest and the root attrs.

    ``extra_root_attrs`` (JSON values under names the writer does not set, see
    :data:`WRITER_ROOT_ATTRS`) go into the root attrs in the same final update as
    ``manifest_sha256``, so a crash never leaves a committed store without them (packing's
    ``packing`` archive is one). Refused with :class:`RolloutInputError`."""
    extra = _checked_root_attrs(extra_root_attrs)
    q_h = build_q_h(tables.columns, discount_gamma=config.discount_gamma, widths=tables.widths)
    manifest = build_manifest(config, tables, dict(manifest_context or {}))
    manifest_sha256 = canonical_digest(manifest)
    root_attrs = {**extra, **_store_identity(config, tables), "manifest_sha256": manifest_sha256}
    return RolloutWritePlan(config=config, tables=tables, q_h=q_h, manifest=manifest, manifest_sha256=manifest_sha256,
                            root_attrs=root_attrs)


def publish_rollout_plan(plan: RolloutWritePlan) -> RolloutZarrWriteResult:
    """Write ``plan`` to ``plan.config.store_dir``, replacing it: every table group and array,
    the sidecar, and last the root attrs (what a reader trusts)."""
    import zarr

    config, tables = plan.config, plan.tables
    store_dir = local_path(config.store_dir).resolve()
    remove_tree(store_dir)
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    root = zarr.open_group(str(store_dir), mode="w", zarr_format=3)
    chunking: dict[str, dict[str, Any]] = {}
    for group_name in (*TABLES, Q_H_GROUP):
        attrs: dict[str, Any] = dict(tables.vocabularies.get(group_name, {}))
        if group_name == Q_H_GROUP:
            attrs = {"return_semantics": config.return_semantics, "discount_gamma": config.discount_gamma,
                     "td_semantics": Q_H_TD_SEMANTICS, "reward_metric": Q_H_REWARD_METRIC}
        group = root.create_group(group_name, attributes=attrs)
        for spec in ARRAYS:
            if spec.group != group_name:
                continue
            data = plan.q_h[spec.name] if group_name == Q_H_GROUP else tables.columns.get(spec.path)
            if data is None:
                if spec.required:
                    raise AssertionError(f"normalize produced no {spec.path}")  # a bug here, not bad input
                continue
            chunking[spec.path] = _write_array(group, spec, data, config)
    manifest_path = store_dir / MANIFEST_FILENAME
    write_bytes_atomic(manifest_path, readable_json(plan.manifest))
    # Commit last: the root attrs (with the manifest digest) are what a reader trusts.
    root.attrs.update(dict(plan.root_attrs))
    counts = tables.counts
    return RolloutZarrWriteResult(
        store_dir=str(store_dir), num_rollouts=counts["rollouts"], num_steps=counts["steps"],
        num_candidates=counts["candidates"], num_sources=counts["sources"], num_targets=counts["targets"],
        manifest_path=str(manifest_path), manifest_sha256=plan.manifest_sha256, chunking=chunking)


def write_rollout_tables(config: RolloutZarrStoreConfig, tables: RolloutTables, *,
                         manifest_context: Mapping[str, Any] | None = None,
                         extra_root_attrs: Mapping[str, Any] | None = None) -> RolloutZarrWriteResult:
    """Write already-normalized ``tables`` to ``config.store_dir`` (replacing it): plan, then
    publish (:func:`plan_rollout_write`, :func:`publish_rollout_plan`). Refused with
    :class:`RolloutInputError` before anything is written."""
    return publish_rollout_plan(plan_rollout_write(config, tables, manifest_context=manifest_context,
                                                   extra_root_attrs=extra_root_attrs))


__all__ = [
    "MANIFEST_CONTEXT_KEYS", "SHARDED_ARRAYS", "SHARD_CHUNKS", "TARGET_CHUNK_BYTES", "WRITER_ROOT_ATTRS",
    "RolloutWritePlan", "RolloutZarrWriteResult", "build_manifest", "plan_rollout_write", "publish_rollout_plan",
    "write_rollout_tables", "write_rollout_zarr_store",
]
