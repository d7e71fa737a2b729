"""Reference half of bench_resolve_selectors.py; runs inside bench/.venv-cuvis.

Usage: python _cuvis_reference_resolve.py INPUT.json

INPUT.json (written by bench_resolve_selectors.py):
  source_names  list of source strings
  runs          [[source_code, first_index, stop_index_exclusive], ...] in kuration's
                canonical row order (so dir_indices positions mean the same rows)
  selectors     the stage's selector list as JSON dicts
  repeats       how many timed repeats of the stage list (best is reported)
  individual    also time each top-level selector alone (one run each)

Prints one JSON object: timings, sample count, and a sha256 over the resolved uids
(each followed by "\\n") so the caller can check the two implementations agree.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import sys
import time

from cuvis_ai_core.data.selectors import resolve_selectors
from cuvis_ai_schemas.training.data import SampleRef, Selector


def digest(uids: list[str]) -> str:
    h = hashlib.sha256()
    for uid in uids:
        h.update(uid.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def main() -> None:
    logging.disable(logging.WARNING)
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    names = spec["source_names"]

    t0 = time.perf_counter()
    refs = [SampleRef(source=names[code], index=i) for code, start, stop in spec["runs"] for i in range(start, stop)]
    build_refs = time.perf_counter() - t0

    t0 = time.perf_counter()
    selectors = [Selector.model_validate(d) for d in spec["selectors"]]
    parse = time.perf_counter() - t0

    times = []
    result: list[SampleRef] = []
    for _ in range(max(1, int(spec.get("repeats", 1)))):
        result = []
        gc.collect()
        t0 = time.perf_counter()
        result = resolve_selectors(selectors, refs)
        times.append(time.perf_counter() - t0)
    uids = [r.uid for r in result]

    individual = []
    if spec.get("individual"):
        for sel in selectors:
            gc.collect()
            t0 = time.perf_counter()
            part = resolve_selectors([sel], refs)
            individual.append({"kind": sel.kind.value, "seconds": time.perf_counter() - t0, "count": len(part)})

    print(json.dumps({
        "universe_size": len(refs),
        "build_sampleref_list_seconds": build_refs,
        "parse_selectors_seconds": parse,
        "stage_seconds_best": min(times),
        "stage_seconds_all": times,
        "count": len(uids),
        "uid_sha256": digest(uids),
        "first_uids": uids[:3],
        "last_uids": uids[-3:],
        "individual": individual,
    }))


if __name__ == "__main__":
    main()
