"""``CuratedDatasetAdapter``: a committed training dataset read back as recordings, so an
artifact can be curated again (scored, split, budgeted and written again).

It reads through :mod:`kuration.read` (``load_committed``, ``read_shard``): only a committed,
checksum-consistent dataset, local or at an fsspec URL (``s3://...``), and every shard's
size and SHA-256 checked before it is used. What a manifest records decides what comes
back:

* **A source is one admitted span**: the shards of one (original source, entity, span),
  concatenated in order of ``start``. Spans of one entity are not joined: the rows between
  them were never curated (joining would invent continuity), and counted segments may
  overlap (joining would repeat ticks). The source id is the span's shard stem
  (:func:`kuration.output.shard_files.shard_stem`, ``<recording>_<entity>[_spanNNN]_<hash12>``):
  portable, stable across runs, moves and machines, and one per (source, entity, span)
  because the 12-hex-digit hash covers the exact (source, entity, span) triple (two spans
  that still map to one id are refused). :meth:`CuratedDatasetAdapter.curated_source` gives the
  original source id, entity, span and split of each.
* **Entities** are the original entity ids, parsed back to their typed value
  (:func:`kuration.sources.entities.parse_entity_key`) into the ``_entity`` column, one
  entity per source; a dataset of single-entity tracks (entity ``none:None``) gives a
  schema without an entity column.
* **Time.** Shards record the rows of the original track they hold (``start``/``stop``),
  not tick numbers, so the ``_tick`` column is the derived index ``start + row``: the row's
  position in the original entity's track (which starts at the entity's first tick). At
  the original ``sample_hz`` (from ``config.json``'s ``job.schema``), so durations carry
  over; the original time column and unit do not.
* **Padding and presence.** Pad rows are dropped (each shard is trimmed to its
  ``n_steps``); a row whose ``_present`` is false is dropped too, so the entity is absent at
  that tick. With one entity per source no other row holds that tick, so it becomes a gap
  in ``Track.ticks`` rather than an absent row: a re-written track holds the present rows
  only. A dataset written with ``presence_mask: false`` is refused, since its absent rows
  cannot be told from recorded zeros.
* **Schema.** Every modality becomes a per-entity ``field`` of its name, dtype and shape:
  ``field:``, ``segment:`` (the span's aggregated value, repeated) and ``encoder:`` values,
  and ``media:`` modalities as the decoded arrays the shards hold (a media provider would
  only read the same shards again). Original globals become per-entity fields too: entities
  of one original source are not aligned on a shared tick axis any more. There are no
  media or tag columns, so :meth:`decode_media` always refuses.
  :meth:`CuratedDatasetAdapter.passthrough_spec` writes every column back as it came.
* **Identity** is a strong ``fingerprint``: SHA-256 over the recorded SHA-256 of every shard
  of the source with the entry data that place its rows (start, n_steps), the original
  source, entity and span, and the schema. It is computed after each shard's size and
  SHA-256 are checked, so a scoring cache is reused exactly when the content is unchanged,
  and a changed shard is refused rather than vouched for. Paths and splits are not part of
  it: a moved dataset keeps its identities.
* **Splits.** Each source keeps its original split (``curated_source(id).split``):
  :meth:`CuratedDatasetAdapter.split_assignments` is a table for
  ``write_dataset(split_assignments=...)`` that keeps it, grouped by original source so the
  spans and entities of one recording stay together; :attr:`CuratedDatasetAdapter.group_of`
  is that grouping for a fresh seeded split.

The adapter reads one dataset folder: given a dataset root, the version current when it was
made (:mod:`kuration.output.versions`; a later one is read by a new adapter). Each call
reads that folder's commit record and reloads the manifest when it changed (a plain dataset
re-committed in place; one whose modalities changed is refused: make a new adapter). A
dataset that is not committed, a shard that is missing or changed, a manifest entry that
lacks what re-ingesting needs, and an unknown source id are :class:`SourceError`
(:class:`TickDataError` for an unknown id) naming the dataset, entry or shard. This module
never writes, and the dataset it reads cannot be the destination of the write that
re-curates it: the writer refuses an adapter whose ``dataset_url`` is its
destination before it touches anything (a write onto the dataset's root commits a new
version beside the one read).
"""

from __future__ import annotations

import os
from itertools import pairwise
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.errors import CommitError, shown
from kuration.canonical.hashing import canonical_digest
from kuration.numbers import finite_float, whole_number
from kuration.output.commit_protocol import CONFIG_FILE, MANIFEST_FILE, read_commit
from kuration.output.shard_files import shard_stem
from kuration.output.spec import OutputSpec
from kuration.read.committed import CommittedDataset, DatasetIntegrityError, load_committed, locate_shard, read_shard
from kuration.sources.entities import EntityIdError, entity_key, parse_entity_key
from kuration.sources.media import MediaError
from kuration.sources.protocol import SourceIdentity
from kuration.sources.schema import Schema, SchemaError
from kuration.sources.ticks import SourceError, TickDataError, Ticks

#: The derived time column (``start + row``) and the entity column. Modality names cannot
#: start with ``_``, so these never collide with a field.
TIME_COLUMN = "_tick"
ENTITY_COLUMN = "_entity"
#: What a single-entity track's entity id is in a manifest.
SINGLE_ENTITY_KEY = entity_key(None)
#: What each manifest entry must record beyond what ``load_committed`` checks.
REQUIRED_ENTRY_KEYS = ("source_id", "entity_id", "span_index", "shard_index", "start", "stop")
_FINGERPRINT_TAG = "kuration.sources.curated/1"


@dataclass(frozen=True)
class CuratedSource:
    """One re-ingested source: the shards of one admitted span, in order of ``start``."""

    source_id: str
    original_source_id: str
    entity_key: str
    #: The original entity id as its typed value (None for a single-entity track).
    entity_id: Any
    span_index: int | None
    split: str
    entries: tuple[Mapping[str, Any], ...]

    @property
    def n_steps(self) -> int:
        """Real (unpadded) rows over all its shards, present or not."""
        return sum(int(e["n_steps"]) for e in self.entries)


def plan_curated_sources(entries: Sequence[Mapping[str, Any]], *, where: str) -> dict[str, CuratedSource]:
    """The re-ingested sources of a manifest's ``entries`` (already checked by
    ``load_committed``), by source id, sorted: a pure plan, no shard read. ``where`` names
    the manifest in errors. Raises :class:`SourceError` naming the entry and key when one
    lacks what re-ingesting needs or two shards of a span overlap."""
    spans: dict[tuple[str, str, int | None], list[tuple[int, Mapping[str, Any]]]] = {}
    for i, entry in enumerate(entries):
        at = f"{where}: entries[{i}]"
        missing = [key for key in REQUIRED_ENTRY_KEYS if key not in entry]
        if missing:
            raise SourceError(f"{at}: lacks {missing}; re-ingesting needs each shard's {list(REQUIRED_ENTRY_KEYS)} "
                              "(write_dataset records them). Write the dataset again with this Kuration")
        source = entry["source_id"]
        if not isinstance(source, str) or not source:
            raise SourceError(f"{at}.source_id: must be a non-empty string, got {shown(source)}")
        try:
            parse_entity_key(entry["entity_id"])
        except EntityIdError as exc:
            raise SourceError(f"{at}.entity_id: {exc}") from None
        span = entry["span_index"]
        if span is not None and not (whole_number(span) is not None and span >= 0):
            raise SourceError(f"{at}.span_index: must be null or a whole number >= 0, got {shown(span)}")
        start, stop = whole_number(entry["start"]), whole_number(entry["stop"])
        if start is None or stop is None or start < 0 or stop - start != entry["n_steps"]:
            raise SourceError(f"{at}: start {shown(entry['start'])} and stop {shown(entry['stop'])} must be whole "
                              f"numbers >= 0 that differ by n_steps ({entry['n_steps']}): the track rows the shard "
                              "holds")
        spans.setdefault((source, entry["entity_id"], span), []).append((i, entry))
    out: dict[str, CuratedSource] = {}
    for (source, key, span), items in spans.items():
        items.sort(key=lambda item: item[1]["start"])
        for (i, before), (j, after) in pairwise(items):
            if after["start"] < before["stop"]:
                raise SourceError(f"{where}: entries[{i}] ({before['path']}) and entries[{j}] ({after['path']}) "
                                  f"overlap: rows [{before['start']}, {before['stop']}) and [{after['start']}, "
                                  f"{after['stop']}) of one span; the manifest cannot be re-ingested")
        splits = sorted({entry["split"] for _, entry in items})
        if len(splits) > 1:
            raise SourceError(f"{where}: the shards of source {source!r}, entity {key}, span {span} are in splits "
                              f"{splits}; one span belongs to one split")
        stem = shard_stem(source, key, span)
        if stem in out:
            other = out[stem]
            raise SourceError(f"{where}: source {source!r}, entity {key}, span {span} and source "
                              f"{other.original_source_id!r}, entity {other.entity_key}, span {other.span_index} "
                              f"would both be re-ingested as {stem!r}")
        out[stem] = CuratedSource(stem, source, key, parse_entity_key(key), span, splits[0],
                                  tuple(entry for _, entry in items))
    return dict(sorted(out.items()))


def curated_schema(spec: OutputSpec, *, sample_hz: float, entities: bool) -> Schema:
    """The schema of a re-ingested dataset written with ``spec``: ``_tick`` (ticks at
    ``sample_hz``), ``_entity`` when ``entities``, and one field per modality."""
    return Schema.from_dict({
        "sample_hz": sample_hz, "time": TIME_COLUMN, "time_unit": "ticks",
        "entity": ENTITY_COLUMN if entities else None,
        "fields": {name: {"dtype": m.dtype, "shape": list(m.shape)} for name, m in spec.modalities.items()},
    })


@dataclass(frozen=True)
class _View:
    """The dataset as one commit record pins it, and what it re-ingests as."""

    dataset: CommittedDataset
    schema: Schema
    sources: dict[str, CuratedSource]

    def source(self, source_id: str) -> CuratedSource:
        found = self.sources.get(source_id)
        if found is None:
            ids = list(self.sources)
            shown_ids = ids[:2] + ["..."] + ids[-1:] if len(ids) > 3 else ids
            raise TickDataError(f"{source_id}: no such source in the curated dataset {self.dataset.root}; sources are "
                                f"{shown_ids} ({len(ids)} spans; list_sources() gives them all)")
        return found


class CuratedDatasetAdapter:
    """A committed dataset (a directory, its ``dataset_manifest.json``, or an fsspec URL)
    as recordings: one source per admitted span (see the module doc).

    ``sample_hz`` is needed only when ``config.json`` does not record ``job.schema.sample_hz``
    (a dataset not written by ``write_dataset``); given with one that does, the two must
    agree. ``untrusted=True`` (with ``decode_timeout``) decodes ``hdf5`` and ``parquet``
    shards in a worker process, as :func:`kuration.read.load_committed` does."""

    def __init__(self, path_or_url: str | os.PathLike[str], *, sample_hz: float | None = None,
                 untrusted: bool = False, decode_timeout: float | None = None) -> None:
        self.url = os.fspath(path_or_url)
        self._sample_hz = sample_hz
        self._untrusted = untrusted
        self._decode_timeout = decode_timeout
        self._view = self._load()
        self.schema = self._view.schema

    @property
    def dataset_url(self) -> str:
        """The folder or URL of the dataset read: a write refuses it as its destination."""
        return self._view.dataset.destination.url

    def __repr__(self) -> str:
        return f"CuratedDatasetAdapter({self.url!r})"

    def _load(self) -> _View:
        try:
            dataset = load_committed(self.url, untrusted=self._untrusted, decode_timeout=self._decode_timeout)
        except CommitError as exc:
            raise SourceError(f"{self.url}: not a committed dataset that can be re-ingested: {exc}") from None
        manifest = dataset.destination.where(MANIFEST_FILE)
        if not dataset.spec.presence_mask:
            raise SourceError(f"{manifest}: written with presence_mask: false, so its absent rows cannot be told from "
                              "recorded zeros and would come back as data; write the dataset with presence_mask: true "
                              "to re-ingest it")
        sources = plan_curated_sources(dataset.entries, where=manifest)
        keys = {source.entity_key for source in sources.values()}
        if SINGLE_ENTITY_KEY in keys and len(keys) > 1:
            raise SourceError(f"{manifest}: mixes single-entity tracks (entity_id {SINGLE_ENTITY_KEY!r}) with entity "
                              f"ids such as {sorted(keys - {SINGLE_ENTITY_KEY})[0]!r}; one schema cannot hold both")
        try:
            schema = curated_schema(dataset.spec, sample_hz=self._rate(dataset),
                                    entities=bool(keys) and SINGLE_ENTITY_KEY not in keys)
        except SchemaError as exc:
            raise SourceError(f"{manifest}: its modalities do not make a schema: {exc}") from None
        return _View(dataset, schema, sources)

    def _rate(self, dataset: CommittedDataset) -> float:
        """The original ``sample_hz``: ``config.json``'s, checked against the argument."""
        where = dataset.destination.where(CONFIG_FILE)
        job = dataset.config.get("job")
        recorded_schema = job.get("schema") if isinstance(job, Mapping) else None
        recorded = recorded_schema.get("sample_hz") if isinstance(recorded_schema, Mapping) else None
        given = None if self._sample_hz is None else finite_float(self._sample_hz)
        if self._sample_hz is not None and (given is None or given <= 0):
            raise SourceError(f"{self.url}: sample_hz must be a positive number of ticks per second, got "
                              f"{shown(self._sample_hz)}")
        if recorded is None:
            if given is None:
                raise SourceError(f"{where}: records no job.schema.sample_hz, so the re-ingested ticks would have no "
                                  "rate; pass sample_hz= (the rate the dataset was recorded at)")
            return given
        rate = finite_float(recorded)
        if rate is None or rate <= 0:
            raise SourceError(f"{where}: job.schema.sample_hz must be a positive number, got {shown(recorded)}")
        if given is not None and not np.isclose(given, rate):
            raise SourceError(f"{self.url}: sample_hz={given:g} but {where} records {rate:g} Hz; leave sample_hz unset")
        return rate

    def _current(self) -> _View:
        """The dataset as committed now: the commit record is read on every call, the
        manifest again only when the record changed."""
        view = self._view
        try:
            record = read_commit(view.dataset.destination)
        except CommitError as exc:
            raise SourceError(f"{self.url}: {exc}") from None
        if record == view.dataset.record:
            return view
        view = self._load()
        if view.schema != self.schema:
            raise SourceError(f"{self.url}: the dataset was re-written with other modalities or another rate since "
                              f"this adapter read it (schema {self.schema.to_dict()['fields']} at "
                              f"{self.schema.sample_hz:g} Hz, now {view.schema.to_dict()['fields']} at "
                              f"{view.schema.sample_hz:g} Hz); make a new CuratedDatasetAdapter")
        self._view = view
        return view

    # ---- the SourceAdapter protocol ------------------------------------------------------

    def list_sources(self) -> list[str]:
        return list(self._current().sources)

    def read_ticks(self, source_id: str) -> Ticks:
        """The span's present rows, in order: ``_tick`` = ``start + row``, every modality
        as a field (each shard's size and SHA-256 checked before it is decoded)."""
        view = self._current()
        source = view.source(source_id)
        ticks: list[np.ndarray] = []
        columns: dict[str, list[np.ndarray]] = {name: [] for name in view.dataset.spec.modalities}
        for entry in source.entries:
            try:
                shard = read_shard(view.dataset, entry)
            except DatasetIntegrityError as exc:
                raise SourceError(f"{source_id}: {exc}") from None
            n = int(entry["n_steps"])
            if shard.present is None:  # load_committed gave a spec with the mask: the container dropped it
                raise SourceError(f"{source_id}: {view.dataset.shard_path(entry)} holds no _present mask although the "
                                  "output spec declares one")
            keep = np.flatnonzero(shard.present[:n])
            ticks.append(int(entry["start"]) + keep.astype(np.int64))
            for name in columns:
                columns[name].append(shard.arrays[name][:n][keep])
        raw: dict[str, Any] = {TIME_COLUMN: np.concatenate(ticks),
                               **{name: np.concatenate(parts) for name, parts in columns.items()}}
        if self.schema.entity is not None:
            entity = np.empty(len(raw[TIME_COLUMN]), dtype=object)
            entity.fill(source.entity_id)  # fill, not slicing: a tuple id must stay one value per row
            raw[ENTITY_COLUMN] = entity
        return Ticks.from_columns(self.schema, source_id, raw)

    def decode_media(self, column: str, refs: Sequence[str], *, source_id: str) -> np.ndarray:
        raise MediaError(f"{source_id}: media {column!r}: a re-ingested dataset has no media columns; its media "
                         f"modalities are fields holding the decoded arrays (declare 'field:{column}' in the output "
                         "spec)")

    def identity(self, source_id: str) -> SourceIdentity:
        """A strong fingerprint of the span's shards (see the module doc), after checking
        each shard's size and SHA-256 against the manifest."""
        view = self._current()
        source = view.source(source_id)
        for entry in source.entries:
            try:
                location = locate_shard(view.dataset, entry)
                matches = location.destination.shard_matches(location.relative, entry)
            except CommitError as exc:
                raise SourceError(f"{source_id}: {exc}") from None
            if not matches:
                raise SourceError(f"{source_id}: {view.dataset.shard_path(entry)} is missing, or its size or SHA-256 "
                                  "differs from the manifest; the shard was changed or is corrupt. Do not re-curate "
                                  "from it: rebuild the dataset (write it again with resume=True)")
        digest = canonical_digest({
            "tag": _FINGERPRINT_TAG, "schema": self.schema.fingerprint(), "source": source.original_source_id,
            "entity": source.entity_key, "span": source.span_index,
            "shards": [[int(e["start"]), int(e["n_steps"]), e["sha256"]] for e in source.entries],
        })
        return SourceIdentity("fingerprint", digest)

    # ---- what the original dataset recorded -------------------------------------------

    def curated_source(self, source_id: str) -> CuratedSource:
        """The original source id, entity, span, split and manifest entries of a source."""
        return self._current().source(source_id)

    @property
    def group_of(self) -> dict[str, str]:
        """Source id -> original source id: pass as ``group_of`` so a fresh split keeps the
        spans and entities of one original recording in one split."""
        return {sid: source.original_source_id for sid, source in self._current().sources.items()}

    def split_assignments(self) -> pa.Table:
        """``stage``, ``source``, ``group`` per source: its original split, grouped by original
        source. ``write_dataset(..., split_assignments=adapter.split_assignments())`` (or
        ``plan_budget``) keeps the split the dataset was written with."""
        sources = list(self._current().sources.values())
        return pa.table({"stage": pa.array([s.split for s in sources], pa.string()),
                         "source": pa.array([s.source_id for s in sources], pa.string()),
                         "group": pa.array([s.original_source_id for s in sources], pa.string())})

    def passthrough_spec(self, *, container: str | None = None, shard_length: int | None = None,
                         short_policy: str | None = None) -> OutputSpec:
        """An output spec that writes every field back as the modality it came from (same
        name, dtype and shape, ``field:<name>``), with the dataset's shard length, short
        policy and container unless given."""
        spec = self._current().dataset.spec
        return OutputSpec.from_dict({
            "shard_length": spec.shard_length if shard_length is None else shard_length,
            "short_policy": spec.short_policy if short_policy is None else short_policy,
            "container": spec.container if container is None else container,
            "presence_mask": True,
            "modalities": {name: {"dtype": m.dtype, "shape": list(m.shape), "source": f"field:{name}"}
                           for name, m in spec.modalities.items()},
        })


__all__ = ["ENTITY_COLUMN", "REQUIRED_ENTRY_KEYS", "TIME_COLUMN", "CuratedDatasetAdapter", "CuratedSource",
           "curated_schema", "plan_curated_sources"]
