"""Validate a rollout replay store on disk against schema v1 and report every violation.

:func:`validate_rollout_zarr_store` opens the store read-only, reads each array once and runs
every check as a vectorised numpy expression, then returns a
:class:`RolloutZarrValidationResult` listing all violations it found. Each error names the
array path, the offending rows (the first few and how many) and what was expected. A store
that cannot be opened at all, garbage metadata or a chunk that will not decode is one more
error in the result: validation never raises on a damaged store and never stops at the
first problem.

The checks, in the order they report:

- **schema**: every problem :func:`~kuration.rollouts.schema.root_attr_problems` finds in
  the root attrs, and :func:`~kuration.rollouts.schema.array_problems` in each array (present
  when required, its dtype, first axis equal to its table's ``counts`` and trailing shape
  equal to the ``widths``): the checks the reader raises the first of;
- **chunks**: every chunk (every shard, and every in-bounds inner chunk of a shard) on disk,
  since zarr reads a missing chunk as the fill value without a word;
- **sidecar**: ``rollout_manifest.json`` present, parseable and its canonical digest equal to
  the attrs ``manifest_sha256``;
- **linkage**: row ids are positions, foreign keys in range, a chain's steps contiguous with
  ``step_index`` 0..n-1, the TD link (``next_step_id``/``terminal``), contiguous candidate
  shells and the selected candidate inside its shell and valid;
- **masks and labels**: reason bits zero exactly on valid actions and only declared bits set,
  labels NaN on invalid actions (never a low or zero label), ``label_valid`` exactly where
  the action is valid and its label finite, a finite reward on every step;
- **provenance**: vocabulary codes in range of non-empty strings, candidates' strategy and
  mixture equal to their chain's, a target protocol and split manifest hash in the config,
  no all-zero source hash, audit columns only using their unavailable sentinels;
- **derived view**: ``q_h/`` equal, array by array, to a rebuild from the factual tables with
  the persisted gamma (NaN equals NaN).

It writes nothing: the group is opened read-only (:mod:`kuration.rollouts._open`, where the
reader opens it too) and the chunk check lists files. It does not read through the strict
reader, which stops at the first problem.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from kuration.canonical.hashing import canonical_digest
from kuration.canonical.strict_json import parse_strict_json
from kuration.errors import RolloutStoreError, shown
from kuration.rollouts import schema
from kuration.rollouts._chunks import (
    MAX_ENUMERATED_MISSING,
    grid_cell_count,
    list_store_files,
    missing_chunk_keys,
    stored_chunk_files,
)
from kuration.rollouts._open import array_node, group_attrs, open_store_group
from kuration.rollouts.config import seed_alias
from kuration.rollouts.lineage import recorded_packing_digest, stored_digest
from kuration.rollouts.qh import Q_H_INPUT_PATHS, build_q_h
from kuration.rollouts.remote import downloaded_rollout_store
from kuration.storage import is_remote

#: How many offending rows an error lists before it only counts them.
SHOWN_ROWS = 5


@dataclass
class RolloutZarrValidationResult:
    """What :func:`validate_rollout_zarr_store` found.

    ``num_rollouts`` / ``num_steps`` / ``num_candidates`` are the rows of the id columns read
    (the attrs ``counts`` where a column could not be read). ``errors`` holds every schema,
    chunk, sidecar, linkage, mask, label and provenance violation, one sentence each.
    """

    #: The local folder checked, or the URL of a remote store.
    store_dir: Path | str
    num_rollouts: int
    num_steps: int
    num_candidates: int
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no violation was found."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values, for check metadata and logs."""
        return {"store_dir": str(self.store_dir), "ok": self.ok, "num_rollouts": self.num_rollouts,
                "num_steps": self.num_steps, "num_candidates": self.num_candidates, "errors": list(self.errors)}


def rows_text(rows: np.ndarray) -> str:
    """``"row 3"`` / ``"rows [3, 7] (2 rows)"`` / ``"rows [3, 7, 9, 11, 12, ...] (40 rows)"``."""
    count = int(rows.size)
    first = [int(r) for r in rows[:SHOWN_ROWS]]
    if count == 1:
        return f"row {first[0]}"
    more = ", ..." if count > SHOWN_ROWS else ""
    return f"rows [{', '.join(map(str, first))}{more}] ({count} rows)"


class _Report:
    """The error list plus the helpers that phrase a vectorised check's failures."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def add(self, message: str) -> None:
        self.errors.append(message)

    def where(self, path: str, bad: np.ndarray, found: str, expected: str) -> None:
        """One error if any of the boolean row mask ``bad`` is set."""
        if bad.size and bad.any():
            rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1) if bad.ndim > 1 else bad)
            self.add(f"{path}: {found} at {rows_text(rows)}; expected {expected}")


@dataclass
class _Store:
    """What was read: root attrs, table counts and widths, and every readable array by path."""

    attrs: dict[str, Any]
    counts: dict[str, int]
    widths: dict[str, Any]
    arrays: dict[str, np.ndarray]
    nodes: dict[str, Any]
    group_attrs: dict[str, dict[str, Any]]
    readable: set[str] = field(default_factory=set)
    #: Every file of the store as a store key (None: the store could not be listed).
    listed: set[str] | None = None

    def get(self, *paths: str) -> tuple[np.ndarray, ...] | None:
        """The arrays at ``paths``, or None when any one is unusable (already reported)."""
        found = tuple(self.arrays.get(path) for path in paths)
        if any(array is None for array in found):
            return None
        return found  # type: ignore[return-value]

    def rows(self, table: str) -> int:
        first = schema.table_arrays(table)[0].path
        if first in self.arrays:
            return int(self.arrays[first].shape[0])
        return int(self.counts.get(table, 0))


def validate_rollout_zarr_store(store_dir: str | Path, *, validate_selected_payload: bool = True,
                                validate_selected_depth_payload: bool | None = None) -> RolloutZarrValidationResult:
    """Check the store at ``store_dir`` and return every violation found (read-only).

    ``validate_selected_payload=False`` skips reading and checking ``steps/selected_payload``
    (the heavy optional payload), for consumers that do not read it;
    ``validate_selected_depth_payload`` is seed 004's name for it. A remote URL
    (``s3://...``) is checked on a local copy of the whole store, downloaded for the call;
    the result names the URL.
    """
    validate_selected_payload = seed_alias("validate_selected_payload", validate_selected_payload,
                                           "validate_selected_depth_payload", validate_selected_depth_payload,
                                           default=True)
    if is_remote(store_dir):
        return _validate_remote(os.fspath(store_dir), validate_selected_payload=validate_selected_payload)
    directory = Path(store_dir).resolve()
    report = _Report()
    store = _open(directory, report, validate_selected_payload=validate_selected_payload)
    if store is not None:
        _check_chunks(directory, store, report)
        _check_sidecar(directory, store, report)
        for check in _CHECKS:
            try:
                check(store, report)
            except Exception as exc:  # noqa: BLE001 -- a check that cannot run on a damaged store is a violation, never a crash
                report.add(f"{check.__name__.lstrip('_')}: could not run on this store ({type(exc).__name__}: "
                           f"{shown(str(exc), 200)})")
    rows = (store.rows if store is not None else (lambda table: 0))
    return RolloutZarrValidationResult(store_dir=directory, num_rollouts=rows("rollouts"), num_steps=rows("steps"),
                                       num_candidates=rows("candidates"), errors=report.errors)


def _validate_remote(url: str, *, validate_selected_payload: bool) -> RolloutZarrValidationResult:
    try:
        with downloaded_rollout_store(url) as copy:
            local = validate_rollout_zarr_store(copy, validate_selected_payload=validate_selected_payload)
            where = str(local.store_dir)
    except RolloutStoreError as exc:
        return RolloutZarrValidationResult(store_dir=url, num_rollouts=0, num_steps=0, num_candidates=0,
                                           errors=[str(exc)])
    # the errors name the store where they were found: the URL, not the copy
    return dataclasses.replace(local, store_dir=url, errors=[error.replace(where, url) for error in local.errors])


# -- opening and the schema ----------------------------------------------------------------


def _open(directory: Path, report: _Report, *, validate_selected_payload: bool) -> _Store | None:
    if not directory.is_dir():
        report.add(f"{directory}: no rollout store here (not a directory); write one with write_rollout_zarr_store")
        return None
    try:
        root, attrs = open_store_group(directory)
    except RolloutStoreError as exc:
        report.add(str(exc))
        return None
    except Exception as exc:  # noqa: BLE001 -- hostile metadata may raise anything from zarr's parser
        report.add(f"{directory}: not a readable zarr v3 group ({type(exc).__name__}: {shown(str(exc), 200)})")
        return None
    for problem in schema.root_attr_problems(attrs):
        report.add(problem)
    attrs = dict(attrs) if isinstance(attrs, Mapping) else {}
    widths = attrs.get("widths")
    store = _Store(attrs=attrs, counts=schema.declared_counts(attrs),
                   widths=dict(widths) if isinstance(widths, Mapping) else {}, arrays={}, nodes={}, group_attrs={})
    try:
        store.listed = list_store_files(directory)
    except OSError as exc:
        report.add(f"{directory}: cannot list the store's files ({exc.strerror})")
    for group in (*schema.TABLES, schema.Q_H_GROUP):
        try:
            store.group_attrs[group] = group_attrs(root, group)
        except RolloutStoreError as exc:
            report.add(str(exc))
        except Exception as exc:  # noqa: BLE001 -- a damaged group zarr.json
            report.add(f"{group}/: group metadata unreadable ({type(exc).__name__}: {shown(str(exc), 200)})")
    for spec in schema.ARRAYS:
        _read_array(root, spec, store, report,
                    read=validate_selected_payload or spec.path != "steps/selected_payload")
    return store


def _read_array(root: zarr.Group, spec: schema.ArraySpec, store: _Store, report: _Report, *, read: bool) -> None:
    try:
        node = array_node(root, spec.path)
    except RolloutStoreError as exc:
        report.add(str(exc))
        return
    except Exception as exc:  # noqa: BLE001 -- a damaged zarr.json below the root
        report.add(f"{spec.path}: unreadable metadata ({type(exc).__name__}: {shown(str(exc), 200)})")
        return
    problems = schema.array_problems(spec, node, store.attrs)
    for problem in problems:
        report.add(problem)
    if node is None or not isinstance(node, zarr.Array):
        return
    store.nodes[spec.path] = node
    if read:
        store.readable.add(spec.path)
    if problems or not read:
        return
    try:
        # Hostile metadata (with matching counts) can declare trillions of rows, and zarr would
        # walk every chunk of them: a grid far larger than the stored files is not read (the
        # chunk check reports it); a few missing chunks are read as fill and reported by name.
        if store.listed is not None and grid_cell_count(node) > stored_chunk_files(store.listed, spec.path) \
                + MAX_ENUMERATED_MISSING:
            return
        store.arrays[spec.path] = np.asarray(node[...])
    except Exception as exc:  # noqa: BLE001 -- corrupt chunk bytes raise from whichever codec decodes them
        report.add(f"{spec.path}: chunks do not decode ({type(exc).__name__}: {shown(str(exc), 200)})")


def _check_chunks(directory: Path, store: _Store, report: _Report) -> None:
    listed = store.listed
    if listed is None:
        return  # reported when the store was opened
    for path, node in store.nodes.items():
        if path not in store.arrays and path not in store.readable:
            continue  # a skipped payload is not checked
        try:
            missing, notes = missing_chunk_keys(directory, path, node, listed)
        except Exception as exc:  # noqa: BLE001 -- hostile chunk-grid metadata
            report.add(f"{path}: chunk grid cannot be checked ({type(exc).__name__}: {shown(str(exc), 200)})")
            continue
        if missing:
            shown_keys = ", ".join(missing[:SHOWN_ROWS]) + (", ..." if len(missing) > SHOWN_ROWS else "")
            report.add(f"{path}: {len(missing)} chunk(s) missing from the store: {shown_keys}; every chunk is "
                       "written (write_empty_chunks=True) and zarr would read a missing one as the fill value")
        for note in notes:
            report.add(f"{path}: {note}")


def _check_sidecar(directory: Path, store: _Store, report: _Report) -> None:
    sidecar = directory / schema.MANIFEST_FILENAME
    try:
        data = sidecar.read_bytes()
    except FileNotFoundError:
        report.add(f"{schema.MANIFEST_FILENAME}: sidecar manifest is missing; expected it beside the zarr group")
        return
    except OSError as exc:
        report.add(f"{schema.MANIFEST_FILENAME}: unreadable ({exc.strerror})")
        return
    try:
        manifest = parse_strict_json(data, where=schema.MANIFEST_FILENAME, what="rollout manifest")
        digest = canonical_digest(manifest)
    except ValueError as exc:
        report.add(f"{exc}; the sidecar is bound to attrs manifest_sha256 and cannot be trusted")
        return
    recorded = store.attrs.get("manifest_sha256")
    if "manifest_sha256" in store.attrs and recorded != digest:
        report.add(f"{schema.MANIFEST_FILENAME}: canonical digest {digest} does not match root attrs "
                   f"manifest_sha256 {shown(recorded)}; the sidecar or the attrs were altered after writing")
    packing = store.attrs.get("packing")
    bound = recorded_packing_digest(manifest) if isinstance(manifest, dict) else None
    if packing is None and bound is None:
        return
    try:
        packed = None if packing is None else stored_digest(packing, where="root attrs packing")
    except RolloutStoreError as exc:
        report.add(str(exc))
        return
    if bound != packed:
        report.add(f"root attrs packing: canonical digest {packed} does not match lineage.caller.packing_sha256 "
                   f"{shown(bound)} in {schema.MANIFEST_FILENAME}; the packing archive was altered, added or removed")


# -- linkage --------------------------------------------------------------------------------


def _check_ids(store: _Store, report: _Report) -> None:
    for table in schema.TABLES:
        id_path = schema.table_arrays(table)[0].path
        found = store.get(id_path)
        if found is not None:
            ids = found[0]
            report.where(id_path, ids != np.arange(ids.shape[0]), "id differs from its position",
                         "ids equal to row positions 0..n-1")


def _in_range(report: _Report, path: str, values: np.ndarray, size: int, *, allow_unavailable: bool = False) -> None:
    low = -1 if allow_unavailable else 0
    bad = (values < low) | (values >= size)
    report.where(path, bad, f"id out of range (values like {shown(values[bad][:3].tolist())})",
                 f"an id in [{low}, {size})")


def _check_foreign_keys(store: _Store, report: _Report) -> None:
    n = {table: store.rows(table) for table in schema.TABLES}
    keys = [("targets/source_id", "sources"), ("rollouts/source_id", "sources"), ("rollouts/target_id", "targets"),
            ("rollouts/first_step", "steps"), ("steps/rollout_id", "rollouts"),
            ("steps/selected_candidate_id", "candidates"), ("candidates/step_id", "steps")]
    for path, table in keys:
        found = store.get(path)
        if found is not None:
            _in_range(report, path, found[0], n[table])
    found = store.get("steps/next_step_id")
    if found is not None:
        _in_range(report, "steps/next_step_id", found[0], n["steps"], allow_unavailable=True)
    found = store.get("steps/candidate_start")
    if found is not None:
        _in_range(report, "steps/candidate_start", found[0], n["candidates"] + 1)


def _valid_index(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``values`` with out-of-range entries clamped to 0, and the mask of in-range entries,
    so lookups run on every row (out-of-range rows are reported by the foreign-key check)."""
    values = values.astype(np.int64, copy=False)
    ok = (values >= 0) & (values < size)
    return np.where(ok, values, 0), ok


def _check_chains(store: _Store, report: _Report) -> None:
    found = store.get("rollouts/first_step", "rollouts/num_steps", "steps/rollout_id", "steps/step_index")
    if found is None:
        return
    first_step, num_steps, rollout_id, step_index = (a.astype(np.int64) for a in found)
    n_steps = rollout_id.shape[0]
    report.where("rollouts/num_steps", num_steps < 1, "a chain without steps", "at least one step a chain")
    report.where("rollouts/num_steps", first_step + num_steps > n_steps,
                 "chain runs past the last step row", f"first_step + num_steps <= {n_steps}")
    owner, owned = _valid_index(rollout_id, first_step.shape[0])
    step_ids = np.arange(n_steps)
    start = first_step[owner]
    inside = owned & (step_ids >= start) & (step_ids < start + num_steps[owner])
    report.where("steps/rollout_id", owned & ~inside, "step lies outside its chain's [first_step, first_step + "
                 "num_steps)", "a chain's steps contiguous from rollouts/first_step")
    report.where("steps/step_index", owned & (step_index != step_ids - start),
                 "step_index differs from the step's position in its chain", "step_index 0..num_steps-1 in order")
    per_chain = np.bincount(owner[owned], minlength=first_step.shape[0])
    report.where("rollouts/num_steps", per_chain != num_steps, "num_steps differs from the step rows that name "
                 "the chain", "num_steps equal to the count of steps/rollout_id rows for the chain")
    terminal_found = store.get("steps/next_step_id", "steps/terminal")
    if terminal_found is None:
        return
    next_step_id, terminal = terminal_found
    last = owned & (step_index == num_steps[owner] - 1)
    expected_next = np.where(last, -1, step_ids + 1)
    report.where("steps/next_step_id", owned & (next_step_id != expected_next), "broken TD link",
                 "next_step_id = step_id + 1 inside a chain and -1 on its last step")
    report.where("steps/terminal", owned & (terminal != last), "terminal flag differs from the chain's end",
                 "terminal True exactly on each chain's last step")


def _check_shells(store: _Store, report: _Report) -> None:
    found = store.get("steps/candidate_start", "steps/candidate_count", "candidates/step_id",
                      "candidates/shell_index")
    if found is None:
        return
    start, count, step_id, shell_index = (a.astype(np.int64) for a in found)
    n_candidates = step_id.shape[0]
    report.where("steps/candidate_count", count < 1, "empty candidate shell", "at least one candidate a step")
    report.where("steps/candidate_count", start + count > n_candidates, "shell runs past the last candidate row",
                 f"candidate_start + candidate_count <= {n_candidates}")
    owner, owned = _valid_index(step_id, start.shape[0])
    candidate_ids = np.arange(n_candidates)
    first = start[owner]
    inside = owned & (candidate_ids >= first) & (candidate_ids < first + count[owner])
    report.where("candidates/step_id", owned & ~inside, "candidate lies outside its step's shell",
                 "a shell contiguous from steps/candidate_start")
    report.where("candidates/shell_index", owned & (shell_index != candidate_ids - first),
                 "shell_index differs from the candidate's position in its shell", "shell_index 0..count-1 in order")
    per_step = np.bincount(owner[owned], minlength=start.shape[0])
    report.where("steps/candidate_count", per_step != count, "candidate_count differs from the candidate rows "
                 "that name the step", "candidate_count equal to the count of candidates/step_id rows")
    selected_found = store.get("steps/selected_candidate_id", "steps/selected_shell_index", "candidates/valid_action")
    if selected_found is None:
        return
    selected_id, selected_index, valid = selected_found
    selected_id = selected_id.astype(np.int64)
    report.where("steps/selected_shell_index", (selected_index < 0) | (selected_index >= count),
                 "selected index outside the shell", "0 <= selected_shell_index < candidate_count")
    report.where("steps/selected_candidate_id", selected_id != start + selected_index,
                 "selected candidate differs from candidate_start + selected_shell_index",
                 "selected_candidate_id == candidate_start + selected_shell_index")
    chosen, chosen_ok = _valid_index(selected_id, n_candidates)
    report.where("steps/selected_candidate_id", chosen_ok & ~valid[chosen], "the selected candidate is not a "
                 "valid action", "the recorded action to be valid (candidates/valid_action True)")


# -- masks, labels, rewards ---------------------------------------------------------------


def _check_masks_and_labels(store: _Store, report: _Report) -> None:
    found = store.get("candidates/valid_action", "candidates/reason_bits")
    if found is not None:
        valid, bits = found
        report.where("candidates/reason_bits", valid & (bits != 0), "reason bits set on a valid action",
                     "reason_bits == 0 exactly where valid_action")
        report.where("candidates/reason_bits", ~valid & (bits == 0), "invalid action without a reason bit",
                     "a non-zero reason_bits on every invalid action")
        declared = schema.declared_reason_mask(store.attrs.get("reason_codes"))
        if declared is not None:  # a malformed table is a root attrs problem, reported with them
            report.where("candidates/reason_bits", (bits & np.uint32(~declared & 0xFFFFFFFF)) != 0,
                         "undeclared reason bit set", f"only bits declared in root attrs reason_codes "
                         f"(mask {declared:#x})")
    found = store.get("candidates/valid_action", "candidates/label", "candidates/label_valid")
    if found is not None:
        valid, label, label_valid = found
        finite = np.isfinite(label)
        report.where("candidates/label", ~valid & finite, "finite label on an invalid action",
                     "NaN: invalid actions are masked with reason bits, never encoded as low or zero labels")
        report.where("candidates/label", valid & np.isinf(label), "infinite label", "a finite label or NaN")
        report.where("candidates/label_valid", label_valid != (valid & finite),
                     "label_valid differs from (valid_action and a finite label)",
                     "label_valid exactly where the action is valid and its label finite")
    found = store.get("steps/reward")
    if found is not None:
        report.where("steps/reward", ~np.isfinite(found[0]), "missing (non-finite) reward",
                     "an explicit finite reward on every step")


# -- provenance -----------------------------------------------------------------------------


def _vocabulary(store: _Store, group: str, name: str) -> list[Any] | None:
    """The vocabulary list ``name`` from ``group``'s attrs (where the writer keeps it)."""
    value = store.group_attrs.get(group, {}).get(name)
    return value if isinstance(value, list) else None


def _check_vocabularies(store: _Store, report: _Report) -> None:
    for group, columns in schema.VOCABULARIES.items():
        for column, name in columns.items():
            vocabulary = _vocabulary(store, group, name)
            if vocabulary is None:
                report.add(f"{group} attrs {name}: vocabulary missing or not a list; expected the list of strings "
                           f"{group}/{column} codes into")
                continue
            empty = np.array([not (isinstance(word, str) and word.strip()) for word in vocabulary], dtype=bool)
            if empty.any():
                report.add(f"{group} attrs {name}: empty or non-string entries at codes "
                           f"{np.flatnonzero(empty)[:SHOWN_ROWS].tolist()}; expected a non-empty name for every "
                           "code (a missing strategy or mixture id is refused)")
            found = store.get(f"{group}/{column}")
            if found is None:
                continue
            codes = found[0].astype(np.int64)
            out = (codes < 0) | (codes >= len(vocabulary))
            report.where(f"{group}/{column}", out, "code out of range",
                         f"a code into the {len(vocabulary)} entries of {group} attrs {name}")
            if empty.any():
                report.where(f"{group}/{column}", ~out & empty[np.where(out, 0, codes)],
                             f"code naming an empty entry of {group} attrs {name}", "a code naming a non-empty string")
    for name in ("strategy_ids", "mixture_ids"):
        if _vocabulary(store, "candidates", name) != _vocabulary(store, "rollouts", name):
            report.add(f"candidates attrs {name}: differs from rollouts attrs {name}; expected one vocabulary, so a "
                       "candidate's code names its chain's id")
    found = store.get("rollouts/strategy_code", "rollouts/mixture_code", "steps/rollout_id", "candidates/step_id",
                      "candidates/strategy_code", "candidates/mixture_code")
    if found is None:
        return
    strategy, mixture, rollout_id, step_id, candidate_strategy, candidate_mixture = found
    step, step_ok = _valid_index(step_id, rollout_id.shape[0])
    chain, chain_ok = _valid_index(rollout_id[step], strategy.shape[0])
    linked = step_ok & chain_ok
    report.where("candidates/strategy_code", linked & (candidate_strategy != strategy[chain]),
                 "strategy differs from the candidate's chain", "rollouts/strategy_code of the chain")
    report.where("candidates/mixture_code", linked & (candidate_mixture != mixture[chain]),
                 "mixture differs from the candidate's chain", "rollouts/mixture_code of the chain")


def _check_config(store: _Store, report: _Report) -> None:
    config = store.attrs.get("config")
    if not isinstance(config, dict):
        return  # missing or not an object: a root attrs problem, reported with them
    for key in ("target_protocol_version", "split_manifest_hash", "return_semantics", "reason_code_version"):
        value = config.get(key)
        if not (isinstance(value, str) and value.strip()):
            report.add(f"root attrs config.{key}: found {shown(value)}; expected a non-empty string")
    gamma = config.get("discount_gamma")
    if _gamma(config) is None:
        report.add(f"root attrs config.discount_gamma: found {shown(gamma)}; expected a number with 0 < gamma <= 1")


def _gamma(config: Any) -> float | None:
    """The config's discount gamma when it is a number in (0, 1], else None."""
    gamma = config.get("discount_gamma") if isinstance(config, dict) else None
    if isinstance(gamma, (int, float)) and not isinstance(gamma, bool) and math.isfinite(gamma) and 0.0 < gamma <= 1.0:
        return float(gamma)
    return None


def _check_sources(store: _Store, report: _Report) -> None:
    found = store.get("sources/shard_sha256")
    if found is not None:
        digests = found[0].reshape(found[0].shape[0], -1)
        report.where("sources/shard_sha256", np.asarray(~digests.any(axis=1)),
                     "all-zero shard SHA-256 (no source hash recorded)", "the SHA-256 the dataset manifest records")
    found = store.get("sources/n_states")
    if found is not None:
        report.where("sources/n_states", found[0] < 0, "negative state count", "n_states >= 0")
    found = store.get("steps/source_row", "steps/rollout_id", "rollouts/source_id", "sources/n_states")
    if found is None:
        return
    source_row, rollout_id, source_id, n_states = found
    chain, chain_ok = _valid_index(rollout_id, source_id.shape[0])
    source, source_ok = _valid_index(source_id[chain], n_states.shape[0])
    linked = chain_ok & source_ok
    report.where("steps/source_row", linked & ((source_row < 0) | (source_row >= n_states[source])),
                 "source row outside its source shard", "0 <= source_row < sources/n_states of the chain's source")


def _check_audit(store: _Store, report: _Report) -> None:
    found = store.get("steps/audit_valid_candidates")
    if found is not None:
        counts = found[0]
        report.where("steps/audit_valid_candidates", counts < -1, "negative count other than the -1 sentinel",
                     "a count >= 0, or -1 for unavailable")
        shell = store.get("steps/candidate_count")
        if shell is not None:
            report.where("steps/audit_valid_candidates", counts > shell[0], "more valid candidates than the shell has",
                         "at most candidate_count")
    found = store.get("steps/audit_selected_margin")
    if found is not None:
        report.where("steps/audit_selected_margin", np.isinf(found[0]), "infinite margin",
                     "a finite margin, or NaN for unavailable")


def _check_q_h_shape(store: _Store, report: _Report) -> None:
    found = store.get("steps/candidate_count")
    width = store.widths.get("A")
    if found is None or not isinstance(width, int):
        return
    widest = int(found[0].max()) if found[0].size else 0
    if width != widest:
        report.add(f"root attrs widths.A: found {width}; expected {widest}, the widest candidate shell")


def _shells_fit(columns: Mapping[str, np.ndarray], widths: Mapping[str, Any]) -> bool:
    """Whether the shells can be padded as recorded: widths.A is the widest shell and the
    shells cover exactly the candidate rows. Otherwise a rebuild would size its S x A arrays
    from a hostile width or count, and the mismatch is already reported."""
    counts = columns["steps/candidate_count"].astype(np.int64)
    width = widths.get("A")
    widest = int(counts.max()) if counts.size else 0
    return isinstance(width, int) and width == widest and bool((counts >= 0).all()) \
        and int(counts.sum()) == columns["candidates/valid_action"].shape[0]


def _check_q_h(store: _Store, report: _Report) -> None:
    """``q_h/`` against a rebuild from the factual tables at the persisted gamma, in bulk."""
    columns = {path: store.arrays[path] for path in Q_H_INPUT_PATHS if path in store.arrays}
    gamma = _gamma(store.attrs.get("config"))
    if len(columns) < len(Q_H_INPUT_PATHS) or gamma is None or not _shells_fit(columns, store.widths):
        report.add("q_h/: not compared with a rebuild (factual columns, shell widths or config.discount_gamma "
                   "unusable, reported above)")
        return
    try:
        rebuilt = build_q_h(columns, discount_gamma=gamma, widths=store.widths)
    except (RolloutStoreError, ValueError, KeyError, IndexError) as exc:
        report.add(f"q_h/: cannot be rebuilt from the factual tables ({shown(str(exc), 200)})")
        return
    for name, expected in rebuilt.items():
        path = f"{schema.Q_H_GROUP}/{name}"
        persisted = store.arrays.get(path)
        if persisted is None:
            continue
        if persisted.shape != expected.shape:
            report.add(f"{path}: shape {list(persisted.shape)} differs from the rebuild's {list(expected.shape)}")
            continue
        differs = persisted != expected
        if expected.dtype.kind == "f":
            differs &= ~(np.isnan(persisted) & np.isnan(expected))
        report.where(path, differs, "stale derived view (differs from a rebuild from the factual tables)",
                     f"build_q_h(steps/, candidates/, discount_gamma={gamma}); rewrite the store to refresh q_h/")
    attrs = store.group_attrs.get(schema.Q_H_GROUP, {})
    config = store.attrs.get("config")
    if not isinstance(config, dict):
        config = {}
    expected_attrs = {"td_semantics": schema.Q_H_TD_SEMANTICS, "reward_metric": schema.Q_H_REWARD_METRIC,
                      "return_semantics": config.get("return_semantics"), "discount_gamma": gamma}
    for key, value in expected_attrs.items():
        if attrs.get(key) != value:
            report.add(f"q_h attrs {key}: found {shown(attrs.get(key))}; expected {shown(value)}")


_CHECKS: tuple[Callable[[_Store, _Report], None], ...] = (
    _check_ids, _check_foreign_keys, _check_chains, _check_shells, _check_masks_and_labels, _check_vocabularies,
    _check_config, _check_sources, _check_audit, _check_q_h_shape, _check_q_h,
)


__all__ = ["RolloutZarrValidationResult", "rows_text", "validate_rollout_zarr_store"]
