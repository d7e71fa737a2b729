"""Recording names: a source id without its recording extension keys the scoring partition
and names the stored segment file; partition keys map back through the recordings listing."""

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.errors import RecordingError
from kuration.landing.recordings import (
    RecordingNameError,
    contiguous_blocks,
    partition_update,
    recording_name,
    recording_names,
    source_ids_for_names,
    universe_token,
)
from kuration.scoring.segment_store import segments_url

_PART = st.text(alphabet="abcxyz019_-.", min_size=1, max_size=8).filter(lambda p: p.strip(".") and ".." not in p)
_FOLDERS = st.lists(_PART, max_size=3)
_STEM = st.text(alphabet="abcxyz019_-.", min_size=1, max_size=10).filter(
    lambda s: not s.startswith(".") and not s.endswith("."))
_EXT = st.sampled_from([".parquet", ".npz", ".h5", ".mcap"])


@pytest.mark.parametrize(("source_id", "name"), [
    ("wind_farm/flight_005.parquet", "wind_farm/flight_005"),
    ("flight.parquet", "flight"),
    ("site/run.v2.parquet", "site/run.v2"),  # only the last suffix is the extension
    ("v1.5/a/flight.npz", "v1.5/a/flight"),  # a folder's dots stay
    ("site/no_extension", "site/no_extension"),
    ("site/.hidden", "site/.hidden"),
    ("site/flight.2024", "site/flight.2024"),  # a date, not an extension
    ("site/flight.2024.05.mcap", "site/flight.2024.05"),
    ("run.averyverylongsuffix", "run.averyverylongsuffix"),  # past 8 characters: part of the name
])
def test_a_name_is_the_id_without_its_extension(source_id, name):
    assert recording_name(source_id) == name


@given(folders=_FOLDERS, stem=_STEM, ext=_EXT)
def test_names_round_trip_through_the_listing(folders, stem, ext):
    source_id = posixpath.join(*folders, stem + ext)
    other = posixpath.join(*folders, stem + "_other" + ext)
    name = recording_name(source_id)
    assert name == posixpath.join(*folders, stem) and not name.endswith(ext)
    assert source_ids_for_names([name], [other, source_id]) == [source_id]
    assert recording_names([source_id, other]) == {name: source_id, recording_name(other): other}


def test_two_recordings_of_one_name_are_refused_naming_both_and_the_fix():
    with pytest.raises(RecordingNameError) as caught:
        recording_names(["site/a.parquet", "site/b.parquet", "site/a.npz"])
    message = str(caught.value)
    assert "'site/a.npz' and 'site/a.parquet' are both 'site/a'" in message
    assert "rename or move one" in message and "source_pattern" in message
    assert isinstance(caught.value, RecordingError) and isinstance(caught.value, ValueError)
    with pytest.raises(RecordingNameError):
        source_ids_for_names(["site/b"], ["site/a.parquet", "site/a.npz", "site/b.parquet"])


def test_a_name_with_no_recording_is_refused_with_every_such_name():
    with pytest.raises(RecordingNameError) as caught:
        source_ids_for_names(["a", "gone", "site/a.parquet"], ["a.parquet"], where="/landing/recordings")
    message = str(caught.value)
    assert "2 scoring partition(s) name no recording under /landing/recordings: 'gone', 'site/a.parquet'" in message
    assert "Restore the recording, or delete the partition" in message


def test_the_stored_file_is_named_after_the_recording_once():
    assert segments_url("/store", "wind/flight_005.parquet") == "/store/scored_segments/wind/flight_005.parquet"
    assert segments_url("/store", "site/run.v2.parquet") == "/store/scored_segments/site/run.v2.parquet"


def test_a_partition_update_adds_names_and_replaces_keys_that_still_carry_the_extension():
    listed = ["s/a.parquet", "s/b.parquet", "s/c.parquet"]
    update = partition_update(["s/a.parquet", "s/b", "removed/x.parquet"], listed)
    # s/a.parquet is an earlier release's key of a listed recording; removed/x.parquet names
    # no listed recording and stays for whatever reads it to refuse by name
    assert update.replace == ("s/a.parquet",)
    assert update.add == ("s/a", "s/c")
    assert partition_update(["s/a", "s/b", "s/c"], listed) == partition_update(["s/c", "s/a", "s/b"], listed)
    assert partition_update(["s/a", "s/b", "s/c"], listed).add == ()
    with pytest.raises(RecordingNameError):
        partition_update([], ["s/a.parquet", "s/a.npz"])


def test_contiguous_blocks_split_wanted_keys_where_others_lie_between():
    order = ["a", "b", "c", "d", "e"]
    assert contiguous_blocks(order, ["d", "a", "b"]) == [["a", "b"], ["d"]]
    assert contiguous_blocks(order, ["c", "d", "e"]) == [["c", "d", "e"]]
    assert contiguous_blocks(order, []) == []
    with pytest.raises(ValueError, match="not among the ordered keys: \\['z'\\]"):
        contiguous_blocks(order, ["a", "z"])


def test_the_universe_token_is_the_csvs_or_the_listing_digest(tmp_path):
    csv = tmp_path / "universe.csv"
    assert universe_token(str(csv), ["ignored"]) is None  # a missing csv has no token
    csv.write_text("source,index\n")
    assert universe_token(str(csv), []) and universe_token(str(csv), []) == universe_token(str(csv), ["x"])
    assert universe_token(None, ["b", "a"]) == universe_token(None, ["a", "b"]) != universe_token(None, ["a"])


@given(folders=_FOLDERS, stem=_STEM, ext=_EXT, other_ext=_EXT)
def test_a_shard_name_starts_from_the_recording_name(folders, stem, ext, other_ext):
    # the partition key and the shard prefix name a recording the same way: two ids of one
    # recording name (which recording_names refuses side by side) give one shard stem, and
    # the extension is in neither
    from kuration.output.shard_files import recording_stem

    source_id = posixpath.join(*folders, stem + ext)
    assert recording_name(source_id) == recording_name(posixpath.join(*folders, stem + other_ext))
    assert recording_stem(source_id) == recording_stem(posixpath.join(*folders, stem + other_ext))
    assert recording_stem(posixpath.join(*folders, stem + ".2024")).endswith("2024")
