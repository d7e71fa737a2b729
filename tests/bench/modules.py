"""Load a file of bench/ as a module: bench/ is a folder of scripts, not a package (its
scripts import each other by bare name with bench/ on sys.path), and run_all has no .py."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def load_bench_module(name: str) -> ModuleType:
    """bench/<name>.py (or bench/<name> when there is no such file) as module ``bench_file_<name>``."""
    path = BENCH_DIR / f"{name}.py"
    if not path.exists():
        path = BENCH_DIR / name
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))  # what the scripts themselves do for their imports
    loader = importlib.machinery.SourceFileLoader(f"bench_file_{name}", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module
