"""Benchmark: what importing the reader costs a training node (issue 26).

Each figure is the best of --repeats fresh interpreters, timing the import statement alone
inside the process (``time.perf_counter`` around it, so the interpreter's own start is left
out), alternating the statements run by run:

* ``import numpy``: the baseline, since the reader cannot import less;
* ``import kuration.core.loaders``, the seed's numpy-only reader (target: at most 2x numpy);
* ``from kuration import iter_shards``, the seed's example;
* ``from kuration.torch import ShardDataset`` next to ``import torch`` (when torch is
  installed), as each DataLoader worker pays it.

Bytecode is compiled once into a scratch ``PYTHONPYCACHEPREFIX`` before timing, as an
installed package has it (this machine sets ``PYTHONDONTWRITEBYTECODE``; compiling every
module on each import would time the compiler). Prints one JSON object.

Run from the repo root:  .venv/bin/python bench/bench_import.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import figure, ratio  # noqa: E402
from _reference_env import kuration_tree_state  # noqa: E402

_TIMED = "import time\nstart = time.perf_counter()\n{statement}\nprint(time.perf_counter() - start)"


def _seconds(statement: str, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", _TIMED.format(statement=statement)], capture_output=True, text=True,
                          check=True, env=env)
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10,
                        help="fresh interpreters per statement; the best is reported (default 10)")
    args = parser.parse_args()
    statements = {"numpy": "import numpy", "core_loaders": "import kuration.core.loaders",
                  "from_kuration": "from kuration import iter_shards"}
    if importlib.util.find_spec("torch") is not None:
        statements["torch"] = "import torch"
        statements["core_torch"] = "from kuration.core.torch import ShardDataset"
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for statement in statements.values():  # compile once, untimed
            _seconds(statement, env)
        runs: dict[str, list[float]] = {name: [] for name in statements}
        for _ in range(args.repeats):
            for name, statement in statements.items():
                runs[name].append(_seconds(statement, env))
    best = {name: min(times) for name, times in runs.items()}
    report = [
        ratio("import kuration.core.loaders / import numpy", best["core_loaders"], best["numpy"],
              "import numpy in a fresh interpreter, same run", target="<= 2"),
        ratio("from kuration import iter_shards / import numpy", best["from_kuration"], best["numpy"],
              "import numpy in a fresh interpreter, same run"),
        figure("import kuration.core.loaders", best["core_loaders"], "s", "absolute, best fresh interpreter"),
    ]
    if "torch" in best:
        report.append(ratio("from kuration.core.torch import ShardDataset / import torch", best["core_torch"],
                            best["torch"], "import torch in a fresh interpreter, same run",
                            note="what a DataLoader worker pays on top of torch"))
    print(json.dumps({
        "bench": "import",
        "report": report,
        "best_seconds": best,
        "runs": runs,
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                    "loadavg": os.getloadavg()},
        "tree": kuration_tree_state(),
    }, indent=1))


if __name__ == "__main__":
    main()
