"""Reading ``universe.csv``: the explicit map from sample identity to physical file.

Columns (Cuvis.AI vocabulary): ``source`` and ``index`` are required; ``materialized_path``,
``split``, ``annotation``, ``format`` and ``group`` are optional; any other column is
ignored. ``index`` may be an inclusive range ``a-b`` (or ``a-b:step``), which fans out into
one sample per index. Paths are posix, relative to the CSV's folder, and may not escape
it with ``..``. Sources are normalized to posix.

Every cell is validated with a pandera schema before anything is built; each rejection
names the file, the line (the header is line 1) and the column. Nothing is parsed out of
filenames. Line endings may be ``\n``, ``\r\n`` or a lone ``\r``.

Limits, each refused with a :class:`~kuration.errors.UniverseError` naming the line (and
the column where there is one) before anything large is allocated:

* a cell longer than :data:`MAX_CELL_CHARS` characters (the csv module's field limit);
* an index, range bound or step above :data:`MAX_INDEX` (the signed 64-bit range the
  universe stores indices in), however many digits it is written with;
* more than ``max_samples`` samples in all, ranges fanned out (default
  :data:`MAX_SAMPLES`): ``0-99999999999`` is refused from its arithmetic, never allocated;
* a column name that appears twice in the header.

Every row yields at least one sample; none is dropped silently. A whole-file sample (a
``SampleRef`` without an index) cannot be written here: Cuvis.AI's reader requires an
integer ``index`` on every row, and so does this one.
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
from kuration.errors import UniverseError, shown
from kuration.numbers import MAX_INDEX, bounded_index
from kuration.splits._bounds import RangeError, expand_runs, parse_range
from kuration.splits.stages import EXCLUSIVE_STAGES
from kuration.splits.universe import AttributeLoader, Universe, enumerate_folder

REQUIRED_COLUMNS = ("source", "index")
OPTIONAL_COLUMNS = ("materialized_path", "split", "annotation", "format", "group")
#: ASCII digits only: ``\d`` would also take other scripts' digits, which ``int`` reads.
_INDEX_PATTERN = r"^[0-9]+(-[0-9]+(:[0-9]+)?)?$"
#: Longest cell, in characters. The csv module refuses longer fields by default; one limit
#: for every cell keeps the two parsers used here (pyarrow, and the csv module for line
#: numbers) from disagreeing about what a file holds.
MAX_CELL_CHARS = 131_072
#: Default for ``max_samples``: the most samples one file may describe, ranges fanned out.
#: Its columns then take a few GB; pass a larger ``max_samples`` for a larger universe.
MAX_SAMPLES = 50_000_000
#: Invalid cells one error names (the rest are counted): a file of a million bad rows
#: must still give a readable message.
_CELL_ERRORS_SHOWN = 5
_ESCAPE = re.compile(r"(?:^|[/\\])\.\.(?:[/\\]|$)")  # non-capturing: pandas warns on groups
#: The header is line 1, so data row ``i`` (0-based) is on line ``i + 2`` unless blank lines or
#: multi-line cells intervene (see ``_data_line_numbers``).
_FIRST_DATA_LINE = 2
#: One line with its ending; ``\r\n``, ``\n`` and a lone ``\r`` each end a line.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _no_escape(series: pd.Series) -> pd.Series:
    return ~series.str.contains(_ESCAPE)


def _cell_schema(columns: list[str]) -> pdv.DataFrameSchema:
    checks: dict[str, pdv.Column] = {
        "source": pdv.Column(str, [pdv.Check.str_length(min_value=1, error="must not be empty"),
                                   pdv.Check(_no_escape, error="must not contain a '..' path component")]),
        "index": pdv.Column(str,
                            pdv.Check.str_matches(_INDEX_PATTERN,
                                                  error="must be a non-negative integer or an 'a-b' range")),
    }
    for name in ("materialized_path", "annotation"):
        if name in columns:
            checks[name] = pdv.Column(str, pdv.Check(_no_escape, error="must not contain a '..' path component"))
    if "split" in columns:
        checks["split"] = pdv.Column(str, pdv.Check.isin(["", *EXCLUSIVE_STAGES],
                                                         error=f"must be empty or one of {list(EXCLUSIVE_STAGES)}"))
    return pdv.DataFrameSchema(checks, strict=False, coerce=False)


def _csv_records(text: str, where: str):
    """``(first line, record)`` of every non-blank record, by the csv module.

    Lines keep their endings, as a file opened with ``newline=""`` gives them, so the csv
    module sees a lone ``\r`` and reads lone-CR files as lines rather than refusing them.
    Its own errors (a field over the limit, a stray quote) become ours, with the line."""
    lines = (match.group() for match in _LINE.finditer(text))  # lazy: the header costs one line
    reader = csv.reader(lines)
    previous = 0
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field limit" in str(exc):
                raise UniverseError(
                    f"{where}: line {reader.line_num}: a cell is longer than {MAX_CELL_CHARS} characters, "
                    "the limit for every cell"
                ) from None
            raise UniverseError(f"{where}: line {reader.line_num}: not valid CSV ({exc})") from None
        if record:
            yield previous + 1, record
        previous = reader.line_num


def _header(text: str, where: str) -> list[str]:
    """The header's column names, stripped; a name given twice is refused.

    Read by the csv module because pandas renames a repeated name (``source.1``) and then
    silently uses only the first column of that name."""
    header: list[str] = next((record for _, record in _csv_records(text, where)), [])
    names = [name.strip() for name in header]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UniverseError(
            f"{where}: line 1 (the header): column name(s) {repeated} appear more than once; "
            "name each column once (rename or remove the extra one)"
        )
    return names


def _data_line_numbers(raw: bytes, text: str, n_rows: int, where: str) -> np.ndarray:
    """The 1-based line of the file each parsed data row starts on.

    Usually row ``i`` is on line ``i + 2``; but the parser skips blank lines, a quoted
    cell may span lines, and a lone ``\r`` ends a line too; then only a (slower) pass of
    the csv module knows the lines.
    """
    n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    if n_lines == n_rows + 1 and (b"\r" not in raw or raw.count(b"\r") == raw.count(b"\r\n")):
        return np.arange(n_rows) + _FIRST_DATA_LINE
    starts = [line for line, _ in _csv_records(text, where)]
    if len(starts) != n_rows + 1:  # the two parsers disagree; fall back to the plain count
        return np.arange(n_rows) + _FIRST_DATA_LINE
    return np.asarray(starts[1:], dtype=np.int64)


def _longest_line(raw: bytes) -> int:
    """Bytes in the longest line (``\n`` or ``\r`` ends one): no cell can be longer."""
    data = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero((data == 10) | (data == 13) if b"\r" in raw else data == 10)
    bounds = np.concatenate(([-1], ends, [len(raw)]))
    return int(np.diff(bounds).max()) - 1


def _refuse_long_cells(raw: bytes, text: str, header: list[str], where: str) -> None:
    """Refuse a cell over :data:`MAX_CELL_CHARS`, naming its line and column.

    Answered from the longest line when no line is that long (the common case); only
    then is every cell looked at. Done before pyarrow parses, whose block-based reader
    fails on such cells with a message that names neither line nor column."""
    if _longest_line(raw) <= MAX_CELL_CHARS:
        return
    for line, record in _csv_records(text, where):
        for i, cell in enumerate(record):
            if len(cell) > MAX_CELL_CHARS:
                column = header[i] if i < len(header) else f"#{i + 1} (beyond the header)"
                raise UniverseError(
                    f"{where}: line {line}, column {column!r}: the cell is {len(cell)} characters long; "
                    f"cells are limited to {MAX_CELL_CHARS} characters"
                )


def _raise_schema_errors(where: str, errors: pdv.errors.SchemaErrors, line_numbers: np.ndarray) -> None:
    """Raise naming the first :data:`_CELL_ERRORS_SHOWN` invalid cells and counting the rest."""
    cases = errors.failure_cases.dropna(subset=["index"]).sort_values("index", kind="stable")
    lines = []
    for case in cases.head(_CELL_ERRORS_SHOWN).itertuples():
        value = shown(case.failure_case, length=True)
        lines.append(f"line {line_numbers[int(case.index)]}, column {case.column!r}: value {value} {case.check}")
    more = len(cases) - _CELL_ERRORS_SHOWN
    raise UniverseError(
        f"{where}: {len(cases)} invalid cell(s):\n  " + "\n  ".join(lines) + (f"\n  ... and {more} more" if more > 0
                                                                              else "")
    ) from None


def _resolve_relative(values: pd.Series, csv_dir: str) -> pd.Series:
    """Relative paths are relative to the CSV's folder; absolute paths and URLs pass through."""
    absolute = (values.str.startswith("/") | values.str.contains("://", regex=False)
                | values.str.match(r"^[A-Za-z]:[/\\]"))
    prefix = csv_dir.rstrip("/") + "/"
    return values.where(absolute | (values == ""), prefix + values)


def read_universe_csv(
    path: str | os.PathLike[str],
    *,
    one_file_per_row: bool = False,
    attributes: AttributeLoader | None = None,
    max_samples: int = MAX_SAMPLES,
) -> Universe:
    """Read, validate and canonically sort a ``universe.csv`` (local path or fsspec URL).

    ``one_file_per_row`` is for layouts where every sample is its own file (converted
    frames): then ``materialized_path`` is required on every row and must be unique.
    Otherwise it defaults to ``source`` and rows may share a file (many frames of one
    recording). Raises :class:`UniverseError` (a ``ValueError``) naming file, line and
    column on: an empty file, a missing required column, a non-integer index, a ``..``
    escape, a bad ``split`` value, a duplicate ``(source, index)``, a duplicate
    ``materialized_path`` when one file per row is required, a repeated header name, and
    anything over the module's limits (cell length, int64 indices, ``max_samples``).
    """
    where = os.fspath(path)
    raw, text = _read_text(where)
    df, line_numbers = _validated_cells(raw, text, where)
    if one_file_per_row:
        empty = df.index[df.get("materialized_path", pd.Series("", index=df.index)) == ""]
        if len(empty):
            raise UniverseError(
                f"{where}: line {line_numbers[int(empty[0])]}, column 'materialized_path': required when each "
                f"sample is its own file, but the cell is empty ({len(empty)} such row(s))"
            )
    sources, indices, row_of = _expand_indices(df, where, line_numbers, max_samples=max_samples)
    csv_dir = storage.parent_url(where)
    mat = df["materialized_path"] if "materialized_path" in df.columns else pd.Series("", index=df.index)
    mat = _resolve_relative(mat.where(mat != "", df["source"]).str.replace("\\", "/", regex=False), csv_dir)
    annotation = _resolve_relative(df["annotation"].str.replace("\\", "/", regex=False),
                                   csv_dir) if "annotation" in df.columns else None
    group = df["group"].str.replace("\\", "/", regex=False) if "group" in df.columns else None
    if one_file_per_row:
        _refuse_shared_files(mat.to_numpy()[row_of], line_numbers[row_of], where)

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


def _read_text(where: str) -> tuple[bytes, str]:
    """The file's bytes and its text (UTF-8, a byte-order mark dropped); refuses a missing,
    empty or non-UTF-8 file."""
    try:
        raw = storage.read_bytes(where)
    except FileNotFoundError:
        raise UniverseError(f"universe file not found: {where}") from None
    if not raw.strip():
        raise UniverseError(f"{where}: the file is empty; expected a header with columns {list(REQUIRED_COLUMNS)} and "
                            "rows")
    try:
        return raw, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UniverseError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as "
                            "UTF-8") from None


def _validated_cells(raw: bytes, text: str, where: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The known columns as stripped strings, every cell validated by the schema, and the
    file line of each row. Sources are posix."""
    header = _header(text, where)
    _refuse_long_cells(raw, text, header, where)
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
    line_numbers = _data_line_numbers(raw, text, len(df), where)
    present = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in df.columns]
    df = df[present].apply(lambda col: col.str.strip())
    df["source"] = df["source"].str.replace("\\", "/", regex=False)
    try:
        _cell_schema(present).validate(df, lazy=True)
    except pdv.errors.SchemaErrors as exc:
        _raise_schema_errors(where, exc, line_numbers)
    return df, line_numbers


def _refuse_shared_files(expanded_paths: np.ndarray, lines: np.ndarray, where: str) -> None:
    """With one file per row, two samples (``lines``: each one's file line) must not share
    a ``materialized_path``."""
    dup = pd.Series(expanded_paths).duplicated(keep=False).to_numpy()
    if dup.any():
        first, second = np.flatnonzero(dup)[:2]
        raise UniverseError(
            f"{where}: duplicate materialized_path {expanded_paths[first]!r} on lines "
            f"{lines[first]} and {lines[second]}; each row must point at a distinct file"
        )


def _expand_indices(
    df: pd.DataFrame, where: str, line_numbers: np.ndarray, *, max_samples: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source per sample, index per sample, originating row per sample), ranges fanned out.

    Every bound is checked and every range counted before anything is allocated, so a
    range of a hundred billion samples is refused from its arithmetic. Each row yields at
    least one sample (``start <= stop`` is required), so no row can vanish."""
    cells = df["index"]
    is_range = cells.str.contains("-", regex=False).to_numpy()
    rows = np.arange(len(df))

    def refuse(row: int, problem: str) -> UniverseError:
        return UniverseError(f"{where}: line {line_numbers[row]}, column 'index': {problem}")

    def too_large(row: int, text: str) -> UniverseError:
        return refuse(row, f"{shown(text, length=True)} is above the largest index {MAX_INDEX} (2**63 - 1)")

    plain = ~is_range
    try:
        plain_values = cells[plain].astype(np.int64).to_numpy()
    except (OverflowError, ValueError):  # only past int64 (the schema admitted digits only)
        for row in rows[plain]:
            if bounded_index(cells.iat[row]) is None:
                raise too_large(int(row), cells.iat[row]) from None
        raise

    def over_limit(row: int, total: int) -> UniverseError:
        return UniverseError(
            f"{where}: up to line {line_numbers[row]} the rows already hold {total} samples, more than "
            f"max_samples={max_samples}; pass a larger max_samples if the universe really is this large"
        )

    def add_plain_rows(total: int, first: int, stop: int) -> int:
        """``total`` after the plain rows ``first`` to ``stop - 1`` (one sample each)."""
        if total + (stop - first) > max_samples:
            raise over_limit(first + max_samples - total, max_samples + 1)
        return total + (stop - first)

    # Counted in file order, so the line named is the one where the limit is passed.
    ranges: list[tuple[int, int, int]] = []
    total = 0
    next_row = 0
    for row in rows[is_range].tolist():
        text = cells.iat[row]
        try:
            start, step, count = parse_range(text)
        except RangeError as exc:  # the schema admitted only 'a-b' and 'a-b:step' forms
            if exc.reason == "too_large":
                raise too_large(row, text) from None
            raise refuse(row, f"range {text!r} must have start <= stop and step > 0") from None
        if count > max_samples:
            raise refuse(
                row, f"range {text!r} holds {count} samples, more than max_samples={max_samples}; "
                "split the file, or pass a larger max_samples if the universe really is this large"
            )
        total = add_plain_rows(total, next_row, row) + count
        if total > max_samples:
            raise over_limit(row, total)
        next_row = row + 1
        ranges.append((start, step, count))
    add_plain_rows(total, next_row, len(df))
    if not ranges:
        return df["source"].to_numpy(dtype=object), plain_values, rows
    row_of = np.concatenate([rows[plain], np.repeat(rows[is_range], [count for _, _, count in ranges])])
    return df["source"].to_numpy(dtype=object)[row_of], np.concatenate([plain_values, expand_runs(ranges)]), row_of


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
