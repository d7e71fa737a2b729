"""The one adapter from a core ``CheckResult`` to Dagster's ``AssetCheckResult``, and the one
Markdown table renderer."""

import math

from dagster import AssetCheckSeverity, AssetKey

from kuration.checks import CheckResult
from kuration_dagster_checks import LISTED, asset_check_result, markdown_table


def test_the_verdict_is_the_description_and_the_figures_a_markdown_table_with_units():
    result = CheckResult("3,322 shards, 1.1 GiB verified", figures={
        "shards": 3322, "train_emitted_hours": 4.0119444, "universe_hash": "ab|cd", "none": None,
        "bytes": 138394520, "train_bytes": 1023, "last_admitted_seconds": 59.99999, "nan_hours": math.nan,
        "flag_bytes": True})
    check = asset_check_result(result)
    assert check.passed and check.severity == AssetCheckSeverity.ERROR  # Dagster's default for a pass
    assert check.description == "3,322 shards, 1.1 GiB verified"
    assert set(check.metadata) == {"figures"}  # no empty errors or warnings
    table = check.metadata["figures"]
    assert type(table).__name__ == "MarkdownMetadataValue"
    assert table.value.splitlines() == ["| figure | value |", "|---|---|", "| shards | 3,322 |",
                                        "| train_emitted_hours | 4.01 h |", "| universe_hash | ab\\|cd |",
                                        "| none |  |",
                                        "| bytes | 132.0 MiB |", "| train_bytes | 1023 B |",
                                        "| last_admitted_seconds | 60 s |", "| nan_hours |  |", "| flag_bytes | True |"]


def test_warnings_alone_fail_as_a_warning_and_are_a_markdown_list():
    check = asset_check_result(CheckResult("train underfilled", warnings=("train: underfilled by 60%",)))
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    assert type(check.metadata["warnings"]).__name__ == "MarkdownMetadataValue"
    assert check.metadata["warnings"].value == "- train: underfilled by 60%" and "errors" not in check.metadata
    assert "figures" not in check.metadata


def test_errors_fail_as_an_error_and_a_long_list_is_cut():
    errors = ("shard <split>/0 of train_*/* differs:\n  size 3 | 4",) + tuple(
        f"shard {i} differs" for i in range(1, LISTED + 5))
    check = asset_check_result(CheckResult("25 of 25 shards bad", errors=errors, warnings=("w",)),
                               check_name="dataset_integrity", asset_key=AssetKey("dataset_manifest"))
    assert not check.passed and check.severity == AssetCheckSeverity.ERROR
    assert check.check_name == "dataset_integrity" and check.asset_key == AssetKey("dataset_manifest")
    # one item a line, whatever the error's own text holds; '<' would open an HTML tag, '*' start emphasis
    assert check.metadata["errors"].value.splitlines() == [
        "- shard &lt;split>/0 of train_\\*/\\* differs: size 3 | 4", *(f"- {e}" for e in errors[1:LISTED]),
        "- ... and 5 more"]
    assert check.metadata["warnings"].value == "- w"


def test_the_table_renderer_formats_cells_for_people():
    rows = [{"path": "train/<split>/a.npz", "bytes": 100400600, "hours": 4.0119444444444445, "share": 1234.5,
             "missing": math.nan, "ok": True},
            {"path": "two\nlines", "bytes": 3}]
    text = markdown_table(rows, more=7).value.splitlines()
    assert text[0] == "| path | bytes | hours | share | missing | ok |"
    assert text[2] == "| train/&lt;split>/a.npz | 100,400,600 | 4.01 | 1,234 |  | True |"
    assert text[3] == "| two lines | 3 |  |  |  |  |"
    assert text[4] == "| ... 7 more |  |  |  |  |  |"
    assert markdown_table([], columns=["a"]).value == "| a |\n|---|"
