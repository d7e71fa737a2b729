"""``ScoreCacheContract``: what every :class:`~kuration.scoring.cache.ScoreCache` promises.

Like zarr's ``testing/store.py::StoreTests``: a test module subclasses it once per cache
and supplies only ``make_cache()``. Through the protocol alone:

* an entry is found only under the exact (run fingerprint, source id, source identity) it
  was put under, and a put under another key never disturbs it;
* ``get`` gives back the table ``put`` stored bit for bit: schema and its metadata, nulls,
  NaN payloads and signed zeros, and a table taken before an overwrite keeps its values;
* a weak identity (a path and an mtime) is never written or read;
* a second put under one key replaces the first.

:class:`PersistentScoreCacheContract` adds what a cache that outlives its object promises
(``reopen(cache)`` gives a new object over the same storage, ``entry_urls(cache)`` its entry
files): entries survive, and a torn, garbage or foreign entry file is a miss, never an
error and never another entry's table.
"""

from __future__ import annotations

import abc
import numpy as np
import pyarrow as pa
import pytest

from kuration import storage
from kuration.scoring.cache import FsspecScoreCache, ScoreCache
from kuration.sources.protocol import SourceIdentity

RUN = "a" * 64
SOURCE = "site_0/rec_000.parquet"
IDENTITY = SourceIdentity("content_sha256", "1" * 64)


def table(seed: int = 0, rows: int = 5) -> pa.Table:
    """Segment features with what a lossy store would change: NaN payloads, -0.0, nulls,
    float16, strings, lists and schema metadata."""
    rng = np.random.default_rng(seed)
    score = rng.normal(size=rows).astype(np.float64)
    score[:3] = [-0.0, np.nan, np.inf][:rows]
    payload_nan = np.array([0x7FF8_0000_DEAD_BEEF] * rows, np.uint64).view(np.float64)
    return pa.table({
        "segment": pa.array([f"{SOURCE}#{i}" for i in range(rows)]),
        "start": pa.array(np.arange(rows, dtype=np.int64) * 10),
        "score": pa.array(score),
        "payload_nan": pa.array(payload_nan),
        "half": pa.array(rng.normal(size=rows).astype(np.float16)),
        "count": pa.array([None if i % 2 else i for i in range(rows)], pa.int32()),
        "tags": pa.array([["gust"] * (i % 3) for i in range(rows)], pa.list_(pa.string())),
    }).replace_schema_metadata({b"strategy": b"priority/1", b"seed": str(seed).encode()})


def assert_same_bits(got: pa.Table | None, want: pa.Table) -> None:
    assert got is not None, "a miss where the entry was put"
    assert got.schema.equals(want.schema, check_metadata=True), (got.schema, want.schema)
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        a, b = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if pa.types.is_floating(b.type):
            width = b.type.bit_width
            bits = [np.asarray(x.to_numpy(zero_copy_only=False)).view(f"u{width // 8}") for x in (a, b)]
            np.testing.assert_array_equal(bits[0], bits[1], err_msg=name)
        else:
            assert a.equals(b), name


class ScoreCacheContract(abc.ABC):
    @abc.abstractmethod
    def make_cache(self) -> ScoreCache:
        ...

    @pytest.fixture
    def cache(self) -> ScoreCache:
        return self.make_cache()

    def test_an_empty_cache_misses(self, cache):
        assert cache.get(RUN, SOURCE, IDENTITY) is None

    @pytest.mark.parametrize("rows", [0, 1, 5, 300])
    def test_get_gives_back_the_table_put_bit_for_bit(self, cache, rows):
        want = table(rows=rows) if rows else table().slice(0, 0)
        cache.put(RUN, SOURCE, IDENTITY, want)
        assert_same_bits(cache.get(RUN, SOURCE, IDENTITY), want)
        assert_same_bits(cache.get(RUN, SOURCE, IDENTITY), want)  # a get does not consume the entry

    def test_a_table_without_schema_metadata_comes_back_without(self, cache):
        want = table().replace_schema_metadata(None)
        cache.put(RUN, SOURCE, IDENTITY, want)
        got = cache.get(RUN, SOURCE, IDENTITY)
        assert_same_bits(got, want)
        assert not got.schema.metadata

    @pytest.mark.parametrize("other", [
        (RUN[:-1] + "b", SOURCE, IDENTITY),
        (RUN[:16] + "c" * 48, SOURCE, IDENTITY),  # same first 16 digits: the namespace a store may use
        (RUN, "site_0/rec_001.parquet", IDENTITY),
        (RUN, SOURCE, SourceIdentity("content_sha256", "2" * 64)),
        (RUN, SOURCE, SourceIdentity("etag", "1" * 64)),  # same value, another kind
    ], ids=["run", "run-same-prefix", "source", "identity-value", "identity-kind"])
    def test_an_entry_is_found_only_under_its_own_key(self, cache, other):
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        assert cache.get(*other) is None
        cache.put(*other, table(2))
        assert_same_bits(cache.get(*other), table(2))
        assert_same_bits(cache.get(RUN, SOURCE, IDENTITY), table(1))

    def test_keys_that_join_to_the_same_text_are_different_keys(self, cache):
        # "<source>\n<kind>:<value>" is the same text for both: only the parts tell them apart
        cache.put(RUN, "a\ncontent_sha256:x", SourceIdentity("content_sha256", "y"), table(1))
        assert cache.get(RUN, "a", SourceIdentity("content_sha256", "x\ncontent_sha256:y")) is None

    def test_a_weak_identity_is_never_written_or_read(self, cache):
        weak = SourceIdentity("logical", "rec_000.parquet:1234:1700000000")
        assert not weak.strong
        cache.put(RUN, SOURCE, weak, table(1))
        assert cache.get(RUN, SOURCE, weak) is None
        self.assert_nothing_stored(cache)

    def assert_nothing_stored(self, cache) -> None:  # noqa: B027 - optional: a no-op unless the cache can be inspected
        """Hook: a cache that can be inspected checks it holds no entry."""

    def test_a_second_put_replaces_the_first(self, cache):
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        cache.put(RUN, SOURCE, IDENTITY, table(2, rows=7))
        assert_same_bits(cache.get(RUN, SOURCE, IDENTITY), table(2, rows=7))

    def test_a_table_taken_before_an_overwrite_keeps_its_values(self, cache):
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        before = cache.get(RUN, SOURCE, IDENTITY)
        cache.put(RUN, SOURCE, IDENTITY, table(2))
        assert_same_bits(before, table(1))
        assert_same_bits(cache.get(RUN, SOURCE, IDENTITY), table(2))


class PersistentScoreCacheContract(ScoreCacheContract):
    @abc.abstractmethod
    def reopen(self, cache: ScoreCache) -> ScoreCache:
        ...

    @abc.abstractmethod
    def entry_urls(self, cache: ScoreCache) -> list[str]:
        ...

    def assert_nothing_stored(self, cache) -> None:
        assert self.entry_urls(cache) == []

    def test_entries_outlive_the_object_that_put_them(self, cache):
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        assert_same_bits(self.reopen(cache).get(RUN, SOURCE, IDENTITY), table(1))

    @pytest.mark.parametrize("damage", ["torn", "empty", "garbage"])
    def test_a_damaged_entry_is_a_miss(self, cache, damage):
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        (url,) = self.entry_urls(cache)
        data = storage.read_bytes(url)
        damaged = {"torn": data[: len(data) // 2], "empty": b"", "garbage": b"ARROW1" + bytes(200)}[damage]
        storage.write_bytes_atomic(url, damaged)
        assert self.reopen(cache).get(RUN, SOURCE, IDENTITY) is None
        cache.put(RUN, SOURCE, IDENTITY, table(1))  # and it is healed by the next put
        assert_same_bits(self.reopen(cache).get(RUN, SOURCE, IDENTITY), table(1))

    @pytest.mark.parametrize("other", [
        (RUN[:16] + "c" * 48, SOURCE, IDENTITY),
        (RUN, "site_0/rec_001.parquet", IDENTITY),
        (RUN, SOURCE, SourceIdentity("content_sha256", "2" * 64)),
    ], ids=["run", "source", "identity"])
    def test_a_foreign_entry_in_an_entrys_place_is_a_miss(self, cache, other):
        """An entry file copied (or restored, or synced) over another key's file is
        recognised as computed from something else."""
        cache.put(*other, table(2))
        (foreign,) = self.entry_urls(cache)
        cache.put(RUN, SOURCE, IDENTITY, table(1))
        (mine,) = set(self.entry_urls(cache)) - {foreign}
        storage.write_bytes_atomic(mine, storage.read_bytes(foreign))
        assert self.reopen(cache).get(RUN, SOURCE, IDENTITY) is None
        assert_same_bits(self.reopen(cache).get(*other), table(2))


class FsspecScoreCacheContract(PersistentScoreCacheContract):
    """:class:`~kuration.scoring.cache.FsspecScoreCache` under ``self.base`` (a local folder
    or a URL, set by the subclass)."""

    base: str

    def make_cache(self) -> ScoreCache:
        return FsspecScoreCache(self.base)

    def reopen(self, cache) -> ScoreCache:
        return FsspecScoreCache(cache.root)

    def entry_urls(self, cache) -> list[str]:
        return [storage.join_url(cache.root, name) for name in storage.list_files(cache.root)]


__all__ = ["FsspecScoreCacheContract", "PersistentScoreCacheContract", "ScoreCacheContract", "assert_same_bits",
           "table"]
