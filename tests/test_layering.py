"""``kuration/`` is the plain core: it must never import dagster, directly or transitively."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import kuration

ROOT = Path(kuration.__file__).parent


def _all_kuration_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(ROOT)], prefix="kuration."))


def test_every_kuration_module_imports_without_pulling_in_dagster():
    modules = ["kuration", *_all_kuration_modules()]
    assert "kuration.splits.resolve" in modules  # the walk found the real tree
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.') or "
        "m.startswith('dagster_'))\nprint(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"dagster modules loaded by kuration: {out.stdout.strip()}"


def test_no_kuration_source_file_mentions_a_dagster_import():
    offenders = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0].startswith("dagster")]
    assert offenders == []


def test_the_subprocess_check_would_catch_a_violation(tmp_path):
    # guard against a vacuous test: the same probe does report dagster when it is imported
    code = "import dagster, sys; print(any(m == 'dagster' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
