"""Reading ``universe.csv``: the explicit map from sample identity to physical file.

Columns (Cuvis.AI vocabulary): ``source`` and ``index`` are required; ``materialized_path``,
``split``, ``annotation``, ``format`` and ``group`` are optional; any other column is
ignored. ``index`` may be an inclusive range ``a-b`` (or ``a-b:step``), which fans out into
one sample per index. Paths are posix, relative to the CSV's folder, and may not escape
it with ``..``. Sources are normalized to posix.

Every cell is validated with a pandera schema before anything is built; each rejection
names the file, the line (the header is line 1) and the column. Nothing is parsed out of
filenames.
"""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np
import pandas as pd
import pandera.pandas as pdv

from kuration import storage
from kuration.errors import UniverseError
from kuration.splits.universe import AttributeLoader, Universe, enumerate_folder

REQUIRED_COLUMNS = ("source", "index")
OPTIONAL_COLUMNS = ("materialized_path", "split", "annotation", "format", "group")
SPLIT_VALUES = ("train", "val", "test")
_INDEX_PATTERN = r"^\d+(-\d+(:\d+)?)?$"
_ESCAPE = re.compile(r"(?:^|[/\\])\.\.(?:[/\\]|$)")  # non-capturing: pandas warns on groups
_PATH_COLUMNS = ("source", "materialized_path", "annotation")
#: The header is line 1, so data row ``i`` (0-based) is on line ``i + 2`` unless blank lines or
#: multi-line cells intervene (see ``_data_line_numbers``).
_FIRST_DATA_LINE = 2


def _no_escape(series: pd.Series) -> pd.Series:
    return ~series.str.contains(_ESCAPE)


def _cell_schema(columns: list[str]) -> pdv.DataFrameSchema:
    checks: dict[str, pdv.Column] = {
        "source": pdv.Column(str, [pdv.Check.str_length(min_value=1, error="must not be empty"),
                                   pdv.Check(_no_escape, error="must not contain a '..' path component")]),
        "index": pdv.Column(str, pdv.Check.str_matches(_INDEX_PATTERN, error="must be a non-negative integer or an 'a-b' range")),
    }
    for name in ("materialized_path", "annotation"):
        if name in columns:
            checks[name] = pdv.Column(str, pdv.Check(_no_escape, error="must not contain a '..' path component"))
    if "split" in columns:
        checks["split"] = pdv.Column(str, pdv.Check.isin(["", *SPLIT_VALUES], error=f"must be empty or one of {list(SPLIT_VALUES)}"))
    return pdv.DataFrameSchema(checks, strict=False, coerce=False)


def _data_line_numbers(raw: bytes, n_rows: int) -> np.ndarray:
    """The 1-based line of the file each parsed data row starts on.

    Usually row ``i`` is on line ``i + 2``; but the parser skips blank lines and a quoted
    cell may span lines, and then only a (slower) pass of the csv module knows the lines.
    """
    n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    if n_lines == n_rows + 1:
        return np.arange(n_rows) + _FIRST_DATA_LINE
    reader = csv.reader(io.StringIO(raw.decode("utf-8-sig", errors="replace")))
    starts: list[int] = []
    previous = 0
    for record in reader:
        if record:
            starts.append(previous + 1)
        previous = reader.line_num
    if len(starts) != n_rows + 1:  # the two parsers disagree; fall back to the plain count
        return np.arange(n_rows) + _FIRST_DATA_LINE
    return np.asarray(starts[1:], dtype=np.int64)


def _raise_schema_errors(where: str, errors: pdv.errors.SchemaErrors, line_numbers: np.ndarray, *, limit: int = 5) -> None:
    cases = errors.failure_cases.dropna(subset=["index"]).sort_values("index", kind="stable")
    lines = []
    for case in cases.head(limit).itertuples():
        check = str(case.check)
        lines.append(f"line {line_numbers[int(case.index)]}, column {case.column!r}: value {case.failure_case!r} {check}")
    more = len(cases) - limit
    raise UniverseError(
        f"{where}: {len(cases)} invalid cell(s):\n  " + "\n  ".join(lines) + (f"\n  ... and {more} more" if more > 0 else "")
    ) from None


def _resolve_relative(values: pd.Series, csv_dir: str) -> pd.Series:
    """Relative paths are relative to the CSV's folder; absolute paths and URLs pass through."""
    absolute = values.str.startswith("/") | values.str.contains("://", regex=False) | values.str.match(r"^[A-Za-z]:[/\\]")
    prefix = csv_dir.rstrip("/") + "/"
    return values.where(absolute | (values == ""), prefix + values)


def read_universe_csv(
    path: str | os.PathLike[str],
    *,
    one_file_per_row: bool = False,
    attributes: AttributeLoader | None = None,
) -> Universe:
    """Read, validate and canonically sort a ``universe.csv`` (local path or fsspec URL).

    ``one_file_per_row`` is for layouts where every sample is its own file (converted
    frames): then ``materialized_path`` is required on every row and must be unique.
    Otherwise it defaults to ``source`` and rows may share a file (many frames of one
    recording). Raises :class:`UniverseError` (a ``ValueError``) naming file, line and
    column on: an empty file, a missing required column, a non-integer index, a ``..``
    escape, a bad ``split`` value, a duplicate ``(source, index)``, or a duplicate
    ``materialized_path`` when one file per row is required.
    """
    where = os.fspath(path)
    try:
        raw = storage.read_bytes(where)
    except FileNotFoundError:
        raise UniverseError(f"universe file not found: {where}") from None
    if not raw.strip():
        raise UniverseError(f"{where}: the file is empty; expected a header with columns {list(REQUIRED_COLUMNS)} and rows")
    try:
        df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, engine="pyarrow", encoding="utf-8")
    except Exception as exc:  # the CSV parser's own errors carry the detail
        raise UniverseError(f"{where}: not a readable CSV: {exc}") from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise UniverseError(
            f"{where}: missing required column(s) {missing}; found {list(df.columns)}. "
            f"Required: {list(REQUIRED_COLUMNS)} (optional: {list(OPTIONAL_COLUMNS)}); other columns are ignored."
        )
    if df.empty:
        raise UniverseError(f"{where}: the file has a header but no rows")
    line_numbers = _data_line_numbers(raw, len(df))
    present = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in df.columns]
    df = df[present].apply(lambda col: col.str.strip())
    df["source"] = df["source"].str.replace("\\", "/", regex=False)
    try:
        _cell_schema(present).validate(df, lazy=True)
    except pdv.errors.SchemaErrors as exc:
        _raise_schema_errors(where, exc, line_numbers)

    if one_file_per_row:
        empty = df.index[df.get("materialized_path", pd.Series("", index=df.index)) == ""]
        if len(empty):
            raise UniverseError(
                f"{where}: line {line_numbers[int(empty[0])]}, column 'materialized_path': required when each "
                f"sample is its own file, but the cell is empty ({len(empty)} such row(s))"
            )
    sources, indices, row_of = _expand_indices(df, where, line_numbers)
    csv_dir = storage.parent_url(where)
    mat = df["materialized_path"] if "materialized_path" in df.columns else pd.Series("", index=df.index)
    mat = _resolve_relative(mat.where(mat != "", df["source"]).str.replace("\\", "/", regex=False), csv_dir)
    annotation = _resolve_relative(df["annotation"].str.replace("\\", "/", regex=False), csv_dir) if "annotation" in df.columns else None
    group = df["group"].str.replace("\\", "/", regex=False) if "group" in df.columns else None

    if one_file_per_row:
        expanded_paths = mat.to_numpy()[row_of]
        dup = pd.Series(expanded_paths).duplicated(keep=False).to_numpy()
        if dup.any():
            first, second = np.flatnonzero(dup)[:2]
            raise UniverseError(
                f"{where}: duplicate materialized_path {expanded_paths[first]!r} on lines "
                f"{line_numbers[row_of[first]]} and {line_numbers[row_of[second]]}; each row must point at a distinct file"
            )

    def column(values: pd.Series | None) -> np.ndarray | None:
        return None if values is None else values.to_numpy(dtype=object)[row_of]

    return Universe.from_columns(
        sources,
        indices,
        group=column(group),
        annotation=column(annotation),
        materialized_path=column(mat),
        format=column(df["format"]) if "format" in df.columns else None,
        split=column(df["split"]) if "split" in df.columns else None,
        row_numbers=line_numbers[row_of],
        attributes=attributes,
        origin=where,
    )


def _expand_indices(df: pd.DataFrame, where: str, line_numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source per sample, index per sample, originating row per sample), ranges fanned out."""
    cells = df["index"]
    is_range = cells.str.contains("-", regex=False).to_numpy()
    rows = np.arange(len(df))
    if not is_range.any():
        return df["source"].to_numpy(dtype=object), cells.astype(np.int64).to_numpy(), rows
    index_parts: list[np.ndarray] = []
    row_parts: list[np.ndarray] = []
    plain = ~is_range
    index_parts.append(cells[plain].astype(np.int64).to_numpy())
    row_parts.append(rows[plain])
    for row in rows[is_range]:
        text = cells.iat[row]
        span, _, step = text.partition(":")
        start, stop = (int(x) for x in span.split("-"))
        step_n = int(step) if step else 1
        if start > stop or step_n <= 0:
            raise UniverseError(
                f"{where}: line {line_numbers[row]}, column 'index': range {text!r} must have start <= stop and step > 0"
            )
        values = np.arange(start, stop + 1, step_n, dtype=np.int64)
        index_parts.append(values)
        row_parts.append(np.full(len(values), row))
    row_of = np.concatenate(row_parts)
    return df["source"].to_numpy(dtype=object)[row_of], np.concatenate(index_parts), row_of


def read_landing_universe(
    root: str | os.PathLike[str],
    *,
    universe_csv: str | None = "universe.csv",
    source_pattern: str = "*",
    one_file_per_row: bool = False,
) -> Universe:
    """A landing zone's universe: its ``universe_csv`` when one is named, otherwise every
    file under ``root`` matching ``source_pattern`` (one sample per file)."""
    if universe_csv:
        return read_universe_csv(storage.join_url(root, universe_csv), one_file_per_row=one_file_per_row)
    return enumerate_folder(root, pattern=source_pattern)
