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
