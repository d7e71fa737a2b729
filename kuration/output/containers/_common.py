"""What the four containers share: checking a shard before it is written, and turning the
raw arrays a container found back into a validated :class:`ShardArrays`.

Every reader hands :func:`assemble` whatever arrays it decoded, in whatever dtype the format
kept them (JSON widens to int64/float64, Parquet may hand back a wider type), and gets the
declared dtype and shape back, or a :class:`ShardFormatError` naming the container, the
modality and what was expected against what was found. A value is only ever converted when
it is exactly representable in the declared dtype: ``300`` for a ``uint8`` modality, ``1.5``
for an integer one or ``1e300`` for a ``float32`` one raise, they never wrap, truncate or
round. This module does no I/O.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any, overload

import numpy as np

from kuration.errors import OutputError, shown
from kuration.output.containers.protocol import ShardArrays, ShardFormatError
from kuration.output.spec import DTYPES, MODALITY_NAME, N_STEPS, PRESENT, Modality


#: The writers hold every shard to the spec's name rule, whoever built the shard.
_NAME = MODALITY_NAME


class MissingDependencyError(OutputError, ImportError):
    """A container needs an optional package that is not installed."""


def require(module: str, extra: str, container: str) -> Any:
    """Import ``module`` lazily, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"the {container!r} shard container needs {module.split('.')[0]}: pip install \"kuration[{extra}]\" "
            f"(import of {module!r} failed: {exc})"
        ) from None


# -- write side -----------------------------------------------------------------------------


def check_shard(shard: ShardArrays, container: str) -> tuple[dict[str, np.ndarray], np.ndarray | None, int]:
    """``shard``'s arrays sorted by name as C-contiguous native-byte-order arrays (no copy when
    they already are), its mask and step count, after checking it is writable at all: names
    not reserved, dtypes in :data:`DTYPES`, one row count, ``0 <= n_steps <= rows``."""
    where = f"{container} shard (write)"
    if not isinstance(shard, ShardArrays):
        raise ShardFormatError(f"{where}: expected a ShardArrays, got {type(shard).__name__}")
    if not shard.arrays:
        raise ShardFormatError(f"{where}: a shard needs at least one modality; got none")
    arrays: dict[str, np.ndarray] = {}
    rows: tuple[str, int] | None = None
    for name in sorted(shard.arrays):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ShardFormatError(
                f"{where}: modality name {name!r} is not allowed; a name starts with a letter and holds only letters, "
                f"digits and _ ({PRESENT} and {N_STEPS} are reserved), as the output spec requires"
            )
        a = _native(shard.arrays[name], f"{where}: modality {name!r}")
        if rows is None:
            rows = (name, len(a))
        elif len(a) != rows[1]:
            raise ShardFormatError(
                f"{where}: modality {name!r} has {len(a)} rows but {rows[0]!r} has {rows[1]}; every array must have "
                "the same number of rows"
            )
        arrays[name] = a
    assert rows is not None
    present = None
    if shard.present is not None:
        present = _native(shard.present, f"{where}: {PRESENT}")
        if present.dtype != np.bool_ or present.shape != (rows[1],):
            raise ShardFormatError(
                f"{where}: {PRESENT} must be bool of shape ({rows[1]},) (the rows of {rows[0]!r}), "
                f"got {present.dtype} {present.shape}"
            )
    n_steps = shard.n_steps
    if isinstance(n_steps, (bool, np.bool_)) or not isinstance(n_steps, (int, np.integer)):
        raise ShardFormatError(f"{where}: n_steps must be an integer, got {n_steps!r}")
    n_steps = int(n_steps)
    if not 0 <= n_steps <= rows[1]:
        raise ShardFormatError(f"{where}: n_steps is {n_steps}, expected 0 <= n_steps <= rows ({rows[1]})")
    return arrays, present, n_steps


def _native(value: Any, where: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ShardFormatError(f"{where}: expected a numpy array, got {type(value).__name__}")
    if value.dtype.name not in DTYPES:
        raise ShardFormatError(f"{where}: dtype {value.dtype} is not one of {list(DTYPES)}")
    if value.ndim == 0:
        raise ShardFormatError(f"{where}: is 0-d; expected (rows, *shape) with a leading row axis")
    # native byte order and C order, so every container writes the same bytes; free when already so
    return np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("="))


def raw_bytes(a: np.ndarray) -> memoryview:
    """A flat byte view of a C-contiguous array (no copy); zipfile counts ``len()`` of what it
    is given as bytes, so a shaped view would corrupt the sizes it records."""
    return a.reshape(-1).view(np.uint8).data


# -- read side ------------------------------------------------------------------------------


def check_names(
    container: str, found: list[str], modalities: Mapping[str, Modality], *, presence: bool, what: str = "array"
) -> None:
    """``found`` (the arrays or columns a shard holds, ``_n_steps`` excluded) is exactly the
    declared modalities, plus ``_present`` iff ``presence``; no name twice."""
    where = f"{container} shard"
    dupes = sorted({n for n in found if found.count(n) > 1})
    if dupes:
        raise ShardFormatError(f"{where}: {what}(s) {dupes} appear more than once; a shard holds each name once")
    have = set(found)
    for name in modalities:
        if name not in have:
            raise ShardFormatError(
                f"{where}: modality {name!r} is missing; the shard holds {sorted(have)}. Was it written with a "
                "different output spec?"
            )
    if presence and PRESENT not in have:
        raise ShardFormatError(
            f"{where}: no {PRESENT} mask, but the spec has presence_mask: true; the shard holds {sorted(have)}"
        )
    if not presence and PRESENT in have:
        raise ShardFormatError(f"{where}: holds a {PRESENT} mask, but the spec has presence_mask: false")
    extra = sorted(have - set(modalities) - {PRESENT})
    if extra:
        raise ShardFormatError(
            f"{where}: unexpected {what}(s) {extra}; the declared modalities are {sorted(modalities)}"
            + (f" (plus {PRESENT})" if presence else "")
        )


@overload
def value_limit(name: str, modalities: Mapping[str, Modality], max_rows: int) -> int: ...
@overload
def value_limit(name: str, modalities: Mapping[str, Modality], max_rows: None) -> None: ...


def value_limit(name: str, modalities: Mapping[str, Modality], max_rows: int | None) -> int | None:
    """The most values array ``name`` may hold in a shard of at most ``max_rows`` rows of the
    declared shapes (None when no bound is given): what a reader may allocate for it."""
    if max_rows is None:
        return None
    if name == N_STEPS:
        return 1
    if name == PRESENT:
        return max_rows
    return max_rows * math.prod(modalities[name].shape)


def check_size(container: str, name: str, shape: tuple[int, ...], limit: int | None) -> None:
    """Refuse, before it is decoded, an array whose declared ``shape`` holds more than ``limit`` values."""
    if limit is not None and math.prod(shape) > limit:
        what = f"the {PRESENT} mask" if name == PRESENT else N_STEPS if name == N_STEPS else f"modality {name!r}"
        raise ShardFormatError(
            f"{container} shard: {what} declares shape {tuple(shape)}, more than the {limit} values a shard of this "
            "spec can hold; the shard is corrupt or was not written with this spec"
        )


def check_rows(container: str, rows: int, max_rows: int | None) -> None:
    if max_rows is not None and rows > max_rows:
        raise ShardFormatError(f"{container} shard: {rows} rows, more than the {max_rows} a shard of this spec holds")


def check_n_steps(container: str, value: Any) -> int:
    """``value`` is a whole number (a Python or numpy integer, or a 0-d integer array)."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise ShardFormatError(f"{container} shard: {N_STEPS} must be a single integer, found shape {value.shape}")
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ShardFormatError(f"{container} shard: {N_STEPS} must be an integer, found {value!r}")
    return int(value)


def assemble(
    container: str,
    found: Mapping[str, np.ndarray],
    present: np.ndarray | None,
    n_steps: int,
    modalities: Mapping[str, Modality],
    max_rows: int | None = None,
) -> ShardArrays:
    """Check shapes and row counts (at most ``max_rows``), restore each declared dtype,
    check ``n_steps``. ``found`` holds exactly the declared modalities (``check_names`` ran
    first)."""
    where = f"{container} shard"
    if present is not None:
        if present.ndim != 1:
            raise ShardFormatError(f"{where}: {PRESENT} must be 1-d (rows,), found shape {present.shape}")
        rows, rows_of = len(present), PRESENT
        present = restore(container, PRESENT, present, np.dtype(bool))
        present = present if present.flags.writeable else present.copy()
    elif modalities:
        rows_of = min(modalities)
        rows = len(found[rows_of]) if found[rows_of].ndim else -1
    else:
        rows, rows_of = n_steps, N_STEPS
    check_rows(container, rows, max_rows)
    arrays: dict[str, np.ndarray] = {}
    for name in sorted(modalities):
        m = modalities[name]
        a = found[name]
        expected = (rows, *m.shape)
        if a.ndim == 0 or len(a) != rows:
            got = "no row axis" if a.ndim == 0 else f"{len(a)} rows"
            raise ShardFormatError(f"{where}: modality {name!r} has {got}, expected {rows} (the rows of {rows_of!r})")
        if a.shape != expected:
            raise ShardFormatError(
                f"{where}: modality {name!r} has shape {a.shape}, expected {expected} (rows, *declared shape "
                f"{list(m.shape)})"
            )
        out = restore(container, name, a, m.numpy_dtype)
        # every container hands back arrays the caller may modify (pyarrow's zero-copy ones are not)
        arrays[name] = out if out.flags.writeable else out.copy()
    if not 0 <= n_steps <= rows:
        raise ShardFormatError(f"{where}: {N_STEPS} is {n_steps}, expected 0 <= {N_STEPS} <= rows ({rows})")
    return ShardArrays(arrays, present, n_steps)


def restore(container: str, name: str, a: np.ndarray, target: np.dtype) -> np.ndarray:
    """``a`` as ``target``, when every value is exactly representable in it; else raise,
    naming the first value that is not and where it is."""
    if a.dtype == target:
        return a
    what = f"{container} shard: {'the ' + PRESENT + ' mask' if name == PRESENT else f'modality {name!r}'}"
    kind = a.dtype.kind
    if a.dtype == object:
        return _restore_objects(what, a, target)
    if target.kind == "b":
        if kind != "b":
            raise ShardFormatError(f"{what}: expected booleans (true/false) for bool, found {a.dtype} values")
        return a.astype(target)
    if kind == "b":
        raise ShardFormatError(f"{what}: expected {target} numbers, found booleans")
    if kind not in "iuf":
        raise ShardFormatError(f"{what}: expected {target} numbers, found {a.dtype} values")
    if target.kind in "iu":
        info = np.iinfo(target)
        if kind == "f":
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(a) | (np.floor(a) != a)
            _raise_at(what, a, bad, f"is not a whole number, so it cannot be {target}")
            # compare as Python ints: float(2**63 - 1) == 2**63 would wrongly pass a float comparison
            if a.size and (int(a.min()) < info.min or int(a.max()) > info.max):
                _raise_at(what, a, (a < float(info.min)) | (a >= float(info.max) + 1), _range(target))
            return a.astype(target)
        # the bounds that are tighter than the source type's are representable in it: compare there
        source = np.iinfo(a.dtype)
        bad = np.zeros(a.shape, bool)
        if info.min > source.min:
            bad |= a < a.dtype.type(info.min)
        if info.max < source.max:
            bad |= a > a.dtype.type(info.max)
        _raise_at(what, a, bad, _range(target))
        return a.astype(target)
    # float target: the cast must come back to the same value (NaN stays NaN; no rounding, no overflow)
    with np.errstate(over="ignore", invalid="ignore"):
        out = a.astype(target)
        back = out.astype(a.dtype)
    same = back == a
    if kind == "f":
        same |= np.isnan(a) & np.isnan(back)
    else:
        same &= np.isfinite(out)
    _raise_at(what, a, ~same, f"is not exactly representable as {target}")
    return out


def _restore_objects(what: str, a: np.ndarray, target: np.dtype) -> np.ndarray:
    """The slow path for values numpy could not type on its own (JSON integers beyond int64
    next to others, floats for an integer modality, ``null``, strings): check every element
    as the Python value it is."""
    out = np.empty(a.shape, target)
    flat = out.reshape(-1)
    for i, v in enumerate(a.flat):
        reason = _object_problem(v, target)
        if reason:
            raise ShardFormatError(f"{what}: value {shown(v)} at {_at(np.unravel_index(i, a.shape))} {reason}")
        flat[i] = v
    return out


def _object_problem(v: Any, target: np.dtype) -> str | None:
    """Why ``v`` cannot be stored exactly as ``target``, or None when it can."""
    is_bool = isinstance(v, (bool, np.bool_))
    if target.kind == "b":
        return None if is_bool else "is not a boolean (true/false)"
    if is_bool:
        return f"is a boolean (expected {target})"
    if not isinstance(v, (int, float, np.integer, np.floating)):
        return f"is not a number (expected {target})"
    if target.kind in "iu":
        if isinstance(v, (float, np.floating)) and not (math.isfinite(v) and float(v).is_integer()):
            return f"is not a whole number, so it cannot be {target}"
        info = np.iinfo(target)
        return None if info.min <= int(v) <= info.max else _range(target)
    try:
        with np.errstate(over="ignore"):
            cast = float(target.type(v))
    except OverflowError:  # a Python int beyond float64
        cast = math.nan
    # Python compares an int with a float exactly; NaN only matches NaN
    if (math.isnan(cast) and isinstance(v, (float, np.floating)) and math.isnan(v)) or cast == v:
        return None
    return f"is not exactly representable as {target}"


def _range(target: np.dtype) -> str:
    info = np.iinfo(target)
    return f"is out of range for {target} ({info.min}..{info.max})"


def _raise_at(what: str, a: np.ndarray, bad: np.ndarray, reason: str) -> None:
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        value = a[index].item()
        raise ShardFormatError(f"{what}: value {value!r} at {_at(index)} {reason}")


def _at(index: tuple[int | np.integer[Any], ...]) -> str:
    row, rest = int(index[0]), tuple(int(i) for i in index[1:])
    return f"row {row}" + (f", element {list(rest)}" if rest else "")


__all__ = ["MissingDependencyError", "assemble", "check_n_steps", "check_names", "check_rows", "check_shard",
           "check_size", "raw_bytes", "require", "restore", "value_limit"]
