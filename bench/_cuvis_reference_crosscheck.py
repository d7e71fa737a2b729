"""Reference half of crosscheck_cuvis.py; runs inside bench/.venv-cuvis.

Usage: python _cuvis_reference_crosscheck.py INPUT.json OUTPUT.json

INPUT.json (written by crosscheck_cuvis.py):
  universes  {name: {"sources", "indices", "tags", "category_ids": per-row lists, "name_to_id"}}
             rows in kuration's canonical order
  cases      [{"id", "universe", "selectors": [selector dicts]}]  one stage each
  splits     [{"id", "dict": {...}, "kuration_file": path or null, "out_file": path}]

For each case: parse every selector with ``Selector.model_validate`` and resolve the
list with ``cuvis_ai_core.data.selectors.resolve_selectors``; any exception (at parse
or resolve) is recorded as raised. For each splits dict: ``DataSplitConfig.model_validate``
then ``json.dumps(cfg.to_dict(), indent=2)``; the file cuvis ``save_splits`` writes is put
at ``out_file``; the kuration-written file (if any) is loaded with cuvis ``load_splits``.
Also reports cuvis ``universe_hash`` per universe.
"""

from __future__ import annotations

import json
import logging
import sys

from cuvis_ai_core.data.selectors import resolve_selectors
from cuvis_ai_core.data.splits_io import load_splits, save_splits, universe_hash
from cuvis_ai_schemas.training.data import DataSplitConfig, SampleRef, Selector


def error_info(exc: BaseException) -> dict:
    return {"raised": True, "error_type": type(exc).__name__, "error": str(exc)[:300]}


def main() -> None:
    logging.disable(logging.WARNING)
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)

    universes = {
        name: [
            SampleRef(source=s, index=i, tags=t, category_ids=c)
            for s, i, t, c in zip(u["sources"], u["indices"], u["tags"], u["category_ids"], strict=True)
        ]
        for name, u in spec["universes"].items()
    }
    name_to_ids = {name: u.get("name_to_id") for name, u in spec["universes"].items()}
    out: dict = {
        "universe_hash": {name: universe_hash(refs) for name, refs in universes.items()},
        "cases": {},
        "splits": {},
    }

    for case in spec["cases"]:
        refs = universes[case["universe"]]
        try:
            selectors = [Selector.model_validate(d) for d in case["selectors"]]
            uids = [r.uid for r in resolve_selectors(selectors, refs, name_to_id=name_to_ids[case["universe"]])]
            out["cases"][case["id"]] = {"raised": False, "uids": uids}
        except Exception as exc:  # noqa: BLE001 - every failure is a data point
            out["cases"][case["id"]] = error_info(exc)

    for item in spec["splits"]:
        rec: dict = {}
        try:
            cfg = DataSplitConfig.model_validate(item["dict"])
            rec["accepted"] = True
            rec["text"] = json.dumps(cfg.to_dict(), indent=2)
            save_splits(cfg, item["out_file"])
        except Exception as exc:  # noqa: BLE001
            rec.update({"accepted": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        path = item.get("kuration_file")
        if path:
            try:
                loaded = load_splits(path)
                rec["kuration_file_valid"] = True
                with open(path, encoding="utf-8") as fh:
                    rec["kuration_file_roundtrip_identical"] = json.dumps(loaded.to_dict(), indent=2) == fh.read()
            except Exception as exc:  # noqa: BLE001
                rec["kuration_file_valid"] = False
                rec["kuration_file_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        out["splits"][item["id"]] = rec

    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
