"""bench/make_report.py renders REPORT.md from a results.json; bench/_report.py builds the
figures; bench/run_all records a failing script instead of dropping it. No bench is run."""

from __future__ import annotations

import json
import math
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.bench.modules import load_bench_module

make_report = load_bench_module("make_report")
report = load_bench_module("_report")
run_all = load_bench_module("run_all")


def results(*benches: dict, **top: object) -> dict:
    base = {"format": 1, "mode": "quick", "started_at": "2026-12-01T20:00:00Z",
            "finished_at": "2026-12-01T20:10:00Z", "commit": "abc1234", "dirty_files": [],
            "machine": {"cpu_count": 2, "cpu_model": "Test CPU", "memory_gib": 23.4,
                        "simd": {"numpy": "2.4.6", "baseline": ["SSE", "SSE2"], "dispatch_available": ["AVX2"],
                                 "dispatch_missing": ["AVX512F"]}},
            "benches": list(benches)}
    return {**base, **top}


def ok_bench(name: str, figures: list[dict] | None) -> dict:
    output: dict = {"bench": name}
    if figures is not None:
        output["report"] = figures
    return {"name": name, "script": f"bench/bench_{name}.py", "args": ["--quick"], "status": "ok",
            "seconds": 12.0, "started_at": "2026-12-01T20:01:00Z", "output": output}


def row_of(text: str, figure_name: str) -> list[str]:
    """The cells of the table row whose first cell is ``figure_name``."""
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells and cells[0] == figure_name:
            return cells
    raise AssertionError(f"no row for {figure_name!r} in:\n{text}")


def test_met_unmet_and_no_target_figures_render_with_their_verdicts():
    figures = [report.ratio("write / raw", 1.0, 2.0, "np.savez, same run", target=">= 0.8"),
               report.ratio("read / raw", 3.0, 2.0, "np.load, same run", target=">= 0.75"),
               report.figure("plan at 1M", 0.57, "s", "absolute wall time", target="<= 2 s"),
               report.ratio("peer write / raw", 1.0, 4.0, "np.savez, same run"),
               report.figure("peer read / raw", None, "x", "np.load, same run", note="no peer: venv failed")]
    text = make_report.render(make_report.check_results(results(ok_bench("peers", figures)), "r.json"))
    assert row_of(text, "write / raw") == ["write / raw", "0.500×", "np.savez, same run", ">= 0.8", "**no**", ""]
    assert row_of(text, "read / raw")[1:5] == ["1.500×", "np.load, same run", ">= 0.75", "yes"]
    assert row_of(text, "plan at 1M")[1:5] == ["0.570 s", "absolute wall time", "<= 2 s", "yes"]
    assert row_of(text, "peer write / raw")[3:5] == ["", "no target"]
    assert row_of(text, "peer read / raw")[1] == "not measured"
    assert row_of(text, "peer read / raw")[5] == "no peer: venv failed"
    # the summary: 5 figures, 2 targets met (read, plan), 1 missed (write), none left unjudged
    assert row_of(text, "peers") == ["peers", "ok", "5", "2", "1", "0"]


def test_a_failed_script_shows_its_error_and_stderr_tail_and_counts_as_failed():
    failed = {"name": "budget_fill", "script": "bench/bench_budget_fill.py", "args": [], "status": "failed",
              "error": "exited with status 1", "stderr_tail": "Traceback (most recent call last):\nMemoryError",
              "seconds": 3.0}
    text = make_report.render(make_report.check_results(results(failed, ok_bench("inspect", [])), "r.json"))
    assert "- benches: 2 run, 1 ok, 1 failed (budget_fill)" in text
    assert row_of(text, "budget_fill")[:2] == ["budget_fill", "**failed**"]
    section = text.split("## budget_fill", 1)[1].split("\n## ", 1)[0]
    assert "**Failed:** exited with status 1" in section
    assert "```\nTraceback (most recent call last):\nMemoryError\n```" in section


def test_a_bench_without_a_report_key_says_so():
    text = make_report.render(make_report.check_results(results(ok_bench("legacy", None)), "r.json"))
    assert row_of(text, "legacy")[:2] == ["legacy", "ok, no `report` key"]
    assert "This bench's JSON has no `report` key" in text.split("## legacy", 1)[1]


def test_scaling_exponents_are_gathered_in_one_table():
    exponent = report.figure("plan exponent 1M -> 4M", 1.08, "exponent", "the plan at 1M, this run",
                             target="<= 1.1")
    text = make_report.render(make_report.check_results(results(ok_bench("budget_fill", [exponent])), "r.json"))
    table = text.split("## Scaling exponents", 1)[1].split("\n## ", 1)[0]
    assert row_of(table, "budget_fill") == ["budget_fill", "plan exponent 1M -> 4M", "1.080",
                                            "the plan at 1M, this run", "<= 1.1", "yes"]


def test_the_header_says_when_where_and_in_which_mode():
    text = make_report.render(make_report.check_results(results(dirty_files=["bench/x.py"]), "r.json"), "r.json")
    assert "- measured: 2026-12-01T20:00:00Z to 2026-12-01T20:10:00Z" in text
    assert "- mode: quick (each script's smaller sizes" in text
    assert "- commit: abc1234 with uncommitted changes in bench/x.py" in text
    assert "- CPUs: 2 (Test CPU), memory 23.4 GiB" in text
    assert "baseline SSE, SSE2; dispatched, available here: AVX2" in text
    assert "lacks: AVX512F" in text


def test_a_merged_file_names_the_benches_kept_from_earlier_runs():
    merged = results(ok_bench("inspect", []), ok_bench("peers", []), kept_from_earlier_runs=["inspect"])
    text = make_report.render(make_report.check_results(merged, "r.json"))
    assert "- kept from earlier runs (`run_all --merge`), each section says when it ran: inspect" in text
    assert "kept from earlier runs" not in make_report.render(make_report.check_results(results(), "r.json"))


def test_pipes_in_cells_are_escaped():
    fig = report.figure("a | b", 1.0, "x", "c | d", note="e\nf")
    text = make_report.render(make_report.check_results(results(ok_bench("b", [fig])), "r.json"))
    assert row_of(text, "a \\| b") == ["a \\| b", "1.000×", "c \\| d", "", "no target", "e f"]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.pop("benches"), "missing field 'benches'"),
    (lambda d: d.update(format=7), "field 'format' must be 1, not 7"),
    (lambda d: d["benches"].append({"name": "x", "status": "maybe"}), "benches[1] (x): field 'status' must be one of"),
    (lambda d: d["benches"].append({"name": "x", "status": "failed"}), "benches[1] (x): missing field 'error'"),
    (lambda d: d["benches"].append(dict(d["benches"][0])), "benches[1] (peers): the bench appears twice"),
    (lambda d: d["benches"][0]["output"].update(report={"not": "a list"}),
     "benches[0] (peers): output: field 'report' must be list"),
    (lambda d: d["benches"][0]["output"]["report"][0].pop("baseline"),
     "benches[0] (peers): output.report[0]: missing field 'baseline'"),
    (lambda d: d["benches"][0]["output"]["report"][0].update(value="fast"),
     "output.report[0]: field 'value' must be int/float or null, not str"),
    (lambda d: d["benches"][0]["output"]["report"][0].update(met="yes"),
     "output.report[0]: field 'met' must be bool or null, not str"),
    (lambda d: d["benches"][0]["output"]["report"][0].update(value=True),
     "output.report[0]: field 'value' must be int/float or null, not bool"),
])
def test_a_malformed_results_file_names_the_file_and_the_field(tmp_path, mutate, message):
    data = results(ok_bench("peers", [report.ratio("r", 1.0, 2.0, "b", target=">= 1")]))
    mutate(data)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(make_report.ResultsError) as caught:
        make_report.load_results(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_file_that_is_not_json_or_is_missing_gives_a_clear_error(tmp_path, capsys):
    broken = tmp_path / "results.json"
    broken.write_text('{"format": 1,\n  "mode": ')
    with pytest.raises(make_report.ResultsError, match=r"results.json: not JSON \(line 2, column 11"):
        make_report.load_results(broken)
    out = tmp_path / "REPORT.md"
    assert make_report.main(["--results", str(tmp_path / "absent.json"), "--out", str(out)]) == 2
    assert "absent.json: cannot read it" in capsys.readouterr().err
    assert not out.exists()


def test_main_writes_the_report_from_an_existing_results_file(tmp_path):
    path, out = tmp_path / "results.json", tmp_path / "REPORT.md"
    path.write_text(json.dumps(results(ok_bench("inspect", [report.ratio("r", 1.0, 4.0, "json.load")]))))
    assert make_report.main(["--results", str(path), "--out", str(out)]) == 0
    assert row_of(out.read_text(), "r")[1] == "0.250×"


@pytest.mark.parametrize(("value", "target", "met"), [
    (5.0, ">= 5", True), (4.99, ">= 5", False), (1.0, "<= 1 s", True), (1.01, "<= 1 s", False),
    (1.0, "== 1", True), (0.995, "== 1", False), (2.0, None, None), (None, ">= 1", None),
])
def test_judge(value, target, met):
    assert report.judge(value, target) is met
    assert report.figure("f", value, "x", "b", target=target)["met"] is met


def test_a_target_in_another_form_is_refused():
    with pytest.raises(ValueError, match="'at least 5' is not '<op> <number> \\[unit\\]'"):
        report.judge(6.0, "at least 5")


@given(st.floats(0.1, 3.0), st.floats(1e-3, 10.0), st.lists(st.floats(1.0, 1e6), min_size=2, max_size=6,
                                                              unique=True))
def test_scaling_exponent_recovers_a_power_law(exponent, scale, sizes):
    if max(sizes) / min(sizes) < 1.5:
        return
    fitted = report.scaling_exponent(sizes, [scale * n ** exponent for n in sizes])
    assert fitted is not None and math.isclose(fitted, exponent, rel_tol=1e-6, abs_tol=1e-6)


def test_scaling_exponent_needs_two_sizes():
    assert report.scaling_exponent([1000, 1000], [1.0, 2.0]) is None


def test_run_all_records_a_failing_script_with_its_stderr_tail(tmp_path, monkeypatch):
    (tmp_path / "bench_boom.py").write_text("import sys\nprint('working', file=sys.stderr)\n"
                                            "raise SystemExit('boom: no data')\n")
    (tmp_path / "bench_fine.py").write_text("import json\nprint('log line')\nprint(json.dumps({'report': []}))\n")
    (tmp_path / "bench_silent.py").write_text("print('no json here')\n")
    monkeypatch.setattr(run_all, "BENCH_DIR", tmp_path)
    monkeypatch.setattr(run_all, "BENCHES", {"boom": ("bench_boom.py", [], []), "fine": ("bench_fine.py", [], []),
                                             "silent": ("bench_silent.py", [], [])})
    boom = run_all.run_bench("boom", sys.executable, quick=False, timeout=60)
    assert boom["status"] == "failed" and boom["error"] == "exited with status 1"
    assert boom["stderr_tail"].splitlines() == ["working", "boom: no data"]
    fine = run_all.run_bench("fine", sys.executable, quick=True, timeout=60)
    assert fine["status"] == "ok" and fine["output"] == {"report": []}
    silent = run_all.run_bench("silent", sys.executable, quick=False, timeout=60)
    assert silent["status"] == "failed" and silent["error"] == "printed no JSON object on stdout"
    data = results(boom, fine, silent)
    text = make_report.render(make_report.check_results(data, "r.json"))
    assert "- benches: 3 run, 1 ok, 2 failed (boom, silent)" in text
