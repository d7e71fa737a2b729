"""Read a rollout replay store, strictly and read-only: :class:`RolloutZarrStoreReader`.

The reader opens the store read-only (:mod:`kuration.rollouts._open`) and never writes, repairs,
migrates or backfills: an array that breaks the schema (wrong dtype, wrong row count, missing
when required) is refused with :class:`RolloutStoreError` saying what was found and what to
do. Only an *optional* array (``required=False`` in :mod:`kuration.rollouts.schema`) may be
absent; it then reads as its unavailable sentinel for every row (-1 counts, NaN floats).

Hostile input (a garbage ``zarr.json``, attrs of the wrong shape, an unreadable sidecar, a
corrupt chunk) raises :class:`RolloutStoreError`, never a raw zarr/JSON exception. The
factual tables are the truth; ``q_h/`` is a cache that :meth:`q_h_view` can rebuild.

The reader is how everything else reads a store: it implements
:class:`~kuration.rollouts.store_rows.StoreRows`, which lineage, packing and the typed
projections read through. What a well-formed store is comes from the pure checks beside the
schema (:func:`~kuration.rollouts.schema.root_attr_problems`,
:func:`~kuration.rollouts.schema.array_problems`): the reader raises the first problem,
validation reports them all.

What it does not do: validate the store's contracts (linkage, masks, digests). That is
:meth:`RolloutZarrStoreReader.validate`, which calls
:func:`kuration.rollouts.validation.validate_rollout_zarr_store`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kuration.canonical.hashing import canonical_digest
from kuration.errors import RolloutInputError, RolloutStoreError, shown
from kuration.rollouts._chunks import implausible_grid
from kuration.rollouts._open import REWRITE_HINT, array_node, chunk_files, open_store_group, zarr_errors
from kuration.rollouts.config import seed_alias
from kuration.rollouts.lineage import AcquisitionRowContext, StoreLineage
from kuration.rollouts.qh import Q_H_INPUT_PATHS, build_q_h
from kuration.rollouts.read_model import StepView, step_view
from kuration.rollouts.remote import download_rollout_store
from kuration.rollouts.schema import (
    ARRAYS,
    MANIFEST_FILENAME,
    Q_H_ARRAY_NAMES,
    Q_H_GROUP,
    VOCABULARIES,
    ArraySpec,
    array_problems,
    expected_rows,
    expected_trailing,
    root_attr_problems,
)
from kuration.rollouts.validation import RolloutZarrValidationResult, validate_rollout_zarr_store
from kuration.storage import is_remote, local_path, read_json

_SPECS = {spec.path: spec for spec in ARRAYS}
_REWRITE = REWRITE_HINT


@dataclass(frozen=True)
class CandidateShellIndex:
    """Shell-ordered candidate lookup of one store, derived only from the canonical columns
    ``candidates/step_id`` and ``candidates/shell_index``. Arrays are read-only.

    - ``candidate_start[s]``: the candidate id of shell index 0 of step ``s``;
    - ``candidate_count[s]``: the width of step ``s``'s shell."""

    candidate_start: np.ndarray
    candidate_count: np.ndarray

    def candidate_id(self, step_id: Any, shell_index: Any) -> np.ndarray:
        """Candidate ids of ``(step_id, shell_index)`` pairs (scalars or arrays, broadcast);
        :class:`RolloutInputError` when a step or shell index is out of range."""
        steps = np.asarray(step_id)
        shells = np.asarray(shell_index)
        for name, value in (("step_id", steps), ("shell_index", shells)):
            if value.dtype.kind not in "iu":
                raise RolloutInputError(f"candidate_id: {name} must be integers, found dtype {value.dtype}")
        steps, shells = np.broadcast_arrays(steps.astype(np.int64), shells.astype(np.int64))
        num_steps = len(self.candidate_start)
        bad = (steps < 0) | (steps >= num_steps)
        if bad.any():
            raise RolloutInputError(f"candidate_id: step_id {int(steps[bad].flat[0])} is outside 0..{num_steps - 1}")
        width = self.candidate_count[steps]
        bad = (shells < 0) | (shells >= width)
        if bad.any():
            raise RolloutInputError(f"candidate_id: shell_index {int(shells[bad].flat[0])} is outside the shell of "
                                    f"step {int(steps[bad].flat[0])} (width {int(width[bad].flat[0])})")
        return self.candidate_start[steps] + shells


class RolloutZarrStoreReader:
    """Open a completed rollout store (a local directory, or a remote URL read from a local
    copy of the whole store: :mod:`kuration.rollouts.remote`) read-only.

    Construction checks the root: it exists, is a zarr v3 group, and its attrs have no
    :func:`~kuration.rollouts.schema.root_attr_problems` (the schema id and version this
    reader knows, every attr of :data:`~kuration.rollouts.schema.REQUIRED_ROOT_ATTRS` with the
    right shape); otherwise it raises :class:`RolloutStoreError` with the first problem. Each
    array's metadata is checked by :func:`~kuration.rollouts.schema.array_problems` when it is
    first read. Arrays are read on demand. Metadata (root attrs, zarr
    nodes, the candidate shell index, the lineage of :meth:`acquisition_row_context`) is
    cached for the reader's life: a store is immutable once written."""

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        #: Where the store was asked for: a local path, or the URL of a remote store, which
        #: is read from a local copy (``store_dir``) this reader downloads, removed with it.
        self.source = os.fspath(store_dir)
        if is_remote(store_dir):
            copy = Path(tempfile.mkdtemp(prefix=".kuration-rollout-copy-"))
            weakref.finalize(self, shutil.rmtree, copy, ignore_errors=True)
            store_dir = download_rollout_store(self.source, copy / "store")
        self.store_dir = str(local_path(store_dir).resolve())
        if not Path(self.store_dir).is_dir():
            raise RolloutStoreError(f"{self.store_dir}: no rollout store here (not a directory); write one with "
                                    "write_rollout_store_atomically or check the path")
        self._root, attrs = open_store_group(self.store_dir)
        problems = root_attr_problems(attrs)
        if problems:
            raise RolloutStoreError(f"{self.store_dir}: {problems[0]}; {_REWRITE}")
        self._attrs: dict[str, Any] = dict(attrs)
        self._nodes: dict[str, Any] = {}
        self._shell_index: CandidateShellIndex | None = None
        self._lineage = StoreLineage(self)

    # -- metadata -------------------------------------------------------------------------

    @property
    def attrs(self) -> dict[str, Any]:
        """A copy of the checked root attrs."""
        return json.loads(json.dumps(self._attrs))

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._attrs["counts"])

    @property
    def widths(self) -> dict[str, Any]:
        return dict(self._attrs["widths"])

    def manifest(self) -> dict[str, Any]:
        """Root attrs and the sidecar manifest, without payload arrays:
        ``{"attrs": {...}, "sidecar": {...}, "sidecar_sha256": <canonical digest>}``. The
        sidecar is read as strict JSON; a missing or malformed one is a
        :class:`RolloutStoreError`. Whether the digest matches ``attrs["manifest_sha256"]``
        is for the caller (validation) to judge."""
        sidecar = read_json(os.path.join(self.store_dir, MANIFEST_FILENAME), what="rollout manifest sidecar",
                            error=RolloutStoreError)
        return {"attrs": self.attrs, "sidecar": sidecar, "sidecar_sha256": canonical_digest(sidecar)}

    def vocabulary(self, table: str, name: str) -> list[str]:
        """The vocabulary ``name`` of ``table`` (``("sources", "shard_paths")``): the strings a
        code column of that table decodes to (:data:`~kuration.rollouts.schema.VOCABULARIES`).
        A missing or malformed list is a :class:`RolloutStoreError`."""
        if name not in VOCABULARIES.get(table, {}).values():
            raise RolloutStoreError(f"{table}/{name}: not a vocabulary of the schema; vocabularies: {VOCABULARIES}")
        try:
            values = self._root[table].attrs.asdict().get(name)
        except zarr_errors() as exc:
            raise RolloutStoreError(f"{self.store_dir}: group {table} is unreadable ({type(exc).__name__}); "
                                    f"{_REWRITE}") from None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise RolloutStoreError(f"{self.store_dir}: {table} attrs {name} must be a list of strings, got "
                                    f"{shown(values)}; {_REWRITE}")
        return list(values)

    # -- arrays ---------------------------------------------------------------------------

    def expected_shape(self, path: str) -> tuple[int, ...]:
        """The shape ``path`` must have in this store (rows from ``counts``, trailing widths
        from ``widths``)."""
        spec = _spec(path)
        trailing = expected_trailing(spec, self._attrs)
        if trailing is None:  # the root attrs are checked: only a payload no store kept lacks a width
            raise RolloutStoreError(f"{self.store_dir}: {path} is not stored (field_retention_policy 'compact' keeps "
                                    "no payload); write with field_retention_policy='full'")
        return (int(expected_rows(spec, self._attrs) or 0), *trailing)

    def _node(self, spec: ArraySpec) -> Any | None:
        """The zarr array at ``spec.path``, checked against the schema; None if absent."""
        if spec.path in self._nodes:
            return self._nodes[spec.path]
        try:
            node = array_node(self._root, spec.path)
        except RolloutStoreError as exc:
            raise RolloutStoreError(f"{self.store_dir}: {exc}; {_REWRITE}") from None
        if node is None:
            self._nodes[spec.path] = None
            return None
        problems = array_problems(spec, node, self._attrs)
        if problems:
            raise RolloutStoreError(f"{self.store_dir}: {problems[0]}; {_REWRITE}")
        # Every chunk is written, so the grid must fit the chunk files on disk: this finds a
        # deleted chunk (zarr would read it as the fill value) and metadata declaring more
        # rows than were written (zarr would walk and allocate all of them).
        try:
            implausible = implausible_grid(node, spec.path, chunk_files(Path(self.store_dir) / spec.path))
        except zarr_errors() as exc:
            raise RolloutStoreError(f"{self.store_dir}: {spec.path}: unreadable chunk grid ({type(exc).__name__}: "
                                    f"{shown(str(exc), 200)}); {_REWRITE}") from None
        if implausible is not None:
            raise RolloutStoreError(f"{self.store_dir}: {implausible}; {_REWRITE}")
        self._nodes[spec.path] = node
        return node

    def _present(self, path: str) -> tuple[ArraySpec, Any | None]:
        spec = _spec(path)
        node = self._node(spec)
        if node is None and spec.required:
            raise RolloutStoreError(f"{self.store_dir}: {array_problems(spec, None, self._attrs)[0]}: {_REWRITE}")
        if node is None and spec.unavailable is None:
            raise RolloutStoreError(f"{self.store_dir}: {path} is not stored (it is kept only by "
                                    "field_retention_policy='full')")
        return spec, node

    def has_array(self, path: str) -> bool:
        """Whether ``path`` is stored (an absent optional array still reads as its sentinel)."""
        return self._node(_spec(path)) is not None

    def array(self, path: str) -> np.ndarray:
        """The whole array at ``path`` (``"steps/reward"``). An optional array absent from
        the store (a legacy store, or provenance not recorded) comes back filled with its
        unavailable sentinel, e.g. -1 for ``steps/audit_valid_candidates``."""
        spec, node = self._present(path)
        if node is None:
            return np.full(self.expected_shape(path), spec.unavailable, dtype=spec.dtype)
        return self._read(path, lambda: node[...])

    def array_rows(self, path: str, positions: Any) -> np.ndarray:
        """Only the first-axis rows ``positions`` of ``path`` (in the order given, duplicates
        kept), reading just the chunks that hold them. ``positions`` must be a 1-D integer
        array of rows in ``0..rows-1``; anything else is a :class:`RolloutInputError`."""
        spec, node = self._present(path)
        rows = self.expected_shape(path)[0]
        index = np.asarray(positions)
        if index.ndim != 1 or index.dtype.kind not in "iu":
            raise RolloutInputError(f"array_rows({path!r}): positions must be a 1-D integer array, found dtype "
                                    f"{index.dtype} shape {index.shape}")
        if index.size and (int(index.min()) < 0 or int(index.max()) >= rows):
            bad = index[(index < 0) | (index >= rows)]
            raise RolloutInputError(f"array_rows({path!r}): position {int(bad[0])} is outside 0..{rows - 1} "
                                    "(negative positions are refused, not counted from the end)")
        if node is None:
            return np.full((index.size, *self.expected_shape(path)[1:]), spec.unavailable, dtype=spec.dtype)
        if index.size == 0:
            return np.empty((0, *node.shape[1:]), dtype=node.dtype)
        return self._read(path, lambda: node.oindex[index.astype(np.int64, copy=False)])

    def step_view(self, step_id: int) -> StepView:
        """The typed projection of one step and its candidate shell
        (:func:`kuration.rollouts.read_model.step_view`): codes decoded to strings, reason bits
        to names, and unavailable values (NaN, -1) to ``None``."""
        return step_view(self, step_id)

    def _read(self, path: str, read: Any) -> np.ndarray:
        try:
            return np.asarray(read())
        except MemoryError:
            raise RolloutStoreError(f"{self.store_dir}: {path}: its declared shape {self.expected_shape(path)} does "
                                    "not fit in memory; read rows with array_rows()") from None
        except zarr_errors() as exc:
            raise RolloutStoreError(f"{self.store_dir}: {path}: a chunk cannot be read ({type(exc).__name__}: "
                                    f"{shown(str(exc), 200)}); {_REWRITE}") from None

    # -- derived --------------------------------------------------------------------------

    def candidate_shell_index(self) -> CandidateShellIndex:
        """The shell-ordered candidate lookup (cached for this reader): per step its first
        candidate id and shell width, and ``candidate_id(step_id, shell_index)``. Derived from
        ``candidates/step_id`` and ``candidates/shell_index`` alone; a table whose shells are
        not contiguous and in shell order is a :class:`RolloutStoreError`."""
        if self._shell_index is not None:
            return self._shell_index
        # The steps table must hold counts["steps"] rows before that count sizes anything here
        # (a hostile attrs count could otherwise ask bincount for terabytes).
        self._present("steps/step_id")
        step_of = self.array("candidates/step_id")
        shell_of = self.array("candidates/shell_index").astype(np.int64)
        num_steps = self.counts["steps"]
        if step_of.size and (step_of.min() < 0 or step_of.max() >= num_steps or np.any(np.diff(step_of) < 0)):
            raise RolloutStoreError(f"{self.store_dir}: candidates/step_id is not non-decreasing within "
                                    f"0..{num_steps - 1}; run validate() for the rows")
        counts = np.bincount(step_of, minlength=num_steps).astype(np.int64)
        start = np.cumsum(counts) - counts
        expected = np.arange(step_of.size, dtype=np.int64) - np.repeat(start, counts)
        bad = np.flatnonzero(shell_of != expected)
        if bad.size:
            raise RolloutStoreError(f"{self.store_dir}: candidates/shell_index[{int(bad[0])}] is "
                                    f"{int(shell_of[bad[0]])}, expected {int(expected[bad[0]])} (shells must be "
                                    "contiguous and in shell order); run validate() for the rows")
        start.setflags(write=False)
        count32 = counts.astype(np.int32)
        count32.setflags(write=False)
        self._shell_index = CandidateShellIndex(candidate_start=start, candidate_count=count32)
        return self._shell_index

    def q_h_view(self, discount_gamma: float | None = None) -> dict[str, np.ndarray]:
        """The padded ``q_h`` training view: every name of ``Q_H_ARRAY_NAMES``, S x A (x P)
        for the per-candidate arrays, S for the per-state ones.

        ``None`` reads the persisted ``q_h/`` cache (written at the store's
        ``discount_gamma``). A float (``0 < gamma <= 1``) rebuilds the view from the factual
        tables with :func:`~kuration.rollouts.qh.build_q_h`, discounting only non-terminal
        selected transitions."""
        if discount_gamma is None:
            return {name: self.array(f"{Q_H_GROUP}/{name}") for name in Q_H_ARRAY_NAMES}
        gamma = discount_gamma
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not math.isfinite(gamma) \
                or not 0.0 < gamma <= 1.0:
            raise RolloutInputError(f"q_h_view: discount_gamma must be None or 0 < gamma <= 1, found {shown(gamma)}")
        columns = {path: self.array(path) for path in Q_H_INPUT_PATHS}
        # The padded view is sized from widths.A and the shell counts: refuse ones that do not
        # describe the candidate rows rather than allocate what a damaged store declares.
        shells = columns["steps/candidate_count"].astype(np.int64)
        widest = int(shells.max()) if shells.size else 0
        if self.widths["A"] != widest or (shells < 0).any() or int(shells.sum()) != self.counts["candidates"]:
            raise RolloutStoreError(f"{self.store_dir}: steps/candidate_count (widest {widest}, total "
                                    f"{int(shells.sum())}) does not match root attrs widths.A {self.widths['A']} and "
                                    f"counts.candidates {self.counts['candidates']}; run validate() for the rows")
        try:
            return build_q_h(columns, discount_gamma=float(gamma), widths=self.widths)
        except (IndexError, ValueError, KeyError) as exc:
            raise RolloutStoreError(f"{self.store_dir}: the factual tables cannot give a q_h view ({exc}); run "
                                    "validate() for the rows") from None

    # -- delegated ------------------------------------------------------------------------

    def validate(self, validate_selected_payload: bool = True, *,
                 validate_selected_depth_payload: bool | None = None) -> RolloutZarrValidationResult:
        """Every schema, linkage, mask, label and provenance violation of this store:
        :func:`kuration.rollouts.validation.validate_rollout_zarr_store` on ``store_dir``
        (``validate_selected_payload=False`` skips the heavy payload rows;
        ``validate_selected_depth_payload`` is seed 004's name for it)."""
        payload = seed_alias("validate_selected_payload", validate_selected_payload,
                             "validate_selected_depth_payload", validate_selected_depth_payload, default=True)
        return validate_rollout_zarr_store(self.store_dir, validate_selected_payload=payload)

    def acquisition_row_context(self, table: str, row_id: int) -> AcquisitionRowContext:
        """The authenticated original generation context of a chain or step, followed through
        packing: :func:`kuration.rollouts.lineage.acquisition_row_context` on this reader, its
        metadata and link columns read once for the reader's life."""
        return self._lineage.row_context(table, row_id)


def _spec(path: str) -> ArraySpec:
    spec = _SPECS.get(path) if isinstance(path, str) else None
    if spec is None:
        raise RolloutStoreError(f"unknown rollout store array {shown(path)}; valid paths: {sorted(_SPECS)}")
    return spec


__all__ = ["CandidateShellIndex", "RolloutZarrStoreReader"]
