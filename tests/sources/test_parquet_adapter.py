"""ParquetTickAdapter: the adapter contract, bad files, and reading from an fsspec URL."""

from __future__ import annotations

import io
import re
import uuid
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration.sources.schema import Schema
from kuration.sources import ParquetTickAdapter, SourceError, TickDataError
from kuration.sources.tracks import tracks_from_ticks

from tests.sources._parquet_files import vectors, write_table
from tests.kits.implementations import ParquetEpisodes
from kuration.testing.adapter import make_episode


class TestParquetContract(ParquetEpisodes):
    pass



# ---- bad files ----------------------------------------------------------------------

MULTI = Schema.from_dict({
    "sample_hz": 10,
    "time": "t",
    "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
    "globals": {"light": {"dtype": "int8"}},
    "tags": "tags",
})


def good_columns() -> dict:
    """3 ticks x 2 agents, sorted by tick."""
    return {
        "t": [0, 0, 1, 1, 2, 2],
        "agent": ["a", "b", "a", "b", "a", "b"],
        "pos": vectors(np.arange(18, dtype=np.float32).reshape(6, 3)),
        "speed": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
        "light": pa.array([0, 0, 1, 1, 2, 2], pa.int8()),
        "tags": [["go"], [], None, ["stop", "go"], ["turn"], []],
    }


def read_bad(tmp_path: Path, schema: Schema = MULTI, **changes):
    columns = {**good_columns(), **changes}
    columns = {k: v for k, v in columns.items() if v is not None}
    write_table(tmp_path / "rec" / "bad.parquet", columns)
    return ParquetTickAdapter(tmp_path / "rec", schema).read_ticks("bad.parquet")


def where(column: str, row: int) -> str:
    """The message prefix every row-level error carries: source, column, row."""
    return re.escape(f"bad.parquet: column {column!r}, row {row}")


def test_good_file_reads(tmp_path):
    ticks = read_bad(tmp_path)
    assert len(ticks) == 6 and list(ticks.entity) == ["a", "b"] * 3
    assert ticks.tags == [("go",), (), (), ("stop", "go"), ("turn",), ()]
    np.testing.assert_array_equal(ticks.columns["light"], [0, 0, 1, 1, 2, 2])


def test_missing_column_names_source_and_column(tmp_path):
    columns = good_columns()
    del columns["speed"]
    write_table(tmp_path / "rec" / "bad.parquet", columns)
    with pytest.raises(TickDataError, match=r"bad\.parquet: missing column 'speed'"):
        ParquetTickAdapter(tmp_path / "rec", MULTI).read_ticks("bad.parquet")


def test_string_in_a_float_field(tmp_path):
    with pytest.raises(TickDataError, match=where("speed", 0) + ".*not a number"):
        read_bad(tmp_path, speed=["fast", "1.0", "x", "y", "z", "w"])


def test_float_in_an_int_global_names_the_fractional_row(tmp_path):
    with pytest.raises(TickDataError, match=where("light", 2) + ".*cannot hold declared int8"):
        read_bad(tmp_path, light=[0.0, 0.0, 1.5, 1.5, 2.0, 2.0])


def test_int_too_big_for_declared_dtype(tmp_path):
    with pytest.raises(TickDataError, match=where("light", 4) + r".*does not fit declared int8"):
        read_bad(tmp_path, light=[0, 0, 1, 1, 300, 300])


def test_fixed_list_of_2_where_3_declared(tmp_path):
    with pytest.raises(TickDataError, match=where("pos", 0) + r".*expected shape \[3\]"):
        read_bad(tmp_path, pos=vectors(np.zeros((6, 2), np.float32)))


def test_ragged_list_rows(tmp_path):
    ragged = [[0.0, 1.0, 2.0]] * 4 + [[1.0, 2.0]] + [[0.0, 1.0, 2.0]]
    with pytest.raises(TickDataError, match=where("pos", 4) + r".*expected shape \[3\] \(3 values\), got 2"):
        read_bad(tmp_path, pos=ragged)


def test_null_inside_a_vector(tmp_path):
    rows = [[0.0, 1.0, 2.0]] * 6
    rows[3] = [0.0, None, 2.0]
    with pytest.raises(TickDataError, match=where("pos", 3) + ".*null element"):
        read_bad(tmp_path, pos=pa.array(rows, pa.list_(pa.float32(), 3)))


def test_null_vector_row(tmp_path):
    rows = [[0.0, 1.0, 2.0]] * 6
    rows[5] = None
    with pytest.raises(TickDataError, match=where("pos", 5) + ".*null"):
        read_bad(tmp_path, pos=pa.array(rows, pa.list_(pa.float32())))


def test_null_in_a_numeric_column(tmp_path):
    with pytest.raises(TickDataError, match=where("speed", 2) + ".*null"):
        read_bad(tmp_path, speed=[0.5, 1.0, None, 2.0, 2.5, 3.0])


def test_null_entity(tmp_path):
    with pytest.raises(TickDataError, match=where("agent", 1) + ".*null"):
        read_bad(tmp_path, agent=["a", None, "a", "b", "a", "b"])


def test_unsorted_ticks(tmp_path):
    with pytest.raises(TickDataError, match=where("t", 4) + ".*sorted"):
        read_bad(tmp_path, t=[0, 0, 2, 2, 1, 1])


def test_duplicate_tick_entity(tmp_path):
    with pytest.raises(TickDataError, match=where("agent", 3) + ".*'a' appears twice at tick 1"):
        read_bad(tmp_path, agent=["a", "b", "a", "a", "a", "b"])


def test_duplicate_tick_in_single_entity_schema(tmp_path):
    single = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"speed": {"dtype": "float64"}}})
    write_table(tmp_path / "rec" / "bad.parquet", {"t": [0, 1, 1, 2], "speed": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(TickDataError, match=where("t", 2) + ".*repeats row 1"):
        ParquetTickAdapter(tmp_path / "rec", single).read_ticks("bad.parquet")


def test_fractional_tick_counter(tmp_path):
    with pytest.raises(TickDataError, match=where("t", 2) + ".*not a whole number"):
        read_bad(tmp_path, t=[0.0, 0.0, 0.5, 0.5, 2.0, 2.0])


def test_time_in_seconds_off_the_sample_grid(tmp_path):
    seconds = Schema.from_dict({"sample_hz": 20, "time": "ts", "time_unit": "seconds",
                                "fields": {"speed": {"dtype": "float64"}}})
    write_table(tmp_path / "rec" / "bad.parquet", {"ts": [0.0, 0.05, 0.1, 0.17], "speed": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(TickDataError, match=where("ts", 3) + r".*0\.17 s is not on the 20 Hz sample grid"):
        ParquetTickAdapter(tmp_path / "rec", seconds).read_ticks("bad.parquet")


def test_time_in_seconds_on_the_grid_becomes_ticks(tmp_path):
    seconds = Schema.from_dict({"sample_hz": 30, "time": "ts", "time_unit": "seconds",
                                "fields": {"speed": {"dtype": "float64"}}})
    write_table(tmp_path / "rec" / "ok.parquet", {"ts": np.arange(100) / 30, "speed": np.ones(100)})
    ticks = ParquetTickAdapter(tmp_path / "rec", seconds).read_ticks("ok.parquet")
    np.testing.assert_array_equal(ticks.tick, np.arange(100))


def test_globals_that_differ_between_entities_at_one_tick(tmp_path):
    with pytest.raises(TickDataError, match=where("light", 3) + ".*global differs from row 2 at the same tick 1"):
        read_bad(tmp_path, light=pa.array([0, 0, 1, 7, 2, 2], pa.int8()))


def test_tags_of_a_wrong_type(tmp_path):
    with pytest.raises(TickDataError, match=where("tags", 0) + ".*tags must be a string or a list of strings"):
        read_bad(tmp_path, tags=[1, 2, 3, 4, 5, 6])


def test_tags_list_of_bytes_is_not_tags(tmp_path):
    with pytest.raises(TickDataError,
                       match=where("tags", 1) + r".*tags must be a string or a list of strings, got \[b'go'\]"):
        read_bad(tmp_path, tags=pa.array([[], [b"go"], [], [], [], []], pa.list_(pa.binary())))


def test_undeclared_columns_are_ignored_even_when_ragged(tmp_path):
    ticks = read_bad(tmp_path, notes=pa.array([[1], [1, 2], [], [3], [4, 5, 6], [7]]))
    assert "notes" not in ticks.columns and len(ticks) == 6


def test_not_a_parquet_file(tmp_path):
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(TickDataError, match=r"junk\.parquet: not a readable Parquet file"):
        ParquetTickAdapter(tmp_path / "rec", MULTI).read_ticks("junk.parquet")


def test_root_that_is_not_a_directory(tmp_path):
    with pytest.raises(SourceError, match="not a directory of recordings"):
        ParquetTickAdapter(tmp_path / "nowhere", MULTI).list_sources()


def test_empty_source_reads_as_zero_rows(tmp_path):
    empty = {
        "t": pa.array([], pa.int64()), "agent": pa.array([], pa.string()),
        "pos": pa.array([], pa.list_(pa.float32(), 3)), "speed": pa.array([], pa.float64()),
        "light": pa.array([], pa.int8()), "tags": pa.array([], pa.list_(pa.string())),
    }
    write_table(tmp_path / "rec" / "empty.parquet", empty)
    ticks = ParquetTickAdapter(tmp_path / "rec", MULTI).read_ticks("empty.parquet")
    assert len(ticks) == 0 and ticks.columns["pos"].shape == (0, 3) and ticks.columns["pos"].dtype == np.float32
    assert tracks_from_ticks(MULTI, ticks) == []


def test_nested_sources_and_hidden_files(tmp_path):
    for rel in ("b.parquet", "sub/a.parquet", ".hidden/x.parquet", "sub/.y.parquet"):
        write_table(tmp_path / "rec" / rel, {"t": [0], "speed": [1.0]})
    (tmp_path / "rec" / "notes.txt").write_text("not a source")
    single = Schema.from_dict({"sample_hz": 10, "time": "t", "fields": {"speed": {"dtype": "float64"}}})
    assert ParquetTickAdapter(tmp_path / "rec", single).list_sources() == ["b.parquet", "sub/a.parquet"]


# ---- fsspec URL ---------------------------------------------------------------------


@pytest.fixture
def memory_root():
    """A fresh directory in fsspec's in-memory filesystem, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/kuration-test-{uuid.uuid4().hex}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_reads_from_a_memory_url_with_weak_identity(memory_root):
    fs, root = memory_root
    schema = Schema.from_dict({
        "sample_hz": 10, "time": "t",
        "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"}},
        "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": "npy_index"}},
    })
    episodes = [make_episode(0, 5), make_episode(1, 3)]
    for i, episode in enumerate(episodes):
        n = len(episode["pos"])
        buffer = io.BytesIO()
        pq.write_table(pa.table({
            "t": np.arange(n), "pos": vectors(episode["pos"]), "speed": episode["speed"],
            "frame": [f"frames/ep{i}.npy#{k}" for k in range(n)],
        }), buffer)
        fs.pipe_file(f"{root}/ep{i}.parquet", buffer.getvalue())
        frames = io.BytesIO()
        np.save(frames, episode["frame"])
        fs.pipe_file(f"{root}/frames/ep{i}.npy", frames.getvalue())

    adapter = ParquetTickAdapter(f"memory://{root}", schema)
    assert adapter.list_sources() == ["ep0.parquet", "ep1.parquet"]
    ticks = adapter.read_ticks("ep1.parquet")
    np.testing.assert_array_equal(ticks.columns["pos"], episodes[1]["pos"])
    frames = adapter.decode_media("frame", list(ticks.media["frame"]), source_id="ep1.parquet")
    np.testing.assert_array_equal(frames, episodes[1]["frame"])

    identity = adapter.identity("ep1.parquet")
    assert identity.kind == "logical"
    assert identity.strong is False  # the memory filesystem has no ETag or version
    assert identity == adapter.identity("ep1.parquet")
    with pytest.raises(TickDataError, match="nope.parquet"):
        adapter.identity("nope.parquet")


def test_tags_as_a_plain_string_column(tmp_path):
    ticks = read_bad(tmp_path, tags=["go", "", None, "stop", "turn", "go"])
    assert ticks.tags == [("go",), (), (), ("stop",), ("turn",), ("go",)]
