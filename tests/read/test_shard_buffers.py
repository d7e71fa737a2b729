"""iter_shards reuses a shard's buffer only once nothing refers to it: whatever a caller
keeps (the arrays, a slice, a view, a memoryview) keeps its values, however many shards
come after it."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.read import iter_shards, loaders
from kuration.read.loaders import ShardBuffers
from tests.output.committed_datasets import build, shard

TRAIN = 24  # train shards of 8 rows, then one test shard of 3: one size for most


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    return build(tmp_path_factory.mktemp("many") / "out", "npz", rows=(8,) * TRAIN)


def expected(seed: int) -> dict[str, np.ndarray]:
    written = shard(8 if seed < TRAIN else 3, seed=seed)
    return {**written.arrays, "_present": written.present}


@pytest.fixture
def pools(monkeypatch):
    """Every ShardBuffers an iteration makes, to read its reuse count."""
    made: list[ShardBuffers] = []

    def recording(keep: int) -> ShardBuffers:
        made.append(ShardBuffers(keep))
        return made[-1]

    monkeypatch.setattr(loaders, "ShardBuffers", recording)
    return made


def test_a_caller_that_lets_go_of_each_shard_gets_buffers_reused_and_right_values(many, pools):
    for seed, arrays in enumerate(iter_shards(many)):
        for name, want in expected(seed).items():
            assert arrays[name].tobytes() == want.tobytes(), (seed, name)
    (pool,) = pools
    assert pool.reused >= TRAIN - 8  # all but the first few reads went into a used buffer


def test_a_caller_that_keeps_every_shard_keeps_every_value(many, pools):
    kept = list(iter_shards(many))
    assert pools[0].reused == 0  # every buffer is still viewed by the arrays kept
    for seed, arrays in enumerate(kept):
        for name, want in expected(seed).items():
            assert arrays[name].tobytes() == want.tobytes(), (seed, name)


HOLDS = ("nothing", "arrays", "slice", "reshaped view", "memoryview", "one array")


@settings(max_examples=25, deadline=timedelta(seconds=30), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(HOLDS), min_size=TRAIN + 1, max_size=TRAIN + 1))
def test_whatever_a_caller_holds_is_never_overwritten(many, holds):
    held = []
    for seed, (arrays, hold) in enumerate(zip(iter_shards(many), holds, strict=True)):
        want = expected(seed)
        if hold == "arrays":
            held.append((arrays, want))
        elif hold == "slice":
            held.append(({"pos": arrays["pos"][1:3]}, {"pos": want["pos"][1:3]}))
        elif hold == "reshaped view":
            held.append(({"frame": arrays["frame"].reshape(-1)[::3]}, {"frame": want["frame"].reshape(-1)[::3]}))
        elif hold == "memoryview":
            held.append(({"frame": memoryview(arrays["frame"])}, {"frame": want["frame"]}))
        elif hold == "one array":
            held.append(({"_present": arrays["_present"]}, {"_present": want["_present"]}))
        del arrays
    for got, want in held:
        for name, array in want.items():
            assert bytes(got[name]) == array.tobytes(), name


def test_only_a_buffer_of_the_size_asked_for_and_unused_is_handed_out():
    pool = ShardBuffers(keep=2)
    pool.give_back(pool.take(16))
    first = id(pool._kept[0])
    other = pool.take(8)
    assert id(other) != first and len(other) == 8  # another size: a new one
    view = memoryview(pool._kept[0])
    taken = pool.take(16)
    assert id(taken) != first  # still viewed
    del taken
    view.release()
    del view
    assert id(pool.take(16)) == first and pool.reused == 1
    held = pool.take(32)
    pool.give_back(held)
    assert pool.take(32) is not held  # a plain reference is a use too
    for _ in range(3):
        pool.give_back(bytearray(4))
    assert len(pool._kept) == 2  # at most keep, the newest
    none = ShardBuffers(keep=0)
    none.give_back(bytearray(4))
    assert none._kept == []
    few = ShardBuffers(keep=5)
    first = bytearray(1)
    few.give_back(first)
    assert few._kept == [first]  # fewer than keep: nothing dropped
