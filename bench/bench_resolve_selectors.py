"""Benchmark: resolving one stage of 10 selectors over a 1,000,000-sample universe.

kuration (this venv) against the Cuvis.AI reference resolver
``cuvis_ai_core.data.selectors.resolve_selectors`` (run as a subprocess in
``bench/.venv-cuvis``, built on first use, see ``_reference_env.py``), on the same
selectors and the same universe in the same canonical order. Checks both return the same
uid list and prints one JSON object.

Run from the repo root:  .venv/bin/python bench/bench_resolve_selectors.py
Options: --sources N --indices N (universe = N x N), --repeats N (kuration),
--reference-repeats N, --no-reference-individual, --no-reference.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import best_of  # noqa: E402
from _report import figure, ratio  # noqa: E402
from _reference_env import ensure_reference_python, kuration_tree_state  # noqa: E402

from kuration.splits import Selector, Universe, resolve_positions, resolve_selectors  # noqa: E402

TARGET_SECONDS = 1.0
TARGET_SPEEDUP = 5.0


def source_name(s: int) -> str:
    return f"site_{s // 100:02d}/rec_{s:05d}.rec"


def stage_selectors(n_sources: int, n_indices: int) -> list[dict]:
    """Ten realistic selectors (JSON form) over the generated universe (2000 x 500 layout).

    Covers file_indices with ranges and steps, files, glob (on source and on stem), stems,
    dir_indices, and union / except / intersect nesting with ``all`` inside.
    """
    n = n_sources * n_indices
    last = n_indices - 1
    q = n_indices // 5  # 100 for 500 indices

    def fi(s: int, ids: list) -> dict:
        return {"kind": "file_indices", "source": source_name(s), "ids": ids}

    def pos(s: int, i: int) -> int:  # canonical row of (source s, index i)
        return s * n_indices + i

    return [
        # 1. frames of one recording: ranges, a stepped range and single ids
        fi(342, [f"0-{q - 1}", q + q // 2, f"{2 * q}-{3 * q - 1}:2", last]),
        # 2. whole recordings by path
        {"kind": "files", "paths": [source_name(s) for s in (400, 401, 517, 650)]},
        # 3. glob on the source path: three sites (300 recordings)
        {"kind": "glob", "pattern": "site_0[0-2]/*"},
        # 4. stems: 60 recordings by filename stem
        {"kind": "stems", "stems": [f"rec_{k:05d}" for k in range(700, 760)]},
        # 5. dir_indices: positional ranges into the canonical universe
        {"kind": "dir_indices",
         "ids": [f"{n // 2}-{n // 2 + 19_999}", f"{int(n * 0.6)}-{int(n * 0.6) + 999}:3", n - 1]},
        # 6. union of half-recordings and a stem glob
        {"kind": "union", "of": [
            fi(800, [f"0-{n_indices // 2 - 1}"]),
            fi(801, [f"{n_indices // 2}-{last}"]),
            {"kind": "glob", "pattern": "rec_009[0-4]?"},
        ]},
        # 7. half the universe minus held-out recordings and every second frame of one
        {"kind": "except", "of": [
            {"kind": "glob", "pattern": "site_1*/*"},
            {"kind": "files", "paths": [source_name(s) for s in (1000, 1001, 1050, 1999)]},
            fi(1100, [f"0-{last}:2"]),
        ]},
        # 8. intersect of sites with (stems union a positional block)
        {"kind": "intersect", "of": [
            {"kind": "glob", "pattern": "site_1[2-4]/*"},
            {"kind": "union", "of": [
                {"kind": "stems", "stems": [f"rec_{k:05d}" for k in range(1290, 1310)]},
                {"kind": "dir_indices", "ids": [f"{pos(1240, 0)}-{pos(1259, last)}"]},
            ]},
        ]},
        # 9. everything except most sites and a slice of the last one
        {"kind": "except", "of": [
            {"kind": "all"},
            {"kind": "union", "of": [
                {"kind": "glob", "pattern": "site_0*/*"},
                {"kind": "glob", "pattern": "site_1[0-7]/*"},
            ]},
            {"kind": "intersect", "of": [
                {"kind": "glob", "pattern": "site_19/*"},
                {"kind": "dir_indices", "ids": [f"{pos(1900, 0)}-{pos(1949, last)}"]},
            ]},
        ]},
        # 10. union of an except (a site minus some stems) and scattered frames
        {"kind": "union", "of": [
            {"kind": "except", "of": [
                {"kind": "glob", "pattern": "site_15/*"},
                {"kind": "stems", "stems": [f"rec_{k:05d}" for k in range(1500, 1550)]},
            ]},
            fi(1600, ["10-19", "30-39", 0]),
        ]},
    ]


def uid_digest(uids) -> str:
    h = hashlib.sha256()
    for uid in uids:
        h.update(uid.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def row_runs(universe: Universe) -> list[list[int]]:
    """The universe's canonical rows as [source_code, first_index, stop) runs of consecutive indices."""
    codes, idx = universe.source_codes, universe.indices
    breaks = np.flatnonzero((codes[1:] != codes[:-1]) | (idx[1:] != idx[:-1] + 1)) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [len(codes)]])
    return [[int(codes[a]), int(idx[a]), int(idx[a]) + int(b - a)] for a, b in zip(starts, stops, strict=True)]


def report(result: dict, reference_reason: str | None) -> list[dict]:
    """The uniform figures (see _report.py): the headline's seconds, and each entry point's
    speedup over the reference."""
    reference_s = result["reference_seconds"]
    missing = f"no reference: {reference_reason}" if reference_s is None else ""
    agreement = "" if result["identical"] is None else f"uid lists identical: {result['identical']}"
    figures = [figure("resolve_selectors(stage, Universe) -> SampleRefs", result["kuration_seconds"], "s",
                      "absolute wall time, best run", target=f"<= {TARGET_SECONDS:g} s",
                      note=f"{result['samples']:,} samples, {result['selectors']} selectors")]
    for entry, verdict in result["by_entry_point"].items():
        figures.append(ratio(f"{entry}: speedup over the reference", reference_s, verdict["seconds"],
                             "Cuvis.AI resolve_selectors on the same stage and universe (its seconds / ours)",
                             target=f">= {TARGET_SPEEDUP:g}", note=missing or agreement))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=int, default=2000)
    ap.add_argument("--indices", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference-repeats", type=int, default=2)
    ap.add_argument("--no-reference-individual", action="store_true")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    tree = kuration_tree_state()  # the code that gets imported/run is the tree as of now
    if args.sources < 2000 or args.indices < 50:
        ap.error("the selectors assume at least 2000 sources x 50 indices")
    logging.disable(logging.WARNING)  # partial-match warnings are not what is measured

    n_s, n_i = args.sources, args.indices
    names = [source_name(s) for s in range(n_s)]
    # Columns in shuffled row order, so from_columns really sorts.
    rng = np.random.default_rng(0)
    perm = rng.permutation(n_s * n_i)
    src_col = np.repeat(np.asarray(names, dtype=object), n_i)[perm].tolist()
    idx_col = np.tile(np.arange(n_i, dtype=np.int64), n_s)[perm]

    gc.collect()
    t0 = time.perf_counter()
    universe = Universe.from_columns(src_col, idx_col)
    from_columns_s = time.perf_counter() - t0
    n = len(universe)
    del src_col, idx_col, perm

    sel_dicts = stage_selectors(n_s, n_i)
    t0 = time.perf_counter()
    selectors = [Selector.from_dict(d) for d in sel_dicts]
    parse_s = time.perf_counter() - t0

    # Cold: the first resolution on a fresh universe builds its per-source row index.
    t0 = time.perf_counter()
    cold_positions = resolve_positions(selectors, universe)
    cold_s = time.perf_counter() - t0

    pos_best, pos_all, positions = best_of(lambda: resolve_positions(selectors, universe), args.repeats)
    refs_best, refs_all, out_refs = best_of(lambda: resolve_selectors(selectors, universe), args.repeats)
    # Building every SampleRef object of the stage is a separate, honest figure: what a
    # caller pays who really reads all of them.
    mat_best, mat_all, out_list = best_of(lambda: list(resolve_selectors(selectors, universe)), args.repeats)
    assert np.array_equal(positions, cold_positions)
    k_uids = [r.uid for r in out_list]
    k_digest = uid_digest(k_uids)
    assert k_digest == uid_digest(universe.uids(positions)) == uid_digest(out_refs.uids())
    del out_refs, out_list

    individual = []
    for d, sel in zip(sel_dicts, selectors, strict=True):
        best, _, p = best_of(functools.partial(resolve_positions, [sel], universe), args.repeats)
        individual.append({"kind": d["kind"], "count": int(len(p)), "positions_seconds": best})

    # The one-off cost of a universe given as a list of SampleRef (the reference's input type).
    gc.collect()
    t0 = time.perf_counter()
    ref_list = universe.refs(np.arange(n))
    build_refs_s = time.perf_counter() - t0
    from_refs_s, from_refs_all, _ = best_of(lambda refs=ref_list: len(Universe.from_refs(refs)), 2)
    list_best, list_all, out_list = best_of(functools.partial(resolve_selectors, selectors, ref_list), 2)
    list_digest = uid_digest(r.uid for r in out_list)
    del out_list, ref_list
    gc.collect()

    kuration = {
        "universe_from_columns_seconds": from_columns_s,
        "build_1M_SampleRef_list_seconds": build_refs_s,
        "universe_from_refs_seconds": from_refs_s,
        "universe_from_refs_all_runs": from_refs_all,
        "parse_selectors_seconds": parse_s,
        "resolve_positions_cold_first_call_seconds": cold_s,
        "resolve_positions_seconds": pos_best,
        "resolve_positions_all_runs": pos_all,
        "resolve_selectors_universe_seconds": refs_best,
        "resolve_selectors_universe_all_runs": refs_all,
        "resolve_and_build_every_SampleRef_seconds": mat_best,
        "resolve_and_build_every_SampleRef_all_runs": mat_all,
        "resolve_selectors_sampleref_list_seconds": list_best,
        "resolve_selectors_sampleref_list_note": "input is a list[SampleRef]; includes the per-call Universe.from_refs "
                                                 "conversion",
        "resolve_selectors_sampleref_list_uids_match": list_digest == k_digest,
        "individual_selectors": individual,
    }

    reference = None
    reference_reason = None
    if args.no_reference:
        reference_reason = "--no-reference given"
    else:
        python, info = ensure_reference_python()
        if python is None:
            reference_reason = info
        else:
            with tempfile.TemporaryDirectory(prefix="kuration-bench-") as tmp:
                spec_path = os.path.join(tmp, "input.json")
                with open(spec_path, "w", encoding="utf-8") as fh:
                    json.dump({
                        "source_names": list(universe.source_names),
                        "runs": row_runs(universe),
                        "selectors": sel_dicts,
                        "repeats": args.reference_repeats,
                        "individual": not args.no_reference_individual,
                    }, fh)
                script = Path(__file__).resolve().parent / "_cuvis_reference_resolve.py"
                proc = subprocess.run([python, str(script), spec_path], capture_output=True, text=True)
            if proc.returncode != 0:
                reference_reason = "reference run failed: " + " | ".join(proc.stderr.strip().splitlines()[-5:])
            else:
                reference = json.loads(proc.stdout)
                reference["versions"] = info

    identical = None
    if reference is not None:
        identical = reference["uid_sha256"] == k_digest and reference["count"] == len(k_uids)
        ref_s = reference["stage_seconds_best"]
        for mine, theirs in zip(individual, reference.get("individual") or [], strict=False):
            mine["reference_seconds"] = theirs["seconds"]
            mine["reference_count"] = theirs["count"]

    def verdict(seconds: float) -> dict:
        speedup = (ref_s / seconds) if reference is not None else None
        return {
            "seconds": seconds,
            "speedup_vs_reference": speedup,
            "met_le_1s": seconds <= TARGET_SECONDS,
            "met_ge_5x": (speedup >= TARGET_SPEEDUP) if speedup is not None else None,
        }

    result = {
        "bench": "resolve_selectors",
        "samples": n,
        "sources": len(universe.source_names),
        "selectors": len(selectors),
        "resolved_count": len(k_uids),
        "headline": "resolve_selectors(stage, Universe) -> SampleRefs (a lazy Sequence[SampleRef]; the reference "
                    "returns a list)",
        "kuration_seconds": refs_best,
        "reference_seconds": reference["stage_seconds_best"] if reference else None,
        "speedup": (reference["stage_seconds_best"] / refs_best) if reference else None,
        "targets": {"kuration_seconds_max": TARGET_SECONDS, "speedup_min": TARGET_SPEEDUP},
        "met": {
            "le_1s": refs_best <= TARGET_SECONDS,
            "ge_5x": (reference["stage_seconds_best"] / refs_best >= TARGET_SPEEDUP) if reference else None,
        },
        "by_entry_point": {
            "resolve_selectors(Universe)->SampleRefs (lazy)": verdict(refs_best),
            "list(resolve_selectors(Universe)) (every SampleRef built)": verdict(mat_best),
            "resolve_positions(Universe)->positions": verdict(pos_best),
            "resolve_selectors(list[SampleRef])->list[SampleRef]": verdict(list_best),
        },
        "identical": identical,
        "uid_sha256": k_digest,
        "kuration": kuration,
        "reference": reference,
        "python": platform.python_version(),
        "tree": tree,
        "cpus": os.cpu_count(),
    }
    if reference is None:
        result["reference_reason"] = reference_reason
    result["report"] = report(result, reference_reason)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
