"""Benchmark: peak memory of ``score_sources`` from a fully warm cache + ``plan_budget``,
with and without ``memory_budget``, on the same synthetic pool.

Setup (in the bench process, not measured): a scored segment table is built with
numpy/pyarrow directly (``bench_budget_fill.build_segments``, no real scoring; ``tag.<name>``
feature columns are 1.0/0.0 from ``tags``), cast to
``segment_table_schema(strategy)``, sorted by (source_id, entity_id, segment_index) and
written source by source into an ``FsspecScoreCache`` under a temp folder in /tmp with
``cache.put(run_fingerprint(adapter, segmenter, strategy), source_id, identity, table)``.
The adapter is a stub: a strong ``SourceIdentity("fingerprint", sha256)`` per source and a
``read_ticks`` that raises (every source must come from the cache; the child checks that
every outcome is ``cached``).

Each mode then runs in its own fresh subprocess (so its peaks are its own):

* ``A``: ``score_sources(adapter, ..., cache=cache)``, then ``plan_budget``;
* ``B``: the same with ``memory_budget=1``.

In the child a background thread reads ``/proc/self/status`` every ~5 ms (and the main
thread once at each phase boundary) and keeps the peak ``RssAnon`` (heap), ``RssFile``
(file pages, incl. memory-mapped checkpoints) and ``VmRSS`` per phase: ``baseline`` (after
imports), ``load`` (``score_sources``) and ``plan`` (``plan_budget``, with the pool still
alive). ``VmHWM`` (kernel peak RSS) is read at the end of the load phase, reset through
``/proc/self/clear_refs`` and read again at the end of the plan phase. Also reported: the
pool's ``segments.nbytes``, wall seconds per phase, Arrow's pool peak
(``max_memory()``), and ``result.memory``. After measuring, the child writes
``plan.items`` and ``plan.admitted()`` as Arrow IPC; the parent compares the two modes'
tables with ``Table.equals``, NaN equal to NaN (``identical_plans``). Ratios are B / A.

Run from the repo root:  .venv/bin/python bench/bench_memory_budget.py   (~15 s per repeat, ~0.8 GiB peak)
Options: ``--sizes 250k,1M`` (default), ``--quick`` (50k only), ``--repeats`` (runs of each
mode per size, alternating A/B; peaks are the minimum over runs), ``--seed``, ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import reset_peak_rss, vmhwm_kb  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402
from _report import figure, scaling_exponent  # noqa: E402
from bench_budget_fill import STRATEGY_DICT, budget_options, build_segments  # noqa: E402

from kuration.budget import plan_budget  # noqa: E402
from kuration.sources.schema import Schema  # noqa: E402
from kuration.scoring.cache import FsspecScoreCache  # noqa: E402
from kuration.scoring import run_fingerprint, score_sources  # noqa: E402
from kuration.scoring.segments import Segmenter  # noqa: E402
from kuration.sources.protocol import SourceIdentity  # noqa: E402
from kuration.scoring.strategy import Strategy  # noqa: E402
from kuration.scoring.track import segment_table_schema  # noqa: E402

SIZES = {"50k": 50_000, "250k": 250_000, "1M": 1_000_000}  # target segments
SEGMENTS_PER_SPAN = 2  # build_segments: windows of 100 steps every 50, spans of 100 steps
MODES = {"A": None, "B": 1}  # memory_budget
SAMPLE_SECONDS = 0.005
SCHEMA = Schema.from_dict({
    "sample_hz": 10.0, "time": "tick", "entity": "drone",
    "fields": {"speed": {"dtype": "float32"}}, "tags": "events",
})
SEGMENTER = Segmenter(100, 50, unit="steps")
STATUS_FIELDS = ("RssAnon", "RssFile", "VmRSS")
PHASES = ("baseline", "load", "plan")


class StubAdapter:
    """Lists sources and vouches for their identity; never reads (all are cached)."""

    schema = SCHEMA

    def __init__(self, source_ids: list[str], seed: int) -> None:
        self.source_ids = sorted(source_ids)
        self.seed = seed

    def list_sources(self) -> list[str]:
        return list(self.source_ids)

    def identity(self, source_id: str) -> SourceIdentity:
        return SourceIdentity("fingerprint", hashlib.sha256(f"{self.seed}:{source_id}".encode()).hexdigest())

    def read_ticks(self, source_id: str):
        raise AssertionError(f"read_ticks({source_id!r}) called: every source should come from the cache")

    def decode_media(self, column, refs, *, source_id):
        raise AssertionError("decode_media called")


# --------------------------------------------------------------------------- setup


def with_tag_features(segments: pa.Table, strategy: Strategy) -> pa.Table:
    """Adds a ``tag.<name>`` column per strategy tag: 1.0 where the segment carries the tag
    in ``tags``, else 0.0 (real scoring counts tagged timesteps; only the values differ)."""
    tags = segments.column("tags").combine_chunks()
    flat = pc.list_flatten(tags)
    parents = pc.list_parent_indices(tags).to_numpy()
    for name in strategy.tags:
        values = np.zeros(segments.num_rows)
        values[parents[pc.equal(flat, name).to_numpy(zero_copy_only=False)]] = 1.0
        segments = segments.append_column(f"tag.{name}", pa.array(values))
    return segments


def build_cache(root: Path, target_segments: int, seed: int) -> dict:
    """Writes the synthetic pool into ``root/cache`` and the child's inputs into ``root/inputs.json``."""
    t0 = time.perf_counter()
    segments, group_of, info = build_segments(target_segments // SEGMENTS_PER_SPAN, seed)
    strategy = Strategy.from_dict(STRATEGY_DICT)
    schema = segment_table_schema(strategy)
    table = with_tag_features(segments, strategy).select(schema.names).cast(schema)
    del segments
    table = table.sort_by([("source_id", "ascending"), ("entity_id", "ascending"), ("segment_index", "ascending")])
    table = table.combine_chunks()
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    sources = table.column("source_id").to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]])
    ends = np.r_[starts[1:], len(sources)]
    source_ids = [str(sources[a]) for a in starts]
    adapter = StubAdapter(source_ids, seed)
    cache = FsspecScoreCache(root / "cache")
    fingerprint = run_fingerprint(adapter, SEGMENTER, strategy)
    for source_id, a, b in zip(source_ids, starts, ends, strict=True):
        cache.put(fingerprint, source_id, adapter.identity(source_id), table.slice(int(a), int(b - a)))
    write_s = time.perf_counter() - t0
    files = list((root / "cache").rglob("*.arrow"))
    (root / "inputs.json").write_text(json.dumps({
        "source_ids": source_ids, "group_of": group_of, "pool_hours": info["pool_hours"], "seed": seed,
    }))
    info.pop("table_mb", None)
    return {"data": info, "pool_nbytes": table.nbytes, "build_seconds": build_s,
            "cache": {"files": len(files), "bytes": sum(f.stat().st_size for f in files), "write_seconds": write_s}}


# --------------------------------------------------------------------------- child


class StatusSampler(threading.Thread):
    """Peak ``RssAnon`` / ``RssFile`` / ``VmRSS`` (kB) per phase, from /proc/self/status."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.phase = "baseline"
        self.peaks = {p: dict.fromkeys(STATUS_FIELDS, 0) for p in PHASES}
        self.samples = dict.fromkeys(PHASES, 0)
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self._file = open("/proc/self/status", "rb", buffering=0)  # noqa: SIM115 (closed in stop())

    def _read(self) -> dict[str, int]:
        with self.lock:
            self._file.seek(0)
            text = self._file.read(8192).decode()
        out = {}
        for line in text.splitlines():
            name, _, rest = line.partition(":")
            if name in STATUS_FIELDS:
                out[name] = int(rest.split()[0])
        return out

    def sample(self) -> dict[str, int]:
        values = self._read()
        peaks = self.peaks[self.phase]
        for k, v in values.items():
            if v > peaks[k]:
                peaks[k] = v
        self.samples[self.phase] += 1
        return values

    def switch(self, phase: str) -> dict[str, int]:
        """Closes the current phase with a sample, and opens ``phase`` with one."""
        self.sample()
        self.phase = phase
        return self.sample()

    def run(self) -> None:
        while not self.stop_event.wait(SAMPLE_SECONDS):
            self.sample()

    def stop(self) -> None:
        self.stop_event.set()
        self.join()
        self.sample()
        self._file.close()


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def run_mode(root: Path, mode: str) -> dict:
    """One mode, in this (fresh) process."""
    inputs = json.loads((root / "inputs.json").read_text())
    adapter = StubAdapter(inputs["source_ids"], inputs["seed"])
    group_of = inputs["group_of"]
    options = budget_options(inputs["pool_hours"])
    strategy = Strategy.from_dict(STRATEGY_DICT)
    cache = FsspecScoreCache(root / "cache")
    kwargs = {} if MODES[mode] is None else {"memory_budget": MODES[mode]}
    del inputs

    sampler = StatusSampler()
    sampler.start()
    time.sleep(0.05)
    baseline = sampler.switch("load")
    t0 = time.perf_counter()
    result = score_sources(adapter, segmenter=SEGMENTER, strategy=strategy, cache=cache, **kwargs)
    load_s = time.perf_counter() - t0
    hwm_load = vmhwm_kb()
    sampler.switch("plan")
    hwm_reset = reset_peak_rss()
    t0 = time.perf_counter()
    plan = plan_budget(result.segments, options, strategy=strategy, group_of=group_of)
    plan_s = time.perf_counter() - t0
    hwm_plan = vmhwm_kb() if hwm_reset else None
    sampler.stop()
    arrow_peak = pa.default_memory_pool().max_memory()

    # Not measured: the plan, for the parent to compare across modes.
    admitted = plan.admitted()
    for name, table in (("items", plan.items), ("admitted", admitted)):
        with pa.OSFile(str(root / f"plan_{mode}_{name}.arrow"),
                       "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    peaks = sampler.peaks
    overall = {k: max(peaks[p][k] for p in PHASES) for k in STATUS_FIELDS}
    return {
        "mode": mode, "memory_budget": MODES[mode],
        "sources": len(result.outcomes), "cached": result.count("cached"),
        "all_cached": result.count("cached") == len(result.outcomes) == len(adapter.source_ids),
        "segments": result.segments.num_rows, "segments_nbytes": result.segments.nbytes,
        "segments_chunks": result.segments.column("priority").num_chunks,
        "scoring_memory_report": result.memory,
        "seconds": {"load": load_s, "plan": plan_s},
        "baseline_mb": {k: _mb(baseline[k]) for k in STATUS_FIELDS},
        "peak_mb": {k: _mb(overall[k]) for k in STATUS_FIELDS},
        "peak_mb_load": {k: _mb(peaks["load"][k]) for k in STATUS_FIELDS},
        "peak_mb_plan": {k: _mb(peaks["plan"][k]) for k in STATUS_FIELDS},
        "vmhwm_mb": {"overall": _mb(max(hwm_load or 0, hwm_plan or 0)), "load": _mb(hwm_load), "plan": _mb(hwm_plan)},
        "arrow_pool_max_mb": round(arrow_peak / 2**20, 1),
        "plan_items": plan.items.num_rows, "plan_admitted": admitted.num_rows,
        "samples": sampler.samples,
    }


# --------------------------------------------------------------------------- driver


def run_child(root: Path, mode: str) -> dict:
    cmd = [sys.executable, __file__, "--_child", mode, "--_root", str(root)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"mode": mode, "error": out.stderr.strip().splitlines()[-8:]}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["subprocess_seconds"] = time.perf_counter() - t0
    return res


def _read_ipc(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).read_all()


def _tables_equal(a: pa.Table, b: pa.Table) -> bool:
    """``Table.equals``, except that NaN equals NaN in float columns (``equals`` treats NaN as
    unequal, and plans carry NaN priorities and features)."""
    if not a.schema.equals(b.schema) or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns, strict=True):
        if pa.types.is_floating(x.type):
            if not pc.is_null(x).equals(pc.is_null(y)):
                return False
            if not np.array_equal(pc.fill_null(x, 0.0).to_numpy(), pc.fill_null(y, 0.0).to_numpy(), equal_nan=True):
                return False
        elif not x.equals(y):
            return False
    return True


def _same_plan(root: Path) -> dict:
    out = {}
    for name in ("items", "admitted"):
        a, b = _read_ipc(root / f"plan_A_{name}.arrow"), _read_ipc(root / f"plan_B_{name}.arrow")
        out[name] = _tables_equal(a, b)
        out[f"{name}_table_equals"] = a.equals(b)  # NaN != NaN here
    return out


def _ratio(b: float | None, a: float | None) -> float | None:
    return None if not a or b is None else round(b / a, 3)


def run_size(label: str, target: int, repeats: int, seed: int, keep: bool) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"kuration-bench-membudget-{label}-", dir="/tmp"))
    try:
        setup = build_cache(root, target, seed)
        runs: dict[str, list[dict]] = {m: [] for m in MODES}
        identical, comparisons = [], []
        for _ in range(repeats):
            for mode in MODES:
                runs[mode].append(run_child(root, mode))
            if all("error" not in runs[m][-1] for m in MODES):
                comparisons.append(_same_plan(root))
                identical.append(comparisons[-1]["items"] and comparisons[-1]["admitted"])
        errors = {m: r["error"] for m in MODES for r in runs[m] if "error" in r}
        if errors:
            return {"size": label, **setup, "errors": errors}

        def best(mode: str, key: str, field: str) -> float:
            return min(r[key][field] for r in runs[mode])

        a, b = runs["A"][0], runs["B"][0]
        ratios = {
            "peak_rss_anon": _ratio(best("B", "peak_mb", "RssAnon"), best("A", "peak_mb", "RssAnon")),
            "peak_rss_anon_load": _ratio(best("B", "peak_mb_load", "RssAnon"), best("A", "peak_mb_load", "RssAnon")),
            "peak_rss_anon_plan": _ratio(best("B", "peak_mb_plan", "RssAnon"), best("A", "peak_mb_plan", "RssAnon")),
            # the same, above each child's RssAnon after imports
            "peak_rss_anon_above_baseline": _ratio(
                best("B", "peak_mb", "RssAnon") - b["baseline_mb"]["RssAnon"],
                best("A", "peak_mb", "RssAnon") - a["baseline_mb"]["RssAnon"]),
            "peak_rss_anon_load_above_baseline": _ratio(
                best("B", "peak_mb_load", "RssAnon") - b["baseline_mb"]["RssAnon"],
                best("A", "peak_mb_load", "RssAnon") - a["baseline_mb"]["RssAnon"]),
            "peak_rss_anon_plan_above_baseline": _ratio(
                best("B", "peak_mb_plan", "RssAnon") - b["baseline_mb"]["RssAnon"],
                best("A", "peak_mb_plan", "RssAnon") - a["baseline_mb"]["RssAnon"]),
            "vmhwm": _ratio(best("B", "vmhwm_mb", "overall"), best("A", "vmhwm_mb", "overall")),
            "seconds_load": _ratio(best("B", "seconds", "load"), best("A", "seconds", "load")),
            "seconds_plan": _ratio(best("B", "seconds", "plan"), best("A", "seconds", "plan")),
        }
        summary = {
            mode: {
                "peak_rss_anon_mb": best(mode, "peak_mb", "RssAnon"),
                "peak_rss_anon_mb_load": best(mode, "peak_mb_load", "RssAnon"),
                "peak_rss_anon_mb_plan": best(mode, "peak_mb_plan", "RssAnon"),
                "peak_rss_file_mb": best(mode, "peak_mb", "RssFile"),
                "peak_rss_file_mb_load": best(mode, "peak_mb_load", "RssFile"),
                "peak_rss_file_mb_plan": best(mode, "peak_mb_plan", "RssFile"),
                "vmhwm_mb": best(mode, "vmhwm_mb", "overall"),
                "vmhwm_mb_load": best(mode, "vmhwm_mb", "load"),
                "vmhwm_mb_plan": best(mode, "vmhwm_mb", "plan"),
                "baseline_rss_anon_mb": runs[mode][0]["baseline_mb"]["RssAnon"],
                "load_seconds": best(mode, "seconds", "load"),
                "plan_seconds": best(mode, "seconds", "plan"),
                "all_cached": all(r["all_cached"] for r in runs[mode]),
            } for mode in MODES
        }
        return {
            "size": label, **setup,
            "segments_nbytes": {m: runs[m][0]["segments_nbytes"] for m in MODES},
            "identical_plans": bool(identical) and all(identical), "plan_comparisons": comparisons,
            "ratios_B_over_A": ratios, "summary": summary, "runs": runs,
        }
    finally:
        if keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def report(results: dict) -> list[dict]:
    """The uniform figures (see _report.py): mode B (memory_budget=1) against mode A (no budget)
    at each size, and how each mode's heap above its import level grows with the pool."""
    without = "mode A: the same score_sources + plan_budget without a memory budget, same pool"
    figures = []
    for label, r in results.items():
        if "errors" in r:
            figures.append(figure(f"{label}: peak heap B / A", None, "x", without,
                                  note=f"a mode failed: {r['errors']}"))
            continue
        same = f"{r['data']['segments']:,} segments; identical plans: {r['identical_plans']}"
        ratios = r["ratios_B_over_A"]
        for what, key in (("peak heap (RssAnon) while loading the pool", "peak_rss_anon_load"),
                          ("peak heap (RssAnon) overall", "peak_rss_anon"),
                          ("VmHWM (heap + file pages)", "vmhwm"),
                          ("plan seconds", "seconds_plan")):
            figures.append(figure(f"{label}: {what}, B / A", ratios[key], "x", without, note=same))
    ok = {label: r for label, r in results.items() if "errors" not in r}
    if len(ok) >= 2:
        segments = [r["data"]["segments"] for r in ok.values()]
        for mode in MODES:
            above = [r["summary"][mode]["peak_rss_anon_mb"] - r["summary"][mode]["baseline_rss_anon_mb"]
                     for r in ok.values()]
            figures.append(figure(f"mode {mode}: peak heap above imports against pool size",
                                  scaling_exponent(segments, above), "exponent",
                                  f"least-squares fit of log(MB) on log(segments) over {', '.join(ok)}",
                                  note="1.0: the heap grows with the pool; 0: it does not"))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="250k,1M", help=f"comma-separated, of {list(SIZES)} (target segment counts)")
    ap.add_argument("--quick", action="store_true", help="only 50k segments")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each mode per size (alternating A, B)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the temp folders (cache, plans)")
    ap.add_argument("--_child", dest="child", choices=list(MODES), help=argparse.SUPPRESS)
    ap.add_argument("--_root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_mode(Path(args._root), args.child)))
        return

    started = time.perf_counter()
    labels = ["50k"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in labels if s not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {unknown}; valid: {list(SIZES)}")
    results = {label: run_size(label, SIZES[label], args.repeats, args.seed, args.keep) for label in labels}
    print(json.dumps({
        "bench": "memory_budget",
        "report": report(results),
        "summary": {label: {k: r.get(k) for k in ("identical_plans", "ratios_B_over_A", "summary", "segments_nbytes")}
                    | {"segments": r["data"]["segments"], "sources": r["data"]["sources"]}
                    for label, r in results.items()},
        "sizes": results,
        "modes": {m: ("score_sources(cache=cache) + plan_budget" if b is None
                      else f"score_sources(cache=cache, memory_budget={b}) + plan_budget") for m, b in MODES.items()},
        "parameters": {"strategy": STRATEGY_DICT, "schema": SCHEMA.to_dict(), "segmenter": SEGMENTER.to_dict(),
                       "seed": args.seed, "repeats": args.repeats, "sample_seconds": SAMPLE_SECONDS},
        "total_bench_seconds": time.perf_counter() - started,
        "python": platform.python_version(), "numpy": np.__version__, "pyarrow": pa.__version__,
        "cpus": os.cpu_count(), "tree": kuration_tree_state(),
    }, indent=2))


if __name__ == "__main__":
    main()
