"""No module under ``tests/`` imports a test module (``test_*``) or a ``conftest``.

A helper kept in a test module ties two test files together (one cannot be edited, split or
deleted without breaking the other), and a fixture imported by name redefines itself in the
importer behind a ``noqa``. pytest loads ``conftest.py`` by itself and does not mean it to be
imported. What tests share lives in helper modules (``tests/output/corpus.py``,
``tests/output/committed_datasets.py``, ...), in conftest fixtures, or, for a contract every
implementation of a boundary keeps, in the kits of :mod:`kuration.testing`.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _forbidden(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def imports_of_test_modules(path: Path) -> list[str]:
    """``"<line>: <module>"`` for every import in ``path`` (at any depth) of a test module or a conftest."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            joined = base if not base or base.endswith(".") else f"{base}."
            modules = [base, *(f"{joined}{alias.name}" for alias in node.names)]
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules if m.strip(".") and _forbidden(m)]
    return found


def test_no_module_under_tests_imports_a_test_module_or_a_conftest():
    offenders = {str(path.relative_to(TESTS)): found for path in sorted(TESTS.rglob("*.py"))
                 if (found := imports_of_test_modules(path))}
    assert offenders == {}, "move what is shared into a helper module or a fixture"


def test_the_check_sees_every_form_of_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import tests.output.test_spec\n"
        "from tests.output.test_write_dataset import Corpus\n"
        "from tests.output import test_spec\n"
        "from . import conftest\n"
        "def f():\n"
        "    from .test_spec import SCHEMA\n"
        "from tests.output.corpus import Corpus\n"
        "import tests.output.testing_helpers\n"
    )
    assert imports_of_test_modules(module) == [
        "1: tests.output.test_spec", "2: tests.output.test_write_dataset", "3: tests.output.test_spec",
        "4: .conftest", "6: .test_spec",
    ]
