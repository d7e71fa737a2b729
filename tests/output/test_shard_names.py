"""Shard names: ``<recording>_<entity>[_spanNNN]_<hash12>``. The readable prefix is the
recording's stem and the entity's plain value made portable; the hash of the exact (source
id, entity key, span index) keeps apart everything the prefix merges. Names are pinned, so a
change on another machine, Python version or hash seed shows up here."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.output.shard_files import (
    PREFIX_PART_MAX, entity_plain, recording_stem, shard_name, shard_name_hash, shard_stem,
)
from kuration.sources.entities import EntityIdError, entity_key
from tests.hostile import FUZZ

#: A portable stem: ASCII letters, digits, ``.``, ``_``, ``-``; starts with a letter or digit.
PORTABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Recording and entity parts at their longest, a 4-digit span and the hash, with separators.
LONGEST_STEM = 2 * PREFIX_PART_MAX + len("_span1234") + 2 + 12
HASH = re.compile(r"(?:\A|_)[0-9a-f]{12}\Z")
REPO = Path(__file__).resolve().parents[2]

#: Golden names: a change to any of them renames every dataset's shards (then say so and re-pin).
PINNED = [
    (("airfield_north/flight_001.parquet", entity_key("drone_07"), 6),
     "airfield_north__flight_001_drone_07_span006_a59a1d9bb2cc"),
    (("flight_001.parquet", entity_key(5), None), "flight_001_5_60dddd5293a5"),
    (("flight_001.parquet", entity_key("5"), None), "flight_001_5_6eef90186ddf"),
    (("episode_0003", entity_key(("veh", 3)), 0), "episode_0003_veh_3_span000_17094c2b54e1"),
    (("s.parquet", entity_key(frozenset({"b", "a", 3})), None), "s_3_a_b_4e5077b9b61d"),
    (("日本/ü.parquet", entity_key("é"), None), "c5af185ae589"),
]


def test_the_prefix_is_the_recording_stem_and_the_plain_entity():
    stem = shard_stem("airfield_north/flight_001.parquet", "str:'drone_07'", 6)
    assert stem.startswith("airfield_north__flight_001_drone_07_span006_") and HASH.search(stem)
    assert ".parquet" not in stem and "str" not in stem and "'" not in stem
    assert shard_name(stem, 3, ".npz") == f"{stem}_shard0003.npz"


@pytest.mark.parametrize(("source", "expected"), [
    ("flight_001.parquet", "flight_001"),
    ("site_a/day 1/flight_001.parquet", "site_a__day_1__flight_001"),
    ("flight.2024.05.parquet", "flight.2024.05"),  # only the recording extension goes
    ("flight.2024", "flight.2024"),
    ("archive.tar.gz", "archive.tar"),
    ("episode_0003", "episode_0003"),
    ("./a/../b.parquet", "a__b"),
    ("a//b/.parquet", "a__b__parquet"),  # a hidden file has no extension to drop
    ("-x/.y_.parquet", "-x__y"),
    ("..", ""),
    ("", ""),
    ("日本.parquet", ""),
    ("a.parquet\n", "a.parquet"),
    ("d" * 30 + "/" + "f" * 60 + ".parquet", "f" * PREFIX_PART_MAX),  # a long stem keeps the file's end
])
def test_recording_stem(source, expected):
    assert recording_stem(source) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("drone_07", "drone_07"), ("drone 07", "drone_07"), ("", ""), ("..", ""), ("../../etc/passwd", "etc_passwd"),
    ("a/b\\c", "a_b_c"), (" \t\n", ""), ("\x00", ""), ("x\x00y", "x_y"), ("ü-é", "-"), (".hidden", "hidden"),
    ("e" * 500, "e" * PREFIX_PART_MAX), (5, "5"), (-3, "-3"), (True, "True"), (1.5, "1.5"), (-0.0, "0.0"),
    (1e-300, "1e-300"), (None, "None"), (b"\x00ab/", "ab"), (("veh", 3), "veh_3"), ((), ""),
    (frozenset({"b", 2}), "2_b"),
])
def test_entity_plain_drops_the_type_tag_and_quotes(value, expected):
    assert entity_plain(entity_key(value)) == expected


@pytest.mark.parametrize("value", ["", "/", "a/b", "..", "../..", "ü", "日本", "x" * 10_000, " ", "\t\n", "\x00",
                                   ".", "-", "-1", "CON", "nul", 0, -1, 2**80, True, False, 0.0, -2.5, None,
                                   b"", b"\xff", (), ("", ""), frozenset()])
def test_hostile_entities_give_portable_bounded_names(value):
    stem = shard_stem("recordings/../weird name.parquet", entity_key(value), 1)
    assert PORTABLE.fullmatch(stem) and len(stem) <= LONGEST_STEM and HASH.search(stem)
    assert "/" not in stem and not stem.startswith(".")


def test_windows_device_names_are_not_the_start_of_a_name():
    assert shard_stem("nul.v2.parquet", "int:1", None).startswith("nul_v2_1_")
    assert shard_stem("CON", "int:1", None).startswith("CON_1_")  # CON_... is an ordinary name


def test_values_that_sanitise_alike_get_distinct_names():
    clashes = [("drone 07", "drone_07", "drone/07", "drone\x0007", "drone\t\t07"), ("ü", "é", "", "..", " "),
               ("e" * PREFIX_PART_MAX, "e" * PREFIX_PART_MAX + "x", "e" * PREFIX_PART_MAX + "/y")]
    for values in clashes:
        stems = [shard_stem("s.parquet", entity_key(v), None) for v in values]
        assert len({HASH.sub("", s) for s in stems}) == 1, stems  # one readable prefix...
        assert len(set(stems)) == len(values), stems  # ...and still one name each
    typed = [1, "1", True, 1.0, b"1", (1,), frozenset({1})]
    assert len({shard_stem("s.parquet", entity_key(v), None) for v in typed}) == len(typed)
    sources = ["a/b.parquet", "a__b.parquet", "./a/b.parquet", "a/b.pq", "a/b"]
    assert len({recording_stem(s) for s in sources}) == 1
    assert len({shard_stem(s, "int:1", None) for s in sources}) == len(sources)
    assert len({shard_stem("s", "int:1", span) for span in (None, 0, 1)}) == 3


def test_an_entity_that_is_not_an_entity_key_is_refused():
    with pytest.raises(EntityIdError, match="drone_07"):
        shard_stem("s.parquet", "drone_07", None)


@pytest.mark.parametrize(("args", "expected"), PINNED)
def test_names_are_pinned(args, expected):
    assert shard_stem(*args) == expected


def test_names_are_the_same_in_a_process_with_another_hash_seed():
    code = ("import json, sys; from kuration.output.shard_files import shard_stem; "
            "print(json.dumps([shard_stem(*a) for a in json.load(sys.stdin)]))")
    args = [list(a) for a, _ in PINNED] + [["s", entity_key(frozenset({"x", "y", "z", 1, b"q"})), None]]
    here = [shard_stem(*a) for a in args]
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", code], input=json.dumps(args), env=env,
                              capture_output=True, text=True, check=True, cwd=REPO)
        assert json.loads(done.stdout) == here


def test_the_hash_takes_any_source_id_even_an_undecodable_one():
    undecodable = os.fsdecode(b"flight_\xff.parquet")  # a lone surrogate, as a listing of such a file gives
    stem = shard_stem(undecodable, "int:1", None)
    assert PORTABLE.fullmatch(stem) and stem.startswith("flight_1_")
    assert shard_name_hash(undecodable, "int:1", None) != shard_name_hash("flight_\ufffd.parquet", "int:1", None)


ENTITIES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=80) | st.binary(max_size=20),
    lambda children: st.tuples(children, children) | st.frozensets(children, max_size=3),
    max_leaves=6,
).map(entity_key)
SOURCES = st.text(st.characters(codec=None, exclude_categories=()), max_size=120) | st.lists(
    st.sampled_from(["a", "b", "..", ".", "", " ", "x.parquet", "ü", "CON", "-", "_"]), max_size=6).map("/".join)
SPANS = st.none() | st.integers(0, 99_999)


@FUZZ
@given(SOURCES, ENTITIES, SPANS)
def test_every_name_is_portable_bounded_and_stable(source, entity, span):
    stem = shard_stem(source, entity, span)
    assert PORTABLE.fullmatch(stem) and HASH.search(stem)
    assert len(stem) <= 2 * PREFIX_PART_MAX + len(f"_span{span:03d}" if span is not None else "") + 2 + 12
    assert stem == shard_stem(source, entity, span)


@FUZZ
@given(st.lists(st.tuples(SOURCES, ENTITIES, SPANS), min_size=2, max_size=12, unique=True))
def test_distinct_shards_get_distinct_names(shards):
    assert len({shard_stem(*shard) for shard in shards}) == len(shards)
