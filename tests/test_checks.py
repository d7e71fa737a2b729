"""``CheckResult``: the one shape every validator answers in, and its severity rule."""

import math

import pytest

from kuration.checks import CheckResult, count, failed_verdict, first, one_line


def test_errors_fail_as_an_error_warnings_alone_as_a_warning_and_neither_passes():
    clean = CheckResult("3 shards verified", figures={"shards": 3})
    warned = CheckResult("train underfilled", warnings=("train: underfilled by 60%",))
    broken = CheckResult("1 problem", errors=("row 3: bad uid",), warnings=("also this",))
    assert (clean.ok, clean.passed, clean.severity) == (True, True, None)
    assert (warned.ok, warned.passed, warned.severity) == (True, False, "warn")  # usable, but look
    assert (broken.ok, broken.passed, broken.severity) == (False, False, "error")  # errors win over warnings


@pytest.mark.parametrize("verdict", ["", "   ", None])
def test_a_result_without_a_verdict_is_refused(verdict):
    with pytest.raises(ValueError, match="a check result needs a verdict"):
        CheckResult(verdict)


def test_the_verdict_is_one_line_and_bounded():
    result = CheckResult("cannot check:\n  line two\tand three " + "x" * 1000)
    assert "\n" not in result.verdict and result.verdict.startswith("cannot check: line two and three x")
    assert len(result.verdict) == 400 and result.verdict.endswith("…")
    assert one_line("a\n b", limit=10) == "a b"


def test_figures_are_plain_values_named_with_their_unit():
    result = CheckResult("ok", figures={"train_admitted_hours": 4.01, "shards": 3, "hash": "ab", "x": None,
                                        "flag": True, "nan": math.nan})
    assert result.figures["train_admitted_hours"] == 4.01
    with pytest.raises(TypeError, match=r"figure 'splits': must be a number, string, bool or None, got dict"):
        CheckResult("ok", figures={"splits": {"train": 1}})


def test_errors_and_warnings_are_kept_as_tuples_of_text():
    result = CheckResult("x", errors=["a", "b"], warnings=["c"])
    assert result.errors == ("a", "b") and result.warnings == ("c",)
    assert result.to_dict() == {"ok": False, "passed": False, "severity": "error", "verdict": "x",
                                "errors": ["a", "b"], "warnings": ["c"], "figures": {}}


def test_a_check_that_cannot_run_fails_as_an_error_naming_why():
    result = CheckResult.cannot_check("the budget plan", FileNotFoundError("no budget.json at s3://b/budget"))
    assert result.severity == "error" and result.errors == ("no budget.json at s3://b/budget",)
    assert result.verdict == "cannot check the budget plan: no budget.json at s3://b/budget"


def test_verdict_helpers_give_numbers_with_units():
    assert count(3322, "shard") == "3,322 shards" and count(1, "shard") == "1 shard"
    assert first(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"
    assert first(["a", "b"], total=40) == "a, b and 38 more"
    assert first(["a", "b"]) == "a, b"
    assert failed_verdict(("train: over budget", "val: over budget"), "contract violation") == (
        "2 contract violations; first: train: over budget")
