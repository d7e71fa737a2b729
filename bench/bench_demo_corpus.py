"""Benchmark: writing the bundled demo landing zone (``kuration.demo.corpus``).

The demo command generates this corpus on a fresh machine, so its cost is part of the
"well under a minute" promise. Times, best of --repeats:

* ``write_demo_landing_zone`` at the default size (40 recordings at 8 sites) and at the
  small size the tests use (one one-minute recording per site);
* the baseline: copying the files the default run wrote (the same bytes, plain
  ``open().write`` of each file into a fresh folder), measured in the same run.

The figure to watch is ``default.ratio_to_raw_copy``; the absolute seconds are there too.
These were asserted as wall-clock limits in tests/demo until timing moved here (shared
cores made them flaky). Prints one JSON object.

Run from the repo root:  .venv/bin/python bench/bench_demo_corpus.py
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import best_of  # noqa: E402
from _report import figure, ratio  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402

from kuration.demo.corpus import write_demo_landing_zone  # noqa: E402


def _copy_bytes(files: list[tuple[Path, bytes]], into: Path) -> None:
    for relative, data in files:
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is reported (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        counter = iter(range(10**6))

        def default() -> object:
            return write_demo_landing_zone(root / f"default-{next(counter)}")

        def small() -> object:
            return write_demo_landing_zone(root / f"small-{next(counter)}", seed=3, recordings_per_site=1,
                                           minutes=(1, 1))

        best_default, runs_default, zone = best_of(default, args.repeats)
        best_small, runs_small, _ = best_of(small, args.repeats)
        written = Path(zone.root)
        files = [(p.relative_to(written), p.read_bytes()) for p in sorted(written.rglob("*")) if p.is_file()]
        best_copy, runs_copy, _ = best_of(lambda: _copy_bytes(files, root / f"copy-{next(counter)}"), args.repeats)
        for leftover in root.iterdir():
            shutil.rmtree(leftover, ignore_errors=True)
    former_limit = "the wall-clock limit tests/demo asserted before timing moved here"
    report = [
        ratio("default corpus: write seconds / raw copy seconds", best_default, best_copy,
              f"plain open().write of the same {len(files)} files ({zone.bytes:,} bytes) into a fresh folder",
              note="time over time: the corpus is simulated, not copied"),
        figure("default corpus (40 recordings), write", best_default, "s", "absolute wall time, best run",
               target="<= 15 s", note=former_limit),
        figure("small corpus (the tests' size), write", best_small, "s", "absolute wall time, best run",
               target="<= 3 s", note=former_limit),
    ]
    print(json.dumps({
        "bench": "demo_corpus",
        "report": report,
        "default": {"seconds": best_default, "runs": runs_default, "bytes": zone.bytes, "recordings": zone.recordings,
                    "ratio_to_raw_copy": best_default / best_copy},
        "small": {"seconds": best_small, "runs": runs_small},
        "raw_copy": {"seconds": best_copy, "runs": runs_copy, "files": len(files)},
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "tree": kuration_tree_state(),
    }, indent=1))


if __name__ == "__main__":
    main()
