"""The Dagster layer stays thin: every asset and check body is a few lines that read
resources, call the core and report. Logic that grows past that belongs in ``kuration/``."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("splits_assets", "kuration_assets", "rollout_assets", "kuration_definitions")
DECORATORS = {"asset", "asset_check", "multi_asset", "multi_asset_check", "graph_asset", "graph_multi_asset"}
#: Lines of a body (its docstring aside) from its first statement to its last.
MAX_BODY_LINES = 20


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _decorated_bodies() -> dict[str, int]:
    """``path:function`` -> body lines, for every function with a Dagster asset or check decorator."""
    bodies = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if not DECORATORS & {_decorator_name(d) for d in node.decorator_list}:
                    continue
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    body = body[1:]
                lines = body[-1].end_lineno - body[0].lineno + 1 if body else 0
                bodies[f"{path.relative_to(REPO)}:{node.name}"] = lines
    return bodies


def test_every_asset_and_check_body_is_short():
    bodies = _decorated_bodies()
    too_long = {name: lines for name, lines in bodies.items() if lines > MAX_BODY_LINES}
    assert too_long == {}, f"move the logic into kuration/ (at most {MAX_BODY_LINES} lines a body): {too_long}"


def test_the_probe_finds_every_asset_and_check():
    # guard against a vacuous pass: the walk sees the real definitions, wrapped ones included
    names = {name.rsplit(":", 1)[1] for name in _decorated_bodies()}
    assert names >= {"universe", "resolved_splits", "universe_schema", "split_leakage", "universe_drift",
                     "scored_segments", "budget_plan", "budget", "shards_and_manifest"}


def test_no_check_repeats_the_severity_ladder():
    # the error/warn decision is CheckResult.severity, turned into Dagster's by one adapter
    offenders = [str(path.relative_to(REPO)) for package in PACKAGES for path in (REPO / package).rglob("*.py")
                 if "AssetCheckSeverity" in path.read_text()]
    assert offenders == []
