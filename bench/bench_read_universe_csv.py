"""Benchmark: ``read_universe_csv`` on a 1,000,000-row universe.csv.

Writes the file to a temp dir (columns source,index,materialized_path,group; one row per
sample, every row with its own per-frame materialized_path), then times

* ``kuration.splits.read_universe_csv(path)``: read, strip, pandera validation of every
  cell, relative-path resolution, canonical sort and duplicate check, i.e. a ready
  ``Universe``;
* the baseline ``pandas.read_csv(path, dtype=str)`` of the same file: a raw parse, no
  validation, no Universe.

Also times the same 1M samples written compactly as one ``a-b`` range row per source
(2,000 rows fanned out to 1,000,000 samples). Best of --repeats; prints one JSON object.

Run from the repo root:  .venv/bin/python bench/bench_read_universe_csv.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import best_of  # noqa: E402
from _report import figure, ratio  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402

from kuration.splits import read_universe_csv  # noqa: E402

TARGET_SECONDS = 5.0


def write_csvs(folder: str, n_sources: int, n_indices: int) -> tuple[str, str]:
    s = np.repeat(np.arange(n_sources), n_indices)
    i = np.tile(np.arange(n_indices), n_sources)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(s))  # rows not pre-sorted, so the canonical sort does work
    s, i = s[order], i[order]
    site = s // 100
    source = pd.Series([f"site_{a:02d}/rec_{b:05d}.rec" for a, b in zip((site).tolist(), s.tolist(), strict=True)])
    frame = pd.DataFrame({
        "source": source,
        "index": i,
        "materialized_path": [f"frames/rec_{b:05d}/{c:06d}.png" for b, c in zip(s.tolist(), i.tolist(), strict=True)],
        "group": [f"site_{a:02d}" for a in site.tolist()],
    })
    plain = os.path.join(folder, "universe.csv")
    frame.to_csv(plain, index=False)
    ranged = os.path.join(folder, "universe_ranges.csv")
    names = [f"site_{a // 100:02d}/rec_{a:05d}.rec" for a in range(n_sources)]
    pd.DataFrame({
        "source": names,
        "index": [f"0-{n_indices - 1}"] * n_sources,
        "group": [n.split("/")[0] for n in names],
    }).to_csv(ranged, index=False)
    return plain, ranged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=2000)
    ap.add_argument("--indices", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tree = kuration_tree_state()  # the code that gets imported/run is the tree as of now

    with tempfile.TemporaryDirectory(prefix="kuration-bench-csv-") as tmp:
        t0 = time.perf_counter()
        plain, ranged = write_csvs(tmp, args.sources, args.indices)
        write_s = time.perf_counter() - t0
        size_mb = os.path.getsize(plain) / 1e6

        base_best, base_all, df = best_of(lambda: pd.read_csv(plain, dtype=str), args.repeats)
        base_rows = len(df)
        del df
        base_kdna_best, _, df = best_of(
            lambda: pd.read_csv(plain, dtype=str, keep_default_na=False, engine="pyarrow"), args.repeats
        )
        del df
        kur_best, kur_all, universe = best_of(lambda: read_universe_csv(plain), args.repeats)
        n = len(universe)
        n_sources = len(universe.source_names)
        del universe
        rng_best, rng_all, ranged_universe = best_of(lambda: read_universe_csv(ranged), args.repeats)
        n_ranged = len(ranged_universe)
        del ranged_universe

    median_s = float(np.median(kur_all))
    report = [
        figure(f"read_universe_csv, {base_rows:,} rows, best run", kur_best, "s", "absolute wall time",
               target=f"<= {TARGET_SECONDS:g} s"),
        figure(f"read_universe_csv, {base_rows:,} rows, median run", median_s, "s", "absolute wall time",
               target=f"<= {TARGET_SECONDS:g} s"),
        ratio("read_universe_csv seconds / raw parse seconds", kur_best, base_best,
              "pandas.read_csv(path, dtype=str) of the same file (no validation)",
              note="time over time: the cost of validation, resolution and the canonical sort over a raw parse"),
        ratio("compact range rows: read_universe_csv seconds / raw parse of the full file", rng_best, base_best,
              f"pandas.read_csv(path, dtype=str) of the {base_rows:,}-row file",
              note=f"{args.sources:,} 'a-b' range rows fanned out to {n_ranged:,} samples"),
    ]
    print(json.dumps({
        "bench": "read_universe_csv",
        "report": report,
        "rows": base_rows,
        "samples": n,
        "sources": n_sources,
        "file_mb": round(size_mb, 1),
        "columns": ["source", "index", "materialized_path", "group"],
        "write_csv_seconds": write_s,
        "kuration_seconds": kur_best,
        "kuration_median_seconds": float(np.median(kur_all)),
        "kuration_all_runs": kur_all,
        "met_by_median": median_s <= TARGET_SECONDS,
        "baseline": "pandas.read_csv(path, dtype=str)",
        "baseline_seconds": base_best,
        "baseline_all_runs": base_all,
        "ratio_kuration_over_baseline": kur_best / base_best,
        "baseline_pyarrow_engine_seconds": base_kdna_best,
        "baseline_pyarrow_engine_note": "pandas.read_csv(dtype=str, keep_default_na=False, engine='pyarrow'): the "
                                        "parse read_universe_csv itself does",
        "target_seconds": TARGET_SECONDS,
        "met": kur_best <= TARGET_SECONDS,
        "ranges_variant": {
            "rows": args.sources,
            "samples": n_ranged,
            "seconds": rng_best,
            "all_runs": rng_all,
        },
        "python": platform.python_version(),
        "tree": tree,
        "pandas": pd.__version__,
        "cpus": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
