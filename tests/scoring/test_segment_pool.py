"""``check_segment_pool``: the pool over every stored source, as one verdict. An empty pool is
an error naming the skipped sources; non-finite priorities warn naming the sources."""

import math

from kuration.checks import CheckResult
from kuration.scoring.segment_store import SKIPPED_KEY, check_segment_pool, write_source_segments
from tests.budget.segment_tables import segments_table

HOUR = 36_000  # steps at 10 Hz


def _store(root, source, rows, skipped=None):
    table = segments_table(rows)
    if skipped is not None:
        table = table.slice(0, 0).replace_schema_metadata({SKIPPED_KEY: skipped.encode()})
    write_source_segments(root, source, table)


def test_a_healthy_pool_says_how_much_there_is(tmp_path):
    _store(tmp_path, "site_a/f1", [("site_a/f1", "e", 0, HOUR, HOUR, 1.0, []),
                                   ("site_a/f1", "e", HOUR, 2 * HOUR, 2 * HOUR, 2.0, [])])
    _store(tmp_path, "site_b/f1", [("site_b/f1", "e", 0, HOUR, HOUR, -math.inf, [])])
    result = check_segment_pool(tmp_path)
    assert isinstance(result, CheckResult) and result.passed
    assert result.verdict == ("3 segments (3 h of track) from 2 sources; 1 filtered out, 0 absent, "
                              "every other priority finite")
    assert result.figures["track_hours"] == 3.0 and result.figures["filtered_out_segments"] == 1
    assert result.figures["priority_max"] == 2.0


def test_non_finite_priorities_warn_naming_the_sources(tmp_path):
    _store(tmp_path, "a", [("a", "e", 0, HOUR, HOUR, 1.0, [])])
    _store(tmp_path, "b", [("b", "e", 0, HOUR, HOUR, math.nan, []), ("b", "e", HOUR, 2 * HOUR, 2 * HOUR, math.inf, [])])
    result = check_segment_pool(tmp_path)
    assert result.severity == "warn" and result.ok
    assert result.warnings == ("2 segments with a non-finite priority (NaN or +inf) although the entity was "
                               "present, in b (2)",)
    assert result.verdict.endswith("; " + result.warnings[0]) and result.figures["non_finite_segments"] == 2


def test_an_empty_pool_fails_naming_the_skipped_sources_and_why(tmp_path):
    _store(tmp_path, "a", [], skipped="SchemaError: missing column 'wind'")
    _store(tmp_path, "b", [], skipped="OSError: truncated file")
    result = check_segment_pool(tmp_path)
    assert result.severity == "error"
    assert result.verdict.startswith("no segments in any of 2 scored sources; skipped: a (SchemaError: missing "
                                     "column 'wind'), b (OSError: truncated file). Check skipped_error")
    assert check_segment_pool(tmp_path / "nothing").verdict.startswith("no segments in any of 0 scored sources. ")


def test_the_pool_is_broken_down_by_folder_and_names_a_skipped_source(tmp_path):
    _store(tmp_path, "site_a/f1", [("site_a/f1", "e", 0, HOUR, HOUR, 1.0, []),
                                   ("site_a/f1", "e", HOUR, 2 * HOUR, 2 * HOUR, math.nan, [])])
    _store(tmp_path, "site_a/f2", [], skipped="SchemaError: missing column 'wind'")
    _store(tmp_path, "site_b/day_1/f1", [("site_b/day_1/f1", "e", 0, HOUR, HOUR, -math.inf, [])])
    _store(tmp_path, "loose", [("loose", "e", 0, HOUR // 2, HOUR // 2, 3.0, [])])
    result = check_segment_pool(tmp_path)
    assert result.severity == "warn"  # the NaN; the skipped source alone would not fail a non-empty pool
    assert result.verdict.endswith("in site_a/f1 (1); 1 source skipped: site_a/f2 (SchemaError: missing column "
                                   "'wind')")
    assert result.figures["skipped_sources"] == 1 and result.figures["sources"] == 4
    assert result.figures["track_hours"] == 3.5 and result.figures["priority_median"] == 2.0
    assert result.folders == (
        {"folder": ".", "sources": 1, "skipped": 0, "segments": 1, "hours": 0.5, "non_finite": 0,
         "filtered_out": 0, "absent": 0},
        {"folder": "site_a", "sources": 2, "skipped": 1, "segments": 2, "hours": 2.0, "non_finite": 1,
         "filtered_out": 0, "absent": 0},
        {"folder": "site_b", "sources": 1, "skipped": 0, "segments": 1, "hours": 1.0, "non_finite": 0,
         "filtered_out": 1, "absent": 0})
    assert result.skipped == (("site_a/f2", "SchemaError: missing column 'wind'"),)
    # the folders add up to the pool
    assert sum(row["segments"] for row in result.folders) == result.figures["segments"] == 4


def test_a_healthy_pool_without_skipped_sources_lists_none(tmp_path):
    _store(tmp_path, "a", [("a", "e", 0, HOUR, HOUR, 1.0, [])])
    result = check_segment_pool(tmp_path)
    assert result.passed and result.skipped == () and result.figures["skipped_sources"] == 0
    assert [row["folder"] for row in result.folders] == ["."] and "skipped" not in result.verdict
