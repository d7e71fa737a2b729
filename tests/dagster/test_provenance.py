"""The provenance entry: cache keys recorded in one Markdown entry that says it holds no figure,
and read back exactly, whatever characters a token holds."""

from __future__ import annotations

from dagster import MarkdownMetadataValue, MetadataValue
from hypothesis import given
from hypothesis import strategies as st

from kuration_dagster_checks.provenance import PROVENANCE, provenance_entry, recorded_provenance

_VALUES = st.one_of(st.text(), st.integers(), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False))


@given(st.dictionaries(st.text(), _VALUES, max_size=6))
def test_any_values_read_back_exactly(values):
    entry = provenance_entry(values)
    assert list(entry) == [PROVENANCE] and isinstance(entry[PROVENANCE], MarkdownMetadataValue)
    assert recorded_provenance(entry) == values
    # as the instance hands them back: the values of stored metadata, or the metadata values themselves
    assert recorded_provenance({PROVENANCE: entry[PROVENANCE].value}) == values


def test_a_token_that_would_end_the_code_span_stays_inside_it():
    token = "ETag:```\n``` `x`"
    entry = provenance_entry({"recording_token": token})
    body = entry[PROVENANCE].value
    assert body.count("`") == 2 and "\n" not in body  # the span's own backticks only, on one line
    assert recorded_provenance(entry) == {"recording_token": token}


def test_the_entry_says_what_it_is_before_the_values_on_one_line():
    body = provenance_entry({"universe_token": "size:5924:mtime:1796194204.7471824"})[PROVENANCE].value
    caption, code = body.split(" `", 1)
    assert caption.startswith("Not a figure") and "sensor" in caption
    assert code == '{"universe_token": "size:5924:mtime:1796194204.7471824"}`'



def test_metadata_without_an_entry_records_nothing():
    assert recorded_provenance({}) == {}
    assert recorded_provenance({"path": MetadataValue.path("/x"), "segments": MetadataValue.int(3)}) == {}
    assert recorded_provenance({PROVENANCE: MetadataValue.md("written by hand, no code span")}) == {}
