"""``load_scored_pool(memory_budget=...)``: stored segment files that name a strong identity
are held as their memory-mapped score-cache checkpoints, the pool and the plan are the
same as a plain load, and a budget that would need the others in memory fails saying how
to provide a fingerprint."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.budget import BudgetOptions, plan_budget
from kuration.budget.options import BudgetError
from kuration.budget.plan_store import load_scored_pool
from kuration.scoring import MemoryBudgetError, run_fingerprint
from kuration.scoring.segment_store import IDENTITY_KEY, score_and_store, score_cache_url, segments_url
from kuration.sources import ParquetTickAdapter
from kuration.sources.protocol import SourceIdentity
from tests.pipeline.recordings import SCHEMA, SEGMENTER, STRATEGY, write_recording

SOURCES = [f"site_{i % 2}/rec_{i:02d}.parquet" for i in range(4)]


class LogicalOnly(ParquetTickAdapter):
    def identity(self, source_id):
        return SourceIdentity("logical", f"{source_id}|mtime")


@pytest.fixture
def recordings(tmp_path):
    for i, source in enumerate(SOURCES):
        write_recording(tmp_path / "recordings" / source, seed=i, ticks=400 + 100 * i)
    return tmp_path / "recordings"


def _store(recordings, root, adapter_class=ParquetTickAdapter):
    stored = score_and_store(adapter_class(recordings, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY,
                             sources=SOURCES, root=root)
    return stored[0][0]


def _plan(pool):
    options = BudgetOptions(train_hours=0.05, test_hours=0.02, span_seconds=20.0)
    return plan_budget(pool.segments, options, strategy=STRATEGY)


def test_a_budgeted_load_maps_every_checkpoint_and_plans_the_same(recordings, tmp_path):
    root = tmp_path / "storage"
    _store(recordings, root)
    plain = load_scored_pool(root, SOURCES)
    mapped = load_scored_pool(root, SOURCES, memory_budget=1)
    assert mapped.memory == {"budget_bytes": 1, "resident_bytes": 0, "mapped_bytes": mapped.segments.nbytes,
                             "mapped_sources": 4}
    assert mapped.segments.equals(plain.segments) and mapped.run_fingerprint == plain.run_fingerprint
    assert _plan(mapped).admitted().equals(_plan(plain).admitted())
    assert plain.memory is None
    before = pa.total_allocated_bytes()
    again = load_scored_pool(root, SOURCES, memory_budget=1)
    assert pa.total_allocated_bytes() - before < again.segments.nbytes / 10  # file pages, not Arrow heap


def test_stored_files_name_strong_identities_only(recordings, tmp_path):
    _store(recordings, tmp_path / "strong")
    _store(recordings, tmp_path / "weak", LogicalOnly)
    strong = pq.read_schema(segments_url(tmp_path / "strong", SOURCES[0])).metadata
    weak = pq.read_schema(segments_url(tmp_path / "weak", SOURCES[0])).metadata
    assert strong[IDENTITY_KEY].startswith(b"content_sha256:") and IDENTITY_KEY not in weak


def test_sources_without_a_checkpoint_count_against_the_budget(recordings, tmp_path):
    root = tmp_path / "storage"
    _store(recordings, root, LogicalOnly)
    plain = load_scored_pool(root, SOURCES)
    roomy = load_scored_pool(root, SOURCES, memory_budget=10 * plain.segments.nbytes)
    assert roomy.segments.equals(plain.segments) and roomy.memory["mapped_sources"] == 0
    with pytest.raises(MemoryBudgetError, match=r"at source 'site_0/rec_02\.parquet': its segment file names no strong "
                                                r"identity.*Provide a fingerprint"):
        load_scored_pool(root, SOURCES, memory_budget=int(plain.segments.nbytes * 0.3))


def test_a_pruned_or_torn_checkpoint_falls_back_to_the_segment_file(recordings, tmp_path):
    root = tmp_path / "storage"
    _store(recordings, root)
    plain = load_scored_pool(root, SOURCES)
    cache = root / "cache" / "scoring"
    # the checkpoints the budgeted load maps are the whole scored tables, under the run's namespace;
    # the segment rows and each feature's values are kept beside them, under their own
    whole_tables = cache / run_fingerprint(ParquetTickAdapter(recordings, SCHEMA), SEGMENTER, STRATEGY)[:16]
    entries = sorted(whole_tables.glob("*.arrow"))
    assert len(entries) == len(SOURCES) and str(entries[0]).startswith(score_cache_url(root))
    assert len(list(cache.rglob("*.arrow"))) == len(SOURCES) * (2 + len(STRATEGY.feature_keys()))
    entries[0].unlink()
    entries[1].write_bytes(b"torn")
    pool = load_scored_pool(root, SOURCES, memory_budget=1 << 30)
    assert pool.memory["mapped_sources"] == 2 and pool.memory["resident_bytes"] > 0
    assert pool.segments.equals(plain.segments)


def test_a_budget_needs_a_local_root():
    with pytest.raises(BudgetError, match="memory_budget needs a local storage root"):
        load_scored_pool("memory://kuration-pool", ["a"], memory_budget=1 << 20)
