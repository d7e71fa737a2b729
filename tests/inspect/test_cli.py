"""kur-inspect, kur-diff and kur-check: exit codes, the --json schema, --html, the progress bar
only on a terminal, and a real subprocess run of each through ``python -m``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kuration.inspect import inspect_dataset
from kuration.numbers import format_hours, format_percent
from kuration.inspect.cli import EXIT_FAILED, EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, check_main, diff_main, inspect_main
from tests.inspect.datasets import copy_dataset
from tests.output.committed_datasets import manifest_of, rechain_shard

ROOT = Path(__file__).resolve().parents[2]
DIFF_KEYS = {"schema_version", "kind", "left", "right", "identical", "shards", "splits", "modalities", "sections"}
CHECK_KEYS = {"schema_version", "kind", "dataset", "policy", "ok", "passed", "severity", "verdict", "errors",
              "warnings", "figures", "gates"}


@pytest.fixture
def damaged(written, tmp_path):
    out = copy_dataset(written, tmp_path / "damaged")
    rechain_shard(out, 1, b"garbage")
    return out


def policy(tmp_path, **gates) -> str:
    path = tmp_path / "quality.json"
    path.write_text(json.dumps(gates))
    return str(path)


def test_inspect_prints_a_summary_and_exits_0(written, capsys):
    assert inspect_main([str(written)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"dataset {written}: committed" in out and "modalities: battery float32[]" in out
    # durations and budget amounts in hours (the budget counts seconds), utilization in percent,
    # as every other page prints them
    budget = inspect_dataset(written).budget["splits"]["train"]
    h = {k: format_hours(budget[k] / 3600) for k in ("requested", "admitted", "emitted")}
    assert (f"budget train: requested {h['requested']}, admitted {h['admitted']}, emitted {h['emitted']} "
            f"(utilization {format_percent(budget['utilization'])})") in out


def test_inspect_json_is_one_document_with_the_report_keys(written, capsys):
    assert inspect_main([str(written), "--json", "--verify"]) == EXIT_OK
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["schema_version"] == 1 and data["kind"] == "dataset_report" and data["verification"]["valid"]
    assert captured.err == ""  # quiet: no progress bar under --json


def test_inspect_verify_exits_2_naming_the_bad_shard(damaged, capsys):
    assert inspect_main([str(damaged), "--verify"]) == EXIT_FAILED
    captured = capsys.readouterr()
    bad = manifest_of(damaged)["entries"][1]["path"]
    assert f"kur-inspect: bad shard {bad}:" in captured.err and "INVALID" in captured.out
    assert inspect_main([str(damaged)]) == EXIT_OK  # without --verify nothing is decoded


def test_unreadable_datasets_exit_1_and_usage_errors_64(tmp_path, capsys):
    assert inspect_main([str(tmp_path / "none")]) == EXIT_UNREADABLE
    assert "no dataset.commit.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        inspect_main([])
    assert exit_info.value.code == EXIT_USAGE
    with pytest.raises(SystemExit) as exit_info:
        check_main([str(tmp_path)])  # --policy is required
    assert exit_info.value.code == EXIT_USAGE


@pytest.mark.parametrize("main", [inspect_main, diff_main, check_main])
def test_help_lists_examples_and_exit_codes(main, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "exit status:" in text and "64  usage error" in text


def test_html_is_written(written, tmp_path, capsys):
    report = tmp_path / "report.html"
    assert inspect_main([str(written), "--html", str(report)]) == EXIT_OK
    assert report.read_text().startswith("<!DOCTYPE html>") and 'data-chart="hours_per_split"' in report.read_text()
    diff = tmp_path / "diff.html"
    assert diff_main([str(written), str(written), "--html", str(diff)]) == EXIT_OK
    assert "identical" in diff.read_text()


def test_diff_json_and_exit_codes(written, smaller, damaged, capsys):
    assert diff_main([str(written), str(smaller), "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert set(data) == DIFF_KEYS and data["identical"] is False
    assert diff_main([str(written), str(smaller)]) == EXIT_OK
    assert "pipeline/budget/train_hours: changed" in capsys.readouterr().out
    assert diff_main([str(written), str(damaged), "--verify", "--json"]) == EXIT_FAILED


def test_check_exits_0_when_every_gate_passes_and_2_when_one_fails(written, tmp_path, capsys):
    assert check_main([str(written), "--policy", policy(tmp_path, min_shards=1, verify=True)]) == EXIT_OK
    assert "PASS  min_shards" in capsys.readouterr().out
    assert check_main([str(written), "--policy", policy(tmp_path, min_shards=10**6), "--json"]) == EXIT_FAILED
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert set(data) == CHECK_KEYS and data["ok"] is False and data["gates"][0]["threshold"] == 10**6
    assert "kur-check: gate failed: min_shards:" in captured.err


def test_check_with_an_invalid_policy_exits_1_naming_the_key(written, tmp_path, capsys):
    assert check_main([str(written), "--policy", policy(tmp_path, min_shard=1)]) == EXIT_UNREADABLE
    assert "unknown key(s) ['min_shard']" in capsys.readouterr().err


def test_a_progress_bar_is_drawn_on_a_terminal_only_without_json(written, monkeypatch, capsys):
    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", terminal)
    assert inspect_main([str(written), "--verify"]) == EXIT_OK
    assert "verifying shards" in terminal.getvalue()
    capsys.readouterr()
    terminal.truncate(0)
    terminal.seek(0)
    assert inspect_main([str(written), "--verify", "--json"]) == EXIT_OK
    assert terminal.getvalue() == "" and json.loads(capsys.readouterr().out)["verification"]["valid"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kuration.inspect.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


def test_each_tool_runs_as_a_real_process(written, damaged, tmp_path):
    done = _run("kur-inspect", str(written), "--json")
    assert done.returncode == EXIT_OK and json.loads(done.stdout)["kind"] == "dataset_report"
    assert _run("kur-inspect", str(damaged), "--verify").returncode == EXIT_FAILED
    assert _run("kur-diff", str(written), str(written)).stdout.startswith("identical")
    failed = _run("kur-check", str(written), "--policy", policy(tmp_path, required_modalities=["lidar"]))
    assert failed.returncode == EXIT_FAILED and "FAIL  required_modalities" in failed.stdout
    assert _run("kur-nothing").returncode == EXIT_USAGE
