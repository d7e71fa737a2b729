"""``score_sources(memory_budget=...)``: scored results held as memory-mapped checkpoints,
the same pool as an unbudgeted run, and a hard failure (with how to fix it) when results
that may not be checkpointed pass the budget."""

import pyarrow as pa
import pytest

from kuration.scoring.cache import FsspecScoreCache, MemoryScoreCache
from kuration.errors import InputError
from kuration.scoring import MemoryBudgetError, score_sources
from kuration.sources import ParquetTickAdapter
from kuration.sources.protocol import SourceIdentity
from tests.pipeline.recordings import SCHEMA, SEGMENTER, STRATEGY, write_recording


class LogicalOnlyAdapter(ParquetTickAdapter):
    """Identifies sources by path only, as an adapter over a store without ETags would."""

    def identity(self, source_id):
        return SourceIdentity("logical", f"{source_id}|size-and-mtime")


def _score(adapter, **kw):
    return score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, **kw)


def test_a_budgeted_pool_is_the_same_pool_held_in_checkpoints(recordings, tmp_path):
    plain = _score(ParquetTickAdapter(recordings, SCHEMA))
    budgeted = _score(ParquetTickAdapter(recordings, SCHEMA), cache=FsspecScoreCache(tmp_path / "ckpt"),
                      memory_budget=1)
    assert budgeted.segments.equals(plain.segments)
    # nothing of the pool in process memory: every source is a mapped checkpoint
    assert budgeted.memory == {"budget_bytes": 1, "resident_bytes": 0, "mapped_bytes": budgeted.segments.nbytes,
                               "checkpointed_sources": 6, "sources": 6}
    assert plain.memory is None
    # a second run reads the checkpoints (mapped) instead of scoring again: same pool
    again = _score(ParquetTickAdapter(recordings, SCHEMA), cache=FsspecScoreCache(tmp_path / "ckpt"), memory_budget=1)
    assert again.count("cached") == 6 and again.segments.equals(plain.segments)


def test_checkpoints_are_memory_mapped_not_copied_into_the_heap(tmp_path):
    for i in range(4):
        write_recording(tmp_path / "long" / f"rec_{i}.parquet", seed=i, ticks=6000)
    adapter = ParquetTickAdapter(tmp_path / "long", SCHEMA)
    cache = FsspecScoreCache(tmp_path / "ckpt")
    _score(adapter, cache=cache)
    before = pa.total_allocated_bytes()
    result = _score(adapter, cache=cache, memory_budget=1)
    held = pa.total_allocated_bytes() - before
    # Arrow's allocator holds none of the pool's buffers (they are file pages); it may hold
    # small transient scraps, far below the pool itself
    assert result.count("cached") == 4 and result.segments.nbytes > 100_000
    assert held < result.segments.nbytes / 10


def test_weak_identities_stay_in_memory_within_the_budget(recordings, tmp_path):
    plain = _score(ParquetTickAdapter(recordings, SCHEMA))
    result = _score(LogicalOnlyAdapter(recordings, SCHEMA), cache=FsspecScoreCache(tmp_path / "ckpt"),
                    memory_budget=10 * plain.segments.nbytes)
    assert result.segments.equals(plain.segments)
    assert result.memory["resident_bytes"] == result.segments.nbytes > 0  # all of it, as chained pieces
    assert result.memory["checkpointed_sources"] == 0
    assert not list((tmp_path / "ckpt").rglob("*.arrow"))  # never a checkpoint under a logical identity


def test_a_budget_that_would_need_checkpoints_of_weak_identities_fails_with_how_to_fix_it(recordings, tmp_path):
    plain = _score(ParquetTickAdapter(recordings, SCHEMA))
    with pytest.raises(MemoryBudgetError) as caught:
        _score(LogicalOnlyAdapter(recordings, SCHEMA), cache=FsspecScoreCache(tmp_path / "ckpt"),
               memory_budget=plain.for_source("site_0/rec_00.parquet").nbytes + 1)
    message = str(caught.value)
    assert "memory_budget=" in message and "site_0/rec_03.parquet" in message  # the second source (sorted) passes it
    assert "'logical'" in message
    assert "Provide a fingerprint" in message and "LogicalOnlyAdapter.identity()" in message


def test_a_budget_needs_a_local_checkpoint_folder(recordings, tmp_path):
    adapter = ParquetTickAdapter(recordings, SCHEMA)
    with pytest.raises(InputError, match="pass cache=FsspecScoreCache"):
        _score(adapter, memory_budget=1 << 30)
    with pytest.raises(InputError, match="cannot be mapped"):
        _score(adapter, memory_budget=1 << 30, cache=MemoryScoreCache())
    with pytest.raises(InputError, match="cannot be mapped"):
        _score(adapter, memory_budget=1 << 30, cache=FsspecScoreCache("memory://ckpt"))
    for bad in (0, -1, 1.5, True, "1GiB"):
        with pytest.raises(InputError, match="memory_budget must be a positive number of bytes"):
            _score(adapter, memory_budget=bad, cache=FsspecScoreCache(tmp_path / "ckpt"))


def test_a_torn_checkpoint_is_rescored_not_trusted(recordings, tmp_path):
    cache = FsspecScoreCache(tmp_path / "ckpt")
    plain = _score(ParquetTickAdapter(recordings, SCHEMA), cache=cache)
    for entry in (tmp_path / "ckpt").rglob("*.arrow"):
        entry.write_bytes(entry.read_bytes()[:100])
    result = _score(ParquetTickAdapter(recordings, SCHEMA), cache=cache, memory_budget=1)
    assert result.count("scored") == 6
    assert result.segments.equals(plain.segments)


def test_pruning_keeps_only_the_named_run(recordings, tmp_path):
    cache = FsspecScoreCache(tmp_path / "ckpt")
    first = _score(ParquetTickAdapter(recordings, SCHEMA), cache=cache)
    other = score_sources(ParquetTickAdapter(recordings, SCHEMA), segmenter=SEGMENTER.__class__(8, 4, unit="seconds"),
                          strategy=STRATEGY, cache=cache)
    # each run's whole tables, and its segments' and features' (another segmenter: all new)
    firsts, others = ({f[:16] for f in run.cache_fingerprints} for run in (first, other))
    assert len(firsts) == len(others) == 2 + len(STRATEGY.feature_keys()) and not firsts & others
    assert cache.namespaces() == sorted(firsts | others)
    assert cache.prune(*other.cache_fingerprints) == sorted(firsts)
    assert cache.namespaces() == sorted(others)
    assert _score(ParquetTickAdapter(recordings, SCHEMA), cache=cache).count("scored") == 6  # pruned: gone
