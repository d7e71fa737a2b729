"""Random budget cases for Hypothesis: pools of scored segments and the requests, strategy
and pools (seeded, a ``group_of`` mapping, resolved split assignments) a plan is made over.

Segment tables are built directly with pyarrow: 1-12 sources of 1-3 tracks, windowed or
arbitrary segments, priorities from a small tie-heavy palette plus -inf and NaN, tags from
``a``/``b``/``rare``, for an hours or a count request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kuration.budget import BudgetOptions, plan_budget
from kuration.scoring.strategy import Strategy

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SPLITS = ("train", "val", "test")
TAGS = ["a", "b", "rare"]
TIES = [0.0, 1.0, 2.0, 3.0]
TOL = 1e-9

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@dataclass(frozen=True)
class Case:
    segments: pa.Table
    options: BudgetOptions
    strategy: Strategy
    group_of: dict[str, str] | None = None
    assignments: pa.Table | None = None

    def plan(self, segments: pa.Table | None = None, options: BudgetOptions | None = None):
        return plan_budget(self.segments if segments is None else segments, options or self.options,
                           strategy=self.strategy, split_assignments=self.assignments, group_of=self.group_of)


# -- generation ----------------------------------------------------------------------------


def segment_table(rows: list[dict]) -> pa.Table:
    """The stored segment-table layout, from one dict per segment."""
    def col(name):
        return [r[name] for r in rows]
    start, stop, hz = np.array(col("start"), np.int64), np.array(col("stop"), np.int64), np.array(col("sample_hz"))
    return pa.table({
        "source_id": pa.array(col("source_id"), pa.string()),
        "entity_id": pa.array(col("entity_id"), pa.string()),
        "segment_index": pa.array(col("segment_index"), pa.int64()),
        "start": pa.array(start, pa.int64()),
        "stop": pa.array(stop, pa.int64()),
        "start_tick": pa.array(start * 1000, pa.int64()),
        "stop_tick": pa.array(stop * 1000, pa.int64()),
        "seconds": pa.array((stop - start) / hz if len(rows) else np.zeros(0), pa.float64()),
        "present_fraction": pa.array(col("present_fraction"), pa.float64()),
        "track_steps": pa.array(col("track_steps"), pa.int64()),
        "sample_hz": pa.array(hz, pa.float64()),
        "f.mean": pa.array(col("f.mean"), pa.float64()),
        "g.max": pa.array(col("g.max"), pa.float64()),
        "tags": pa.array(col("tags"), pa.list_(pa.string())),
        "priority": pa.array(col("priority"), pa.float64()),
        "passed": pa.array(col("passed"), pa.bool_()),
    })


def _windows(t: int, w: int, stride: int) -> list[tuple[int, int]]:
    if t < w:
        return [(0, t)]
    return [(k * stride, k * stride + w) for k in range((t - w) // stride + 1)]


@st.composite
def cases(draw, unit: str | None = None, palette=None, pools: str | None = None, coverage: bool | None = None,
          cap: bool | None = None, method: str | None = None, snap: bool | None = None, fine: bool = False):
    unit = unit or draw(st.sampled_from(["seconds", "segments"]))
    method = method or draw(st.sampled_from(["inclusion", "filter"]))
    values = palette if palette is not None else draw(
        st.lists(st.one_of(st.sampled_from(TIES), finite), min_size=1, max_size=6))
    p_neg_inf = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    p_nan = draw(st.sampled_from([0.0, 0.0, 0.02, 0.2]))
    p_tag = draw(st.sampled_from([0.0, 0.2, 0.6]))
    p_rare = draw(st.sampled_from([0.0, 0.03, 0.3]))
    p_absent = draw(st.sampled_from([0.0, 0.0, 0.1, 0.6]))  # windows the entity is absent from throughout
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    # Strategy: the plan reads only tags and selection; a filter's predicate makes its -inf.
    coverage = draw(st.booleans()) if coverage is None else coverage
    frac = (draw(st.one_of(st.sampled_from([0.05, 0.1, 0.25, 0.5, 1.0]), st.floats(1e-6, 1.0)))
            if coverage else draw(st.sampled_from([0.0, 0.2])))
    overshoot = None if cap is False else draw(
        (st.none() if cap is None else st.nothing()) | st.sampled_from([1.0, 1.5, 2.0]) | st.floats(1.0, 5.0))
    spec = {"method": method, "priority": {"f.mean": 1.0}, "tags": TAGS,
            "selection": {"tag_coverage": coverage, "min_tag_frac": frac, "max_group_overshoot": overshoot}}
    if method == "filter":
        spec["predicates"] = [{"feature": "f.mean", "op": draw(st.sampled_from([">", ">=", "<"])),
                               "value": draw(st.sampled_from(values) | finite)}]
    strategy = Strategy.from_dict(spec)

    rows: list[dict] = []
    sources = [f"src{i:02d}" for i in range(draw(st.integers(1, 12)))]
    tracks = []  # (steps, hz)
    # One rate: many equal spans, so summed seconds drift (ten 0.1 s spans sum to 0.9999999999999999).
    one_rate = draw(st.sampled_from([10.0, 30.0] if fine else [None, 10.0, 30.0]))
    for source in sources:
        hz = one_rate or draw(st.sampled_from([10.0, 15.0, 30.0]))
        for e in range(draw(st.integers(1, 3))):
            t = draw(st.integers(1, 300))
            tracks.append((t, hz))
            if draw(st.booleans()):
                spans = _windows(t, draw(st.integers(1, 60)), draw(st.integers(1, 60)))
                index = np.arange(len(spans))
            else:
                raw = draw(st.lists(st.tuples(st.integers(0, t - 1), st.integers(1, t)), max_size=8))
                spans = [(a, min(a + n, t)) for a, n in raw]
                index = rng.permutation(len(spans))  # index order need not follow start order
            n = len(spans)
            fx = np.array(values)[rng.integers(0, len(values), n)]
            fx[rng.random(n) < p_nan] = np.nan
            if method == "filter":
                priority = strategy.score({"f.mean": fx, "g.max": np.zeros(n)}).priority
            else:
                priority = fx.copy()
                priority[rng.random(n) < p_neg_inf] = -np.inf
            for (a, b), i, p, x in zip(spans, index, priority, fx, strict=True):
                tags = [tag for tag, q in (("b", p_tag), ("a", p_tag), ("rare", p_rare)) if rng.random() < q]
                rows.append({
                    "source_id": source, "entity_id": f"ent{e}", "segment_index": int(i), "start": a, "stop": b,
                    "present_fraction": 0.0 if rng.random() < p_absent else float(1.0 - rng.random()),
                    "track_steps": t, "sample_hz": hz,
                    "f.mean": float(x), "g.max": float(rng.normal()), "tags": tags, "priority": float(p),
                    "passed": bool(np.isfinite(p)),
                })
    segments = segment_table(rows)
    n_rows = len(rows)

    # The request: each split unset, zero or some; at least one split asks for something.
    seed = draw(st.integers(0, 2**31 - 1))
    clip = draw(st.sampled_from([None, "max", "mean", "min"]))
    asks = {s: draw(st.sampled_from(["unset", "zero", "some", "some"])) for s in SPLITS}
    if not any(a == "some" for a in asks.values()):
        asks["train"] = "some"
    if unit == "segments":
        some = st.integers(1, 5) | st.integers(1, max(1, n_rows))
        amount = {s: None if a == "unset" else 0 if a == "zero" else draw(some) for s, a in asks.items()}
        options = BudgetOptions(train_count=amount["train"], val_count=amount["val"], test_count=amount["test"],
                                clip_aggregate=clip, seed=seed)
    else:
        fine_steps = st.sampled_from([1, 2, 3, 5])
        span_steps = draw(fine_steps if fine else st.none() | fine_steps | st.integers(1, 300))
        total = sum(t / hz for t, hz in tracks)
        snap = draw(st.booleans()) if snap is None else snap
        amount = {}
        for s, a in asks.items():
            if a != "some":
                amount[s] = None if a == "unset" else 0.0
            elif snap:  # a whole number of one track's (or one span's) seconds: exact-boundary requests
                t, hz = tracks[draw(st.integers(0, len(tracks) - 1))]
                amount[s] = draw(st.integers(6 if fine else 1, 40)) * (min(span_steps or t, t) / hz) / 3600.0
            else:
                amount[s] = draw(st.floats(0.01, 1.2)) * total / 3 / 3600.0
        options = BudgetOptions(train_hours=amount["train"], val_hours=amount["val"], test_hours=amount["test"],
                                span_steps=span_steps, clip_aggregate=clip, seed=seed)

    # The pools.
    pools = pools or draw(st.sampled_from(["seeded", "group_of", "assignments"]))
    group_of = assignments = None
    n_groups = draw(st.integers(1, max(1, len(sources) - 1)))
    if pools == "group_of":
        group_of = {s: f"grp{rng.integers(n_groups)}" for s in sources}
    elif pools == "assignments":
        stage_of_group = {f"grp{g}": draw(st.sampled_from(SPLITS)) for g in range(n_groups)}
        recs = []
        for s in sources + ["ghost"]:  # "ghost" is in the split but has no segments
            g = f"grp{rng.integers(n_groups)}"
            if rng.random() < 0.85:
                recs += [(stage_of_group[g], s, g)] * int(rng.integers(1, 4))
            if rng.random() < 0.3:  # inference-only rows never place a source
                recs.append(("predict", s, f"grp{rng.integers(n_groups)}"))
        assignments = pa.table({
            "stage": pa.array([r[0] for r in recs], pa.string()),
            "uid": pa.array([f"u{i}" for i in range(len(recs))], pa.string()),
            "source": pa.array([r[1] for r in recs], pa.string()),
            "index": pa.array(list(range(len(recs))), pa.int64()),
            "group": pa.array([r[2] for r in recs], pa.string()),
            "position": pa.array(list(range(len(recs))), pa.int64()),
        })
    return Case(segments, options, strategy, group_of, assignments)
