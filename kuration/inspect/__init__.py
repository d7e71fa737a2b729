"""Artifact tooling: inspect a committed dataset, compare two, gate one on a quality policy,
and render either as a self-contained HTML report (``kur-inspect``, ``kur-diff``,
``kur-check``). Everything here reads committed datasets only (through
:func:`kuration.read.load_committed`) and never writes one.
"""

from kuration.inspect.compare import DatasetComparison, compare_datasets, differences
from kuration.inspect.html import render_diff_html, render_report_html, write_report_html
from kuration.inspect.quality import (
    QualityPolicy, QualityResult, advisory_quality, check_quality, load_policy, parse_policy,
)
from kuration.inspect.report import REPORT_SCHEMA_VERSION, DatasetReport, inspect_dataset

__all__ = ["REPORT_SCHEMA_VERSION", "DatasetComparison", "DatasetReport", "QualityPolicy", "QualityResult",
           "advisory_quality", "check_quality", "compare_datasets", "differences", "inspect_dataset", "load_policy",
           "parse_policy", "render_diff_html", "render_report_html", "write_report_html"]
