"""``kuration check-landing``: one line per finding (level first), a summary line, exit 0
without an error and 2 with one; ``--json`` prints the report as one object."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kuration_cli import VERBS, main, verb, verb_parser
from tests.landing_check.landing_factory import rewrite_universe, write_curation

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_kuration_environment(monkeypatch: pytest.MonkeyPatch):
    """The command reads ``os.environ``; the tests' own KURATION_* variables must not leak in."""
    for name in [n for n in os.environ if n.startswith("KURATION_")]:
        monkeypatch.delenv(name)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(argv)
    return status, capsys.readouterr().out.splitlines()


def test_a_clean_landing_zone_exits_0_with_one_line_per_finding(zone: Path, capsys):
    status, lines = run(["check-landing", str(zone)], capsys)
    assert status == 0
    assert all(line.startswith("INFO    ") for line in lines[:-1]) and len(lines) == 13
    assert lines[0].startswith("INFO    config.defaults: no curation.json in the landing zone")
    assert lines[-1] == f"landing zone {zone}: 0 errors, 0 warnings, 12 notes; ready to run"


def test_an_error_exits_2_and_is_printed_first_on_its_line(zone: Path, capsys):
    rewrite_universe(zone, source_prefix="recordings/")
    status, lines = run(["check-landing", str(zone)], capsys)
    assert status == 2
    errors = [line for line in lines if line.startswith("ERROR   ")]
    assert len(errors) == 1 and errors[0].startswith("ERROR   universe.unmatched_sources: 2 of the 2 universe")
    assert any(line.startswith("WARNING universe.unlisted_recordings: ") for line in lines)
    assert lines[-1].endswith("1 error, 1 warning, 11 notes; fix the errors above before running")


def test_json_prints_the_report(zone: Path, capsys):
    write_curation(zone, {"workers": 0})
    status, lines = run(["check-landing", str(zone), "--json"], capsys)
    report = json.loads("\n".join(lines))
    assert status == 2 and report["ok"] is False and report["landing_url"] == str(zone)
    first = report["findings"][0]
    assert first["level"] == "error" and first["code"] == "config.invalid" and "workers" in first["message"]


def test_config_names_another_settings_file(zone: Path, tmp_path: Path, capsys):
    (zone / "recordings").rename(zone / "flights")
    team = tmp_path / "team.json"
    team.write_text(json.dumps({"recordings": "flights"}))
    status, lines = run(["check-landing", str(zone), "--config", str(team)], capsys)
    assert status == 0, "\n".join(lines)
    assert any(f"settings from {team}:" in line for line in lines)


def test_an_empty_universe_csv_name_enumerates_the_recordings(zone: Path, capsys):
    rewrite_universe(zone, index="broken")  # not read at all
    status, lines = run(["check-landing", str(zone), "--universe-csv", "", "--samples", "1", "--media-refs", "2"],
                        capsys)
    assert status == 0
    assert any(line.startswith("INFO    universe.enumerated: no universe.csv named") for line in lines)
    assert sum(line.startswith("INFO    sample.read") for line in lines) == 1


@pytest.mark.parametrize("option", ["--samples", "--media-refs"])
def test_a_count_below_one_is_a_usage_error(zone: Path, option: str, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["check-landing", str(zone), option, "0"])
    assert exit_.value.code == 2 and "expected a whole number >= 1, got 0" in capsys.readouterr().err


def test_every_option_has_help():
    parsers = [(f"kuration {v.name}", verb_parser(v.name)) for v in VERBS]
    while parsers:
        name, parser = parsers.pop()
        for action in parser._actions:
            assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
            if isinstance(action, argparse._SubParsersAction):  # kuration budget review|check
                parsers += [(f"{name} {sub}", subparser) for sub, subparser in action.choices.items()]


def test_the_module_runs_as_a_command(zone: Path, tmp_path: Path):
    (zone / "schema.json").write_text("[]")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KURATION_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-m", "kuration_cli", "check-landing", str(zone)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ERROR   settings.schema_invalid: " in done.stdout and "schema must be a JSON object" in done.stdout


def test_a_broken_landing_zone_in_the_environment_does_not_stop_checking_another(zone: Path, tmp_path: Path):
    # The command must not load the Dagster code location (whose import reads the curation
    # settings of $KURATION_LANDING_ZONE): checking a landing zone is what finds such errors.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "curation.json").write_text('{"recording": 1}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("KURATION_")}
    env.update(PYTHONPATH=str(REPO), KURATION_LANDING_ZONE=str(broken))
    done = subprocess.run([sys.executable, "-m", "kuration_cli", "check-landing", str(zone)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "kuration_cli", "check-landing", str(broken)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2 and "ERROR   config.invalid: " in done.stdout and "'recording'" in done.stdout
    assert "Traceback" not in done.stderr


def test_run_is_a_subcommand_with_the_graph_runs_options():
    from kuration_cli.graph_run import run_main

    args = verb_parser("run").parse_args(["--landing", "in", "--storage", "out", "--config", "c.json"])
    assert (args.landing, args.storage, args.config, verb("run").load().run) == ("in", "out", "c.json", run_main)
    with pytest.raises(SystemExit) as exit_:
        verb_parser("run").parse_args(["--landing", "in"])
    assert exit_.value.code == 2
