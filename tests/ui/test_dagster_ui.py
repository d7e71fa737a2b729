"""The Dagster UI as a person sees it, in headless Chromium against ``scripts/ui.sh`` (``dg dev``).

One server for the module: ``kuration-demo`` on a private instance (the session's ``demo``
fixture, run once and copied back as it left it), then ``scripts/ui.sh`` starts over its
landing zone and storage root in its own process group and is stopped by PID
at the end (nothing of it may remain). What is expected comes from the definitions and the
instance, not from a list kept here. Every page is a screenshot under
``test-artifacts/dagster_ui/``, beside the server's and the demo's logs. The browser refuses
every request that leaves the machine, and each test fails if the UI tried one. The server
listens on a free port, or on ``$KURATION_UI_TEST_PORT``.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser import artifacts_dir, chromium, local_page, require_browser, screenshot
from tests.built_once import BuiltOnce
from tests.ui.dagster_dev import (
    LOCATION,
    DagsterDev,
    DagsterDevError,
    DemoFolders,
    DemoRun,
    log_tail,
    start_dagster_dev,
    stop_dagster_dev,
    wait_until_loaded,
)

# the ui fixture takes the session's demo by name, after checking the browser
pytestmark = [pytest.mark.slow, pytest.mark.requests_fixture("demo")]

#: The asset launched from the UI: the graph's root, light, and without required config.
LAUNCHED_ASSET = "universe"
RUN_TIMEOUT_MS = 120_000


@dataclass
class DagsterUI:
    server: DagsterDev
    home: Path
    #: asset key (as the UI writes it) -> the names of its checks, from the definitions
    checks: dict[str, list[str]]
    #: job name -> ids of the runs kuration-demo made of it
    demo_runs: dict[str, list[str]]
    #: one Chromium for the module; each page gets its own context (nothing stored between pages)
    browser: Any
    #: the definitions as the server's code location loads them
    definitions: Any

    @contextmanager
    def page(self, path: str) -> Iterator[Any]:
        with local_page(self.browser, width=1600, height=1000, allow=(f"{self.url}/",)) as page:
            page.set_default_timeout(30_000)
            page.goto(f"{self.url}{path}")
            yield page
            assert page.external_requests == [], f"the UI tried to leave the machine: {page.external_requests}"

    @property
    def url(self) -> str:
        return self.server.url

    @contextmanager
    def instance(self) -> Iterator[Any]:
        from dagster import DagsterInstance

        with DagsterInstance.from_config(str(self.home)) as instance:
            yield instance


def _port() -> int:
    if os.environ.get("KURATION_UI_TEST_PORT"):
        return int(os.environ["KURATION_UI_TEST_PORT"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _definitions(landing: Path, storage: Path) -> Any:
    """The definitions as the server's code location loads them (the same settings)."""
    from kuration_definitions import build_definitions

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KURATION_LANDING_ZONE", str(landing))
        patch.setenv("KURATION_STORAGE_ROOT", str(storage))
        return build_definitions()


@pytest.fixture(scope="module")
def ui(request: pytest.FixtureRequest) -> Iterator[DagsterUI]:
    require_browser()  # before the demo: KURATION_SKIP_BROWSER=1 skips without running it
    logs = artifacts_dir() / "dagster_ui"
    logs.mkdir(parents=True, exist_ok=True)
    timings = logs / "timings.txt"  # where the module's time goes, for a CI that runs out of it
    started = time.monotonic()
    demo: BuiltOnce[DemoRun] = request.getfixturevalue("demo")  # the session's, built by its first user
    demo_folders = DemoFolders.under(demo.fresh())  # as kuration-demo left it: the UI launches runs on it
    home, landing, storage = demo_folders.home, demo_folders.landing, demo_folders.storage
    (logs / "kuration_demo.log").write_text(demo.built.out)
    if demo.built.code != 0:
        raise DagsterDevError(f"kuration-demo exited {demo.built.code}; the end of {logs / 'kuration_demo.log'}:\n"
                              f"{log_tail(logs / 'kuration_demo.log')}")
    timings.write_text(f"kuration-demo: {demo.seconds:.1f} s, once for the session; its copy here: "
                       f"{time.monotonic() - started:.1f} s\n")

    definitions = _definitions(landing, storage)
    graph = definitions.resolve_asset_graph()
    checks: dict[str, list[str]] = {key.to_user_string(): [] for key in graph.get_all_asset_keys()}
    for check_key in graph.asset_check_keys:
        checks[check_key.asset_key.to_user_string()].append(check_key.name)
    from dagster import DagsterInstance

    demo_runs: dict[str, list[str]] = {}
    with DagsterInstance.from_config(str(home)) as instance:
        for run in instance.get_runs():
            demo_runs.setdefault(run.job_name, []).append(run.run_id)

    server = start_dagster_dev(home, landing, storage, _port(), logs / "dagster_dev.log")
    try:
        loaded = wait_until_loaded(server)
        with timings.open("a") as out:
            out.write(f"dagster dev: the code location loaded {loaded:.1f} s after the start\n")
        with chromium() as browser:
            ui = DagsterUI(server=server, home=home, checks={k: sorted(v) for k, v in checks.items()},
                           demo_runs=demo_runs, browser=browser, definitions=definitions)
            _skip_community_modal(ui)
            yield ui
    finally:
        stopped = stop_dagster_dev(server)
        with timings.open("a") as out:
            out.write(f"dagster dev: stopped in {stopped.seconds:.1f} s "
                      f"{'by SIGKILL to its process group' if stopped.killed else 'by SIGTERM'}\n")
    assert not stopped.left, f"dagster dev (process group {server.group}) left processes running: {stopped.left}"


def _skip_community_modal(ui: DagsterUI) -> None:
    """A fresh instance opens the UI with a "Join the Dagster community" modal over the page:
    skip it once, as a person would; the instance remembers."""
    if not ui.server.graphql("{ shouldShowNux }")["data"]["shouldShowNux"]:
        return
    with ui.page("/") as page:
        page.get_by_role("button", name="Skip").click()
        page.get_by_role("button", name="Skip").wait_for(state="hidden")
        # the button hides at once; the instance records it when the UI's mutation lands
        deadline = time.monotonic() + 30
        while ui.server.graphql("{ shouldShowNux }")["data"]["shouldShowNux"] and time.monotonic() < deadline:
            time.sleep(0.25)
    assert ui.server.graphql("{ shouldShowNux }")["data"]["shouldShowNux"] is False


def _node_names(page: Any) -> set[str]:
    # asset nodes are the graph's foreignObjects that are not groups; the first line of each is
    # the asset's name, whether the zoom draws it minimal or in full (group outlines have none)
    lines = page.locator("svg foreignObject:not(.group)").evaluate_all(
        "nodes => nodes.map(n => n.firstElementChild ? n.firstElementChild.innerText.trim().split('\\n')[0] : '')")
    return {line for line in lines if line}


def _wait_for_nodes(page: Any, expected: set[str], seconds: float) -> set[str]:
    deadline = time.monotonic() + seconds
    while (shown := _node_names(page)) != expected and time.monotonic() < deadline:
        time.sleep(0.25)
    return shown


def test_the_lineage_graph_shows_every_asset(ui):
    """The first test of the module pays for its ``ui`` fixture: a copy of the session's demo
    (built here if no test needed it before), ``dagster dev`` started until its code location
    loaded, and a headless Chromium; 30 s to 2 min on two cores."""
    expected = set(ui.checks)
    with ui.page("/asset-groups") as page:
        page.locator("svg foreignObject").first.wait_for()
        if _wait_for_nodes(page, expected, 1) != expected:
            # several groups start collapsed: the graph's settings offer to expand them all
            page.locator("button:has([aria-label='settings'])").last.click()
            page.get_by_role("menuitem").first.wait_for()  # the menu always offers the graph's orientation
            expand = page.get_by_role("menuitem", name="Expand all groups")
            if expand.count():
                expand.click()
            page.keyboard.press("Escape")
        shown = _wait_for_nodes(page, expected, 15)
        screenshot(page, "dagster_ui/lineage")
    assert shown == expected, (f"missing from the graph: {sorted(expected - shown)}; "
                               f"not among the definitions: {sorted(shown - expected)}")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def test_each_assets_checks_are_listed_with_status_and_verdict(ui):
    from dagster import AssetCheckKey, AssetKey

    with_checks = {asset: names for asset, names in ui.checks.items() if names}
    assert with_checks, "the definitions have no asset checks"
    with ui.instance() as instance:
        latest = {(asset, name): instance.get_latest_asset_check_evaluation_record(
            AssetCheckKey(AssetKey.from_user_string(asset), name)) for asset, names in with_checks.items()
            for name in names}
    for (asset, name), record in latest.items():
        assert record is not None and record.event is not None, f"{asset}:{name} was never evaluated by the demo"
    with ui.page("/assets") as page:
        for asset, names in with_checks.items():
            page.goto(f"{ui.url}/assets/{asset}?view=checks")
            page.get_by_text(f"Checks ({len(names)})", exact=True).wait_for()
            for name in names:
                evaluation = latest[(asset, name)].event.dagster_event.event_specific_data
                row = page.locator(f"span:has(> div[title='{name}'])")
                row.click()
                page.wait_for_url(re.compile(rf"checkDetail={re.escape(name)}"))
                status = "Succeeded" if evaluation.passed else "Failed"
                assert status.lower() in row.inner_text().lower(), f"{asset}:{name} is not listed as {status}"
                result = page.get_by_text("Evaluation result", exact=True).locator("xpath=..")
                verdict = "Passed" if evaluation.passed else "Failed"
                assert verdict in result.inner_text(), f"{asset}:{name}: the evaluation result is not {verdict}"
                # the innermost block holding the latest execution: its verdict and its result
                latest_execution = page.locator("div").filter(
                    has=page.get_by_text("Latest execution", exact=True)).filter(has=result).last
                assert evaluation.description, f"{asset}:{name} gives no verdict"
                assert _collapse(evaluation.description) in _collapse(latest_execution.inner_text()), (
                    f"{asset}:{name}: its verdict {evaluation.description!r} is not shown")
                screenshot(page, f"dagster_ui/checks_{asset}_{name}")


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _markdown_tables(markdown: str) -> list[list[str]]:
    """Each Markdown table's header cells: a row of cells above a row of dashes."""
    lines = markdown.splitlines()
    return [_cells(line) for line, below in zip(lines, lines[1:], strict=False)
            if line.lstrip().startswith("|") and all(re.fullmatch(r":?-+:?", cell) for cell in _cells(below))]


def test_the_dataset_manifest_page_shows_its_report(ui):
    from dagster import AssetKey, MarkdownMetadataValue

    with ui.instance() as instance:
        event = instance.get_latest_materialization_event(AssetKey("dataset_manifest"))
    assert event is not None and event.asset_materialization is not None
    reports = {key: value.value for key, value in event.asset_materialization.metadata.items()
               if isinstance(value, MarkdownMetadataValue) and "report" in key}
    assert reports, f"dataset_manifest has no Markdown report: {sorted(event.asset_materialization.metadata)}"
    key, report = next(iter(sorted(reports.items())))
    tables = _markdown_tables(report)
    bold = re.findall(r"\*\*(.+?)\*\*", report)
    assert tables and bold, f"the {key} report has no table or bold text to look for:\n{report[:500]}"
    with ui.page("/assets/dataset_manifest") as page:
        row = page.locator("tr", has=page.get_by_text(key, exact=True))
        row.get_by_text("[Show Markdown]").click()
        dialog = page.get_by_role("dialog")
        dialog.locator("table").first.wait_for()
        headers = [[_collapse(cell) for cell in table.locator("th").all_inner_texts()]
                   for table in dialog.locator("table").all()]
        strong = [_collapse(text) for text in dialog.locator("strong").all_inner_texts()]
        screenshot(page, "dagster_ui/dataset_manifest_report")
    # rendered, not shown as source: each table with its header row, and the bold text as bold
    for header in tables:
        assert header in headers, f"the {key} table with columns {header} is not rendered (rendered: {headers})"
    for text in bold:
        assert _collapse(text) in strong, f"{text!r} of the {key} report is not rendered bold"


def test_a_materialization_launched_from_the_ui_succeeds(ui):
    from dagster import AssetKey, DagsterRunStatus

    with ui.page(f"/assets/{LAUNCHED_ASSET}") as page:
        page.get_by_text("Latest materialization").wait_for()
        page.locator("button").filter(has_text=re.compile(r"^Materialize$")).click()
        launched = page.locator("a", has_text=re.compile(r"^View$"))
        launched.wait_for()
        run_id = launched.get_attribute("href").rsplit("/", 1)[-1]
        launched.click()
        page.wait_for_url(re.compile(rf"/runs/{run_id}"))
        outcome = page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first
        outcome.wait_for(timeout=RUN_TIMEOUT_MS)
        shown = outcome.inner_text()
        screenshot(page, "dagster_ui/materialized_from_ui")
    with ui.instance() as instance:
        run = instance.get_run_by_id(run_id)
        materialization = instance.get_latest_materialization_event(AssetKey(LAUNCHED_ASSET))
    assert run is not None and run.status == DagsterRunStatus.SUCCESS and shown == "Success", (
        f"run {run_id} launched from the UI ended {shown} ({run and run.status}); see {ui.server.log}")
    assert run.asset_selection == {AssetKey(LAUNCHED_ASSET)}
    assert materialization is not None and materialization.run_id == run_id


def test_the_demos_runs_appear_under_their_jobs(ui):
    from kuration_cli.graph_run import JOB_ORDER

    assert set(JOB_ORDER) <= set(ui.demo_runs), f"kuration-demo made no run of {set(JOB_ORDER) - set(ui.demo_runs)}"
    missing = {}
    with ui.page("/jobs") as page:
        for job in JOB_ORDER:
            page.goto(f"{ui.url}/locations/{LOCATION}/jobs/{job}/runs")
            page.locator("a[href^='/runs/'], :text('No runs found')").first.wait_for()
            listed = {href.split("?")[0].rsplit("/", 1)[-1] for href in page.locator("a[href^='/runs/']").evaluate_all(
                "links => links.map(a => a.getAttribute('href'))")}
            screenshot(page, f"dagster_ui/runs_of_{job}")
            if not set(ui.demo_runs[job]) <= listed:
                missing[job] = sorted(set(ui.demo_runs[job]) - listed)
    assert not missing, f"the demo's runs are not listed under their jobs: {missing}"


def _graphql(ui: DagsterUI, query: str) -> dict:
    answer = ui.server.graphql(query)
    assert "errors" not in answer, answer
    return answer["data"]


def test_the_automation_badge_says_what_the_automation_sensor_does(ui):
    from kuration_assets.automation_badge import AUTOMATION_SENSOR_NAME

    sensor = _graphql(ui, f'''{{ sensorOrError(sensorSelector: {{repositoryLocationName: "{LOCATION}",
        repositoryName: "__repository__", sensorName: "{AUTOMATION_SENSOR_NAME}"}}) {{
        ... on Sensor {{ sensorState {{ status }} }} }} }}''')["sensorOrError"]
    running = sensor["sensorState"]["status"] == "RUNNING"
    expected = "Auto-materialize on" if running else "Auto-materialize off"
    graph = ui.definitions.resolve_asset_graph()
    automated = {key for key in graph.get_all_asset_keys() if graph.get(key).automation_condition is not None}
    jobs = sorted(job.name for job in ui.definitions.resolve_all_job_defs()
                  if not job.name.startswith("__") and set(job.asset_layer.executable_asset_keys) & automated)
    assert running and jobs, f"the automation sensor runs from the start ({sensor}), over the jobs' assets ({jobs})"
    shown = {}
    with ui.page("/jobs") as page:
        for job in jobs:
            page.goto(f"{ui.url}/locations/{LOCATION}/jobs/{job}")
            badge = page.get_by_text(re.compile(r"^Auto-materialize (on|off)$"))
            badge.wait_for()
            shown[job] = badge.inner_text()
            screenshot(page, f"dagster_ui/automation_badge_{job}")
    assert shown == dict.fromkeys(jobs, expected)


def test_the_ui_script_serves_with_dg_dev_and_leaves_nothing_in_dagster_home(ui):
    command = Path(f"/proc/{ui.server.process.pid}/cmdline").read_bytes().decode().split("\0")
    assert Path(command[1]).name == "dg" and command[2] == "dev", command
    log = ui.server.log.read_text(errors="replace")
    assert "superseded" not in log and "SupersessionWarning" not in log, f"see {ui.server.log}"
    assert "automation: default_automation_condition_sensor is on" in log  # ui.sh set the badge first
    left = sorted(name for name in ("logs", ".logs_queue") if (ui.home / name).exists())
    assert left == [], f"the server left {left} in its DAGSTER_HOME {ui.home}"


def _metadata_keys(page: Any) -> list[str]:
    """The keys of the metadata table of an asset's Overview (its outer table, headed Key), in order."""
    outer = page.locator("table").filter(has=page.locator("thead", has_text="Key")).first
    outer.wait_for()
    return outer.evaluate("t => Array.from(t.tBodies[0].rows).map(r => r.cells[0].innerText.trim())")


def _partition_metadata_keys(page: Any) -> list[str]:
    """The keys of a partition's metadata table (its first table: key, value rows), once the
    partition's materialization has loaded: until then the table says "No metadata entries"."""
    table = page.locator("table").first
    table.wait_for()
    page.get_by_text("No metadata entries").wait_for(state="detached")
    return table.evaluate("t => Array.from(t.rows).map(r => r.cells[0].innerText.trim())")


def test_cache_keys_are_one_provenance_entry_that_says_it_holds_no_figure(ui):
    from urllib.parse import quote

    from kuration_assets.scoring_assets import SOURCE_PARTITIONS
    from kuration_dagster_checks.provenance import PROVENANCE

    cache_keys = {"universe_token", "recording_token", "identity", "identity_strong"}
    with ui.instance() as instance:
        partition = instance.get_dynamic_partitions(SOURCE_PARTITIONS)[0]
    with ui.page("/assets/universe") as page:
        universe = _metadata_keys(page)
        entry = page.locator("tr", has=page.get_by_text(PROVENANCE, exact=True)).last.inner_text()
        assert "Not a figure" in entry and '"universe_token": ' in entry, entry
        screenshot(page, "dagster_ui/universe_metadata")
        page.goto(f"{ui.url}/assets/scored_segments?view=partitions&partition={quote(partition, safe='')}")
        page.get_by_text(partition, exact=True).first.wait_for()
        scored = _partition_metadata_keys(page)
        screenshot(page, "dagster_ui/scored_segments_partition")
    for where, keys in (("universe", universe), (f"scored_segments[{partition}]", scored)):
        assert keys[-1] == PROVENANCE and not cache_keys & set(keys), f"{where} shows {keys}"


def _numeric_keys(metadata: Any) -> list[str]:
    from dagster import FloatMetadataValue, IntMetadataValue

    return [key for key, value in metadata.items() if isinstance(value, (IntMetadataValue, FloatMetadataValue))]


def test_each_asset_leads_with_its_table_and_plots_the_figures_that_move(ui):
    """Slow (20 s to 35 s under load): the browser opens each of the seven assets' pages and
    waits for every plot Dagster draws there."""
    from dagster import AssetKey

    graph = ui.definitions.resolve_asset_graph()
    assets = sorted(key.to_user_string() for key in graph.get_all_asset_keys() if not graph.get(key).is_partitioned)
    with ui.instance() as instance:
        latest = {asset: instance.get_latest_materialization_event(AssetKey(asset)).asset_materialization.metadata
                  for asset in assets}
    plotted: dict[str, tuple[int, int]] = {}
    with ui.page("/assets") as page:
        for asset in assets:
            page.goto(f"{ui.url}/assets/{asset}")
            keys = _metadata_keys(page)
            if asset == "budget_plan":
                # the per-split table's figures are read there once; only what each split admitted is
                # a row as well, to be plotted
                repeated = [k for k in keys
                            if k.endswith(("_requested_hours", "_emitted_hours", "_utilization_percent"))]
                assert keys[0] == "budget" and repeated == [], keys
                screenshot(page, "dagster_ui/budget_plan_metadata")
            numeric = _numeric_keys(latest[asset])
            if not numeric:
                continue
            page.get_by_role("button", name="Plots").click()
            charts = page.locator("canvas")
            charts.nth(len(numeric) - 1).wait_for()
            plotted[asset] = (len(numeric), charts.count())
            screenshot(page, f"dagster_ui/plots_{asset}")
    assert {"budget_plan", "resolved_splits", "shards", "dataset_manifest"} <= set(plotted)
    assert all(charts >= numbers for numbers, charts in plotted.values()), plotted


#: A table cell that is a number, with its unit if it has one: "3,322", "4.01 h", "132.0 MiB".
_NUMBER_CELL = re.compile(r"-?[\d,]+(\.\d+)?%?( [A-Za-z]+)?")


def _shows_a_number(metadata: Any) -> bool:
    """Whether any Markdown table of a check's metadata (its figures, its gates) has a number in a cell."""
    from dagster import MarkdownMetadataValue

    return any(_NUMBER_CELL.fullmatch(cell.strip()) for value in metadata.values()
               if isinstance(value, MarkdownMetadataValue) for line in value.value.splitlines()[2:]
               for cell in line.strip().strip("|").split("|"))


def test_every_check_that_measures_a_number_plots_it(ui):
    """Slow (20 s to 35 s under load): the browser opens each of the eleven checks' pages and
    waits for its plots, or for the box saying it has none."""
    from dagster import AssetCheckKey, AssetKey

    with ui.instance() as instance:
        evaluations = {(asset, name): instance.get_latest_asset_check_evaluation_record(
            AssetCheckKey(AssetKey.from_user_string(asset), name)).event.dagster_event.event_specific_data
            for asset, names in ui.checks.items() for name in names}
    numeric = {check: _numeric_keys(evaluation.metadata) for check, evaluation in evaluations.items()}
    # a check whose figures hold a number plots some of them; one that compares hashes has none to plot
    unplotted = {check for check, evaluation in evaluations.items() if _shows_a_number(evaluation.metadata)
                 and not numeric[check]}
    assert unplotted == set() and any(numeric.values()), numeric
    shown = {}
    with ui.page("/assets") as page:
        for (asset, name), keys in numeric.items():
            page.goto(f"{ui.url}/assets/{asset}?view=checks&checkDetail={name}")
            page.get_by_text("Latest execution", exact=True).wait_for()
            # each page renders its plots, or the box saying there are none, after its header:
            # wait for what this check should show, then count both
            if keys:
                page.locator("canvas").nth(len(keys) - 1).wait_for()
            else:
                page.get_by_text("Plots are automatically generated by metadata").wait_for()
            empty = page.get_by_text("Plots are automatically generated by metadata").count()
            shown[(asset, name)] = (page.locator("canvas").count() >= len(keys), empty == 0)
    assert shown == {check: (True, bool(keys)) for check, keys in numeric.items()}


def test_dataset_quality_shows_each_gate_measured_against_its_threshold(ui):
    from dagster import AssetCheckKey, AssetKey

    with ui.instance() as instance:
        record = instance.get_latest_asset_check_evaluation_record(
            AssetCheckKey(AssetKey("dataset_manifest"), "dataset_quality"))
    evaluation = record.event.dagster_event.event_specific_data
    gates = evaluation.metadata["gates"].value.splitlines()[2:]
    assert gates and "figures" not in evaluation.metadata  # no column of bare True / False
    with ui.page("/assets/dataset_manifest?view=checks&checkDetail=dataset_quality") as page:
        row = page.locator("tr", has=page.get_by_text("gates", exact=True))
        row.get_by_text("[Show Markdown]").click()
        dialog = page.get_by_role("dialog")
        dialog.locator("table").first.wait_for()
        headers = [_collapse(text) for text in dialog.locator("th").all_inner_texts()]
        rows = dialog.locator("tbody tr").count()
        screenshot(page, "dagster_ui/dataset_quality_gates")
    assert headers == ["gate", "result", "measured", "threshold", "detail"] and rows == len(gates)


def test_the_split_table_says_what_the_predict_row_is(ui):
    from dagster import AssetKey

    from kuration.splits import load_splits
    from kuration.splits.stages import stage_purpose

    with ui.instance() as instance:
        metadata = instance.get_latest_materialization_event(AssetKey("resolved_splits")).asset_materialization.metadata
    everything = not load_splits(metadata["splits_json"].value).predict
    with ui.page("/assets/resolved_splits") as page:
        table = page.locator("table").filter(has=page.locator("th", has_text="what it is")).first
        table.wait_for()
        predict = table.locator("tr", has=page.get_by_text("predict", exact=True))
        cells = [_collapse(text) for text in predict.locator("td").all_inner_texts()]
        screenshot(page, "dagster_ui/resolved_splits_stages")
    assert cells[-1] == stage_purpose("predict", predict_is_everything=everything)
    assert not everything or "whole universe" in cells[-1]


def test_descriptions_shown_as_plain_text_show_no_markup(ui):
    repository = ui.definitions.get_repository_def()
    graph = ui.definitions.resolve_asset_graph()
    shown: dict[str, str] = {}
    with ui.page("/assets") as page:
        for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
            description = " ".join((graph.get(key).description or "").split())
            line = page.get_by_text(description[:40], exact=False).first  # the catalog's line under the asset
            line.wait_for()
            shown[f"catalog {key.to_user_string()}"] = line.inner_text()
        screenshot(page, "dagster_ui/catalog")
        for kind, definitions in (("sensors", repository.sensor_defs), ("schedules", repository.schedule_defs)):
            for definition in definitions:
                page.goto(f"{ui.url}/locations/{LOCATION}/{kind}/{definition.name}")
                text = page.get_by_text(definition.description[:40], exact=False).first
                text.wait_for()
                shown[f"{kind} {definition.name}"] = text.inner_text()
                screenshot(page, f"dagster_ui/{kind}_{definition.name}")
    marked = {where: text[:80] for where, text in shown.items() if "`" in text or "**" in text}
    assert len(shown) >= 10 and marked == {}, marked
