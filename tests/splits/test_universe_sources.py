"""``check_universe_sources``: universe source ids must name recordings under the recordings root."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.demo.corpus import write_demo_landing_zone
from kuration.landing.recordings import list_recordings
from kuration.splits import read_landing_universe
from kuration.splits.artifacts import write_universe
from kuration.landing.universe_sources import check_stored_universe_sources, check_universe_sources
from tests.splits.mismatched_ids import prefix_universe_sources

WHERE = ("Universe source ids are paths relative to the recordings root {url} (the `recordings` setting of "
         "curation.json, relative to the landing zone)")


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """The demo's layout: universe.csv at the landing zone, recordings/<site>/flight_NNN.parquet."""
    return Path(write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=2, sites=2,
                                        minutes=(1, 1)).root)


def _check(landing: Path):
    universe = read_landing_universe(str(landing))
    url = str(landing / "recordings")
    return check_universe_sources(universe.source_names, list_recordings(url), recordings_url=url,
                                  pattern="*.parquet")


def test_the_demo_universe_names_every_recording(landing):
    result = _check(landing)
    assert result.passed, result.errors
    assert result.verdict == (f"4 universe sources, each names a recording under {landing}/recordings matching "
                              "'*.parquet'")
    assert result.figures == {"universe_sources": 4, "recordings": 4, "unmatched_sources": 0, "unlisted_recordings": 0}


def test_ids_relative_to_the_landing_zone_fail_naming_them_with_a_hint(landing):
    ids = sorted(prefix_universe_sources(landing))
    result = _check(landing)
    url = f"{landing}/recordings"
    assert not result.ok and result.severity == "error" and result.unmatched == tuple(ids)
    (error,) = result.errors
    assert error == (
        f"4 of the 4 universe sources name no recording ({ids[0]!r}, {ids[1]!r}, {ids[2]!r} and 1 more); found 4 "
        f"recordings under {url} matching '*.parquet'. " + WHERE.format(url=url) + ". Hint: 4 of the 4 unmatched ids "
        "match a recording once the prefix 'recordings/' is removed: the ids carry the recordings folder 'recordings' "
        "itself, so they look relative to the landing zone, not to the recordings root. Remove 'recordings/' from "
        "the ids in universe.csv, or point the recordings folder at the folder the ids are relative to")
    assert result.verdict.startswith(f"4 of 4 universe sources name no recording under {url} matching '*.parquet': "
                                     f"{ids[0]!r}, ")
    # ... and every recording is then in no universe row: a warning beside the error.
    assert result.unlisted == tuple(i.removeprefix("recordings/") for i in ids)
    assert result.warnings[0].startswith(f"4 recordings under {url} matching '*.parquet' are in no universe row (")


def test_a_recordings_root_above_the_ids_hints_at_the_missing_prefix(landing):
    url = str(landing)  # recordings = "." while the ids are relative to recordings/
    result = check_universe_sources(read_landing_universe(url).source_names, list_recordings(url), recordings_url=url)
    assert result.errors[0].endswith(
        f"Hint: 4 of the 4 unmatched ids match a recording once the prefix 'recordings/' is added: the ids look "
        f"relative to {landing}/recordings, a folder below the recordings root. Point the recordings folder there, or "
        "prefix the ids with 'recordings/'")


def test_ids_without_their_extension_are_hinted():
    result = check_universe_sources(["a/x", "b/y", "b/z.parquet"], ["a/x.parquet", "b/y.parquet", "b/z.parquet"],
                                    recordings_url="s3://bucket/rec")
    assert result.unmatched == ("a/x", "b/y") and result.figures["unmatched_sources"] == 2
    assert result.errors[0].startswith("2 of the 3 universe sources name no recording ('a/x', 'b/y'); found 3 "
                                       "recordings under s3://bucket/rec. ")
    assert result.errors[0].endswith("Hint: 2 of the 2 unmatched ids match a recording once the extension '.parquet' "
                                     "is added: write the ids with their extension")


def test_no_recordings_at_all_says_so_without_a_hint():
    result = check_universe_sources(["a.parquet"], {}, recordings_url="/data/landing/recordings", pattern="*.parquet")
    assert result.errors == (
        "1 of the 1 universe source names no recording ('a.parquet'); found no recording under "
        "/data/landing/recordings matching '*.parquet' (is the recordings folder right, and are the recordings "
        "there?). " + WHERE.format(url="/data/landing/recordings") + ". Fix the ids in universe.csv's source column, "
        "or the recordings folder",)


def test_recordings_no_universe_row_names_only_warn():
    result = check_universe_sources(["a.parquet"], ["a.parquet", "b.parquet"], recordings_url="/r")
    assert result.ok and result.severity == "warn" and result.unlisted == ("b.parquet",)
    assert result.warnings == ("1 recording under /r is in no universe row ('b.parquet'); they will be scored but "
                               "belong to no split, which fails the budget check. Add them to universe.csv, or move "
                               "them out of the recordings root",)
    assert result.verdict == ("1 universe source, each names a recording under /r; 1 recording in no universe row "
                              "('b.parquet')")


def test_the_stored_check_reads_the_stored_universe_and_fails_instead_of_raising(landing, tmp_path):
    storage = tmp_path / "storage"
    missing = check_stored_universe_sources(storage, str(landing / "recordings"))
    assert missing.severity == "error" and missing.verdict.startswith("cannot check the universe's source ids: ")
    write_universe(read_landing_universe(str(landing)), storage)
    assert check_stored_universe_sources(storage, str(landing / "recordings")).passed
    assert not check_stored_universe_sources(storage, str(landing / "nowhere")).ok  # a missing folder lists nothing


_ID = st.text(alphabet="abc/", min_size=1, max_size=6).filter(lambda s: "//" not in s and s[0] != "/" and s[-1] != "/")


@settings(max_examples=80, deadline=None)
@given(st.sets(_ID, max_size=8), st.sets(_ID, max_size=8), st.sampled_from(["", "recordings/", "data/raw/"]))
def test_unmatched_is_exactly_the_ids_no_recording_has_and_a_shared_prefix_is_named(ids, recordings, prefix):
    written = [prefix + i for i in ids]
    result = check_universe_sources(written, recordings, recordings_url="/z/recordings")
    assert result.unmatched == tuple(sorted(set(written) - recordings))
    assert result.unlisted == tuple(sorted(recordings - set(written)))
    assert result.ok == (not result.unmatched)
    if prefix and ids and ids <= recordings and not set(written) & recordings:
        # every id is a recording once the prefix goes: the hint names it (or an equally good one)
        assert "Hint: " in result.errors[0] and "prefix" in result.errors[0]
