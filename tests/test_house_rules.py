"""The shape rules issue 24 set for ``kuration/`` hold, so the house does not grow back into
a grab-bag: at most 10 plain modules at its top, no function over 80 lines, no public
function over 12 parameters and no internal one over 8, the seeds' entry points aside (they
keep the keyword arguments their seeds name)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kuration"
MAX_TOP_LEVEL_MODULES = 10
MAX_FUNCTION_LINES = 80
MAX_PUBLIC_PARAMETERS = 12
MAX_INTERNAL_PARAMETERS = 8
#: The seeds name these functions and every keyword argument they take (seed 000:
#: write_dataset; seed 004: write_rollout_zarr_store); they gather them into an options
#: object and call plan, then publish.
SEED_ENTRY_POINTS = {("output/write_dataset.py", "write_dataset"), ("rollouts/writer.py", "write_rollout_zarr_store")}


def _functions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)


def _is_internal(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def shape_problems(package: Path) -> list[str]:
    """Each breach of the rules above in ``package``, as ``file:line name: what``."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        for function in _functions(path.read_text(encoding="utf-8")):
            where = f"{relative}:{function.lineno} {function.name}"
            lines = (function.end_lineno or function.lineno) - function.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                problems.append(f"{where}: {lines} lines, over {MAX_FUNCTION_LINES}")
            bound = MAX_INTERNAL_PARAMETERS if _is_internal(function.name) else MAX_PUBLIC_PARAMETERS
            if (relative, function.name) not in SEED_ENTRY_POINTS and _parameters(function) > bound:
                problems.append(f"{where}: {_parameters(function)} parameters, over {bound}")
    return problems


def test_kuration_keeps_its_functions_short_and_their_parameters_few():
    assert shape_problems(PACKAGE) == []


def test_kuration_has_at_most_ten_plain_modules_at_its_top():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


@pytest.mark.parametrize("source, problem", [
    ("def f():\n" + "    x = 1\n" * 80, "f: 81 lines, over 80"),
    ("def f(a, b, c, d, e, f, g, h, i, j, k, l, m):\n    pass\n", "f: 13 parameters, over 12"),
    ("def _f(a, b, c, d, e, f, g, h, i):\n    pass\n", "_f: 9 parameters, over 8"),
    ("class C:\n    def _m(self, a, b, c, d, e, f, g, h, i):\n        pass\n", "_m: 9 parameters, over 8"),
])
def test_the_rules_find_a_long_function_and_too_many_parameters(tmp_path, source, problem):
    (tmp_path / "module.py").write_text(source)
    assert [p.split(" ", 1)[1] for p in shape_problems(tmp_path)] == [problem]


def test_the_rules_pass_a_short_function_a_method_with_self_and_a_dunder_at_the_public_bound(tmp_path):
    (tmp_path / "module.py").write_text(
        "def f(a, b, c, d, e, f, g, h, i, j, k, l):\n    pass\n"
        "class C:\n    def __init__(self, a, b, c, d, e, f, g, h, i, j):\n        pass\n"
        "    def _m(self, a, b, c, d, e, f, g, h):\n        pass\n")
    assert shape_problems(tmp_path) == []
