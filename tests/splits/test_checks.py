"""The split validators' uniform answers: universe table, leakage and drift, on storage.

Each gives a one-line verdict with numbers; a failing one names its first offenders."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.checks import CheckResult
from kuration.splits import SampleRef, Universe, evaluate_leakage
from kuration.splits.artifacts import (
    SplitRequest, check_split_leakage, check_universe_drift, check_universe_table, materialize_splits,
    validate_universe_table, write_universe,
)
from kuration.splits.drift import DriftCheck
from kuration.splits.leakage import LeakageCheck, leakage_check


def _universe(*sites: str) -> Universe:
    """Two recordings a site, four samples each, grouped by site."""
    return Universe.from_refs([SampleRef(f"{site}/rec_{r}.parquet", i, group=site)
                               for site in sites for r in (1, 2) for i in range(4)])


def _split(root: Path, rule: dict, universe: Universe | None = None) -> Universe:
    universe = universe or _universe("site_a", "site_b", "site_c")
    write_universe(universe, root)
    (root / "rule.json").write_text(json.dumps(rule))
    materialize_splits(universe, SplitRequest(splits_json=str(root / "rule.json")), root)
    return universe


DISJOINT = {"train": [{"kind": "glob", "pattern": "site_a/*"}], "val": [{"kind": "glob", "pattern": "site_b/*"}],
            "test": [{"kind": "glob", "pattern": "site_c/*"}]}
LEAKING = {"train": [{"kind": "glob", "pattern": "site_a/*"}, {"kind": "files", "paths": ["site_b/rec_1.parquet"]}],
           "val": [{"kind": "files", "paths": ["site_b/rec_2.parquet"]}],
           "test": [{"kind": "glob", "pattern": "site_c/*"}]}


# -- universe table --------------------------------------------------------------------


def test_a_sound_universe_table_passes_with_its_counts(tmp_path):
    write_universe(_universe("site_a", "site_b"), tmp_path)
    result = check_universe_table(tmp_path)
    assert isinstance(result, CheckResult) and result.passed
    assert result.verdict.startswith("16 samples from 4 sources in 2 groups: schema, uids, canonical order and "
                                     "pinned hash ")
    assert result.figures["samples"] == 16 and result.figures["groups"] == 2


def test_a_tampered_universe_table_fails_naming_the_first_problem(tmp_path):
    write_universe(_universe("site_a", "site_b"), tmp_path)
    path = tmp_path / "universe" / "universe.parquet"
    pq.write_table(pq.read_table(path).slice(1), path)  # a row dropped, the pinned hash kept
    result = check_universe_table(tmp_path)
    assert result.severity == "error"
    assert result.verdict.startswith("1 problem; first: pinned universe_hash ")
    assert "does not match the rows" in result.verdict and result.errors[0] in result.verdict


def test_an_edited_uid_or_row_order_fails_the_universe_check(tmp_path):
    table = _universe("site_a", "site_b").to_arrow()
    uids = table.column("uid").to_pylist()
    uids[2] = "elsewhere#0"
    edited = table.set_column(0, "uid", pa.array(uids, pa.string())).replace_schema_metadata(table.schema.metadata)
    result = validate_universe_table(edited)
    derived = table["uid"][2].as_py()
    assert result.errors == (f"universe table: row 2: uid 'elsewhere#0' is not source#index ({derived!r}); "
                             "the file was modified after it was written. Re-materialize the universe.",)
    swapped = table.take([1, 0, *range(2, len(table))]).replace_schema_metadata(table.schema.metadata)
    assert validate_universe_table(swapped).errors == ("rows are not in canonical (source, index) order",)


def test_a_missing_universe_fails_instead_of_raising(tmp_path):
    result = check_universe_table(tmp_path)
    assert result.severity == "error" and result.verdict.startswith("cannot check universe.parquet: no universe at ")
    assert "materialize the 'universe' asset first" in result.errors[0]


# -- leakage ---------------------------------------------------------------------------


def test_a_disjoint_split_says_no_sample_or_group_is_in_two_stages(tmp_path):
    _split(tmp_path, DISJOINT)
    result = check_split_leakage(tmp_path)
    assert isinstance(result, LeakageCheck) and result.passed and result.report is not None and result.report.ok
    assert result.verdict == "no sample or group in two stages (train 8, val 8, test 8 samples)"
    assert result.counts == {"train": 8, "val": 8, "test": 8, "predict": 24}
    assert result.figures["no_split_overlap.status"] == "satisfied (error)"


def test_a_leaking_split_names_the_group_and_the_first_leaking_samples(tmp_path):
    _split(tmp_path, LEAKING)
    result = check_split_leakage(tmp_path)
    assert result.severity == "error" and not result.warnings
    assert result.verdict == (
        "no_split_overlap violated: 1 group(s) in both train and val: 'site_b' (first: site_b/rec_1.parquet#0, "
        "site_b/rec_1.parquet#1, site_b/rec_1.parquet#2 and 5 more) (train 12, val 4, test 8 samples)")
    assert result.report.errors[0].shared_groups == ("site_b",)  # the report callers read stays whole
    assert result.figures["no_split_overlap.shared_groups"] == "site_b"
    assert result.figures["no_split_overlap.offending_count"] == 8


def test_a_warn_policy_leak_is_a_warning_not_an_error():
    train, val = [SampleRef("a.parquet", 0, group="g")], [SampleRef("b.parquet", 0, group="g")]
    result = leakage_check(evaluate_leakage(train, val, [], mode="warn"), {"train": 1, "val": 1, "test": 0})
    assert result.severity == "warn" and result.ok and not result.errors
    assert result.warnings[0].startswith("no_split_overlap violated: 1 group(s) in both train and val: 'g'")
    assert result.verdict.endswith("(train 1, val 1, test 0 samples)")


def test_leakage_off_checks_nothing_and_says_so():
    result = leakage_check(evaluate_leakage([], [], [], mode="off"), {"train": 0, "val": 0, "test": 0})
    assert result.passed and result.verdict.startswith("no leakage constraint declared, nothing checked")


def test_a_split_that_cannot_be_read_fails_the_leakage_check(tmp_path):
    result = check_split_leakage(tmp_path)
    assert result.severity == "error" and result.report is None
    assert result.verdict.startswith("cannot check the split's leakage: no universe at ")


# -- drift -----------------------------------------------------------------------------


def test_a_split_baked_against_the_current_universe_passes(tmp_path):
    universe = _split(tmp_path, DISJOINT)
    result = check_universe_drift(tmp_path)
    assert isinstance(result, DriftCheck) and result.passed and result.baked_hash == universe.hash
    assert result.verdict == f"split is baked against the current universe {universe.hash[:12]}..."


def test_a_universe_changed_after_baking_fails_naming_both_hashes(tmp_path):
    baked = _split(tmp_path, DISJOINT)
    grown = _universe("site_a", "site_b", "site_c", "site_d")
    write_universe(grown, tmp_path)
    result = check_universe_drift(tmp_path)
    assert result.severity == "error"
    assert result.verdict == (f"splits.json pins universe {baked.hash[:12]}..., but universe.parquet is "
                              f"{grown.hash[:12]}...; the universe changed after the split was baked. "
                              "Re-materialize 'resolved_splits'.")
    # and the leakage check refuses the stale split rather than judging it
    assert check_split_leakage(tmp_path).verdict.startswith("cannot check the split's leakage: ")


def test_a_refused_positional_rule_fails_with_the_drift_message(tmp_path):
    _split(tmp_path, {"universe_hash": "0" * 64, "train": [{"kind": "dir_indices", "ids": ["0-7"]}]})
    result = check_universe_drift(tmp_path)
    assert result.severity == "error" and result.baked_hash is None
    assert result.verdict.startswith("split refused: universe changed since splits.json was committed (expected "
                                     "000000000000..., got ")
    assert result.figures["input_rule"] == "drifted"


def test_a_position_independent_rule_with_a_stale_pin_passes_and_says_why(tmp_path):
    # a baked file pinned to another universe passes only while it decides about every sample:
    # the ones it keeps out of train / val / test it names under predict
    _split(tmp_path, {"universe_hash": "0" * 64,
                      "train": [{"kind": "file_indices", "source": "site_a/rec_1.parquet", "ids": ["0-3"]}],
                      "predict": [{"kind": "files", "paths": ["site_a/rec_2.parquet", "site_b/rec_1.parquet",
                                                              "site_b/rec_2.parquet", "site_c/rec_1.parquet",
                                                              "site_c/rec_2.parquet"]}]})
    result = check_universe_drift(tmp_path)
    assert result.passed and "holds no dir_indices, so it still selects the same samples" in result.verdict


def test_a_stale_baked_file_that_leaves_samples_unassigned_fails_naming_them(tmp_path):
    _split(tmp_path, {"universe_hash": "0" * 64,
                      "train": [{"kind": "file_indices", "source": "site_a/rec_1.parquet", "ids": ["0-3"]}],
                      "val": [{"kind": "files", "paths": ["site_b/rec_1.parquet"]}]})
    result = check_universe_drift(tmp_path)
    assert result.severity == "error" and result.baked_hash is None
    assert result.verdict.startswith(f"split refused: {tmp_path / 'rule.json'} was baked against universe "
                                     "000000000000..., but the universe is now ")
    assert ("and 16 samples from 4 sources are in none of its stages (first: site_a/rec_2.parquet, "
            "site_b/rec_2.parquet, site_c/rec_1.parquet and 1 more)") in result.errors[0]
    assert "set extend_baked: true in the resolved_splits config" in result.errors[0]
    assert "resolve-splits --rule FILE --extend-baked --seed N" in result.errors[0]


@pytest.mark.parametrize("missing", ["universe", "report"])
def test_missing_artifacts_fail_the_drift_check(tmp_path, missing):
    _split(tmp_path, DISJOINT)
    (tmp_path / ("universe/universe.parquet" if missing == "universe" else "splits/split_report.json")).unlink()
    result = check_universe_drift(tmp_path)
    assert result.severity == "error" and result.verdict.startswith("cannot check the split's universe: no ")
