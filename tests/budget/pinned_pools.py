"""The seeded pools and plan cases whose digests ``tests/budget/test_plan_digest.py`` pins
(and ``tests/test_cpu_dispatch.py`` reruns under narrowed numpy dispatch), and the digest
itself: a SHA-256 over a plan's items by value and its accounting.

The pools cover what the fast paths must get right: rows out of canonical order and in
many chunks, priorities with many exact ties (and -0.0 next to 0.0), NaN, -inf and
unscored tails, windows that straddle span edges, two sample rates, rare tags, the group
cap, resolved splits and the count path."""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pyarrow as pa

import kuration.budget.spans as spans_module
from kuration.budget import BudgetOptions, ShardChunking, plan_budget
from kuration.scoring.strategy import Strategy
from tests.budget.segment_tables import add_segment, columns_table, segment_columns

TAGS = ("gust", "low_battery", "near_miss", "rare_hazard", "bird_strike")


def seeded_pool(seed: int, n_sources: int, *, stride: int = 50, window: int = 100, two_rates: bool = False,
                filtered: bool = False, duplicate_starts: bool = False) -> tuple[pa.Table, dict[str, str]]:
    rng = np.random.default_rng(seed)
    cols = segment_columns("speed.max")
    for s in range(n_sources):
        hz = 20.0 if two_rates and s % 3 == 0 else 10.0
        for e in range(int(rng.integers(1, 4))):
            steps = int(rng.integers(3, 40)) * 50 + int(rng.integers(0, 60))
            n_seg = (steps - window) // stride + 1
            if n_seg < 1:
                continue
            effect = rng.normal() + (1.5 if s % 9 < 2 else 0.0)  # groups g0 and g1 run into the cap
            starts = [i * stride for i in range(n_seg)]
            stops = [st + window for st in starts]
            if duplicate_starts and rng.random() < 0.3:
                # A second, shorter window at some starts: equal (track, start), the segment index decides.
                extra = sorted(rng.choice(n_seg, min(n_seg, 3), replace=False).tolist())
                starts += [starts[k] for k in extra]
                stops += [starts[k] + window // 2 for k in extra]
            for i, (start, stop) in enumerate(zip(starts, stops, strict=True)):
                # Coarse priorities: many exact ties, so the tie-break decides real order.
                p = float(np.round(effect + rng.normal(), 1))
                if p == 0.0 and rng.random() < 0.5:
                    p = -0.0
                u = rng.random()
                if u < 0.01:
                    p = float("nan")
                elif filtered and u < 0.2:
                    p = float("-inf")
                tags = [t for t, rate in zip(TAGS[:4], (0.05, 0.03, 0.01, 0.001), strict=True) if rng.random() < rate]
                value = p if np.isfinite(p) else float(rng.normal())
                add_segment(cols, source=f"site_{s % 7}/rec_{s:04d}", entity=f"drone_{e}", index=i, start=start,
                            stop=stop, steps=steps, hz=hz, feature="speed.max", value=value, tags=tags, priority=p)
    table = columns_table(cols)
    # Out of canonical order (sources interleaved, a few rows swapped within a track) and chunked.
    order = np.argsort(np.array([hash_name(s) for s in cols["source_id"]]), kind="stable")
    swap = rng.integers(0, len(order) - 1, len(order) // 50)
    order[swap], order[swap + 1] = order[swap + 1], order[swap].copy()
    table = table.take(pa.array(order))
    cuts = [0, *sorted(rng.integers(0, table.num_rows, 6).tolist()), table.num_rows]
    table = pa.concat_tables([table.slice(a, b - a) for a, b in itertools.pairwise(cuts)])
    group_of = {name: f"g{int(name[-4:]) % 9}" for name in set(cols["source_id"])}
    return table, group_of


def hash_name(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "little")


def strategy(method: str = "inclusion", *, cap: float | None = 1.5) -> Strategy:
    data = {"method": method, "priority": {"speed.max": 1.0},
            "tags": ["near_miss", "low_battery", "rare_hazard", "bird_strike"],
            "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": cap}}
    if method == "filter":
        data["predicates"] = [{"feature": "speed.max", "op": ">", "value": -0.5}]
    return Strategy.from_dict(data)


def plan_digest(plan) -> str:
    """SHA-256 over every item column by value (chunks combined, so only the content counts)
    and the accounting."""
    h = hashlib.sha256()
    for field, column in zip(plan.items.schema, plan.items.columns, strict=True):
        h.update(f"{field.name}:{field.type}\n".encode())
        array = column.combine_chunks() if column.num_chunks else pa.array([], field.type)
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([pa.field("v", array.type)])) as writer:
            writer.write_batch(pa.record_batch([array], names=["v"]))
        h.update(sink.getvalue().to_pybytes())
    h.update(json.dumps(plan.accounting, sort_keys=True, default=repr).encode())
    return h.hexdigest()


def _hours(pool_seconds: float, fraction: float, **kw) -> BudgetOptions:
    hours = pool_seconds * fraction / 3600
    return BudgetOptions(train_hours=hours * 0.7, val_hours=hours * 0.15, test_hours=hours * 0.15, **kw)


def _pool_seconds(table: pa.Table) -> float:
    steps = np.asarray(table.column("track_steps").to_numpy(), float) / table.column("sample_hz").to_numpy()
    # Per segment, so not the pool's exact hours; only a budget of about the right size.
    return float(steps.sum()) / 40


CASES = {
    "hours_span_steps_group_cap": (
        lambda: seeded_pool(1, 400),
        lambda t: _hours(_pool_seconds(t), 0.3, span_steps=100, seed=3),
        lambda: strategy(), "group_of", None,
    ),
    "hours_straddling_windows_two_rates_filter": (
        lambda: seeded_pool(2, 300, stride=40, window=90, two_rates=True, filtered=True),
        lambda t: _hours(_pool_seconds(t), 0.5, span_seconds=7.0, seed=11,
                         chunking=ShardChunking(shard_length=30, short_policy="drop")),
        lambda: strategy("filter"), "group_of", None,
    ),
    "whole_tracks_no_cap": (
        lambda: seeded_pool(3, 300, duplicate_starts=True),
        lambda t: _hours(_pool_seconds(t), 0.2, seed=5, clip_aggregate="mean"),
        lambda: strategy(cap=None), None, None,
    ),
    "count": (
        lambda: seeded_pool(4, 250, stride=30, window=60),
        lambda t: BudgetOptions(train_count=3000, val_count=700, test_count=0, seed=2),
        lambda: strategy(), "group_of", None,
    ),
    "resolved_splits": (
        lambda: seeded_pool(5, 300),
        lambda t: _hours(_pool_seconds(t), 0.4, span_steps=120, seed=1),
        lambda: strategy(cap=2.0), "assignments", None,
    ),
    "blocks": (
        lambda: seeded_pool(6, 500, stride=40, window=90, duplicate_starts=True),
        lambda t: _hours(_pool_seconds(t), 0.3, span_steps=100, seed=9, clip_aggregate="mean"),
        lambda: strategy(), "group_of", 2048,
    ),
}

def _assignments(group_of: dict[str, str]) -> pa.Table:
    sources = sorted(group_of)
    groups = sorted(set(group_of.values()))
    stage = {g: ("train", "train", "val", "test", "train", "predict", "train", "val", "test")[i % 9]
             for i, g in enumerate(groups)}
    rows = [(stage[group_of[s]], s, group_of[s]) for s in sources[:-5]]  # the last 5 are in no split
    return pa.table({"stage": [r[0] for r in rows], "uid": [f"{r[1]}#0" for r in rows], "source": [r[1] for r in rows],
                     "index": [0] * len(rows), "group": [r[2] for r in rows], "position": list(range(len(rows)))})


def run_case(name: str, monkeypatch=None):
    make_pool, make_options, make_strategy, grouping, block_rows = CASES[name]
    table, group_of = make_pool()
    if block_rows is not None:
        monkeypatch.setattr(spans_module, "BLOCK_ROWS", block_rows)
    kwargs = {}
    if grouping == "group_of":
        kwargs["group_of"] = group_of
    elif grouping == "assignments":
        kwargs["split_assignments"] = _assignments(group_of)
    return plan_budget(table, make_options(table), strategy=make_strategy(), **kwargs)
