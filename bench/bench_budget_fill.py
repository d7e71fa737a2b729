"""Benchmark: the hours-budget fill (``kuration.budget.plan_budget``) at 100k, 1M and 4M
candidate spans.

Each size runs in its own fresh subprocess (started through a small launcher, so its peak
RSS is its own and not the bench parent's). The subprocess builds a synthetic scored
segment table with numpy/pyarrow directly (not through the scoring pipeline), then times,
interleaved and best of ``--repeats`` (``--repeats-4m`` for the largest size):

* **plan:** ``plan_budget(segments, options, strategy=..., group_of=...)``, the whole call;
  inside it, every stage is timed through thin wrappers around the names ``plan.py``
  imports (``span_items``, ``seeded_pools``, ``sorted_codes``, ``_tiebreak``, ``_tag_items``,
  ``fill_split``, ``budget_accounting``, ``_assert_exclusive``); ``inline`` is the rest
  (code written directly in ``plan_budget``). ``after_items`` = total - ``span_items``
  (everything the plan does once the spans exist), ``fill`` = the three ``fill_split``
  calls (order, tag reserve, group cap, cut);
* **raw baseline**, in the same process, interleaved with the plan runs: ``np.lexsort`` of
  (uint64 key, -float64 priority) over as many random values as the plan has spans, i.e.
  ordering the spans best first with a deterministic tie break, the least a fill has to
  do; and ``np.argsort`` of the float64 priorities alone. Ratios are plan / lexsort;
* **machine reference**: a streaming ``a * 2 + a`` and a random gather ``a[perm]`` of the
  same length, and the plan's user / kernel CPU time (``getrusage``), so the 1M -> 4M
  exponent can be read against what this machine does to plain linear work;
* **memory**: ``ru_maxrss`` after import, after building the table and at the end, and
  ``/proc`` VmHWM during each plan call (reset before it through ``/proc/self/clear_refs``).

Data (seeded): sources with 1-4 entities ("drones") each, 10 Hz tracks of 2,000-6,000
steps (a few with a tail that is not a multiple of the stride), windows of 100 steps every
50 (so ``start``/``stop`` overlap), one feature column ``speed.max``, priorities =
group effect + track effect + segment noise (so the best groups run into the group cap),
0.05% NaN priorities (non-finite spans), and rare tags ``gust`` 1%, ``low_battery`` 0.5%,
``near_miss`` 0.2%, ``rare_hazard`` 0.001% of segments. Sources belong to 50 groups
(``group_of``); pools are the seeded partition. Source names are ``site_<i % 97>/rec_<i>``,
so the rows do not arrive in canonical order and the plan's canonical sort is real work. ``span_steps`` = 100 (10 s) at
every size; the pool grows (sources are added until the span count is reached), so the segment table
grows with the spans (about 2 segments per span). Budget: a third of the pool, split
70/15/15 over train/val/test; strategy ``inclusion`` with tags ``near_miss``,
``low_battery``, ``rare_hazard``, ``bird_strike`` (absent) and
``selection = {tag_coverage: true, min_tag_frac: 0.1, max_group_overshoot: 1.5}``.

Targets (from the issue): ``plan_budget`` <= 2 s at 1M candidate spans; scaling exponent
log(t_4M / t_1M) / log(4) <= 1.1.

Run from the repo root:  .venv/bin/python bench/bench_budget_fill.py   (~45 s, ~4 GiB peak)
Options: ``--sizes 100k,1M,4M``, ``--repeats``, ``--repeats-4m``, ``--seed``, ``--profile``
(adds a cProfile of one extra 1M call, top 25 functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import platform
import pstats
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import reset_peak_rss, timed, vmhwm_kb  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402
from _report import figure, ratio, scaling_exponent  # noqa: E402

import kuration.budget.plan as plan_module  # noqa: E402
from kuration.budget import BudgetOptions, plan_budget  # noqa: E402
from kuration.scoring.strategy import Strategy  # noqa: E402

SAMPLE_HZ = 10.0
WINDOW, STRIDE = 100, 50
SPAN_STEPS = 100
N_GROUPS = 50
BUDGET_FRACTION = 1 / 3
SPLIT_SHARES = {"train": 0.70, "val": 0.15, "test": 0.15}
TAG_RATES = {"gust": 0.01, "low_battery": 0.005, "near_miss": 0.002, "rare_hazard": 0.00001}
NAN_RATE = 0.0005
SIZES = {"100k": 100_000, "1M": 1_000_000, "4M": 4_000_000}
TARGET_SECONDS_1M = 2.0
TARGET_EXPONENT = 1.1
STRATEGY_DICT = {
    "name": "bench-budget-fill",
    "method": "inclusion",
    "priority": {"speed.max": 1.0},
    "tags": ["near_miss", "low_battery", "rare_hazard", "bird_strike"],
    "selection": {"tag_coverage": True, "min_tag_frac": 0.1, "max_group_overshoot": 1.5},
}
STAGES = ("span_items", "seeded_pools", "sorted_codes", "_tiebreak", "_tag_items", "fill_split", "budget_accounting",
          "_assert_exclusive")


# --------------------------------------------------------------------------- data


def _strings(codes: np.ndarray, names: list[str]) -> pa.Array:
    """A dense string column from integer codes into ``names``."""
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                          pa.array(names, pa.string())).dictionary_decode()


def build_segments(n_spans: int, seed: int) -> tuple[pa.Table, dict[str, str], dict]:
    """A scored segment table whose tracks cut into ~``n_spans`` spans of ``SPAN_STEPS``."""
    rng = np.random.default_rng(seed)
    # Tracks: 2,000-6,000 steps, 1 in 10 with a tail that is not a multiple of the stride.
    est_tracks = int(n_spans / 40 * 1.2) + 16
    steps = rng.integers(20, 61, est_tracks) * 100 + np.where(rng.random(est_tracks) < 0.1,
                                                              rng.integers(1, 50, est_tracks), 0)
    spans_per_track = -(-steps // SPAN_STEPS)
    n_tracks = int(np.searchsorted(np.cumsum(spans_per_track), n_spans)) + 1
    steps = steps[:n_tracks]
    # Entities per source 1-4; the last source may get fewer.
    per_source = rng.integers(1, 5, n_tracks)
    per_source = per_source[: int(np.searchsorted(np.cumsum(per_source), n_tracks)) + 1]
    per_source[-1] -= int(per_source.sum()) - n_tracks
    n_sources = len(per_source)
    track_source = np.repeat(np.arange(n_sources), per_source)
    track_entity = np.arange(n_tracks) - np.repeat(np.cumsum(per_source) - per_source, per_source)
    source_names = [f"site_{i % 97:02d}/rec_{i:07d}" for i in range(n_sources)]
    source_group = rng.integers(0, N_GROUPS, n_sources)
    group_of = {name: f"group_{g:02d}" for name, g in zip(source_names, source_group, strict=True)}

    # Segments: windows of WINDOW every STRIDE.
    segs_per_track = (steps - WINDOW) // STRIDE + 1
    n = int(segs_per_track.sum())
    seg_track = np.repeat(np.arange(n_tracks), segs_per_track)
    seg_index = np.arange(n, dtype=np.int64) - np.repeat(np.cumsum(segs_per_track) - segs_per_track, segs_per_track)
    start = seg_index * STRIDE
    stop = start + WINDOW

    group_effect = rng.normal(0.0, 0.6, N_GROUPS)
    track_effect = rng.normal(0.0, 0.5, n_tracks)
    speed = group_effect[source_group[track_source]][seg_track] + track_effect[seg_track] + rng.normal(0.0, 1.0, n)
    priority = speed.copy()
    priority[rng.random(n) < NAN_RATE] = np.nan

    # Tags: each independently per segment, in a fixed name order within a segment.
    names = list(TAG_RATES)
    has = np.stack([rng.random(n) < TAG_RATES[t] for t in names], axis=1)
    counts = has.sum(axis=1)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    tag_codes = np.nonzero(has)[1]  # row-major: per segment, in name order
    tags = pa.ListArray.from_arrays(pa.array(offsets), _strings(tag_codes, names))

    table = pa.table({
        "source_id": _strings(track_source[seg_track], source_names),
        "entity_id": _strings(track_entity[seg_track], [f"drone_{e}" for e in range(4)]),
        "segment_index": pa.array(seg_index),
        "start": pa.array(start),
        "stop": pa.array(stop),
        "start_tick": pa.array(start),
        "stop_tick": pa.array(stop),
        "seconds": pa.array(np.full(n, WINDOW / SAMPLE_HZ)),
        "present_fraction": pa.array(np.ones(n)),
        "track_steps": pa.array(steps[seg_track].astype(np.int64)),
        "sample_hz": pa.array(np.full(n, SAMPLE_HZ)),
        "speed.max": pa.array(speed),
        "tags": tags,
        "priority": pa.array(priority),
        "passed": pa.array(np.ones(n, bool)),
    })
    info = {
        "sources": n_sources, "tracks": n_tracks, "segments": n, "groups": N_GROUPS,
        "spans": int(spans_per_track[:n_tracks].sum()), "pool_hours": float(steps.sum() / SAMPLE_HZ / 3600),
        "segments_with_tag": {t: int(has[:, i].sum()) for i, t in enumerate(names)},
        "nan_priorities": int(np.isnan(priority).sum()),
        "table_mb": round(table.nbytes / 2**20, 1),
    }
    return table, group_of, info


def budget_options(pool_hours: float) -> BudgetOptions:
    budget = pool_hours * BUDGET_FRACTION
    return BudgetOptions(train_hours=budget * SPLIT_SHARES["train"], val_hours=budget * SPLIT_SHARES["val"],
                         test_hours=budget * SPLIT_SHARES["test"], span_steps=SPAN_STEPS)


# --------------------------------------------------------------------------- timing


class StageTimer:
    """Wraps the functions ``plan.py`` imported, accumulating seconds per name."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._originals = {name: getattr(plan_module, name) for name in STAGES}
        for name, fn in self._originals.items():
            setattr(plan_module, name, self._wrap(name, fn))

    def _wrap(self, name, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
        return timed

    def reset(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)


def _plan_summary(plan) -> dict:
    acc = plan.accounting
    out = {"candidate_spans": 0, "splits": {}}
    for name, block in acc["splits"].items():
        out["candidate_spans"] += block["items"]["candidate"]
        out["splits"][name] = {
            "requested_h": round(block["requested"] / 3600, 2), "admitted_h": round(block["admitted"] / 3600, 2),
            "candidate_spans": block["items"]["candidate"], "admitted_spans": block["items"]["admitted"],
            "reserved_spans": block["items"]["reserved"], "groups": block["groups"],
            "group_cap_spans": block["excluded"]["group_cap"]["items"],
            "tag_reserve": {t: v.get("reserve") for t, v in block["tag_coverage"].items()},
        }
    out["non_finite_spans"] = acc["totals"]["non_finite_items"]
    out["unscored_spans"] = sum(b["excluded"]["unscored"]["items"] for b in acc["splits"].values())
    return out


def run_size(label: str, n_spans: int, repeats: int, seed: int, profile: bool) -> dict:
    """One size, in this (fresh) process."""
    rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    segments, group_of, info = build_segments(n_spans, seed)
    build_s = time.perf_counter() - t0
    options = budget_options(info["pool_hours"])
    strategy = Strategy.from_dict(STRATEGY_DICT)
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    timer = StageTimer()

    # The baseline's input: one float64 priority and one uint64 key per span, as many as
    # the plan has spans (random; it only has to be the same amount of data).
    rng = np.random.default_rng(seed + 1)
    base_priority = rng.normal(size=info["spans"])
    base_key = rng.integers(0, 2**63, info["spans"], dtype=np.uint64)

    perm = rng.permutation(info["spans"])
    runs: dict[str, list] = {"plan": [], "lexsort": [], "argsort": [], "stream": [], "gather": [], "stages": [],
                             "vmhwm_kb_plan": [], "plan_rusage": []}
    plan = None
    for _ in range(repeats):
        s, _order = timed(lambda: np.lexsort((base_key, -base_priority)))
        runs["lexsort"].append(s)
        s, _order = timed(lambda: np.argsort(-base_priority))
        runs["argsort"].append(s)
        s, _order = timed(lambda: base_priority * 2.0 + base_priority)
        runs["stream"].append(s)
        s, _order = timed(lambda: base_priority[perm])
        runs["gather"].append(s)
        del _order
        plan = None
        gc.collect()
        hwm_reset = reset_peak_rss()
        timer.reset()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        s, plan = timed(lambda: plan_budget(segments, options, strategy=strategy, group_of=group_of))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        runs["plan"].append(s)
        runs["plan_rusage"].append({"user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
                                    "minor_faults": r1.ru_minflt - r0.ru_minflt})
        runs["vmhwm_kb_plan"].append(vmhwm_kb() if hwm_reset else None)
        stages = dict(timer.seconds)
        stages["inline"] = s - sum(stages.values())
        runs["stages"].append(stages)

    best = int(np.argmin(runs["plan"]))
    stages = runs["stages"][best]
    total = runs["plan"][best]
    lexsort, argsort = min(runs["lexsort"]), min(runs["argsort"])
    fill = stages["fill_split"]
    after_items = total - stages["span_items"]
    out = {
        "size": label, "target_spans": n_spans, "data": info, "build_seconds": build_s,
        "options": options.to_dict(), "plan": _plan_summary(plan), "items": plan.items.num_rows,
        "plan_seconds": total, "plan_seconds_median": float(np.median(runs["plan"])),
        "after_items_seconds": after_items, "fill_seconds": fill,
        "stages_seconds_best_run": stages,
        "baseline_lexsort_seconds": lexsort, "baseline_argsort_seconds": argsort,
        "ratio_plan_over_lexsort": total / lexsort, "ratio_plan_over_argsort": total / argsort,
        "ratio_fill_over_lexsort": fill / lexsort,
        "machine_reference_seconds": {"stream_a_times_2_plus_a": min(runs["stream"]),
                                      "gather_random_permutation": min(runs["gather"])},
        "plan_rusage_best_run": runs["plan_rusage"][best],
        "all_runs": {k: runs[k] for k in ("plan", "lexsort", "argsort", "plan_rusage")},
        "ru_maxrss_mb": {"after_import": round(rss_import / 1024, 1), "after_build": round(rss_built / 1024, 1),
                         "end": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
        "vmhwm_mb_during_plan": [None if v is None else round(v / 1024, 1) for v in runs["vmhwm_kb_plan"]],
    }
    if profile:
        plan = None
        gc.collect()
        prof = cProfile.Profile()
        prof.enable()
        plan_budget(segments, options, strategy=strategy, group_of=group_of)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        out["profile_tottime_top25"] = buf.getvalue().splitlines()
    return out


# --------------------------------------------------------------------------- driver


# A small launcher in between: on Linux a child's ru_maxrss starts at the peak RSS of the
# process it was forked from, so a child forked straight from this process would report it.
_LAUNCH = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def run_child(label: str, n_spans: int, repeats: int, seed: int, profile: bool) -> dict:
    cmd = [sys.executable, "-c", _LAUNCH, sys.executable, __file__, "--_child", label, "--_spans", str(n_spans),
           "--repeats", str(repeats), "--seed", str(seed)] + (["--profile"] if profile else [])
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"size": label, "error": out.stderr.strip().splitlines()[-8:]}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["subprocess_seconds"] = time.perf_counter() - t0
    return res


def _exponent(a: float, b: float, na: int, nb: int) -> float:
    return math.log(b / a) / math.log(nb / na)


def report(ok: dict, scaling: dict, errors: dict) -> list[dict]:
    """The uniform figures (see _report.py): the 1M seconds, the plan against the raw sort at
    each size, and the scaling exponents."""
    lexsort = "np.lexsort((uint64 key, -float64 priority)) over as many values as the plan has spans"
    figures = []
    if "1M" in ok:
        one = ok["1M"]
        figures.append(figure("plan_budget at 1M candidate spans, best run", one["plan_seconds"], "s",
                              "absolute wall time", target=f"<= {TARGET_SECONDS_1M:g} s",
                              note=f"median {one['plan_seconds_median']:.3f} s"))
    for label, r in ok.items():
        figures.append(ratio(f"plan_budget seconds / raw sort seconds, {label}", r["plan_seconds"],
                             r["baseline_lexsort_seconds"], lexsort,
                             note=f"{r['plan']['candidate_spans']:,} spans; time over time"))
    if scaling:
        figures.append(figure("plan_budget exponent 1M -> 4M, log(t4M/t1M)/log 4", scaling["exponent_plan"],
                              "exponent", "the same plan at 1M spans, this run", target=f"<= {TARGET_EXPONENT:g}",
                              note=f"raw lexsort in the same run: {scaling['exponent_baseline_lexsort']:.3f}"))
    if len(ok) >= 2:
        spans = [r["plan"]["candidate_spans"] for r in ok.values()]
        sizes = ", ".join(ok)
        for what, key in (("plan_budget", "plan_seconds"), ("raw lexsort baseline", "baseline_lexsort_seconds")):
            figures.append(figure(f"{what}: fitted exponent over {sizes}",
                                  scaling_exponent(spans, [r[key] for r in ok.values()]), "exponent",
                                  "least-squares fit of log(seconds) on log(candidate spans), this run",
                                  note="1.0 is linear; the target applies to the 1M -> 4M figure"))
    for label, error in errors.items():
        lines = error if isinstance(error, list) else [str(error)]
        figures.append(figure(f"plan_budget at {label}", None, "s", "absolute wall time",
                              note="the size failed: " + " | ".join(lines)))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100k,1M,4M", help=f"comma-separated, of {list(SIZES)}")
    ap.add_argument("--repeats", type=int, default=3, help="best of, for every size but 4M")
    ap.add_argument("--repeats-4m", type=int, default=2, help="best of, for 4M")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="add a cProfile (top 25 by own time) of one extra 1M call")
    ap.add_argument("--_child", dest="child", help=argparse.SUPPRESS)
    ap.add_argument("--_spans", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_size(args.child, args._spans, args.repeats, args.seed, args.profile)))
        return

    tree = kuration_tree_state()
    started = time.perf_counter()
    results = {}
    for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        repeats = args.repeats_4m if label == "4M" else args.repeats
        results[label] = run_child(label, SIZES[label], repeats, args.seed, args.profile and label == "1M")

    ok = {k: v for k, v in results.items() if "error" not in v}
    scaling = {}
    if "1M" in ok and "4M" in ok:
        a, b = ok["1M"], ok["4M"]
        na, nb = a["plan"]["candidate_spans"], b["plan"]["candidate_spans"]
        log4 = {key: math.log(b[key] / a[key]) / math.log(4) for key in (
            "plan_seconds", "after_items_seconds", "fill_seconds", "baseline_lexsort_seconds",
            "baseline_argsort_seconds")}
        scaling = {
            "spans_ratio": nb / na,
            # The definition: log(t_4M / t_1M) / log(4).
            "exponent_plan": log4["plan_seconds"],
            "exponent_after_items": log4["after_items_seconds"],
            "exponent_fill": log4["fill_seconds"],
            "exponent_span_items": math.log(b["stages_seconds_best_run"]["span_items"]
                                            / a["stages_seconds_best_run"]["span_items"]) / math.log(4),
            "exponent_baseline_lexsort": log4["baseline_lexsort_seconds"],
            "exponent_baseline_argsort": log4["baseline_argsort_seconds"],
            # What this machine does to plain linear work between the two sizes (cache, page faults).
            "exponent_machine_stream": math.log(b["machine_reference_seconds"]["stream_a_times_2_plus_a"]
                                                / a["machine_reference_seconds"]["stream_a_times_2_plus_a"])
                                       / math.log(4),
            "exponent_machine_gather": math.log(b["machine_reference_seconds"]["gather_random_permutation"]
                                                / a["machine_reference_seconds"]["gather_random_permutation"])
                                       / math.log(4),
            # The best run's CPU time in user space and in the kernel (page faults on fresh memory).
            "exponent_plan_user_cpu": math.log(b["plan_rusage_best_run"]["user_s"]
                                               / a["plan_rusage_best_run"]["user_s"]) / math.log(4),
            "exponent_plan_sys_cpu": math.log(max(b["plan_rusage_best_run"]["sys_s"], 1e-3)
                                              / max(a["plan_rusage_best_run"]["sys_s"], 1e-3)) / math.log(4),
            "sys_share_of_plan_1M": a["plan_rusage_best_run"]["sys_s"] / a["plan_seconds"],
            "sys_share_of_plan_4M": b["plan_rusage_best_run"]["sys_s"] / b["plan_seconds"],
            # Over the measured span counts rather than exactly 4x.
            "exponent_plan_exact_n": _exponent(a["plan_seconds"], b["plan_seconds"], na, nb),
            # How much faster than the raw sort the plan's time grows (0: like the sort).
            "exponent_plan_minus_lexsort": log4["plan_seconds"] - log4["baseline_lexsort_seconds"],
            "exponent_fill_minus_lexsort": log4["fill_seconds"] - log4["baseline_lexsort_seconds"],
            "exponent_plan_median_runs": math.log(b["plan_seconds_median"] / a["plan_seconds_median"]) / math.log(4),
        }
    targets = {}
    if "1M" in ok:
        t, med = ok["1M"]["plan_seconds"], ok["1M"]["plan_seconds_median"]
        targets["plan_seconds_1M"] = {"value": t, "median": med, "target": f"<= {TARGET_SECONDS_1M}",
                                      "met": t <= TARGET_SECONDS_1M, "met_by_median": med <= TARGET_SECONDS_1M}
    if scaling:
        e = scaling["exponent_plan"]
        targets["exponent_1M_4M"] = {"value": e, "target": f"<= {TARGET_EXPONENT}", "met": e <= TARGET_EXPONENT,
                                     "fill_only": scaling["exponent_fill"],
                                     "fill_only_met": scaling["exponent_fill"] <= TARGET_EXPONENT,
                                     "baseline_lexsort": scaling["exponent_baseline_lexsort"]}
    summary = {
        label: {
            "candidate_spans": r["plan"]["candidate_spans"], "segments": r["data"]["segments"],
            "plan_s": r["plan_seconds"], "plan_median_s": r["plan_seconds_median"],
            "after_items_s": r["after_items_seconds"], "fill_s": r["fill_seconds"],
            "span_items_s": r["stages_seconds_best_run"]["span_items"],
            "lexsort_s": r["baseline_lexsort_seconds"], "argsort_s": r["baseline_argsort_seconds"],
            "plan_over_lexsort": r["ratio_plan_over_lexsort"], "fill_over_lexsort": r["ratio_fill_over_lexsort"],
            "peak_rss_mb": r["ru_maxrss_mb"]["end"],
        } for label, r in ok.items()
    }
    print(json.dumps({
        "bench": "budget_fill",
        "report": report(ok, scaling, {label: r["error"] for label, r in results.items() if "error" in r}),
        "targets": targets,
        "scaling_1M_to_4M": scaling,
        "summary": summary,
        "sizes": results,
        "parameters": {
            "span_steps": SPAN_STEPS, "window_steps": WINDOW, "stride_steps": STRIDE, "sample_hz": SAMPLE_HZ,
            "groups": N_GROUPS, "budget_fraction_of_pool": BUDGET_FRACTION, "split_shares": SPLIT_SHARES,
            "tag_rates": TAG_RATES, "nan_rate": NAN_RATE, "strategy": STRATEGY_DICT, "seed": args.seed,
            "repeats": args.repeats, "repeats_4m": args.repeats_4m,
        },
        "baseline": "np.lexsort((uint64 key, -float64 priority)) over as many random values as the plan has spans; "
                    "np.argsort(-priority) alone also given",
        "total_bench_seconds": time.perf_counter() - started,
        "python": platform.python_version(), "numpy": np.__version__, "pyarrow": pa.__version__,
        "cpus": os.cpu_count(), "tree": tree,
    }, indent=2))


if __name__ == "__main__":
    main()
