"""Hostile ``curation.json`` content through ``check_landing_zone``: whatever the file holds,
the check returns a report and never raises; an invalid file is one ``config.invalid``
error naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.landing.check import check_landing_zone
from kuration.landing.plugins import forget_loaded_plugins
from tests.hostile import FUZZ, mutated, values
from tests.landing_check.landing_factory import copy_zone

VALID = {
    "plugins": [], "recordings": "recordings", "media_root": "recordings", "source_pattern": "*.parquet",
    "segment_window": 10, "segment_stride": 5, "segment_unit": "seconds", "workers": 2,
    "budget": {"train_hours": 1, "val_hours": 0.5, "test_hours": 0.5, "span_seconds": 30},
    "split": {"strategy": "stratified", "seed": 3, "val_ratio": 0.2, "test_ratio": 0.2, "group_by": "group"},
}


def _contained(data: Any) -> Any:
    """``data`` without what would make the check leave the test's folder: a folder outside
    the landing zone (an absolute path, ``..``, a URL) would list someone else's files, and
    a plugin name would import whatever module happens to be installed under it."""
    if not isinstance(data, dict):
        return data
    for key in ("recordings", "media_root"):
        value = data.get(key)
        if isinstance(value, str) and (value.startswith(("/", "\\", "~")) or ".." in value or ":" in value):
            data[key] = "elsewhere"
    if isinstance(data.get("plugins"), list):
        data["plugins"] = [f"kcheck_fuzz_absent_{name}" if isinstance(name, str) else name
                           for name in data["plugins"]]
    return data


CONTENT = st.one_of(
    mutated(VALID, python=False).map(lambda data: json.dumps(_contained(data))),
    values(python=False).map(json.dumps),
    st.binary(max_size=40).map(lambda raw: raw.decode("latin-1")),
    st.sampled_from(['{"budget": {"train_hours": 1e999}}', '{"workers": 1, "workers": 2}', "", "[]", "null",
                     '{"split": {"val_ratio": 0.6, "test_ratio": 0.6}}', "\ufeff{}", '{"plugins": "a,b"}']),
)


@pytest.fixture(scope="module")
def fuzz_zone(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_zone(template, tmp_path_factory.mktemp("fuzz") / "landing")


@FUZZ
@given(content=CONTENT)
def test_any_curation_json_gives_a_report_never_an_exception(fuzz_zone: Path, content: str):
    path = fuzz_zone / "curation.json"
    path.write_text(content, encoding="utf-8", errors="surrogatepass")
    forget_loaded_plugins()
    report = check_landing_zone(fuzz_zone, environ={}, sample_limit=1, media_refs=1)
    assert report.findings and report.render().splitlines()[-1].startswith(f"landing zone {fuzz_zone}: ")
    assert not [f for f in report.findings if f.code.endswith(".crashed")], report.render()
    invalid = [f for f in report.findings if f.code == "config.invalid"]
    if invalid:
        assert len(invalid) == 1 and str(path) in invalid[0].message
        assert not [f for f in report.findings if f.step in ("plugins", "settings", "sample", "media")
                    and not f.code.endswith(".skipped")]
    json.dumps(report.to_dict())  # the report is plain data
