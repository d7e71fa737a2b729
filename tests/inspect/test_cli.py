"""``kuration inspect``, ``kuration diff`` and ``kuration check``: exit codes, the --json schema,
--html, the progress bar only on a terminal, numbers as every page prints them, and a real
subprocess run of each through ``python -m kuration_cli``. The seed's names for them
(``kur-inspect`` ...) are tested in ``tests/cli/test_aliases.py``."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK
from kuration.inspect import inspect_dataset
from kuration.inspect.cli import diff_text
from kuration.numbers import format_hours, format_number, format_percent
from kuration_cli import main
from tests.inspect.datasets import plain_copy
from tests.output.committed_datasets import manifest_of, rechain_shard
from tests.output.corpus import version_dir

ROOT = Path(__file__).resolve().parents[2]
DIFF_KEYS = {"schema_version", "kind", "left", "right", "identical", "shards", "splits", "modalities", "sections"}
CHECK_KEYS = {"schema_version", "kind", "dataset", "policy", "ok", "passed", "severity", "verdict", "errors",
              "warnings", "figures", "gates"}


def kuration(*argv: object) -> int:
    return main([str(a) for a in argv])


@pytest.fixture
def damaged(written, tmp_path):
    out = plain_copy(written, tmp_path / "damaged")
    rechain_shard(out, 1, b"garbage")
    return out


def policy(tmp_path, **gates) -> str:
    path = tmp_path / "quality.json"
    path.write_text(json.dumps(gates))
    return str(path)


def test_inspect_prints_a_summary_and_exits_0(written, capsys):
    assert kuration("inspect", written) == EXIT_OK
    out = capsys.readouterr().out
    assert f"dataset {version_dir(written)}: committed" in out and "modalities: battery float32[]" in out
    # durations and budget amounts in hours (the budget counts seconds), utilization in percent,
    # as every other page prints them
    budget = inspect_dataset(written).budget["splits"]["train"]
    h = {k: format_hours(budget[k] / 3600) for k in ("requested", "admitted", "emitted")}
    assert (f"budget train: requested {h['requested']}, admitted {h['admitted']}, emitted {h['emitted']} "
            f"(utilization {format_percent(budget['utilization'])})") in out


def test_inspect_names_the_sources_with_shards_against_the_sources_scored(written, capsys):
    report = inspect_dataset(written)
    assert report.scored_sources is not None and report.sources <= report.scored_sources
    assert kuration("inspect", written) == EXIT_OK
    assert (f"{report.shards:,} shards from {report.sources:,} of the {report.scored_sources:,} sources scored"
            in capsys.readouterr().out)


def test_inspect_json_is_one_document_with_the_report_keys(written, capsys):
    assert kuration("inspect", written, "--json", "--verify") == EXIT_OK
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["schema_version"] == 1 and data["kind"] == "dataset_report" and data["verification"]["valid"]
    assert captured.err == ""  # quiet: no progress bar under --json


def test_inspect_verify_exits_1_naming_the_bad_shard(damaged, capsys):
    assert kuration("inspect", damaged, "--verify") == EXIT_CHECK_FAILED
    captured = capsys.readouterr()
    bad = manifest_of(damaged)["entries"][1]["path"]
    assert f"kuration inspect: bad shard {bad}:" in captured.err and "INVALID" in captured.out
    assert kuration("inspect", damaged) == EXIT_OK  # without --verify nothing is decoded


def test_unreadable_datasets_and_usage_errors_exit_2(tmp_path, capsys):
    assert kuration("inspect", tmp_path / "none") == EXIT_BAD_INPUT
    assert "no dataset.commit.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        kuration("inspect")
    assert exit_info.value.code == EXIT_BAD_INPUT
    with pytest.raises(SystemExit) as exit_info:
        kuration("check", tmp_path)  # --policy is required
    assert exit_info.value.code == EXIT_BAD_INPUT
    assert "the following arguments are required: --policy" in capsys.readouterr().err


@pytest.mark.parametrize("verb", ["inspect", "diff", "check"])
def test_help_lists_examples_and_exit_codes(verb, capsys):
    with pytest.raises(SystemExit) as exit_info:
        kuration(verb, "--help")
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: kuration {verb} ")
    assert "examples:" in text and f"  kuration {verb} " in text
    assert "exit status:" in text and "\n  0  " in text and "\n  1  " in text
    assert "also a usage error" in " ".join(text.split())


def test_html_is_written(written, tmp_path, capsys):
    report = tmp_path / "report.html"
    assert kuration("inspect", written, "--html", report) == EXIT_OK
    assert report.read_text().startswith("<!DOCTYPE html>") and 'data-chart="hours_per_split"' in report.read_text()
    diff = tmp_path / "diff.html"
    assert kuration("diff", written, written, "--html", diff) == EXIT_OK
    assert "identical" in diff.read_text()


def test_diff_exits_1_when_the_datasets_differ_and_0_when_they_do_not(written, smaller, damaged, capsys):
    assert kuration("diff", written, written) == EXIT_OK
    assert capsys.readouterr().out.startswith("identical: 0 shards added")
    assert kuration("diff", written, smaller, "--json") == EXIT_CHECK_FAILED
    data = json.loads(capsys.readouterr().out)
    assert set(data) == DIFF_KEYS and data["identical"] is False
    assert kuration("diff", written, smaller) == EXIT_CHECK_FAILED
    assert "pipeline/budget/train_hours: changed" in capsys.readouterr().out
    assert kuration("diff", written, smaller, "--exit-zero") == EXIT_OK  # a report, not a gate
    assert kuration("diff", written, damaged, "--verify", "--json") == EXIT_CHECK_FAILED
    assert kuration("diff", written, damaged, "--verify", "--json", "--exit-zero") == EXIT_CHECK_FAILED
    assert kuration("diff", written, written.parent / "none") == EXIT_BAD_INPUT


def test_diff_prints_numbers_as_every_page_does(written, smaller, capsys):
    assert kuration("diff", written, smaller, "--json") == EXIT_CHECK_FAILED
    data = json.loads(capsys.readouterr().out)
    assert kuration("diff", written, smaller) == EXIT_CHECK_FAILED
    out = capsys.readouterr().out
    (train,) = [d for d in data["sections"]["pipeline"] if d["path"] == "/budget/train_hours"]
    assert isinstance(train["left"], float)
    assert f"  pipeline/budget/train_hours: changed {format_number(train['left'])} -> " \
           f"{format_number(train['right'])}\n" in out
    assert not re.search(r"\d\.\d{7,}", out), out  # no float repr anywhere: 5182.259569336778 reads 5,182
    split = data["splits"]["train"]
    assert (f"  split train: {split['left']['shards']:,} -> {split['right']['shards']:,} shards, "
            f"{split['left']['steps']:,} -> {split['right']['steps']:,} steps") in out


def test_a_difference_rounding_would_hide_gets_the_digits_that_show_it():
    data = {"identical": False, "shards": {"added": [], "removed": [], "changed": [], "unchanged": 3},
            "splits": {}, "modalities": {"added": [], "removed": [], "changed": []},
            "sections": {"results": [
                {"path": "/a", "change": "changed", "left": 5182.259569336778, "right": 3629.3740622009573},
                {"path": "/b", "change": "changed", "left": 0.51166, "right": 0.51172},
                {"path": "/c", "change": "changed", "left": 1, "right": 1.0},
                {"path": "/d", "change": "added", "left": None, "right": {"x": 1}},
            ]}}
    assert diff_text(data)[1:] == ["  results/a: changed 5,182 -> 3,629", "  results/b: changed 0.51166 -> 0.51172",
                                   "  results/c: changed 1 -> 1.0", '  results/d: added null -> {"x": 1}']


def test_check_exits_0_when_every_gate_passes_and_1_when_one_fails(written, tmp_path, capsys):
    assert kuration("check", written, "--policy", policy(tmp_path, min_shards=1, verify=True)) == EXIT_OK
    assert "PASS  min_shards" in capsys.readouterr().out
    assert kuration("check", written, "--policy", policy(tmp_path, min_shards=10**6), "--json") == EXIT_CHECK_FAILED
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert set(data) == CHECK_KEYS and data["ok"] is False and data["gates"][0]["threshold"] == 10**6
    assert "kuration check: gate failed: min_shards:" in captured.err


def test_check_with_an_invalid_policy_exits_2_naming_the_key(written, tmp_path, capsys):
    assert kuration("check", written, "--policy", policy(tmp_path, min_shard=1)) == EXIT_BAD_INPUT
    assert "unknown key(s) ['min_shard']" in capsys.readouterr().err


def test_a_progress_bar_is_drawn_on_a_terminal_only_without_json(written, monkeypatch, capsys):
    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", terminal)
    assert kuration("inspect", written, "--verify") == EXIT_OK
    assert "verifying shards" in terminal.getvalue()
    capsys.readouterr()
    terminal.truncate(0)
    terminal.seek(0)
    assert kuration("inspect", written, "--verify", "--json") == EXIT_OK
    assert terminal.getvalue() == "" and json.loads(capsys.readouterr().out)["verification"]["valid"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kuration_cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


def test_each_verb_runs_as_a_real_process(written, damaged, tmp_path):
    done = _run("inspect", str(written), "--json")
    assert done.returncode == EXIT_OK and json.loads(done.stdout)["kind"] == "dataset_report"
    assert _run("inspect", str(damaged), "--verify").returncode == EXIT_CHECK_FAILED
    assert _run("diff", str(written), str(written)).stdout.startswith("identical")
    failed = _run("check", str(written), "--policy", policy(tmp_path, required_modalities=["lidar"]))
    assert failed.returncode == EXIT_CHECK_FAILED and "FAIL  required_modalities" in failed.stdout
    assert _run("nothing").returncode == EXIT_BAD_INPUT
