"""Every description the Dagster UI renders (assets, checks, jobs, sensors, schedules,
resources, run config and its fields) is Markdown that renders as written: no reST
double backticks or roles, no bare `<name>` that the UI takes for an HTML tag and
swallows, and no indented paragraph that turns into a code block. The descriptions the UI
also shows as plain text (an asset's line in the catalog, a sensor or schedule on the
Automation page and its own page, a job's tooltip) carry no markup at all: a backtick or
``**`` would show as it is."""

import re

import pytest

from kuration_definitions import defs

# `code` spans are shown as written, so what is inside them may hold anything
_CODE_SPAN = re.compile(r"`[^`]*`")
_HTML_LOOKING = re.compile(r"</?[A-Za-z][\w-]*")
_REST_ROLE = re.compile(r":(mod|class|func|meth|attr|data|ref):`")
_INDENTED_PARAGRAPH = re.compile(r"\n[ \t]*\n(?: {4}|\t)")


def markdown_problems(text: str) -> list[str]:
    problems = []
    if "``" in text:
        problems.append("reST double backticks (write `single`)")
    if _REST_ROLE.search(text):
        problems.append("a reST role such as :mod:`...`")
    prose = _CODE_SPAN.sub("", text)
    for tag in _HTML_LOOKING.findall(prose):
        problems.append(f"{tag}...> outside backticks renders as an HTML tag (write {{name}} or `<name>`)")
    if _INDENTED_PARAGRAPH.search(text):
        problems.append("a paragraph indented by 4 spaces renders as a code block")
    return problems


#: The descriptions the UI shows as plain text somewhere, by the prefix _descriptions gives them.
PLAIN_TEXT = ("asset ", "sensor ", "schedule ", "job ")
_LINK = re.compile(r"\[[^\]]*\]\(")


def plain_text_problems(text: str) -> list[str]:
    problems = []
    if "`" in text:
        problems.append("a backtick, which the plain-text views show as it is")
    if "**" in text:
        problems.append("bold markup, which the plain-text views show as it is")
    if _LINK.search(text):
        problems.append("a Markdown link, which the plain-text views show as it is")
    return problems


def _config_descriptions(where: str, field) -> list[tuple[str, str]]:
    found = [(where, field.description)] if field.description else []
    for name, sub in (getattr(field.config_type, "fields", None) or {}).items():
        found += _config_descriptions(f"{where}.{name}", sub)
    return found


def _descriptions() -> list[tuple[str, str]]:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    found: list[tuple[str, str]] = []
    for key in graph.get_all_asset_keys():
        found.append((f"asset {key.to_user_string()}", graph.get(key).description or ""))
    nodes = {}
    # the graph's definitions: assets, multi-assets, and checks defined on their own
    for assets in graph.assets_defs:
        if assets.is_executable:
            nodes[assets.node_def.name] = assets.node_def
        for spec in assets.check_specs:
            found.append((f"check {spec.key.to_user_string()}", spec.description or ""))
    for name, node in nodes.items():
        if node.config_schema is not None and node.config_schema.as_field() is not None:
            found += _config_descriptions(f"run config of {name}", node.config_schema.as_field())
    found += [(f"job {job.name}", job.description or "") for job in repo.get_all_jobs()]
    found += [(f"sensor {s.name}", s.description or "") for s in repo.sensor_defs]
    found += [(f"schedule {s.name}", s.description or "") for s in repo.schedule_defs]
    for name, resource in repo.get_top_level_resources().items():
        found.append((f"resource {name}", resource.description or ""))
        found += _config_descriptions(f"resource {name}", resource.config_schema.as_field())
    return found


def test_the_walk_reaches_every_kind_of_description():
    where = " ".join(w for w, _ in _descriptions())
    for needle in ("asset shards", "asset resolved_splits", "check dataset_manifest:dataset_integrity",
                   "check budget_plan:budget", "run config of budget_plan.train", "run config of budget_plan",
                   "job build_dataset", "job recurate", "sensor new_recordings_sensor",
                   "sensor default_automation_condition_sensor", "schedule nightly_recuration",
                   "resource landing_zone.recordings",
                   "resource storage_root"):
        assert needle in where


def test_every_description_renders_as_markdown():
    problems = [f"{where}: {problem}: {text[:120]!r}" for where, text in _descriptions()
                for problem in markdown_problems(text)]
    assert problems == []


def test_descriptions_shown_as_plain_text_carry_no_markup():
    shown = [(where, text) for where, text in _descriptions() if where.startswith(PLAIN_TEXT)]
    assert {where.split()[0] for where, _ in shown} == {"asset", "sensor", "schedule", "job"}
    problems = [f"{where}: {problem}: {text[:120]!r}" for where, text in shown for problem in plain_text_problems(text)]
    assert problems == []


@pytest.mark.parametrize(("text", "problem"), [
    ("runs `recurate` nightly", "a backtick"), ("the **blocking** check", "bold"), ("see [docs](x.md)", "link"),
])
def test_the_plain_text_rule_catches_markup(text, problem):
    assert any(problem in p for p in plain_text_problems(text))


def test_the_plain_text_rule_lets_file_names_and_placeholders_pass():
    assert plain_text_problems("under dataset/{split}/, as scored_segments/{recording name}.parquet") == []


@pytest.mark.parametrize(("text", "problem"), [
    ("The baked ``splits.json``", "double backticks"),
    ("under dataset/<split>/", "<split...> outside backticks"),
    ("see :mod:`kuration.checks`", "reST role"),
    ("First.\n\n    Second paragraph, indented", "code block"),
])
def test_the_rule_catches_what_the_ui_would_garble(text, problem):
    assert any(problem in p for p in markdown_problems(text))


@pytest.mark.parametrize("text", ["under `dataset/{split}/`", "under `dataset/<split>/`", "a < b and 3 <= 4",
                                  "First.\n    continued, indented, in the same paragraph"])
def test_the_rule_lets_markdown_that_renders_pass(text):
    assert markdown_problems(text) == []
