"""Resolve a row of a rollout store to the store and row it was acquired in, through packing.

A store written from records is its own acquisition store: its sidecar manifest (bound to the
root attrs ``manifest_sha256``) holds the generation context. A packed store
(:func:`kuration.rollouts.packing.pack_rollout_zarr_stores`) renumbers rows; its root attrs
``packing`` archive, for each input store, that store's full sidecar manifest and digest, its
own ``packing`` block when it was itself packed, and the row ranges it occupies::

    {"version": "kuration.rollout_packing.v1",
     "inputs": [{"manifest": {...}, "manifest_sha256": "<hex>", "packing": {...} | null,
                 "rows": {"sources": [offset, count], ..., "candidates": [offset, count]},
                 "mapping_sha256": canonical_digest({"manifest_sha256": ..., "rows": ...})}, ...]}

The packed store's own sidecar records ``lineage.caller.packing_sha256``, the canonical digest
of that block, so the block is bound to ``manifest_sha256`` like everything else in the sidecar.

:func:`acquisition_row_context` follows these bindings down to the acquisition store. It
raises :class:`RolloutStoreError` when a binding is missing (no range holds the row),
ambiguous (two ranges hold it) or altered (a digest that does not match), rather than
borrowing another chain's configuration. It does not open the input stores (they may be
gone): the archive is the evidence. It reads the store only through
:class:`~kuration.rollouts.store_rows.StoreRows` (the reader), which has checked the root
attrs and checks each column's shape before it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.canonical.hashing import canonical_digest
from kuration.errors import RolloutStoreError, shown
from kuration.rollouts import schema
from kuration.rollouts.store_rows import StoreRows

PACKING_VERSION = "kuration.rollout_packing.v1"
#: Tables a row can be resolved in (every factual table keeps its rows through packing).
LINEAGE_TABLES = ("rollouts", "steps", "candidates")


@dataclass(frozen=True)
class AcquisitionRowContext:
    """Where one row of a store was acquired, and under what configuration.

    - ``table`` / ``row_id``: the row asked about, in the store read.
    - ``acquisition_manifest_sha256`` / ``acquisition_row_id``: the store that generated the
      row (its manifest digest) and the row's id there.
    - ``packing_depth``: how many packings lie between the two (0: the store itself).
    - ``generation``: the acquisition store's sidecar blocks ``config``, ``generation``,
      ``invocation`` and ``lineage``.
    - ``strategy_id`` / ``mixture_id`` / ``source``: the row's chain provenance (source:
      shard path, shard SHA-256, entity and split).
    """

    table: str
    row_id: int
    acquisition_manifest_sha256: str
    acquisition_row_id: int
    packing_depth: int
    generation: Mapping[str, Any]
    strategy_id: str
    mixture_id: str
    source: Mapping[str, Any]


def mapping_digest(manifest_sha256: str, rows: Mapping[str, Any]) -> str:
    """The digest binding one input's row ranges to its manifest (see the module docstring)."""
    return canonical_digest({"manifest_sha256": manifest_sha256, "rows": rows})


def stored_digest(value: Any, *, where: str) -> str:
    """:func:`canonical_digest` of a JSON value read from a store; a value that has no
    canonical form (NaN, infinity, nesting too deep to encode) is a :class:`RolloutStoreError`
    naming ``where``: attrs are parsed leniently by zarr, so they can hold what the writer
    never writes."""
    try:
        return canonical_digest(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RolloutStoreError(f"{where}: has no canonical JSON form ({type(exc).__name__}: {shown(str(exc), 120)}); "
                                "the record was altered after writing") from None


@dataclass(frozen=True)
class StoreMetadata:
    """A store's root attrs and its sidecar manifest, the sidecar checked against the attrs
    ``manifest_sha256`` (its canonical digest)."""

    attrs: dict[str, Any]
    manifest: dict[str, Any]
    manifest_sha256: str


def read_store_metadata(store: StoreRows) -> StoreMetadata:
    """The root attrs and sidecar manifest of ``store``, the sidecar checked against the attrs
    ``manifest_sha256``; :class:`RolloutStoreError` if the sidecar is unreadable or they
    disagree."""
    attrs = store.attrs
    read = store.manifest()
    manifest, digest = read["sidecar"], read["sidecar_sha256"]
    sidecar = f"{store.store_dir}/{schema.MANIFEST_FILENAME}"
    if not isinstance(manifest, dict):
        raise RolloutStoreError(f"{sidecar}: expected a JSON object, found {type(manifest).__name__}")
    if attrs.get("manifest_sha256") != digest:
        raise RolloutStoreError(f"{sidecar}: canonical digest {digest} does not match root attrs manifest_sha256 "
                                f"{shown(attrs.get('manifest_sha256'))}; the store was altered after writing")
    return StoreMetadata(attrs=attrs, manifest=manifest, manifest_sha256=digest)


class StoreLineage:
    """Row lineage of one opened store (a :class:`~kuration.rollouts.store_rows.StoreRows`,
    the reader). Its metadata (root attrs, checked sidecar) is read on the first lookup and
    kept, and so is each link column a lookup follows, read whole once: a single element
    costs the decode of its ~1 MB chunk, so per-row reads over many rows would repeat it.
    The store is immutable while it is open, so what is kept stays true; the reader keeps
    one of these for its life."""

    def __init__(self, store: StoreRows) -> None:
        self._store = store
        self._metadata: StoreMetadata | None = None
        self._columns: dict[str, np.ndarray] = {}

    @property
    def metadata(self) -> StoreMetadata:
        if self._metadata is None:
            self._metadata = read_store_metadata(self._store)
        return self._metadata

    def row_context(self, table: str, row_id: int) -> AcquisitionRowContext:
        """See :func:`acquisition_row_context`."""
        if table not in LINEAGE_TABLES:
            raise RolloutStoreError(f"acquisition_row_context: table {shown(table)} has no lineage; expected one of "
                                    f"{list(LINEAGE_TABLES)}")
        store_dir = self._store.store_dir
        metadata = self.metadata
        rows = self._store.counts.get(table)
        if isinstance(row_id, bool) or not isinstance(row_id, (int, np.integer)) or not isinstance(rows, int) \
                or not 0 <= int(row_id) < rows:
            raise RolloutStoreError(f"{store_dir}: acquisition_row_context: {table} row {shown(row_id)} is not in "
                                    f"the store ({shown(rows)} rows)")
        row = int(row_id)
        digest, original, depth, manifest = _resolve(metadata.attrs.get("packing"), metadata.manifest,
                                                     metadata.manifest_sha256, table, row,
                                                     where=f"{store_dir}: root attrs packing")
        strategy, mixture, source = self._row_provenance(table, row)
        generation = {key: manifest.get(key) for key in ("config", "generation", "invocation", "lineage")}
        return AcquisitionRowContext(table=table, row_id=row, acquisition_manifest_sha256=digest,
                                     acquisition_row_id=original, packing_depth=depth, generation=generation,
                                     strategy_id=strategy, mixture_id=mixture, source=source)

    def _at(self, path: str, index: int) -> Any:
        if path not in self._columns:
            # the reader checked the column's shape against the root attrs counts: its size
            # never comes from an array's own (hostile) metadata
            self._columns[path] = self._store.array(path)
        return self._columns[path][index]

    def _row_provenance(self, table: str, row: int) -> tuple[str, str, dict[str, Any]]:
        """Strategy id, mixture id and source of the chain that ``row`` of ``table`` belongs to."""
        at = self._at
        try:
            if table == "candidates":
                row = int(at("candidates/step_id", row))
            if table in ("candidates", "steps"):
                row = int(at("steps/rollout_id", row))
            strategy = self._word("rollouts", "strategy_ids", at("rollouts/strategy_code", row))
            mixture = self._word("rollouts", "mixture_ids", at("rollouts/mixture_code", row))
            source_id = int(at("rollouts/source_id", row))
            source = {"shard_path": self._word("sources", "shard_paths", at("sources/shard_path_code", source_id)),
                      "shard_sha256": bytes(np.asarray(at("sources/shard_sha256", source_id), dtype=np.uint8)).hex(),
                      "entity": self._word("sources", "entities", at("sources/entity_code", source_id)),
                      "split": self._word("sources", "splits", at("sources/split_code", source_id))}
        except RolloutStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a damaged link (an id out of range); validation names the details
            raise RolloutStoreError(f"{self._store.store_dir}: the provenance of {table} row {row} cannot be read "
                                    f"({type(exc).__name__}: {shown(str(exc), 200)}); run validate() for details") \
                from None
        return strategy, mixture, source

    def _word(self, table: str, name: str, code: Any) -> str:
        words = self._store.vocabulary(table, name)
        index = int(code)
        if not 0 <= index < len(words) or not words[index]:
            raise RolloutStoreError(f"{self._store.store_dir}: {table} attrs {name}: code {index} names no entry; "
                                    "the vocabulary is missing or broken")
        return words[index]


def acquisition_row_context(store: StoreRows, table: str, row_id: int) -> AcquisitionRowContext:
    """Resolve row ``row_id`` of ``table`` (``rollouts``, ``steps`` or ``candidates``) in
    ``store`` (the reader) to its acquisition store and row, through any number of packings.

    Raises :class:`RolloutStoreError` on a missing, ambiguous or altered binding, on a store
    whose sidecar does not match its attrs, and for a ``table`` or ``row_id`` the store does
    not have. Each call reads the metadata again;
    :meth:`RolloutZarrStoreReader.acquisition_row_context
    <kuration.rollouts.reader.RolloutZarrStoreReader.acquisition_row_context>` keeps it (and
    the link columns) for the reader's life.
    """
    return StoreLineage(store).row_context(table, row_id)


def _resolve(packing: Any, manifest: dict[str, Any], manifest_sha256: str, table: str, row: int, *,
             where: str) -> tuple[str, int, int, dict[str, Any]]:
    """(acquisition digest, original row, packing depth, acquisition manifest), iteratively."""
    depth = 0
    while packing is not None:
        recorded = recorded_packing_digest(manifest)
        if recorded != stored_digest(packing, where=where):
            raise RolloutStoreError(f"{where}: the packing block's digest does not match packing_sha256 "
                                    f"{shown(recorded)} in the manifest {manifest_sha256}; the packing record was "
                                    "altered")
        entry, offset = _input_holding(packing, table, row, where=where)
        manifest, manifest_sha256 = entry["manifest"], entry["manifest_sha256"]
        row -= offset
        packing = entry.get("packing")
        depth += 1
        where = f"{where}.inputs[manifest {manifest_sha256[:12]}].packing"
    if recorded_packing_digest(manifest) is not None:
        raise RolloutStoreError(f"{where}: the manifest {manifest_sha256} records packing_sha256 but the store has "
                                "no packing block; the packing record was removed")
    return manifest_sha256, row, depth, manifest


def _input_holding(packing: Any, table: str, row: int, *, where: str) -> tuple[dict[str, Any], int]:
    """The one archived input whose ``table`` range holds ``row``, checked, and its offset."""
    if not isinstance(packing, dict) or packing.get("version") != PACKING_VERSION \
            or not isinstance(packing.get("inputs"), list):
        raise RolloutStoreError(f"{where}: expected {{'version': {PACKING_VERSION!r}, 'inputs': [...]}}, found "
                                f"{shown(packing)}")
    holding = []
    for index, entry in enumerate(packing["inputs"]):
        span = _range(entry, table, where=f"{where}.inputs[{index}]")
        if span[0] <= row < span[0] + span[1]:
            holding.append((index, entry, span[0]))
    if not holding:
        raise RolloutStoreError(f"{where}: no archived input holds {table} row {row}; the row mapping is missing "
                                "(refusing to borrow another chain's configuration)")
    if len(holding) > 1:
        raise RolloutStoreError(f"{where}: {table} row {row} lies in the ranges of inputs "
                                f"{[index for index, _, _ in holding]}; the row mapping is ambiguous")
    index, entry, offset = holding[0]
    manifest, digest = entry.get("manifest"), entry.get("manifest_sha256")
    if not isinstance(manifest, dict) or not isinstance(digest, str) \
            or stored_digest(manifest, where=f"{where}.inputs[{index}].manifest") != digest:
        raise RolloutStoreError(f"{where}.inputs[{index}]: the archived manifest does not match its manifest_sha256 "
                                f"{shown(digest)}; the archive was altered")
    rows = entry["rows"]
    if entry.get("mapping_sha256") != stored_digest({"manifest_sha256": digest, "rows": rows},
                                                    where=f"{where}.inputs[{index}].rows"):
        raise RolloutStoreError(f"{where}.inputs[{index}]: the row mapping {shown(entry['rows'])} does not match its "
                                f"mapping_sha256 {shown(entry.get('mapping_sha256'))}; the mapping was altered")
    return entry, offset


def _range(entry: Any, table: str, *, where: str) -> tuple[int, int]:
    rows = entry.get("rows") if isinstance(entry, dict) else None
    span = rows.get(table) if isinstance(rows, dict) else None
    if not (isinstance(span, list) and len(span) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in span)):
        raise RolloutStoreError(f"{where}.rows.{table}: expected [offset, count] of non-negative ints, found "
                                f"{shown(span)}; the row mapping is missing or malformed")
    return span[0], span[1]


def recorded_packing_digest(manifest: Mapping[str, Any]) -> Any:
    """The ``packing_sha256`` a packed store's sidecar records (``lineage.caller``), or None."""
    lineage = manifest.get("lineage")
    caller = lineage.get("caller") if isinstance(lineage, dict) else None
    return caller.get("packing_sha256") if isinstance(caller, dict) else None


__all__ = ["LINEAGE_TABLES", "PACKING_VERSION", "AcquisitionRowContext", "StoreLineage", "StoreMetadata",
           "acquisition_row_context", "mapping_digest", "read_store_metadata", "recorded_packing_digest",
           "stored_digest"]
