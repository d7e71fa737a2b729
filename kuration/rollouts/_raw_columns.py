"""The raw columns of the input items, before any rule: :func:`record_columns` for a run of
:class:`~kuration.rollouts.records.RolloutWriteRecord` steps and :func:`batch_columns` for one
:class:`~kuration.rollouts.records.RolloutChainBatch`.

Each gives the same per-step and per-candidate columns (names as in the records), checked
here only for type, dtype kind, rank and row count; the rules of the store (ranges, masks,
labels, links) run once on the joined columns, in :mod:`kuration.rollouts.normalize`, the same
code for records and batches. A record run is read one C-level pass per field over its steps
and joined by one numpy call; a culprit is searched for only when that fast path fails, and is
named through ``where(row, field)`` (:data:`Where`).

What it does not do: join the items, or judge a value against another (that is
normalization's job).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from kuration.canonical.floats import canonical_floats
from kuration.errors import RolloutInputError, shown
from kuration.rollouts.config import RolloutZarrStoreConfig
from kuration.rollouts.records import CandidateShell, RolloutChainBatch, RolloutStepRecord

INT32_MAX = int(np.iinfo(np.int32).max)
INT64_MAX = int(np.iinfo(np.int64).max)
#: A batch's name for a per-step field where it differs from the record's (a column is plural).
BATCH_FIELDS = {"source_row": "source_rows", "state": "states", "reward": "rewards"}
CANDIDATE_KEYS = ("action_ids", "positions", "valid_action", "reason_bits", "labels", "label_valid")
_PAYLOAD_MISSING = ("missing, but field_retention_policy='full' keeps a payload for every step (use 'compact' to "
                    "store none)")


def nonempty_text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RolloutInputError(f"{where}: expected a non-empty string, found {shown(value)}")
    return value


def refuse_rows(mask: np.ndarray, values: np.ndarray, where: str, what: str) -> None:
    """Refuse the first row of a batch column where ``mask`` holds, naming ``where[row]``."""
    bad = np.flatnonzero(mask)
    if bad.size:
        row = int(bad[0])
        raise RolloutInputError(f"{where}[{row}]: {shown(values[row].item())} {what} ({bad.size} rows in all)")


def batch_texts(value: Any, where: str, count: int, rows: str, *, one_for_all: bool) -> list[str]:
    """A batch's per-chain strings: ``count`` non-empty strings (or one for all chains when
    ``one_for_all``)."""
    if isinstance(value, str) and one_for_all:
        return [nonempty_text(value, where)] * count
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        one = "a string or " if one_for_all else ""
        raise RolloutInputError(f"{where}: expected {one}a sequence of {count} strings, found {shown(value)}")
    if len(value) != count:
        raise RolloutInputError(f"{where}: {len(value)} strings, but {rows}; give one per chain")
    texts = list(value)
    for c, text in enumerate(texts):
        nonempty_text(text, f"{where}[{c}]")
    return [str(text) for text in texts]


def batch_column(batch: RolloutChainBatch, item: int, name: str, kinds: str, ndim: int | None,
                  rows: int | None, rows_label: str) -> np.ndarray:
    """The batch's column ``name`` as an array of a dtype kind in ``kinds`` (``"u1"``: uint8
    only) with ``ndim`` dimensions (None: at least 2) and ``rows`` rows (None: any), or a
    refusal naming ``records[item].<name>``. A uint64 int column is returned as int64 (numpy
    would join it with signed ints as floats)."""
    where = f"records[{item}].{name}"
    try:
        array = np.asarray(getattr(batch, name))
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{where}: expected an array: {exc}") from None
    uint8_only = kinds == "u1"
    kind_ok = array.dtype == np.uint8 if uint8_only else array.dtype.kind in kinds
    if not kind_ok or (array.ndim < 2 if ndim is None else array.ndim != ndim):
        shape = "an N-D (N >= 2)" if ndim is None else f"a {ndim}-D"
        kind = "uint8" if uint8_only else _KIND_NAMES[kinds]
        raise RolloutInputError(f"{where}: expected {shape} {kind} array, found dtype {array.dtype} shape "
                                f"{array.shape}")
    if rows is not None and len(array) != rows:
        raise RolloutInputError(f"{where}: {len(array)} rows, but {rows_label}; every row of the batch has one entry")
    if array.dtype == np.uint64 and kinds == "iu":
        refuse_rows(array > np.uint64(INT64_MAX), array, where, "is outside the int64 range")
        array = array.astype(np.int64)
    return array


def batch_columns(batch: RolloutChainBatch, item: int, num_steps: int, config: RolloutZarrStoreConfig
                   ) -> dict[str, np.ndarray]:
    """A batch's raw step and candidate columns, checked for kind, rank and row count (the
    rules run on the joined columns)."""
    steps = f"sum(chain_lengths) {num_steps}"
    counts = batch_column(batch, item, "shell_counts", "iu", 1, num_steps, steps)
    refuse_rows(counts < 1, counts, f"records[{item}].shell_counts", "is not >= 1 (a shell needs a candidate)")
    columns = {
        "source_row": batch_column(batch, item, "source_rows", "iu", 1, num_steps, steps),
        "selected_shell_index": batch_column(batch, item, "selected_shell_index", "iu", 1, num_steps, steps),
        "reward": batch_column(batch, item, "rewards", "fiu", 1, num_steps, steps).astype(np.float64),
        "state": batch_column(batch, item, "states", "fiu", 2, num_steps, steps),
        "shell_counts": counts.astype(np.int64, copy=False),
    }
    columns["audit_valid_candidates"] = np.full(num_steps, -1, dtype=np.int64) \
        if batch.audit_valid_candidates is None \
        else batch_column(batch, item, "audit_valid_candidates", "iu", 1, num_steps, steps)
    columns["audit_selected_margin"] = np.full(num_steps, np.nan) if batch.audit_selected_margin is None \
        else batch_column(batch, item, "audit_selected_margin", "fiu", 1, num_steps, steps).astype(np.float64)
    if config.field_retention_policy == "full":
        if batch.selected_payload is None:
            raise RolloutInputError(f"records[{item}].selected_payload: {_PAYLOAD_MISSING}")
        columns["selected_payload"] = batch_column(batch, item, "selected_payload", "u1", None, num_steps, steps)
    candidates = f"sum(shell_counts) {int(counts.sum())}"
    for name, kinds in zip(CANDIDATE_KEYS, _CANDIDATE_KINDS, strict=True):
        ndim = 2 if name == "positions" else 1
        columns[name] = batch_column(batch, item, name, kinds, ndim, int(counts.sum()), candidates)
    return columns


def float_vector(value: Any, where: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise RolloutInputError(f"{where}: expected a 1-D float vector: {exc}") from None
    if array.ndim != 1 or array.dtype.kind not in "fiu":
        raise RolloutInputError(f"{where}: expected a 1-D numeric vector, found dtype {array.dtype} shape "
                                f"{array.shape}")
    return canonical_floats(array.astype(np.float32))


def _all_of(types: set[type], accepted: tuple[type, ...], refused: tuple[type, ...] = (bool, np.bool_)) -> bool:
    return all(issubclass(t, accepted) and not issubclass(t, refused) for t in types)


def _check_instances(items: Sequence[Any], expected: type, where: Callable[[int], str]) -> None:
    """Refuse the first item that is not an ``expected``. One C-level pass over the types is
    the fast path; the per-item loop runs only when some type differs."""
    if set(map(type, items)) <= {expected}:
        return
    for i, item in enumerate(items):
        if not isinstance(item, expected):
            raise RolloutInputError(f"{where(i)}: expected a {expected.__name__}, found {type(item).__name__}")


def _attribute_lists(items: list[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """One list per attribute, each built by a C-level ``map``: no per-item tuple, since
    allocating one tuple per step wakes the cyclic GC, which then walks every record."""
    return [list(map(attrgetter(name), items)) for name in names]


_STEP_FIELDS = ("source_row", "state", "shell", "selected_shell_index", "reward", "audit_valid_candidates",
                "audit_selected_margin", "selected_payload")
#: The dtype kinds of the candidate columns (:data:`CANDIDATE_KEYS`), for records and batches.
_CANDIDATE_KINDS = ("iu", "fiu", "b", "iu", "fiu", "b")

#: ``where(row, field)``: the input location of a joined row (see :class:`_Locator`).
Where = Callable[..., str]


def record_columns(steps: list[Any], where: Where, config: RolloutZarrStoreConfig) -> dict[str, np.ndarray]:
    """The raw step and candidate columns of a run of records' steps (``where`` names the
    run's step ``s``), checked for type and shape only: each field is collected by one
    C-level pass and joined by one numpy call; the rules run on the joined columns."""
    _check_instances(steps, RolloutStepRecord, where)
    source_row, state, shells, selected, reward, audit_count, margin_values, payloads = \
        _attribute_lists(steps, _STEP_FIELDS)
    columns: dict[str, np.ndarray] = {
        "source_row": _int_column(source_row, "source_row", where, 0, INT64_MAX),
        "selected_shell_index": _int_column(selected, "selected_shell_index", where, 0, INT32_MAX),
        "reward": _float_column(reward, "reward", where),
    }
    if _has_none(audit_count):  # unavailable (None) is written as -1, so a measured 0 stays 0
        available = np.fromiter((v is not None for v in audit_count), dtype=bool, count=len(steps))
        known = _int_column([0 if v is None else v for v in audit_count], "audit_valid_candidates", where, -1,
                            INT32_MAX)
        columns["audit_valid_candidates"] = np.where(available, known, np.int64(-1))
    else:
        columns["audit_valid_candidates"] = _int_column(audit_count, "audit_valid_candidates", where, -1,
                                                        INT32_MAX)
    if _has_none(margin_values):
        margin_values = [math.nan if v is None else v for v in margin_values]
    columns["audit_selected_margin"] = _float_column(margin_values, "audit_selected_margin", where)
    columns["state"] = _joined(state, field="state", where=where, accept=_is_numeric, want="a 1-D numeric vector",
                               item_ndim=1, stack=True, width_label="width D_s")
    if config.field_retention_policy == "full":
        if _has_none(payloads):
            missing = next(s for s, payload in enumerate(payloads) if payload is None)
            raise RolloutInputError(f"{where(missing, 'selected_payload')}: {_PAYLOAD_MISSING}")
        columns["selected_payload"] = _joined(payloads, field="selected_payload", where=where,
                                              accept=lambda d: d == np.uint8, want="a uint8 array", item_ndim=None,
                                              stack=True, width_label="payload shape")
    _check_instances(shells, CandidateShell, lambda s: where(s, "shell"))
    counts = _lengths([shell.action_ids for shell in shells], "shell.action_ids", where)
    columns["shell_counts"] = counts
    fields = _attribute_lists(shells, CANDIDATE_KEYS)
    for name, kinds, parts in zip(CANDIDATE_KEYS, _CANDIDATE_KINDS, fields, strict=True):
        columns[name] = _shell_concat(parts, name, where, kinds, counts)
    return columns


def _has_none(values: list[Any]) -> bool:
    # By type, not ``None in values``: that compares with ==, which an ndarray answers elementwise.
    return type(None) in set(map(type, values))


def _lengths(parts: list[Any], field: str, where: Where) -> np.ndarray:
    try:
        return np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    except TypeError:
        for s, part in enumerate(parts):
            if not hasattr(part, "__len__") or np.ndim(part) == 0:
                raise RolloutInputError(f"{where(s, field)}: expected a 1-D array, found {shown(part)}") from None
        raise


def _int_column(values: list[Any], name: str, where: Where, low: int, high: int) -> np.ndarray:
    """``values`` (one Python or numpy int per step, bools refused) as int64. The range
    ``low..high`` is checked on the joined column (:func:`_check_int_range`); here it only
    words the refusal of a value that is no int or does not fit int64."""
    if _all_of(set(map(type, values)), (int, np.integer)):
        try:
            array = np.asarray(values)
        except (TypeError, ValueError, OverflowError):
            array = np.zeros(0, dtype=object)
        if array.ndim == 1 and (array.dtype.kind == "i" or (
                array.dtype.kind == "u" and (not array.size or array.max() <= INT64_MAX))):
            return array.astype(np.int64, copy=False)
    for s, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
            raise RolloutInputError(f"{where(s, name)}: expected an int in {low}..{high}, found {shown(value)}")
    raise RolloutInputError(f"steps.{name}: values are not integers")  # unreachable in practice


def _float_column(values: list[Any], name: str, where: Where) -> np.ndarray:
    """``values`` (one Python or numpy number per step) as float64. ``None`` and bools are
    refused by name: numpy would read them as NaN and 1.0."""
    if _all_of(set(map(type, values)), (int, float, np.integer, np.floating)):
        return np.asarray(values, dtype=np.float64)
    for s, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise RolloutInputError(f"{where(s, name)}: expected a number, found {shown(value)}")
    raise RolloutInputError(f"steps.{name}: expected one number per step")  # unreachable in practice


def _is_numeric(dtype: np.dtype) -> bool:
    return dtype.kind in "fiu"


def _joined(parts: list[Any], *, field: str, where: Where, accept: Any, want: str, item_ndim: int | None,
            stack: bool, width_label: str) -> np.ndarray:
    """The per-step arrays ``parts`` stacked (one row per step) or concatenated (one row per
    candidate). The fast path is one numpy call; when it fails or gives the wrong dtype or
    shape, the culprit step is found and named (``accept(dtype)`` and ``item_ndim``, None
    for any, say what each part must be; every part has the same shape past the row axis)."""
    array = np.zeros(0)
    ok = False
    try:
        array = np.asarray(parts) if stack else np.concatenate(parts)
        ok = accept(array.dtype) and (array.ndim >= 2 if item_ndim is None else array.ndim == item_ndim + stack)
    except (TypeError, ValueError):
        pass
    if ok:
        return array
    first = np.asarray(parts[0])
    for s, part in enumerate(parts):
        item = np.asarray(part)
        if not accept(item.dtype) or (item.ndim < 1 if item_ndim is None else item.ndim != item_ndim):
            raise RolloutInputError(f"{where(s, field)}: expected {want}, found dtype {item.dtype} shape {item.shape}")
        kept = 0 if stack else 1  # stacked parts share their whole shape, concatenated ones their width
        if item.shape[kept:] != first.shape[kept:]:
            raise RolloutInputError(f"{where(s, field)}: {width_label} {item.shape[kept:]}, but step 0 has "
                                    f"{first.shape[kept:]}; every step has the same")
    raise RolloutInputError(f"{field}: cannot join the per-step arrays")


_KIND_NAMES = {"b": "bool", "iu": "integer", "fiu": "numeric"}


def _shell_concat(parts: list[Any], field: str, where: Where, kinds: str, counts: np.ndarray) -> np.ndarray:
    """One shell array per step, joined into one row per candidate. Every shell array has one
    entry per candidate (``counts``); the first step where one does not is named."""
    lengths = _lengths(parts, f"shell.{field}", where)
    bad = np.flatnonzero(lengths != counts)
    if bad.size:
        s = int(bad[0])
        raise RolloutInputError(f"{where(s, f'shell.{field}')}: {int(lengths[s])} entries, but the shell has "
                                f"{int(counts[s])} action_ids; every shell array has one entry per candidate")
    item_ndim = 2 if field == "positions" else 1
    return _joined(parts, field=f"shell.{field}", where=where, accept=lambda d: d.kind in kinds,
                   want=f"a {item_ndim}-D {_KIND_NAMES[kinds]} array", item_ndim=item_ndim, stack=False,
                   width_label="width P")


__all__ = ["BATCH_FIELDS", "CANDIDATE_KEYS", "INT32_MAX", "INT64_MAX", "Where", "batch_column", "batch_columns",
           "batch_texts", "float_vector", "nonempty_text", "record_columns", "refuse_rows"]
