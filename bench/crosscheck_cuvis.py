"""Differential check of kuration.splits against the Cuvis.AI reference.

Runs in the project venv; the reference runs as a subprocess in ``bench/.venv-cuvis``
(built on first use, see ``_reference_env.py``) via ``_cuvis_reference_crosscheck.py``.

1. Selector resolution: ~200 seeded random stage selector lists (nested
   union/except/intersect, ``a-b`` / ``a-b:step`` ranges, dir_indices, glob, stems, files,
   file_indices, all, plus a few malformed ones) over a small random universe, resolved by
   ``kuration.splits.resolve_selectors`` (over a ``Universe`` and over a
   ``list[SampleRef]``) and by ``cuvis_ai_core.data.selectors.resolve_selectors``. The uid
   lists must be identical; a list that raises in one must raise in the other.
2. Edge probes: hand-written cases at the corners (odd file names, id spellings, empty
   strings), reported one by one.
3. ``splits.json``: ~100 seeded random ``DataSplitConfig`` dicts (explicit
   ``constraints``): kuration ``dumps_splits`` must equal Cuvis
   ``json.dumps(DataSplitConfig.model_validate(d).to_dict(), indent=2)`` byte for byte,
   the file kuration ``save_splits`` writes must equal the one Cuvis ``save_splits``
   writes, and must load under Cuvis ``load_splits`` (the cuvis_ai_schemas model).
4. ``universe_hash`` of each universe: kuration vs Cuvis, including one of whole-file
   samples (``SampleRef`` without an index, as Cuvis.AI's disk-enumerated modules make
   them), over which a few probes are resolved as well.

Prints one JSON summary. Run from the repo root:  .venv/bin/python bench/crosscheck_cuvis.py
Options: --seed N, --cases N, --splits N.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _reference_env import ensure_reference_python, kuration_tree_state  # noqa: E402
from _report import figure  # noqa: E402

from kuration.errors import KurationError  # noqa: E402
from kuration.splits import (  # noqa: E402
    DataSplitConfig,
    PreloadedAttributes,
    Selector,
    Universe,
    dumps_splits,
    resolve_selectors,
    save_splits,
    universe_hash,
)

# --------------------------------------------------------------------------- universe


def random_universe(rng: random.Random) -> tuple[list[str], list[int]]:
    """~12 sources with gappy index sets; stems shared across folders, several extensions."""
    dirs = ["site_a", "site_b", "site_a/sub", "Site_C", "d"]
    exts = [".rec", ".cu3s", ".npz", ""]
    sources: set[str] = set()
    while len(sources) < 11:
        prefix = rng.choice(["rec", "cal", "run"])
        sources.add(f"{rng.choice(dirs)}/{prefix}_{rng.randrange(6):03d}{rng.choice(exts)}")
    sources.add("site_b/über_001.npz")  # non-ASCII
    src_col: list[str] = []
    idx_col: list[int] = []
    for s in sorted(sources, key=lambda _: rng.random()):  # rows not pre-sorted
        k = rng.choice([1, 1, 3, 8, 15])
        for i in rng.sample(range(0, 30), k):
            src_col.append(s)
            idx_col.append(i)
    return src_col, idx_col


# --------------------------------------------------------------------------- selectors

TAGS = ["normal", "anomalous", "blurry", "night"]
CATEGORIES = {"background": 0, "crack": 1, "dent": 2, "stain": 3}

GLOBS = [
    "*", "rec_*", "*.npz", "site_a/*", "site_a/sub/*", "*_00[0-2]", "?al_*", "*[!0-9]", "Site_C/*",
    "site_?/*", "*sub*", "run_0??", "[rc]*", "*.cu3s", "d/*", "nomatch*", "*0",
]


class Gen:
    def __init__(self, rng: random.Random, sources: list[str], n: int, *, clean: bool = False) -> None:
        self.rng = rng
        self.sources = sorted(set(sources))
        self.n = n
        self.clean = clean  # only structurally valid output (for the splits.json check)
        self.stems = sorted({s.rsplit("/", 1)[-1].rsplit(".", 1)[0] for s in self.sources})

    def path(self) -> str:
        r = self.rng.random()
        s = self.rng.choice(self.sources)
        if r < 0.75:
            return s
        if r < 0.82:
            return "./" + s
        if r < 0.88:
            head, _, tail = s.rpartition("/")
            return f"{head}/../{head.rsplit('/', 1)[-1]}/{tail}" if head else s
        if r < 0.94:
            return s.replace("/", "\\")  # windows-authored: folded to lower case for matching
        return self.rng.choice(["site_z/nope.rec", "missing.npz", "site_a"])

    def ids(self, top: int) -> list:
        out: list = []
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            a = self.rng.randrange(top)
            b = min(top + 3, a + self.rng.randrange(12))
            if r < 0.4:
                out.append(a)
            elif r < 0.75:
                out.append(f"{a}-{b}")
            elif r < 0.93:
                out.append(f"{a}-{b}:{self.rng.randint(1, 4)}")
            elif self.clean or r < 0.97:
                out.append(f" {a}-{b} ")
            else:
                out.append(self.rng.choice([f"{b + 1}-{a}", "x", f"{a}-{b}:0", -1, f" {a}-{b} "]))
        return out

    def leaf(self) -> dict:
        kind = self.rng.choices(
            ["files", "file_indices", "dir_indices", "stems", "glob", "all", "tag", "categories"],
            [3, 5, 3, 2, 3, 1, 2, 2],
        )[0]
        if kind == "files":
            return {"kind": kind, "paths": [self.path() for _ in range(self.rng.randint(1, 3))]}
        if kind == "file_indices":
            return {"kind": kind, "source": self.path(), "ids": self.ids(32)}
        if kind == "dir_indices":
            top = self.n + (0 if self.clean or self.rng.random() < 0.9 else 2)
            return {"kind": kind, "ids": self.ids(top) if self.rng.random() < 0.9 else [self.rng.randrange(top)]}
        if kind == "stems":
            pool = self.stems + ["nostem"]
            return {"kind": kind, "stems": self.rng.sample(pool, self.rng.randint(1, min(3, len(pool))))}
        if kind == "glob":
            return {"kind": kind, "pattern": self.rng.choice(GLOBS)}
        if kind == "tag":
            return {"kind": kind, "any_of": self.rng.sample(TAGS + ["unused_tag"], self.rng.randint(1, 2))}
        if kind == "categories":
            pool = list(CATEGORIES) + ([] if self.clean or self.rng.random() < 0.9 else ["rust"])
            return {"kind": kind, "any_of": self.rng.sample(pool, self.rng.randint(1, 2))}
        return {"kind": "all"}

    def selector(self, depth: int = 0) -> dict:
        if depth < 3 and self.rng.random() < (0.45 if depth == 0 else 0.3):
            kind = self.rng.choice(["union", "except", "intersect"])
            lo = 1 if kind == "union" else 2
            return {"kind": kind, "of": [self.selector(depth + 1) for _ in range(self.rng.randint(lo, 3))]}
        return self.leaf()

    def malformed(self) -> dict:
        return self.rng.choice([
            {"kind": "glob", "pattern": "*", "ids": [1]},
            {"kind": "except", "of": [{"kind": "all"}]},
            {"kind": "intersect", "of": [{"kind": "all"}]},
            {"kind": "file_indices", "ids": [1]},
            {"kind": "bogus"},
            {"kind": "all", "extra": 1},
            {"kind": "files", "paths": []},
            {"kind": "union", "of": []},
            {"kind": "dir_indices", "ids": ["1-"]},
            {"kind": "stems", "stems": "rec_000"},
        ])

    def stage(self) -> list[dict]:
        sels = [self.selector() for _ in range(self.rng.randint(1, 3))]
        if not self.clean and self.rng.random() < 0.05:
            sels.insert(self.rng.randrange(len(sels) + 1), self.malformed())
        return sels


def sparsify(sel: dict, rng: random.Random) -> dict:
    """Spell some default fields out explicitly (both sides must accept and drop them)."""
    out = dict(sel)
    if "of" in out:
        out["of"] = [sparsify(c, rng) for c in out["of"]]
    for name, empty in (("paths", []), ("source", None), ("ids", []), ("stems", []), ("pattern", None), ("any_of", []),
                        ("of", [])):
        if name not in out and rng.random() < 0.2:
            out[name] = empty
    return out


def random_splits_dict(rng: random.Random, gen: Gen) -> dict:
    d: dict = {}
    if rng.random() < 0.5:
        d["universe_hash"] = "%064x" % rng.getrandbits(256)
    if rng.random() < 0.2:
        d["splits_path"] = rng.choice(["splits.json", "configs/splits/v2.json", "données/split.json"])
    for stage in ("train", "val", "test", "predict"):
        if rng.random() < 0.8:
            d[stage] = [sparsify(s, rng) for s in gen.stage()] if rng.random() < 0.85 else []
    kinds = ["no_split_overlap", "no_source_overlap", "no_train_anomalous"]
    chosen = rng.sample(kinds, rng.randint(0, 3))
    cons = []
    for k in chosen:
        c = {"kind": k}
        if rng.random() < 0.7:
            c["severity"] = rng.choice(["error", "warn"])
        cons.append(c)
    d["constraints"] = cons
    if rng.random() < 0.05:  # a few both must reject
        d["constraints"] = cons + [{"kind": "no_split_overlap"}, {"kind": "no_split_overlap"}]
    keys = list(d)
    rng.shuffle(keys)  # key order of the input must not matter
    return {k: d[k] for k in keys}


# --------------------------------------------------------------------------- edge probes


EDGE_SOURCES = [
    "e/b.", "e/...", "e/name.with.dots.rec", "e/.hidden", "e/noext", "e/..b", "e/c..", "e/rec_000.rec",
]


def edge_probes() -> list[tuple[str, list[dict]]]:
    return [
        ("stems ['b.'] on source 'e/b.'", [{"kind": "stems", "stems": ["b."]}]),
        ("stems ['b'] on source 'e/b.'", [{"kind": "stems", "stems": ["b"]}]),
        ("glob 'b.' (stem match)", [{"kind": "glob", "pattern": "b."}]),
        ("stems ['...'] on source 'e/...'", [{"kind": "stems", "stems": ["..."]}]),
        ("stems ['..'] on source 'e/...'", [{"kind": "stems", "stems": [".."]}]),
        ("stems ['c.'] on source 'e/c..'", [{"kind": "stems", "stems": ["c."]}]),
        ("stems ['name.with.dots']", [{"kind": "stems", "stems": ["name.with.dots"]}]),
        ("stems ['.hidden']", [{"kind": "stems", "stems": [".hidden"]}]),
        ("stems ['noext']", [{"kind": "stems", "stems": ["noext"]}]),
        ("glob '*.' ", [{"kind": "glob", "pattern": "*."}]),
        ("dir_indices ids ['5'] (digit string)", [{"kind": "dir_indices", "ids": ["5"]}]),
        ("file_indices ids ['0'] (digit string)", [{"kind": "file_indices", "source": "e/rec_000.rec", "ids": ["0"]}]),
        ("dir_indices ids [true]", [{"kind": "dir_indices", "ids": [True]}]),
        ("dir_indices ids [2.0]", [{"kind": "dir_indices", "ids": [2.0]}]),
        ("dir_indices ids ['²'] (unicode digit)", [{"kind": "dir_indices", "ids": ["²"]}]),
        ("dir_indices ids ['١-٣'] (arabic-indic range)", [{"kind": "dir_indices", "ids": ["١-٣"]}]),
        ("dir_indices ids [' 1-2 ']", [{"kind": "dir_indices", "ids": [" 1-2 "]}]),
        ("dir_indices ids ['1 - 2']", [{"kind": "dir_indices", "ids": ["1 - 2"]}]),
        ("except [all, files ['']]", [{"kind": "except", "of": [{"kind": "all"}, {"kind": "files", "paths": [""]}]}]),
        ("except [all, stems ['']]", [{"kind": "except", "of": [{"kind": "all"}, {"kind": "stems", "stems": [""]}]}]),
        ("except [all, tag any_of ['']]",
         [{"kind": "except", "of": [{"kind": "all"}, {"kind": "tag", "any_of": [""]}]}]),
        ("glob '' (empty pattern)", [{"kind": "glob", "pattern": ""}]),
        ("file_indices source '' ", [{"kind": "file_indices", "source": "", "ids": [0]}]),
        ("files ['E/REC_000.REC'] (case)", [{"kind": "files", "paths": ["E/REC_000.REC"]}]),
        ("files ['e\\\\rec_000.rec'] (backslash)", [{"kind": "files", "paths": ["e\\rec_000.rec"]}]),
        ("files ['e//rec_000.rec']", [{"kind": "files", "paths": ["e//rec_000.rec"]}]),
        ("files ['/e/rec_000.rec'] (absolute)", [{"kind": "files", "paths": ["/e/rec_000.rec"]}]),
        ("union of one operand", [{"kind": "union", "of": [{"kind": "glob", "pattern": "e/*"}]}]),
        ("dir_indices with duplicates [3, 1, 3, '0-3']", [{"kind": "dir_indices", "ids": [3, 1, 3, "0-3"]}]),
        ("tag any_of ['normal'] (default loader tags every row 'normal'; passed to the reference too)",
         [{"kind": "tag", "any_of": ["normal"]}]),
        ("categories any_of ['cat'] (no categories)", [{"kind": "categories", "any_of": ["cat"]}]),
        ("ids with null entry", [{"kind": "dir_indices", "ids": [None]}]),
        ("paths null", [{"kind": "files", "paths": None}]),
    ]


#: Whole-file samples (index None) beside one indexed recording.
WHOLE_SOURCES = [("cubes/a.tif", None), ("cubes/b.tif", None), ("cubes/sub/c.tif", None), ("rec/x.cu3s", 0),
                 ("rec/x.cu3s", 1)]


def whole_file_probes() -> list[tuple[str, list[dict]]]:
    return [
        ("whole-file: all", [{"kind": "all"}]),
        ("whole-file: files ['cubes/b.tif']", [{"kind": "files", "paths": ["cubes/b.tif"]}]),
        ("whole-file: glob '*.tif'", [{"kind": "glob", "pattern": "*.tif"}]),
        ("whole-file: stems ['c', 'x']", [{"kind": "stems", "stems": ["c", "x"]}]),
        ("whole-file: dir_indices [4, 0, 2]", [{"kind": "dir_indices", "ids": [4, 0, 2]}]),
        ("whole-file: file_indices a.tif [0] (matches nothing)",
         [{"kind": "file_indices", "source": "cubes/a.tif", "ids": [0]}]),
        ("whole-file: except [all, files [a.tif]]",
         [{"kind": "except", "of": [{"kind": "all"}, {"kind": "files", "paths": ["cubes/a.tif"]}]}]),
    ]


# --------------------------------------------------------------------------- kuration side


def kuration_resolve(universe: Universe, ref_list: list, selectors: list[dict], name_to_id: dict | None) -> dict:
    """Universe path takes the name->id map from the universe's attributes; list path is given it."""
    try:
        sels = [Selector.from_dict(d) for d in selectors]
        uids = [r.uid for r in resolve_selectors(sels, universe)]
    except Exception as exc:  # noqa: BLE001
        return {
            "raised": True,
            "error_type": type(exc).__name__,
            "error": str(exc)[:300],
            "kuration_error_class": isinstance(exc, KurationError),
        }
    try:
        via_list = [r.uid for r in resolve_selectors(sels, ref_list, name_to_id=name_to_id)]
    except Exception as exc:  # noqa: BLE001
        via_list = f"raised {type(exc).__name__}: {exc}"
    return {"raised": False, "uids": uids, "list_path_agrees": via_list == uids}


def compare(mine: dict, theirs: dict) -> str:
    if mine["raised"] and theirs["raised"]:
        return "both_raised"
    if mine["raised"] != theirs["raised"]:
        return "raise_mismatch"
    return "identical" if mine["uids"] == theirs["uids"] else "uid_mismatch"


def detail(case_id: str, selectors: list[dict], mine: dict, theirs: dict) -> dict:
    def short(r: dict) -> dict:
        if r["raised"]:
            return {"raised": f"{r['error_type']}: {r['error']}"}
        return {"count": len(r["uids"]), "uids": r["uids"][:12]}

    out = {"case": case_id, "selectors": selectors, "kuration": short(mine), "reference": short(theirs)}
    if not mine["raised"] and not theirs["raised"]:
        a, b = set(mine["uids"]), set(theirs["uids"])
        out["only_kuration"] = sorted(a - b)[:10]
        out["only_reference"] = sorted(b - a)[:10]
        out["same_set_different_order"] = a == b
    return out


# --------------------------------------------------------------------------- main


def report(summary: dict) -> list[dict]:
    """The uniform figures (see _report.py): shares of cases where both implementations agree."""
    reference = "the Cuvis.AI reference on the same cases"
    if summary.get("reference", True) is None:
        why = f"no reference: {summary.get('reason')}"
        return [figure(name, None, "fraction", reference, target=target, note=why) for name, target in (
            ("random stage selector lists: agreement", "== 1"), ("edge probes: agreement", None),
            ("splits.json text byte-identical", "== 1"), ("universe_hash identical", None))]
    resolution, edge, splits = summary["resolution"], summary["edge_probes"], summary["splits_json"]
    hashes = summary["universe_hash"]
    accepted = splits["both_accepted"]
    return [
        figure("random stage selector lists: agreement", resolution["agreements"] / max(1, resolution["cases"]),
               "fraction", reference, target="== 1",
               note=f"{resolution['agreements']} of {resolution['cases']} agree (same uids, or both raise)"),
        figure("edge probes: agreement", edge["agree"] / max(1, edge["agree"] + edge["disagree"]), "fraction",
               reference, note=f"{edge['disagree']} of {edge['agree'] + edge['disagree']} probes differ "
                                "(reported one by one; see bench/README.md)"),
        figure("splits.json text byte-identical", splits["text_identical"] / max(1, accepted), "fraction",
               "Cuvis json.dumps(DataSplitConfig.model_validate(d).to_dict(), indent=2)", target="== 1",
               note=f"{splits['text_identical']} of {accepted} configs both accept; "
                    f"{splits['accept_mismatch']} accepted by one side only"),
        figure("universe_hash identical", sum(h["identical"] for h in hashes.values()) / max(1, len(hashes)),
               "fraction", reference, note=f"{len(hashes)} universes"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--splits", type=int, default=100)
    args = ap.parse_args()
    tree = kuration_tree_state()  # the code that gets imported/run is the tree as of now
    logging.disable(logging.WARNING)
    rng = random.Random(args.seed)

    src, idx = random_universe(rng)
    plain = Universe.from_columns(src, np.asarray(idx))
    canon_src = [plain.source_names[c] for c in plain.source_codes.tolist()]
    tags = [rng.sample(TAGS, rng.randint(0, 2)) for _ in canon_src]
    cats = [sorted(rng.sample(list(CATEGORIES.values()), rng.randint(0, 2))) for _ in canon_src]
    # Tags / category ids ride on the universe (given in canonical row order); the reference
    # gets the very same values on its SampleRefs, plus the same name->id map.
    by_uid = {f"{src}#{idx}": (t, c)
              for src, idx, t, c in zip(canon_src, plain.indices.tolist(), tags, cats, strict=True)}
    main_u = Universe.from_columns(
        canon_src, plain.indices, attributes=PreloadedAttributes(by_uid, name_to_id=CATEGORIES)
    )
    edge_u = Universe.from_columns(
        [s for s in EDGE_SOURCES for _ in range(2)], np.asarray([i for _ in EDGE_SOURCES for i in (0, 1)])
    )
    whole_u = Universe.from_columns([s for s, _ in WHOLE_SOURCES], [i for _, i in WHOLE_SOURCES])
    universes = {"random": main_u, "edge": edge_u, "whole": whole_u}
    name_to_ids = {"random": CATEGORIES, "edge": None, "whole": None}
    every_attr = frozenset({"tags", "category_ids"})
    ref_lists = {name: u.refs(np.arange(len(u)), attrs=every_attr) for name, u in universes.items()}

    gen = Gen(rng, src, len(main_u))
    cases = [{"id": f"r{i:03d}", "universe": "random", "selectors": gen.stage()} for i in range(args.cases)]
    probes = edge_probes()
    cases += [{"id": f"e{i:02d}", "universe": "edge", "selectors": sels, "label": label}
              for i, (label, sels) in enumerate(probes)]
    cases += [
        {"id": f"w{i:02d}", "universe": "whole", "selectors": sels, "label": label}
        for i, (label, sels) in enumerate(whole_file_probes())
    ]

    clean = Gen(rng, src, len(main_u), clean=True)
    splits_dicts = [random_splits_dict(rng, clean) for _ in range(args.splits)]

    python, info = ensure_reference_python()
    with tempfile.TemporaryDirectory(prefix="kuration-crosscheck-") as tmp:
        splits_items = []
        kur_splits: dict[str, dict] = {}
        for i, d in enumerate(splits_dicts):
            sid = f"s{i:03d}"
            rec: dict = {}
            kpath = os.path.join(tmp, f"{sid}.kuration.json")
            try:
                cfg = DataSplitConfig.from_dict(json.loads(json.dumps(d)))
                rec["accepted"] = True
                rec["text"] = dumps_splits(cfg)
                save_splits(cfg, kpath)
            except Exception as exc:  # noqa: BLE001
                rec = {"accepted": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                kpath = None
            kur_splits[sid] = rec
            splits_items.append({"id": sid, "dict": d, "kuration_file": kpath,
                                 "out_file": os.path.join(tmp, f"{sid}.cuvis.json")})

        kur_cases = {
            c["id"]: kuration_resolve(
                universes[c["universe"]], ref_lists[c["universe"]], c["selectors"], name_to_ids[c["universe"]]
            )
            for c in cases
        }

        summary: dict = {"bench": "crosscheck_cuvis", "seed": args.seed, "tree": tree}
        if python is None:
            summary["reference"] = None
            summary["reason"] = info
            summary["kuration_only"] = {
                "cases": len(cases),
                "raised": sum(r["raised"] for r in kur_cases.values()),
                "list_path_disagreements": [cid for cid, r in kur_cases.items() if not r["raised"]
                                            and not r["list_path_agrees"]],
            }
            summary["report"] = report(summary)
            print(json.dumps(summary, indent=2, ensure_ascii=False))
            return
        summary["reference_versions"] = info

        in_path = os.path.join(tmp, "input.json")
        out_path = os.path.join(tmp, "output.json")
        with open(in_path, "w", encoding="utf-8") as fh:
            json.dump({
                "universes": {
                    name: {
                        "sources": [r.source for r in ref_lists[name]],
                        "indices": [r.index for r in ref_lists[name]],
                        "tags": [list(r.tags) for r in ref_lists[name]],
                        "category_ids": [list(r.category_ids) for r in ref_lists[name]],
                        "name_to_id": name_to_ids[name],
                    }
                    for name in universes
                },
                "cases": cases,
                "splits": splits_items,
            }, fh)
        script = Path(__file__).resolve().parent / "_cuvis_reference_crosscheck.py"
        proc = subprocess.run([python, str(script), in_path, out_path], capture_output=True, text=True)
        if proc.returncode != 0:
            summary["reference"] = None
            summary["reason"] = "reference run failed: " + " | ".join(proc.stderr.strip().splitlines()[-5:])
            summary["report"] = report(summary)
            print(json.dumps(summary, indent=2, ensure_ascii=False))
            return
        with open(out_path, encoding="utf-8") as fh:
            ref = json.load(fh)

        # ---- 1. random resolution cases
        counts = {"identical": 0, "both_raised": 0, "raise_mismatch": 0, "uid_mismatch": 0}
        random_mismatches = []
        nonempty = 0
        for c in cases:
            if c["universe"] != "random":
                continue
            mine, theirs = kur_cases[c["id"]], ref["cases"][c["id"]]
            verdict = compare(mine, theirs)
            counts[verdict] += 1
            nonempty += verdict == "identical" and len(mine["uids"]) > 0
            if verdict in ("raise_mismatch", "uid_mismatch"):
                random_mismatches.append(detail(c["id"], c["selectors"], mine, theirs))
        list_path_bad = [cid for cid, r in kur_cases.items() if not r["raised"] and not r["list_path_agrees"]]
        non_kuration_errors = [
            {"case": cid, "error": f"{r['error_type']}: {r['error']}"}
            for cid, r in kur_cases.items() if r["raised"] and not r["kuration_error_class"]
        ]
        summary["resolution"] = {
            "universe": {"samples": len(main_u), "sources": len(main_u.source_names)},
            "cases": sum(1 for c in cases if c["universe"] == "random"),
            **counts,
            "agreements": counts["identical"] + counts["both_raised"],
            "mismatches": counts["raise_mismatch"] + counts["uid_mismatch"],
            "identical_nonempty": nonempty,
            "kuration_universe_vs_sampleref_list_path_disagreements": list_path_bad,
            "first_mismatches": random_mismatches[:5],
        }

        # ---- 2. edge probes
        edge = []
        for c in cases:
            if c["universe"] not in ("edge", "whole"):
                continue
            mine, theirs = kur_cases[c["id"]], ref["cases"][c["id"]]
            verdict = compare(mine, theirs)
            row = {"probe": c["label"], "verdict": verdict}
            if verdict != "identical":
                d = detail(c["id"], c["selectors"], mine, theirs)
                row["kuration"], row["reference"] = d["kuration"], d["reference"]
            edge.append(row)
        summary["edge_probes"] = {
            "universe_sources": EDGE_SOURCES,
            "agree": sum(r["verdict"] in ("identical", "both_raised") for r in edge),
            "disagree": sum(r["verdict"] not in ("identical", "both_raised") for r in edge),
            "probes": edge,
            "non_kuration_exception_types": [e for e in non_kuration_errors if e["case"].startswith(("e", "w"))],
        }
        summary["resolution"]["non_kuration_exception_types"] = [
            e for e in non_kuration_errors if e["case"].startswith("r")
        ]

        # ---- 3. splits.json
        s_counts = {"both_accepted": 0, "both_rejected": 0, "accept_mismatch": 0,
                    "text_identical": 0, "text_mismatch": 0, "file_identical": 0, "file_mismatch": 0,
                    "kuration_file_valid_under_cuvis": 0, "kuration_file_invalid_under_cuvis": 0,
                    "kuration_file_roundtrip_identical": 0}
        s_mismatches = []
        for item in splits_items:
            sid = item["id"]
            mine, theirs = kur_splits[sid], ref["splits"][sid]
            if mine["accepted"] != theirs["accepted"]:
                s_counts["accept_mismatch"] += 1
                s_mismatches.append({"id": sid, "dict": item["dict"], "kuration": mine.get("error", "accepted"),
                                     "reference": theirs.get("error", "accepted")})
                continue
            if not mine["accepted"]:
                s_counts["both_rejected"] += 1
                continue
            s_counts["both_accepted"] += 1
            if mine["text"] == theirs["text"]:
                s_counts["text_identical"] += 1
            else:
                s_counts["text_mismatch"] += 1
                a, b = mine["text"].splitlines(), theirs["text"].splitlines()
                first = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
                s_mismatches.append({"id": sid, "dict": item["dict"], "first_differing_line": first + 1,
                                     "kuration_line": a[first] if first < len(a) else None,
                                     "reference_line": b[first] if first < len(b) else None})
            with open(item["kuration_file"], "rb") as fa, open(item["out_file"], "rb") as fb:
                same = fa.read() == fb.read()
            s_counts["file_identical" if same else "file_mismatch"] += 1
            if theirs.get("kuration_file_valid"):
                s_counts["kuration_file_valid_under_cuvis"] += 1
            else:
                s_counts["kuration_file_invalid_under_cuvis"] += 1
                s_mismatches.append({"id": sid, "kuration_file_error": theirs.get("kuration_file_error")})
            s_counts["kuration_file_roundtrip_identical"] += bool(theirs.get("kuration_file_roundtrip_identical"))
        summary["splits_json"] = {"configs": len(splits_items), **s_counts, "first_mismatches": s_mismatches[:5]}

        # ---- 4. universe hash
        summary["universe_hash"] = {
            name: {"kuration": universe_hash(u), "reference": ref["universe_hash"][name],
                   "identical": universe_hash(u) == ref["universe_hash"][name]}
            for name, u in universes.items()
        }
        summary["report"] = report(summary)
        print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
