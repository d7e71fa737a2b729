"""plan_scoring sorts every source into one of the plan's parts (cached, features cached,
partly cached, to compute, unidentified) by reading identities and the cache only; the two
pools behind score_sources give the same segment table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kuration.scoring import (
    MemoryScoreCache, ScoringPlan, SourceScoringError, plan_scoring, score_sources,
)
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring.pools import BudgetedPool, InMemoryPool, PooledSource
from kuration.scoring.strategy import Strategy
from kuration.scoring.track import segment_table_schema
from kuration.sources import ParquetTickAdapter
from tests.pipeline.recordings import SCHEMA, SEGMENTER, STRATEGY, write_recording

#: Reads the features STRATEGY reads, and one more (pos.std) no earlier run computed.
WIDER = Strategy.from_dict({"method": "inclusion", "priority": {"battery.min": 1.0, "pos.std": 1.0}})
#: The same features as STRATEGY, weighed otherwise.
REWEIGHED = Strategy.from_dict({"method": "inclusion", "priority": {"battery.min": 2.0, "tag.near_miss": 1.0}})


class Watched(ParquetTickAdapter):
    """Records every recording read; one source's identity can be made to fail."""

    def __init__(self, root, schema, *, unidentifiable: str | None = None):
        super().__init__(root, schema)
        self.read: list[str] = []
        self.unidentifiable = unidentifiable

    def read_ticks(self, source_id):
        self.read.append(source_id)
        return super().read_ticks(source_id)

    def identity(self, source_id):
        if source_id == self.unidentifiable:
            raise OSError(f"{source_id}: permission denied")
        return super().identity(source_id)


def _parts(plan: ScoringPlan) -> list[set[str]]:
    return [set(plan.unidentified), set(plan.cached), set(plan.features_cached), set(plan.partly_cached),
            set(plan.to_compute)]


def test_without_a_cache_every_source_is_to_compute_and_no_identity_is_asked(recordings):
    adapter = Watched(recordings, SCHEMA, unidentifiable="site_0/rec_00.parquet")
    plan = plan_scoring(adapter, segmenter=SEGMENTER, strategy=STRATEGY)
    assert plan.to_compute == plan.source_ids == tuple(sorted(adapter.list_sources()))
    assert plan.identities == {} and plan.unidentified == {} and adapter.read == []


def test_each_source_lands_in_exactly_one_part_and_the_plan_reads_no_recording(recordings):
    cache = MemoryScoreCache()
    score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY, cache=cache)
    write_recording(recordings / "site_1" / "rec_new.parquet", seed=50, ticks=220)
    adapter = Watched(recordings, SCHEMA, unidentifiable="site_2/rec_02.parquet")
    entries = dict(cache.entries)

    same = plan_scoring(adapter, segmenter=SEGMENTER, strategy=STRATEGY, cache=cache)
    assert same.unidentified.keys() == {"site_2/rec_02.parquet"}
    assert "permission denied" in str(same.unidentified["site_2/rec_02.parquet"])
    assert same.to_compute == ("site_1/rec_new.parquet",) and len(same.cached) == 5
    reweighed = plan_scoring(adapter, segmenter=SEGMENTER, strategy=REWEIGHED, cache=cache)
    assert len(reweighed.features_cached) == 5 and not reweighed.cached
    wider = plan_scoring(adapter, segmenter=SEGMENTER, strategy=WIDER, cache=cache)
    assert len(wider.partly_cached) == 5 and wider.partial_passes() == {("pos.std",): sorted(wider.partly_cached)}
    for plan in (same, reweighed, wider):
        parts = _parts(plan)
        assert sum(len(part) for part in parts) == len(plan.source_ids) == 7
        assert set().union(*parts) == set(plan.source_ids)
        assert set(plan.identities) == set(plan.source_ids) - set(plan.unidentified)
    assert adapter.read == [] and cache.entries == entries  # read nothing, wrote nothing


def test_an_unidentified_source_is_skipped_or_raised_as_on_error_says(recordings):
    adapter = Watched(recordings, SCHEMA, unidentifiable="site_0/rec_00.parquet")
    result = score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, cache=MemoryScoreCache())
    skipped = {o.source_id: o.error for o in result.skipped}
    assert skipped == {"site_0/rec_00.parquet": "OSError: site_0/rec_00.parquet: permission denied"}
    with pytest.raises(SourceScoringError, match="site_0/rec_00.parquet: cannot establish identity: .*denied"):
        score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, cache=MemoryScoreCache(), on_error="raise")


def test_progress_reports_every_source_once_with_a_running_count(recordings):
    cache = MemoryScoreCache()
    score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY, cache=cache)
    write_recording(recordings / "site_1" / "rec_new.parquet", seed=50, ticks=220)
    calls: list[tuple[str, str, int, int]] = []
    result = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=WIDER, cache=cache,
                           progress=lambda outcome, done, total: calls.append((outcome.source_id, outcome.status,
                                                                               done, total)))
    assert [done for _, _, done, _ in calls] == list(range(1, 8)) and {total for *_, total in calls} == {7}
    assert sorted(source for source, *_ in calls) == sorted(o.source_id for o in result.outcomes)


def _pooled(recordings) -> list[PooledSource]:
    result = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY,
                           cache=MemoryScoreCache())
    return [PooledSource(o.source_id, o.identity, result.for_source(o.source_id)) for o in result.outcomes]


def test_both_pools_give_the_canonical_table_whatever_order_sources_come_in(recordings, tmp_path):
    """Half the sources one by one (in reverse, each source's rows reversed too), the other
    half as one batch, as a task returns them."""
    pooled = _pooled(recordings)
    alone, batched = pooled[3:][::-1], pooled[:3]
    batch = pa.concat_tables([source.table for source in batched])
    schema = segment_table_schema(STRATEGY)
    in_memory = InMemoryPool(schema)
    for source in alone:
        in_memory.add(PooledSource(source.source_id, None, source.table.take(
            pa.array(range(source.table.num_rows - 1, -1, -1)))))
    in_memory.add_batch(batch, batched)
    cache = FsspecScoreCache(tmp_path / "cache")
    fingerprint = "f" * 64
    budgeted = BudgetedPool(schema, 1 << 30, cache, fingerprint, "ParquetTickAdapter")
    for source in pooled:
        cache.put(fingerprint, source.source_id, source.identity, source.table)
    for source in alone:
        budgeted.add(source)
    budgeted.add_batch(batch, batched)
    expected = pa.concat_tables([source.table for source in pooled])
    assert in_memory.table().equals(expected) and budgeted.table().equals(expected)
    assert in_memory.memory() is None
    memory = budgeted.memory()  # every source was held as its mapped checkpoint
    assert memory["resident_bytes"] == 0 < memory["mapped_bytes"]
    assert memory["checkpointed_sources"] == memory["sources"] == len(pooled)


def test_an_empty_pool_is_the_empty_table_of_the_strategy(tmp_path):
    schema = segment_table_schema(STRATEGY)
    budgeted = BudgetedPool(schema, 1, FsspecScoreCache(tmp_path / "cache"), "f" * 64, "A")
    assert InMemoryPool(schema).table().equals(schema.empty_table()) and budgeted.table().equals(schema.empty_table())
