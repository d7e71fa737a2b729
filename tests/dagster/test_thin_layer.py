"""The Dagster layer stays thin: every asset, check, sensor and schedule body is a few lines
that read resources, call the core and report. Logic that grows past that belongs in
``kuration/``."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("splits_assets", "kuration_assets", "rollout_assets", "kuration_definitions")
DECORATORS = {"asset", "asset_check", "multi_asset", "multi_asset_check", "graph_asset", "graph_multi_asset",
              "sensor", "asset_sensor", "multi_asset_sensor", "run_status_sensor", "run_failure_sensor", "schedule"}
#: Lines of a body (its docstring aside) from its first statement to its last.
MAX_BODY_LINES = 20


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _decorated_bodies() -> dict[str, int]:
    """``path:function`` -> body lines, for every function with a Dagster asset, check, sensor
    or schedule decorator."""
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


def test_every_asset_check_sensor_and_schedule_body_is_short():
    bodies = _decorated_bodies()
    too_long = {name: lines for name, lines in bodies.items() if lines > MAX_BODY_LINES}
    assert too_long == {}, f"move the logic into kuration/ (at most {MAX_BODY_LINES} lines a body): {too_long}"


def test_the_probe_finds_every_asset_and_check():
    # guard against a vacuous pass: the walk sees the real definitions, wrapped ones included
    names = {name.rsplit(":", 1)[1] for name in _decorated_bodies()}
    assert names >= {"universe", "resolved_splits", "universe_schema", "split_leakage", "universe_drift",
                     "scored_segments", "budget_plan", "budget", "shards_and_manifest", "rollout_store",
                     "new_recordings_sensor"}


def _user_function(definition) -> object:
    """The function a sensor or schedule evaluates, unwrapped from what Dagster wraps it in."""
    fn = getattr(definition, "_raw_fn", None) or getattr(definition, "_execution_fn", None)
    return getattr(fn, "decorated_fn", fn)


def test_every_sensor_and_schedule_of_the_code_location_is_a_short_body_or_declarative(monkeypatch, tmp_path):
    # a body of ours is one the probe measured; anything else is Dagster's own evaluation of a
    # declaration (a cron and a job, an automation condition), with no code of ours to grow
    from kuration_definitions import build_definitions

    monkeypatch.setenv("KURATION_LANDING_ZONE", str(tmp_path))
    defs = build_definitions()
    measured = {name.rsplit(":", 1)[1] for name in _decorated_bodies()}
    ours, declared = [], []
    for definition in [*defs.sensors, *defs.schedules]:
        fn = _user_function(definition)
        module = getattr(fn, "__module__", "") or ""
        if module.split(".")[0] in PACKAGES:
            ours.append(definition.name)
            assert fn.__name__ in measured, f"{definition.name}: its body {fn.__name__} escaped the probe"
        else:
            declared.append(definition.name)
    assert "new_recordings_sensor" in ours
    assert {"nightly_recuration", "default_automation_condition_sensor"} <= set(declared)


def test_no_check_repeats_the_severity_ladder():
    # the error/warn decision is CheckResult.severity, turned into Dagster's by one adapter
    offenders = [str(path.relative_to(REPO)) for package in PACKAGES for path in (REPO / package).rglob("*.py")
                 if "AssetCheckSeverity" in path.read_text()]
    assert offenders == []
