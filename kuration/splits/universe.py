"""The sample universe: every addressable sample, in canonical order, stored as columns.

A ``Universe`` behaves as a read-only ``Sequence[SampleRef]`` (what the seed's functions
take), but keeps its rows as numpy columns: a source code and an index per row, a group
code per row, and optional provenance columns. Selector resolution and the leakage check
work on row positions over these columns, which is what lets a million-sample universe
resolve in well under a second; ``SampleRef`` objects are built only for rows a caller
actually reads.

Canonical order is ``(source, index)`` with sources compared as posix strings, so
resolution and :func:`universe_hash` agree across machines. A universe built from a list
of refs keeps the list's order (that order is the caller's canonical order).

Whole-file samples (``index=None``; uid = the source) are rows whose index column holds
:data:`WHOLE_FILE`. A source is either one whole-file sample or indexed samples, never
both: a file and a frame of it as two samples would be leakage waiting to happen, and a
baked split could not name the whole-file one alone. Every identity occurs once; a list
of refs repeating one is refused (Cuvis.AI keeps the repeat, counts it twice in
``universe_hash`` and deduplicates it when resolving).

Tags and category ids are loaded lazily, and only when a selector or constraint needs
them: see :class:`SampleAttributes` and the two loaders below.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, overload

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kuration import storage
from kuration.errors import UniverseError, shown
from kuration.numbers import bounded_index, is_digits, whole_number
from kuration.splits._bounds import MAX_INDEX
from kuration.splits.sample_ref import SampleRef, source_stem
from kuration.canonical.strict_json import parse_strict_json

logger = logging.getLogger(__name__)

ATTRIBUTE_NAMES = frozenset({"tags", "category_ids"})
#: What the index column holds for a whole-file sample (a ``SampleRef`` with ``index=None``).
WHOLE_FILE = -1
NORMAL_TAG = "normal"
ANOMALOUS_TAG = "anomalous"


@dataclass(frozen=True)
class SampleAttributes:
    """Tags and category ids of every row, as (row, value) pairs.

    ``loaded`` says which attributes were actually loaded; a constraint that needs one
    that was not must report ``unavailable``, never ``satisfied``.
    """

    loaded: frozenset[str]
    tag_names: tuple[str, ...] = ()
    tag_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    tag_codes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    category_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    category_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    name_to_id: Mapping[str, int] | None = None

    def rows_with_tags(self, names: Sequence[str], n_rows: int) -> np.ndarray:
        wanted = [i for i, name in enumerate(self.tag_names) if name in set(names)]
        mask = np.zeros(n_rows, dtype=bool)
        mask[self.tag_rows[np.isin(self.tag_codes, wanted)]] = True
        return mask

    def rows_with_categories(self, ids: Sequence[int], n_rows: int) -> np.ndarray:
        mask = np.zeros(n_rows, dtype=bool)
        mask[self.category_rows[np.isin(self.category_ids, list(ids))]] = True
        return mask

    def anomalous_rows(self, n_rows: int) -> np.ndarray:
        """Rows carrying any category other than 0 (background)."""
        mask = np.zeros(n_rows, dtype=bool)
        mask[self.category_rows[self.category_ids != 0]] = True
        return mask

    def tags_for_rows(self, rows: np.ndarray) -> list[tuple[str, ...]]:
        """Each given row's tags, in the order given (rows without tags get ``()``)."""
        names = np.asarray(self.tag_names, dtype=object)
        return _values_for_rows(self.tag_rows, names[self.tag_codes] if len(self.tag_codes) else np.empty(0, object),
                                rows)

    def categories_for_rows(self, rows: np.ndarray) -> list[tuple[int, ...]]:
        return _values_for_rows(self.category_rows, self.category_ids, rows)


def _values_for_rows(pair_rows: np.ndarray, pair_values: np.ndarray, rows: np.ndarray) -> list[tuple]:
    """Group (row, value) pairs by row, for just the rows asked for: O(pairs of those rows)."""
    rows = np.asarray(rows, dtype=np.int64)
    keep = np.isin(pair_rows, rows)
    if not keep.any():
        return [()] * len(rows)
    kept_rows = pair_rows[keep]
    order = np.argsort(kept_rows, kind="stable")
    sorted_rows = kept_rows[order]
    values = np.asarray(pair_values, dtype=object)[keep][order].tolist()
    starts = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
    ends = np.r_[starts[1:], len(sorted_rows)]
    by_row = {row: tuple(values[a:b])
              for row, a, b in zip(sorted_rows[starts].tolist(), starts.tolist(), ends.tolist(), strict=True)}
    return [by_row.get(row, ()) for row in rows.tolist()]


class AttributeLoader(Protocol):
    """Supplies tags / category ids for a universe's rows: only the attributes in
    ``required``, and (when ``sources`` is given) only for rows of those source codes.
    Rows outside ``sources`` may be left without values; callers never read them."""

    def load(
        self, universe: Universe, required: frozenset[str], *, sources: frozenset[int] | None = None
    ) -> SampleAttributes: ...


def _rows_in(universe: Universe, sources: frozenset[int] | None) -> np.ndarray:
    if sources is None:
        return np.arange(len(universe), dtype=np.int64)
    return universe.rows_of_sources(sorted(sources))


class PreloadedAttributes:
    """Attributes already known per sample (carried on ``SampleRef`` objects), by uid.

    Keyed by uid, not by position, so they land on the right rows whatever order the
    universe is built or sorted in. Both attributes count as loaded: a uid that is absent
    has no tags and no categories."""

    def __init__(
        self,
        by_uid: Mapping[str, tuple[Sequence[str], Sequence[int]]],
        *,
        name_to_id: Mapping[str, int] | None = None,
    ) -> None:
        self._by_uid = dict(by_uid)
        self._name_to_id = dict(name_to_id) if name_to_id is not None else None

    def load(
        self, universe: Universe, required: frozenset[str], *, sources: frozenset[int] | None = None
    ) -> SampleAttributes:
        rows = _rows_in(universe, sources)
        empty: tuple[Sequence[str], Sequence[int]] = ((), ())
        found = [self._by_uid.get(uid, empty) for uid in universe.uids(rows)]
        return _pairs_to_attributes(
            required,
            zip(rows.tolist(), (tags for tags, _ in found), strict=True) if "tags" in required else None,
            zip(rows.tolist(), (cats for _, cats in found), strict=True) if "category_ids" in required else None,
            self._name_to_id,
        )


class CocoAnnotationAttributes:
    """Reads each row's ``annotation`` file as COCO JSON, at most once per file, and only
    the files of the sources asked for.

    A row's ``index`` is its COCO ``image_id``. ``category_ids`` are the categories of
    that image's annotations. Tags follow Cuvis.AI (``anomalous`` when the image has a
    non-background category, ``normal`` otherwise, and ``normal`` for rows without an
    annotation file), plus any ``tags`` list the COCO image entry carries. Category names
    must map to one id across the files read.
    """

    def __init__(self, *, name_to_id: Mapping[str, int] | None = None) -> None:
        self._explicit_names = dict(name_to_id) if name_to_id is not None else None
        self._parsed: dict[str, tuple[dict[int, set[int]], dict[int, list[str]], dict[str, int]]] = {}

    def load(
        self, universe: Universe, required: frozenset[str], *, sources: frozenset[int] | None = None
    ) -> SampleAttributes:
        rows = _rows_in(universe, sources)
        annotations = universe.annotation_column
        has_any_labels = annotations is not None and any(annotations)
        name_to_id: dict[str, int] = dict(self._explicit_names or {})
        tag_pairs: list[tuple[int, list[str]]] = []
        cat_pairs: list[tuple[int, list[int]]] = []
        rows_by_file: dict[str, list[int]] = {}
        for row in rows.tolist():
            ann = annotations[row] if annotations is not None else None
            if ann:
                rows_by_file.setdefault(ann, []).append(row)
            elif "tags" in required:
                tag_pairs.append((row, [NORMAL_TAG]))  # label-free: normal, as in Cuvis.AI
        for ann, file_rows in rows_by_file.items():
            if ann not in self._parsed:
                self._parsed[ann] = _read_coco(ann)
            image_cats, image_tags, names = self._parsed[ann]
            for name, cid in names.items():
                if name_to_id.get(name, cid) != cid and self._explicit_names is None:
                    raise UniverseError(
                        f"{ann}: category {name!r} has id {cid}, but another annotation file gives it "
                        f"id {name_to_id[name]}; category names must map to one id across the universe"
                    )
                name_to_id.setdefault(name, cid)
            for row in file_rows:
                image_id = int(universe.indices[row])  # a whole-file row (-1) matches no COCO image
                found = image_cats.get(image_id, ()) if image_id != WHOLE_FILE else ()
                if "category_ids" in required:
                    cat_pairs.append((row, sorted(found)))
                if "tags" in required:
                    derived = ANOMALOUS_TAG if any(c != 0 for c in found) else NORMAL_TAG
                    extra = image_tags.get(image_id, ()) if image_id != WHOLE_FILE else ()
                    tag_pairs.append((row, [derived, *extra]))
        # Without any annotation file nothing is known about categories: report them as not
        # loaded, so a constraint needing them says "unavailable" instead of "satisfied".
        return _pairs_to_attributes(
            required,
            tag_pairs if "tags" in required else None,
            cat_pairs if has_any_labels and "category_ids" in required else None,
            name_to_id if (name_to_id or has_any_labels) else None,
        )


def _read_coco(url: str) -> tuple[dict[int, set[int]], dict[int, list[str]], dict[str, int]]:
    """(categories per image id, tags per image id, category id per name) of one COCO file.

    Read strictly (duplicate keys, non-finite numbers and deep nesting refused); ids must be
    integers and names and tags strings, so a ``1.5`` or ``true`` id is refused rather than
    truncated to another category."""
    try:
        data = storage.read_bytes(url)
    except FileNotFoundError:
        raise UniverseError(f"annotation file not found: {url}") from None
    doc = parse_strict_json(data, where=f"annotation file {url}", what="COCO JSON file", error=UniverseError)
    if not isinstance(doc, dict):
        raise UniverseError(f"annotation file {url}: expected a COCO JSON object, got {type(doc).__name__}")

    def entries(key: str) -> list[dict]:
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise UniverseError(f"annotation file {url}: '{key}' must be a list of objects")
        return value

    def checked(value: object, kind: type, where: str):
        if isinstance(value, bool) or not isinstance(value, kind):
            noun = "an integer" if kind is int else "a string"
            raise UniverseError(f"annotation file {url}: {where} must be {noun}, got {shown(value)}")
        return value

    image_cats: dict[int, set[int]] = {}
    image_tags: dict[int, list[str]] = {}
    for i, ann in enumerate(entries("annotations")):
        image_id = checked(ann.get("image_id"), int, f"annotations[{i}].image_id")
        image_cats.setdefault(image_id, set()).add(checked(ann.get("category_id"), int,
                                                           f"annotations[{i}].category_id"))
    for i, img in enumerate(entries("images")):
        tags = img.get("tags") or []
        if not isinstance(tags, list):
            raise UniverseError(f"annotation file {url}: images[{i}].tags must be a list of strings, got {shown(tags)}")
        if tags:
            image_tags[checked(img.get("id"), int, f"images[{i}].id")] = [
                checked(t, str, f"images[{i}].tags[{j}]") for j, t in enumerate(tags)
            ]
    names = {
        checked(c.get("name"), str, f"categories[{i}].name"): checked(c.get("id"), int, f"categories[{i}].id")
        for i, c in enumerate(entries("categories"))
    }
    return image_cats, image_tags, names


def _pairs_to_attributes(
    required: frozenset[str],
    tags: Iterable[tuple[int, Sequence[str]]] | None,
    cats: Iterable[tuple[int, Sequence[int]]] | None,
    name_to_id: Mapping[str, int] | None,
) -> SampleAttributes:
    """Flatten ``(row, values)`` items into the (row, value) pair arrays."""
    attributes = SampleAttributes(loaded=frozenset(), name_to_id=name_to_id)
    loaded: set[str] = set()
    if tags is not None:
        names: dict[str, int] = {}
        rows: list[int] = []
        codes: list[int] = []
        for row, row_tags in tags:
            for tag in row_tags:
                rows.append(row)
                codes.append(names.setdefault(tag, len(names)))
        attributes = replace(attributes, tag_names=tuple(names), tag_rows=np.asarray(rows, np.int64),
                             tag_codes=np.asarray(codes, np.int64))
        loaded.add("tags")
    if cats is not None:
        rows, ids = [], []
        for row, row_cats in cats:
            for c in row_cats:
                rows.append(row)
                ids.append(int(c))
        attributes = replace(attributes, category_rows=np.asarray(rows, np.int64),
                             category_ids=np.asarray(ids, np.int64))
        loaded.add("category_ids")
    return replace(attributes, loaded=frozenset(loaded & required))


@dataclass(frozen=True, eq=False)
class UniverseColumns:
    """What a :class:`Universe` holds: its rows as columns, already checked and in their
    final order. :meth:`Universe.from_columns` builds one (it validates and sorts); the
    constructor trusts it.

    Sources and groups are codes into their sorted names. The optional provenance columns
    hold one value per row (``None`` when the universe has no such column); ``row_numbers``
    is the 1-based file line of each row when it came from a file, and ``stem_names`` one
    stem per source when the refs it came from named them (else the filename stems)."""

    source_names: Sequence[str]
    source_codes: np.ndarray
    indices: np.ndarray
    group_names: Sequence[str]
    group_codes: np.ndarray
    annotation: np.ndarray | None = None
    materialized_path: np.ndarray | None = None
    format: np.ndarray | None = None
    split: np.ndarray | None = None
    row_numbers: np.ndarray | None = None
    stem_names: Sequence[str] | None = None


class Universe(Sequence[SampleRef]):
    """An immutable, canonically ordered universe of samples.

    Build one with :meth:`from_columns`, :meth:`from_refs`,
    :func:`kuration.splits.read_universe_csv` or :func:`enumerate_folder`.
    """

    def __init__(
        self, columns: UniverseColumns, *, attributes: AttributeLoader | None = None, origin: str | None = None
    ) -> None:
        self.source_names: tuple[str, ...] = tuple(columns.source_names)
        #: One stem per source: the filename stem unless the refs it came from said otherwise.
        self.stem_names: tuple[str, ...] = (
            tuple(columns.stem_names) if columns.stem_names is not None
            else tuple(source_stem(n) for n in self.source_names)
        )
        self.source_codes = np.asarray(columns.source_codes, dtype=np.int64)
        self.indices = np.asarray(columns.indices, dtype=np.int64)
        self.group_names: tuple[str, ...] = tuple(columns.group_names)
        self.group_codes = np.asarray(columns.group_codes, dtype=np.int64)
        self.annotation_column = columns.annotation
        self.materialized_path_column = columns.materialized_path
        self.format_column = columns.format
        self.split_column = columns.split
        #: The 1-based line of the file each row came from, when it came from a file.
        self.row_numbers = columns.row_numbers
        self.origin = origin
        self._attribute_loader: AttributeLoader = attributes or CocoAnnotationAttributes()
        self._attributes: dict[frozenset[str], SampleAttributes] = {}
        self._hash: str | None = None
        self._rows_by_source: list[np.ndarray] | None = None
        for name, col in (("indices", self.indices), ("group_codes", self.group_codes)):
            if len(col) != len(self.source_codes):
                raise UniverseError(f"universe column {name} has {len(col)} rows, expected {len(self.source_codes)}")

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_columns(
        cls,
        source: Sequence[str] | np.ndarray,
        index: Sequence[int | None] | np.ndarray,
        *,
        group: Sequence[str | None] | np.ndarray | None = None,
        annotation: Sequence[str | None] | np.ndarray | None = None,
        materialized_path: Sequence[str | None] | np.ndarray | None = None,
        format: Sequence[str | None] | np.ndarray | None = None,
        split: Sequence[str | None] | np.ndarray | None = None,
        stem: Sequence[str] | None = None,
        row_numbers: np.ndarray | None = None,
        attributes: AttributeLoader | None = None,
        origin: str | None = None,
        sort: bool = True,
    ) -> Universe:
        """Build from parallel columns; sorts canonically unless ``sort=False``.

        ``index`` entries are ints in ``[0, 2**63 - 1]``, or None for a whole-file sample.
        Raises :class:`UniverseError` on a duplicate identity, a bad index, or a source
        holding both a whole-file sample and indexed ones.
        """
        where = origin or "universe"
        src = _source_column(source, where, row_numbers)
        idx = _index_column(index, where, row_numbers)
        if len(src) != len(idx):
            raise UniverseError(f"{where}: {len(src)} sources but {len(idx)} indices")
        source_names, source_codes = _sorted_codes(src)
        order = np.lexsort((idx, source_codes)) if sort else np.arange(len(idx))
        source_codes = source_codes[order]
        idx = idx[order]
        rows = None if row_numbers is None else np.asarray(row_numbers)[order]
        _refuse_repeated_identities(where, source_names, source_codes, idx, rows, in_key_order=sort)
        group_names, group_codes = _group_codes(_reordered(group, order), source_names, source_codes)
        stem_names = _stem_names(where, _reordered(stem, order), source_names, source_codes)
        columns = UniverseColumns(
            source_names=[str(s) for s in source_names],
            source_codes=source_codes,
            indices=idx,
            group_names=[str(g) for g in group_names],
            group_codes=group_codes,
            annotation=_reordered(annotation, order),
            materialized_path=_reordered(materialized_path, order),
            format=_reordered(format, order),
            split=_reordered(split, order),
            row_numbers=rows,
            stem_names=None if stem_names is None else [str(x) for x in stem_names],
        )
        return cls(columns, attributes=attributes, origin=origin)

    @classmethod
    def from_refs(cls, refs: Sequence[SampleRef], *, name_to_id: Mapping[str, int] | None = None) -> Universe:
        """Wrap a list of refs, keeping its order; their tags / category ids are the attributes."""
        if isinstance(refs, Universe):
            return refs
        refs = list(refs)
        return cls.from_columns(
            [r.source for r in refs],
            [r.index for r in refs],
            group=[r.group for r in refs],
            annotation=[r.annotation for r in refs],
            materialized_path=[r.materialized_path for r in refs],
            format=[r.format for r in refs],
            stem=[r.stem for r in refs],
            attributes=PreloadedAttributes({r.uid: (r.tags, r.category_ids) for r in refs}, name_to_id=name_to_id),
            sort=False,
        )

    # -- Sequence[SampleRef] ------------------------------------------------------

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, i: int) -> SampleRef: ...
    @overload
    def __getitem__(self, i: slice) -> list[SampleRef]: ...
    def __getitem__(self, i: int | slice) -> SampleRef | list[SampleRef]:
        if isinstance(i, slice):
            return self.refs(np.arange(len(self))[i])
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"universe row {i} out of range for {n} samples")
        return self.refs(np.asarray([i % n]))[0]

    def __iter__(self) -> Iterator[SampleRef]:
        yield from SampleRefs(self, np.arange(len(self)))

    def __repr__(self) -> str:
        return f"Universe({len(self)} samples from {len(self.source_names)} sources, origin={self.origin!r})"

    def refs(self, positions: np.ndarray | Sequence[int], *, attrs: frozenset[str] = frozenset()) -> list[SampleRef]:
        """``SampleRef`` objects for the given row positions, in that order.

        ``attrs`` names lazily loaded attributes to fill in (loading them if needed); the
        others are left empty, so the result does not depend on what happens to be cached.
        Columns are gathered with numpy and the refs built without re-validation.
        """
        rows = np.asarray(positions, dtype=np.int64)
        n = len(rows)
        codes = self.source_codes[rows]
        loaded = self.attributes(attrs, sources=np.unique(codes).tolist()) if attrs else None

        def gather(names: Sequence[str], by: np.ndarray) -> list:
            return np.asarray(names, dtype=object)[by].tolist() if n else []

        def optional(column: np.ndarray | None) -> list:
            if column is None:
                return [None] * n
            return [None if v is None or v == "" else str(v) for v in column[rows].tolist()]

        def attribute(name: str, for_rows) -> list:
            if loaded is None or name not in attrs or name not in loaded.loaded:
                return [()] * n
            return for_rows(rows)

        indices = self.indices[rows]
        index = indices.tolist()
        if (indices == WHOLE_FILE).any():
            index = [None if i == WHOLE_FILE else i for i in index]
        return SampleRef._from_trusted_columns({
            "source": gather(self.source_names, codes),
            "index": index,
            "stem": gather(self.stem_names, codes),
            "annotation": optional(self.annotation_column),
            "group": gather(self.group_names, self.group_codes[rows]),
            "tags": attribute("tags", loaded.tags_for_rows if loaded else None),
            "category_ids": attribute("category_ids", loaded.categories_for_rows if loaded else None),
            "materialized_path": optional(self.materialized_path_column),
            "format": optional(self.format_column),
            "uid": self.uids(rows),
        })

    # -- derived columns ----------------------------------------------------------

    def stems(self) -> list[str]:
        return list(self.stem_names)

    def uids(self, positions: np.ndarray | None = None) -> list[str]:
        rows = np.arange(len(self)) if positions is None else np.asarray(positions, np.int64)
        return _uid_array(self, rows).to_pylist()

    def rows_of_source(self, code: int) -> np.ndarray:
        """Row positions of one source, in universe order."""
        if self._rows_by_source is None:
            order = np.argsort(self.source_codes, kind="stable")
            bounds = np.searchsorted(self.source_codes[order], np.arange(len(self.source_names) + 1))
            self._rows_by_source = [order[bounds[c]: bounds[c + 1]] for c in range(len(self.source_names))]
        return self._rows_by_source[code]

    def rows_of_sources(self, codes: Sequence[int]) -> np.ndarray:
        if not len(codes):
            return np.empty(0, np.int64)
        return np.sort(np.concatenate([self.rows_of_source(int(c)) for c in codes]))

    def glob_source_codes(self, pattern: str) -> list[int]:
        stems = self.stems()
        return [
            code
            for code, name in enumerate(self.source_names)
            if fnmatch.fnmatchcase(stems[code], pattern) or fnmatch.fnmatchcase(name, pattern)
        ]

    def attributes(self, required: frozenset[str], *, sources: Iterable[int] | None = None) -> SampleAttributes:
        """The lazily loaded attributes named in ``required``.

        With ``sources`` (source codes), only those sources' rows are filled, so only
        their annotation files are read: the expensive level is paid for what a selector
        touches. A whole-universe load is cached and answers every later request; scoped
        loads are not cached here (the loader keeps each parsed file)."""
        required = frozenset(required) & ATTRIBUTE_NAMES
        for key, cached in self._attributes.items():
            if required <= key:
                return cached
        if not required:
            return self._attribute_loader.load(self, required)
        if sources is not None:
            scope = frozenset(int(c) for c in sources)
            if len(scope) < len(self.source_names):
                return self._attribute_loader.load(self, required, sources=scope)
        logger.debug("loading sample attributes %s for %d samples", sorted(required), len(self))
        self._attributes[required] = self._attribute_loader.load(self, required)
        return self._attributes[required]

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = _hash_uid_array(_uid_array(self, np.arange(len(self))))
        return self._hash

    def to_arrow(self) -> pa.Table:
        """The universe as an Arrow table in canonical order (the ``universe.parquet`` layout)."""
        names = np.asarray(self.source_names, dtype=object)
        columns = {
            "uid": _uid_array(self, np.arange(len(self))),
            "source": pa.array(names[self.source_codes] if len(self) else [], pa.string()),
            "index": pa.array(self.indices, pa.int64(), mask=self.indices == WHOLE_FILE),
            "stem": pa.array(np.asarray(self.stems(), dtype=object)[self.source_codes] if len(self) else [],
                             pa.string()),
            "group": pa.array(np.asarray(self.group_names, dtype=object)[self.group_codes] if len(self) else [],
                              pa.string()),
        }
        for name, col in (
            ("annotation", self.annotation_column),
            ("materialized_path", self.materialized_path_column),
            ("format", self.format_column),
            ("split", self.split_column),
        ):
            columns[name] = pa.array([None] * len(self) if col is None else list(col), pa.string())
        table = pa.table(columns)
        return table.replace_schema_metadata({
            b"kuration.universe_hash": self.hash.encode(),
            b"kuration.table_digest": _table_digest(table).encode(),
        })

    @classmethod
    def from_arrow(cls, table: pa.Table, *, attributes: AttributeLoader | None = None,
                   origin: str | None = None) -> Universe:
        """Inverse of :meth:`to_arrow`; re-checks uniqueness, the ``uid`` column (each row's
        ``source#index``, or ``source`` for a whole-file sample), the pinned hash and the
        digest of every column (so an edited ``group`` or path is caught, not only identity)."""
        data = table.to_pydict()
        universe = cls.from_columns(
            data["source"], table.column("index"),
            group=data.get("group"), annotation=data.get("annotation"),
            materialized_path=data.get("materialized_path"), format=data.get("format"),
            split=data.get("split"), stem=data.get("stem"), attributes=attributes, origin=origin, sort=False,
        )
        metadata = table.schema.metadata or {}
        where = origin or "universe table"
        pinned = metadata.get(b"kuration.universe_hash")
        if pinned is not None and pinned.decode() != universe.hash:
            raise UniverseError(
                f"{where}: rows hash to {universe.hash[:12]}..., but the file pins "
                f"{pinned.decode()[:12]}...; the file was modified after it was written. Re-materialize the universe."
            )
        digest = metadata.get(b"kuration.table_digest")
        if digest is not None and digest.decode() != _table_digest(table):
            raise UniverseError(
                f"{where}: a column (group, paths, format or split) no longer matches the digest written with it; "
                "the file was modified after it was written. Re-materialize the universe."
            )
        if "uid" in data:
            expected = _uid_array(universe, np.arange(len(universe)))
            same = pc.fill_null(pc.equal(expected, table.column("uid")), False)
            differs = np.flatnonzero(~np.asarray(same, dtype=bool))
            if len(differs):
                row = int(differs[0])
                raise UniverseError(
                    f"{where}: row {row}: uid {shown(data['uid'][row])} is not source#index "
                    f"({expected[row].as_py()!r}); the file was modified after it was written. Re-materialize the "
                    "universe."
                )
        return universe


class SampleRefs(Sequence[SampleRef]):
    """A read-only sequence of resolved samples: row positions into a universe.

    What the resolvers return for a :class:`Universe`. Resolving a stage of hundreds of
    thousands of samples costs only the positions; ``SampleRef`` objects are built when
    read, a chunk at a time when iterated. ``uids()`` and ``positions`` serve bulk callers
    without building objects at all. Compares equal to any sequence of the same refs.
    """

    _CHUNK = 65536

    def __init__(self, universe: Universe, positions: np.ndarray, *, attrs: frozenset[str] = frozenset()) -> None:
        self.universe = universe
        self.positions = np.asarray(positions, dtype=np.int64)
        self.attrs = frozenset(attrs)

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> SampleRef: ...
    @overload
    def __getitem__(self, i: slice) -> SampleRefs: ...
    def __getitem__(self, i: int | slice) -> SampleRef | SampleRefs:
        if isinstance(i, slice):
            return SampleRefs(self.universe, self.positions[i], attrs=self.attrs)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample {i} out of range for {n} resolved samples")
        return self.universe.refs(self.positions[i: i + 1 if i != -1 else None], attrs=self.attrs)[0]

    def __iter__(self) -> Iterator[SampleRef]:
        for start in range(0, len(self.positions), self._CHUNK):
            yield from self.universe.refs(self.positions[start: start + self._CHUNK], attrs=self.attrs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SampleRefs) and other.universe is self.universe:
            return np.array_equal(self.positions, other.positions) and self.attrs == other.attrs
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    # Mutable-free but list-like: unhashable, as a list is. typeshed types object.__hash__ as a
    # method, so mypy refuses None here, although it is how Python spells "unhashable".
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(self.uids()[:3]) if len(self) else ""
        more = ", ..." if len(self) > 3 else ""
        return f"SampleRefs([{shown}{more}], {len(self)} samples)"

    def uids(self) -> list[str]:
        return self.universe.uids(self.positions)


#: The columns the table digest covers, in this order (``uid`` is derived from two of them).
DIGEST_COLUMNS = ("source", "index", "stem", "group", "annotation", "materialized_path", "format", "split")


def _table_digest(table: pa.Table) -> str:
    """sha256 over every row's digest columns, unit-separated, nulls marked."""
    columns = [pc.cast(table.column(name), pa.string()) for name in DIGEST_COLUMNS]
    if not table.num_rows:
        return hashlib.sha256(b"").hexdigest()
    rows = pc.binary_join_element_wise(*columns, "\x1f", null_handling="replace", null_replacement="\x00")
    return _hash_uid_array(rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows)


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each row's code): ``np.unique(return_inverse=True)``, but
    hash-based, which is ten times faster on a million Python strings."""
    if not len(values):
        return np.empty(0, dtype=object), np.empty(0, dtype=np.int64)
    codes, names = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return np.asarray(names, dtype=object), codes.astype(np.int64)


def _row_label(row_numbers: np.ndarray | None, position: int) -> str:
    """Where a row came from: its file line when read from a file, else its position."""
    return f"line {int(row_numbers[position])}" if row_numbers is not None else f"position {position}"


def _two_rows(row_numbers: np.ndarray | None, a: int, b: int) -> str:
    """Two rows, earlier first (a range row fanned out after a plain row sorts before it)."""
    if row_numbers is not None and int(row_numbers[a]) > int(row_numbers[b]):
        a, b = b, a
    return f"{_row_label(row_numbers, a)} and {_row_label(row_numbers, b)}"


def _uid_array(universe: Universe, rows: np.ndarray) -> pa.Array:
    """``source#index`` per row, or ``source`` for a whole-file row (Cuvis.AI's uid)."""
    names = pa.array(universe.source_names, pa.string())
    sources = names.take(pa.array(universe.source_codes[rows]))
    values = universe.indices[rows]
    indices = pc.cast(pa.array(values), pa.string())
    joined = pc.binary_join_element_wise(sources, indices, "#")
    whole = values == WHOLE_FILE
    return pc.if_else(pa.array(whole), sources, joined) if whole.any() else joined


def _source_column(source: Sequence[str] | np.ndarray, where: str, row_numbers: np.ndarray | None) -> np.ndarray:
    values = pd.Series(np.asarray(source, dtype=object), dtype=object)
    if pd.api.types.infer_dtype(values, skipna=False) not in ("string", "empty") or (values == "").any():
        row = next(i for i, v in enumerate(values.tolist()) if not isinstance(v, str) or not v)
        raise UniverseError(
            f"{where}: {_row_label(row_numbers, row)}: column 'source': {shown(values[row])} must be a non-empty string"
        )
    return values.str.replace("\\", "/", regex=False).to_numpy(dtype=object)


def _index_column(index: Sequence[int | None] | np.ndarray, where: str, row_numbers: np.ndarray | None) -> np.ndarray:
    """The int64 index column: ints in [0, 2**63 - 1] as given, None as :data:`WHOLE_FILE`.

    A numpy or Arrow integer column is checked as a whole (an Arrow null is a whole-file
    sample); anything else value by value, so a float, a bool, a string or an int past
    int64 is refused rather than converted."""
    if isinstance(index, (pa.Array, pa.ChunkedArray)) and pa.types.is_integer(index.type):
        whole = index.is_null().to_numpy(zero_copy_only=False)
        idx = _index_column(pc.fill_null(index, 0).to_numpy(), where, row_numbers)
        idx[whole] = WHOLE_FILE
        return idx
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
        idx = index.astype(np.int64)
        if index.dtype.kind == "u" and (index > MAX_INDEX).any():
            bad = int(np.flatnonzero(index > MAX_INDEX)[0])
        elif (idx < 0).any():
            bad = int(np.flatnonzero(idx < 0)[0])
        else:
            return idx
        raise UniverseError(
            f"{where}: {_row_label(row_numbers, bad)}: column 'index': {index[bad]} must be in [0, 2**63 - 1]"
        )
    values = list(index)
    for row, value in enumerate(values):
        if value is None:
            continue
        number = whole_number(value)
        if number is None or not 0 <= number <= MAX_INDEX:
            raise UniverseError(
                f"{where}: {_row_label(row_numbers, row)}: column 'index': {shown(value)} must be an int in "
                "[0, 2**63 - 1], or None for a whole-file sample"
            )
    return np.fromiter((WHOLE_FILE if v is None else v for v in values), dtype=np.int64, count=len(values))


def _reordered(values: Sequence[str | None] | np.ndarray | None, order: np.ndarray) -> np.ndarray | None:
    """An optional column as an object array in the universe's row ``order``."""
    if values is None:
        return None
    return np.asarray(values, dtype=object)[order]


def _refuse_repeated_identities(
    where: str, source_names: np.ndarray, codes: np.ndarray, indices: np.ndarray, rows: np.ndarray | None, *,
    in_key_order: bool,
) -> None:
    """Refuse a (source, index) given twice, and a source that is both a whole-file sample
    and indexed samples. Rows already in (source, index) order (``in_key_order``) have any
    duplicates side by side; others are looked at through that order."""
    if len(indices) <= 1:
        return
    key_order = np.arange(len(indices)) if in_key_order else np.lexsort((indices, codes))
    keyed_codes, keyed_idx = codes[key_order], indices[key_order]
    same = (keyed_codes[1:] == keyed_codes[:-1]) & (keyed_idx[1:] == keyed_idx[:-1])
    if same.any():
        first = int(np.flatnonzero(same)[0])
        a, b = sorted((int(key_order[first]), int(key_order[first + 1])))
        name = source_names[codes[a]]
        what = (f"whole-file sample {name!r}" if indices[a] == WHOLE_FILE
                else f"(source, index)=({name!r}, {indices[a]})")
        raise UniverseError(
            f"{where}: duplicate identity {what} at {_two_rows(rows, a, b)}; each (source, index) must be "
            "unique (drop the repeated sample)"
        )
    _refuse_mixed_sources(where, source_names, keyed_codes, keyed_idx, key_order, rows)


def _group_codes(group_col: np.ndarray | None, source_names: np.ndarray,
                 source_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted group names, each row's group code); a row without a group is its source's."""
    if group_col is None:
        return source_names, source_codes
    missing = pd.Series(group_col, dtype=object).fillna("").to_numpy() == ""
    filled = np.where(missing, np.asarray(source_names, dtype=object)[source_codes], group_col)
    return _sorted_codes(filled.astype(str).astype(object))


def _stem_names(where: str, stem_col: np.ndarray | None, source_names: np.ndarray,
                source_codes: np.ndarray) -> np.ndarray | None:
    """One stem per source when the rows name stems (``None`` when they do not); a source
    given two stems is refused."""
    if stem_col is None or not len(stem_col):
        return None
    first_row = np.unique(source_codes, return_index=True)[1]
    stem_names = stem_col[first_row]
    differs = np.flatnonzero(stem_col != stem_names[source_codes])
    if len(differs):
        row = int(differs[0])
        raise UniverseError(
            f"{where}: source {source_names[source_codes[row]]!r} is given stems "
            f"{stem_names[source_codes[row]]!r} and {stem_col[row]!r}; a source has one stem"
        )
    return stem_names


def _refuse_mixed_sources(
    where: str, source_names: np.ndarray, codes: np.ndarray, indices: np.ndarray, key_order: np.ndarray,
    rows: np.ndarray | None,
) -> None:
    """A source must not be both a whole-file sample and indexed samples; in (source, index)
    order the whole-file row (-1) comes first, directly before any indexed row of its source.

    Also refuses a whole-file uid equal to an indexed uid (source ``a#0`` next to source
    ``a``, index 0): one identity for two samples."""
    whole = indices == WHOLE_FILE
    if not whole.any():
        return
    mixed = np.flatnonzero(whole[:-1] & (codes[1:] == codes[:-1]))
    if len(mixed):
        k = int(mixed[0])
        a, b = int(key_order[k]), int(key_order[k + 1])
        raise UniverseError(
            f"{where}: source {source_names[codes[k]]!r} is a whole-file sample (no index) at {_row_label(rows, a)} "
            f"and has indexed samples too (index {indices[k + 1]} at {_row_label(rows, b)}); a source is either one "
            "whole-file sample or indexed samples"
        )
    for k in np.flatnonzero(whole).tolist():
        name = str(source_names[codes[k]])
        head, _, tail = name.rpartition("#")
        number = bounded_index(tail) if head and is_digits(tail) else None  # None: above any index
        if number is not None and _holds_sample(source_names, codes, indices, head, number):
            raise UniverseError(
                f"{where}: whole-file sample {name!r} at {_row_label(rows, int(key_order[k]))} has the uid of "
                f"sample ({head!r}, {number}); rename the source, every uid must be unique"
            )


def _holds_sample(source_names: np.ndarray, codes: np.ndarray, indices: np.ndarray, source: str, index: int) -> bool:
    """Whether rows in (source, index) order (``codes`` into the sorted ``source_names``)
    hold the sample ``(source, index)``: binary searches, nothing built."""
    code = int(np.searchsorted(source_names, source))
    if code == len(source_names) or source_names[code] != source:
        return False
    lo, hi = np.searchsorted(codes, code, "left"), np.searchsorted(codes, code, "right")
    at = lo + int(np.searchsorted(indices[lo:hi], index))
    return bool(at < hi and indices[at] == index)


def _hash_uid_array(uids: pa.Array) -> str:
    lines = pc.binary_join_element_wise(uids, pa.scalar(""), "\n") if len(uids) else uids
    digest = hashlib.sha256()
    # The string data buffer holds every value back to back: exactly "uid\n" repeated.
    for chunk in (lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines,):
        if len(chunk):
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset: chunk.offset + len(chunk) + 1]
            digest.update(memoryview(chunk.buffers()[2])[offsets[0]: offsets[-1]])
    return digest.hexdigest()


def universe_hash(refs: Sequence[SampleRef] | Universe) -> str:
    """sha256 over the ordered uids, each followed by ``\\n`` (the Cuvis.AI fingerprint)."""
    if isinstance(refs, Universe):
        return refs.hash
    digest = hashlib.sha256()
    for ref in refs:
        digest.update(ref.uid.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def enumerate_folder(
    root: str | os.PathLike[str],
    *,
    pattern: str = "*",
    recursive: bool = True,
    attributes: AttributeLoader | None = None,
) -> Universe:
    """The universe of a folder of source files, for data without a ``universe.csv``.

    Each file whose name matches ``pattern`` is one source holding one sample (index 0);
    its ``source`` is its posix path relative to ``root`` and its ``materialized_path``
    the full path. Hidden files (a leading ``.``) are skipped. Works on fsspec URLs.
    """
    import fsspec

    text = os.fspath(root)
    fs, base = fsspec.core.url_to_fs(text)
    if not fs.isdir(storage.fresh_path(fs, base)):
        raise UniverseError(f"cannot enumerate {text}: not a directory")
    sources = list(storage.list_files(text, pattern=pattern, recursive=recursive))
    paths = [storage.join_url(text, *rel.split("/")) for rel in sources]
    if not sources:
        raise UniverseError(f"no files matching {pattern!r} under {text}; nothing to enumerate")
    return Universe.from_columns(
        sources, np.zeros(len(sources), np.int64), materialized_path=paths, attributes=attributes, origin=text
    )
