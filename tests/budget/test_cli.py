"""``kuration budget review`` and ``check`` on a stored plan; ``kuration-budget``, its old name,
keeps its exit status for this release."""

import dataclasses
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from kuration.budget import BudgetOptions, plan_budget
from kuration_cli import main as kuration
from kuration_cli.aliases import kuration_budget
from kuration.budget.plan_store import write_budget_plan
from tests.budget.segment_tables import assignments, segments_table, strategy

H = 1 / 3600
ROWS = [(f"s{i}", "e", 0, 100, 100, float(i), []) for i in range(1, 5)]


def main(argv: list[str]) -> int:
    """``kuration budget ARGV``."""
    return kuration(["budget", *argv])


@pytest.fixture
def root(tmp_path):
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_hours=20 * H), strategy=strategy(),
                       split_assignments=assignments({f"s{i}": "train" for i in range(1, 5)}))
    write_budget_plan(plan, tmp_path, inputs={"check": {"underfill_warn_fraction": 0.1}})
    return tmp_path


def test_review_prints_text_json_and_one_item(root, capsys):
    assert main(["review", str(root)]) == 0
    assert "train: requested 20 s, admitted 20 s (100.0%)" in capsys.readouterr().out
    assert main(["review", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["splits"]["train"]["admitted"] == 20.0
    assert main(["review", str(root), "--explain", "s2", "e", "0"]) == 0
    assert "the train budget was reached before its turn" in capsys.readouterr().out
    assert main(["review", str(root), "--explain", "s9", "e", "0"]) == 2
    assert "no item 's9'" in capsys.readouterr().err


def test_check_passes_a_sound_plan_and_fails_a_tampered_one(root, capsys):
    assert main(["check", str(root)]) == 0
    assert "budget plan: OK" in capsys.readouterr().out
    items = root / "budget" / "plan_items.parquet"
    pq.write_table(pq.read_table(items).slice(0, 1), items)
    assert main(["check", str(root)]) == 2
    assert "does not match the SHA-256" in capsys.readouterr().err


def test_a_plan_that_breaks_the_contract_exits_1_and_2_under_the_old_name(tmp_path, capsys):
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_hours=20 * H), strategy=strategy(),
                       split_assignments=assignments({f"s{i}": "train" for i in range(1, 5)}))
    # a plan record whose accounting admits twice the request: a stored plan, consistent with
    # its pins, that breaks the contract the blocking check enforces
    accounting = {**plan.accounting, "splits": {**plan.accounting["splits"], "train": {
        **plan.accounting["splits"]["train"], "requested": 5.0, "requested_seconds": 5.0}}}
    write_budget_plan(dataclasses.replace(plan, accounting=accounting), tmp_path)
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("ERROR   train: admitted ") and "contract violation(s)" in out
    assert kuration_budget(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kuration-budget: deprecated, and gone in the next release; use `kuration budget`")


def test_check_warns_on_underfill_without_failing(tmp_path, capsys):
    plan = plan_budget(segments_table(ROWS), BudgetOptions(train_hours=100 * H), strategy=strategy(),
                       split_assignments=assignments({f"s{i}": "train" for i in range(1, 5)}))
    write_budget_plan(plan, tmp_path)
    assert main(["check", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["warnings"][0].startswith("train: underfilled by 60 of 100 seconds")


def test_a_missing_plan_exits_2_with_the_fix(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    assert "materialize budget_plan" in capsys.readouterr().err


def test_help_names_both_commands():
    out = subprocess.run([sys.executable, "-m", "kuration_cli", "budget", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "review" in out.stdout and "check" in out.stdout
    assert "  kuration budget review storage/" in out.stdout and "\n  1  check: the plan breaks" in out.stdout


def test_a_malformed_budget_json_exits_2_naming_the_file(root, capsys):
    (root / "budget" / "budget.json").write_text('{"accounting": {}}')
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert "budget.json: not a complete budget plan record" in err and "re-materialize budget_plan" in err
    (root / "budget" / "budget.json").write_text("[1, 2]")
    assert main(["review", str(root)]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
