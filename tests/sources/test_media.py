"""Media providers: npy_index decoding, errors naming source and column, bounded batches."""

from __future__ import annotations

import io
import re
import uuid

import fsspec
import numpy as np
import pytest

from kuration.sources.media import (
    MediaError,
    NpyIndexProvider,
    decode_in_batches,
    get_media_provider,
    register_media_provider,
)
from kuration.sources.schema import MediaSpec, Schema
from kuration.sources import ParquetTickAdapter

from tests.sources._parquet_files import write_table
from tests.kits.implementations import NpyFiles, NpyFilesInMemory
from tests.sources.read_counts import count_reads

SPEC = MediaSpec("cam", "uint8", (2, 3), "npy_index")
FRAMES = np.arange(5 * 2 * 3, dtype=np.uint8).reshape(5, 2, 3)


@pytest.fixture
def local_root(tmp_path):
    (tmp_path / "frames").mkdir(exist_ok=True)
    np.save(tmp_path / "frames" / "x.npy", FRAMES)
    return str(tmp_path)


@pytest.fixture
def memory_root():
    fs = fsspec.filesystem("memory")
    root = f"/kuration-media-{uuid.uuid4().hex}"
    buffer = io.BytesIO()
    np.save(buffer, FRAMES)
    fs.pipe_file(f"{root}/frames/x.npy", buffer.getvalue())
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


class TestNpyIndexProvider(NpyFiles):
    pass


class TestNpyIndexProviderInMemory(NpyFilesInMemory):
    pass


def decode(refs, root, spec=SPEC):
    return NpyIndexProvider().decode(refs, spec, root=root, source_id="rec_7")


@pytest.mark.parametrize("root_kind", ["local", "memory"])
def test_decodes_rows_relative_to_the_root(root_kind, request):
    root = request.getfixturevalue(f"{root_kind}_root")
    got = decode(["frames/x.npy#3", "frames/x.npy#0", "frames/x.npy#3"], root)
    assert got.dtype == np.uint8 and got.shape == (3, 2, 3)
    np.testing.assert_array_equal(got, FRAMES[[3, 0, 3]])


def test_none_reference_is_an_absent_slot_of_zeros(local_root):
    got = decode([None, "frames/x.npy#1"], local_root)
    np.testing.assert_array_equal(got[0], np.zeros((2, 3)))
    np.testing.assert_array_equal(got[1], FRAMES[1])
    assert decode([None, None], local_root).shape == (2, 2, 3)


def named(detail: str) -> str:
    return re.escape("rec_7: media 'cam'") + ".*" + detail


def test_wrong_shape(local_root):
    with pytest.raises(MediaError, match=named(r"holds items of shape \[2, 3\], declared \[3, 2\]")):
        decode(["frames/x.npy#0"], local_root, MediaSpec("cam", "uint8", (3, 2), "npy_index"))


def test_wrong_dtype_kind(local_root):
    np.save(f"{local_root}/frames/f.npy", FRAMES.astype(np.float64))
    with pytest.raises(MediaError, match=named("holds float64, declared uint8")):
        decode(["frames/f.npy#0"], local_root)


@pytest.mark.parametrize("root_kind", ["local", "memory"])
def test_missing_file(root_kind, request):
    root = request.getfixturevalue(f"{root_kind}_root")
    with pytest.raises(MediaError, match=named(r"file .*frames/nope\.npy not found")):
        decode(["frames/nope.npy#0"], root)


def test_not_an_npy_file(local_root):
    with open(f"{local_root}/frames/bad.npy", "wb") as handle:
        handle.write(b"garbage")
    with pytest.raises(MediaError, match=named(r"bad\.npy is not a readable \.npy array")):
        decode(["frames/bad.npy#0"], local_root)


@pytest.mark.parametrize("ref", ["frames/x.npy", "frames/x.npy#", "frames/x.npy#-1", "frames/x.npy#a", "#3", 3])
def test_bad_reference(local_root, ref):
    with pytest.raises(MediaError, match=named(re.escape(f", reference 1: {ref!r} is not '<file>.npy#<row>'"))):
        decode(["frames/x.npy#0", ref], local_root)


def test_row_out_of_range(local_root):
    with pytest.raises(MediaError, match=named(r"reference 1: row 5 out of range, .*x\.npy has 5 rows")):
        decode(["frames/x.npy#4", "frames/x.npy#5"], local_root)


@pytest.mark.parametrize(("row", "message"), [
    ("0009223372036854775807", r"row 9223372036854775807 out of range, .*x\.npy has 5 rows"),
    ("9223372036854775808", r"row 9223372036854775808\.\.\. \(19 digits\) is out of range"),
])
def test_a_row_is_an_int64_as_every_index_written_as_text(local_root, row, message):
    with pytest.raises(MediaError, match=named(rf"reference 1: {message}")):
        decode(["frames/x.npy#4", f"frames/x.npy#{row}"], local_root)


def test_decode_in_batches_is_bounded_and_covers_every_reference(local_root):
    class Counting(NpyIndexProvider):
        sizes: list[int] = []

        def decode(self, refs, spec, *, root, source_id):
            self.sizes.append(len(refs))
            return super().decode(refs, spec, root=root, source_id=source_id)

    refs = [f"frames/x.npy#{i % 5}" for i in range(11)]
    provider = Counting()
    batches = list(decode_in_batches(provider, refs, SPEC, root=local_root, source_id="rec_7", batch_size=4))
    assert [start for start, _ in batches] == [0, 4, 8]
    assert provider.sizes == [4, 4, 3]
    np.testing.assert_array_equal(np.concatenate([b for _, b in batches]), FRAMES[[i % 5 for i in range(11)]])
    assert list(decode_in_batches(provider, [], SPEC, root=local_root, source_id="rec_7")) == []
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        next(decode_in_batches(provider, refs, SPEC, root=local_root, source_id="rec_7", batch_size=0))


def test_unknown_provider_lists_the_registered_ones():
    import kuration.sources  # noqa: F401  (registers hdf5_rows and zarr_rows)

    with pytest.raises(MediaError,
                       match=r"no media provider named 'png'; registered: \[.*'hdf5_rows', 'npy_index', "
                             r"'zarr_rows'.*\]"):
        get_media_provider("png")


def test_adapter_decodes_with_a_registered_custom_provider(tmp_path):
    class Constant:
        def __init__(self, value: int = 0) -> None:
            self.value = value

        def decode(self, refs, spec, *, root, source_id):
            return np.full((len(refs), *spec.shape), self.value, dtype=spec.dtype)

    register_media_provider("test_constant", lambda: Constant(9))
    schema = Schema.from_dict({"sample_hz": 1, "time": "t", "fields": {"x": {"dtype": "float32"}},
                               "media": {"cam": {"dtype": "uint8", "shape": [2], "provider": "test_constant"}}})
    write_table(tmp_path / "rec" / "a.parquet", {"t": [0, 1], "x": [0.0, 1.0], "cam": ["k0", "k1"]})
    adapter = ParquetTickAdapter(tmp_path / "rec", schema)
    refs = list(adapter.read_ticks("a.parquet").media["cam"])
    np.testing.assert_array_equal(adapter.decode_media("cam", refs, source_id="a.parquet"), np.full((2, 2), 9))


def test_a_schema_naming_an_unregistered_provider_is_refused_when_declared():
    from kuration.sources.schema import SchemaError

    name = f"test_png_{uuid.uuid4().hex[:8]}"
    declared = {"sample_hz": 1, "time": "t", "fields": {"x": {"dtype": "float32"}},
                "media": {"cam": {"dtype": "uint8", "shape": [2], "provider": name}}}
    with pytest.raises(SchemaError, match=rf"^schema\.media\.cam\.provider: no media provider named '{name}'; "
                                          r"registered: \[.*'npy_index'.*\]\. Register it with "
                                          r"kuration\.sources\.media\.register_media_provider\(name, factory\) before"):
        Schema.from_dict(declared)
    register_media_provider(name, NpyIndexProvider)
    assert Schema.from_dict(declared).media["cam"].provider == name
    for built_in in ("hdf5_rows", "zarr_rows"):  # registered by their adapter module on first use
        assert Schema.from_dict({**declared, "media": {"cam": {**declared["media"]["cam"], "provider": built_in}}})


# -- .npz archives -----------------------------------------------------------------------

@pytest.fixture
def npz_root(tmp_path):
    (tmp_path / "frames").mkdir(exist_ok=True)
    np.savez(tmp_path / "frames" / "one.npz", FRAMES)                                   # one array, arr_0
    np.savez_compressed(tmp_path / "frames" / "cars.npz", car_7=FRAMES, bus_1=FRAMES[::-1],
                        **{f"frame_{k:03d}": FRAMES[k] for k in range(5)})
    return str(tmp_path)


def test_npz_references_read_the_only_array_by_row_a_named_array_by_row_and_a_named_item_whole(npz_root):
    got = decode(["frames/one.npz#4", "frames/cars.npz#car_7/1", None, "frames/cars.npz#bus_1/0",
                  "frames/cars.npz#frame_002", "frames/one.npz#0"], npz_root)
    np.testing.assert_array_equal(got, np.stack([FRAMES[4], FRAMES[1], np.zeros_like(FRAMES[0]), FRAMES[4], FRAMES[2],
                                                 FRAMES[0]]))


@pytest.mark.parametrize("ref, detail", [
    ("frames/cars.npz#3", r"cars\.npz holds 7 arrays \[.*\], so '#<row>' is ambiguous; name the array: "
                          r"'<file>\.npz#<key>/<row>'"),
    ("frames/cars.npz#truck_2/0", r"cars\.npz has no array 'truck_2'; it has \['bus_1', 'car_7', 'frame_000'"),
    ("frames/cars.npz#car_7/5", r"reference 1: row 5 out of range, .*cars\.npz#car_7 has 5 rows"),
    ("frames/cars.npz#car_7", r"cars\.npz#car_7 holds items of shape \[5, 2, 3\], declared \[2, 3\]"),
    ("frames/cars.npz", r"'frames/cars\.npz' is not '<file>\.npy#<row>' \(or '<file>\.npz#<row>', "
                        r"'<file>\.npz#<key>/<row>', '<file>\.npz#<key>'\)"),
])
def test_npz_reference_errors_name_source_column_reference_and_what_to_write(npz_root, ref, detail):
    with pytest.raises(MediaError, match=named(detail)) as raised:
        decode(["frames/one.npz#0", ref], npz_root)
    assert raised.value.reference == 1


def test_a_npy_and_an_npz_under_each_others_name_are_told_apart(npz_root):
    import shutil

    shutil.copy(f"{npz_root}/frames/one.npz", f"{npz_root}/frames/zipped.npy")
    np.save(f"{npz_root}/frames/plain.npz.npy", FRAMES)
    shutil.move(f"{npz_root}/frames/plain.npz.npy", f"{npz_root}/frames/plain.npz")
    with pytest.raises(MediaError, match=named(r"zipped\.npy is an \.npz archive \(arrays \['arr_0'\]\), not a \.npy "
                                               r"array; give the file an '\.npz' name")):
        decode(["frames/zipped.npy#0"], npz_root)
    with pytest.raises(MediaError, match=named(r"plain\.npz is a \.npy array, not an \.npz archive; name it '\.npy'")):
        decode(["frames/plain.npz#0"], npz_root)


def test_a_corrupt_or_pickled_npz_member_is_a_media_error(npz_root):
    np.savez(f"{npz_root}/frames/objects.npz", o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(MediaError, match=named(r"array 'o' of .*objects\.npz is not readable \(Object arrays cannot be "
                                               r"loaded when allow_pickle=False")):
        decode(["frames/objects.npz#o/0"], npz_root)
    import zipfile

    with zipfile.ZipFile(f"{npz_root}/frames/foreign.npz", "w") as archive:
        archive.writestr("car_7.npy", b"not an array")
    with pytest.raises(MediaError, match=named(r"array 'car_7' of .*foreign\.npz is not readable")):
        decode(["frames/foreign.npz#car_7/0"], npz_root)
    data = open(f"{npz_root}/frames/cars.npz", "rb").read()
    open(f"{npz_root}/frames/torn.npz", "wb").write(data[: len(data) // 2])
    with pytest.raises(MediaError, match=named(r"torn\.npz is not a readable \.npz archive \(File is not a zip file")):
        decode(["frames/torn.npz#car_7/0"], npz_root)


# -- the per-write cache -------------------------------------------------------------------

def test_inside_a_media_cache_each_file_and_member_is_read_once(npz_root, local_root, monkeypatch):
    from kuration.sources.media import media_cache

    reads = count_reads(monkeypatch)
    batches = [["frames/cars.npz#car_7/0", "frames/cars.npz#car_7/1"], ["frames/cars.npz#car_7/4"],
               ["frames/one.npz#2"], ["frames/cars.npz#car_7/3", "frames/one.npz#1"]]
    for batch in batches:  # no cache: every batch reads its files again
        decode(batch, npz_root)
    assert sorted(reads.values()) == [2, 3]
    reads.clear()
    with media_cache() as cache:
        got = [decode(batch, npz_root) for batch in batches]
        with media_cache(max_bytes=1) as inner:  # a nested scope uses the write's cache
            assert inner is cache
    # misses: car_7 and its archive's bytes, arr_0 and its archive's bytes; then hits only
    assert sorted(reads.values()) == [1, 1] and cache.hits == 3 and cache.misses == 4
    np.testing.assert_array_equal(got[3], FRAMES[[3, 1]])
    got[3][0] = 0  # the caller's batch is its own: the cached arrays are read-only and were copied
    with media_cache():
        np.testing.assert_array_equal(decode(["frames/cars.npz#car_7/3"], npz_root)[0], FRAMES[3])


def test_the_media_cache_is_bounded_in_bytes_least_recently_used_out_first():
    from kuration.sources.media import MediaCache

    loads = []

    def load(name, size):
        def go():
            loads.append(name)
            return np.zeros(size, np.uint8)
        return go

    cache = MediaCache(max_bytes=100)
    for name, size in (("a", 40), ("b", 40), ("a", 40), ("c", 40), ("b", 40), ("huge", 101), ("huge", 101)):
        got = cache.get(name, load(name, size))
        assert not got.flags.writeable and cache.nbytes <= 100
    # a, b kept; a hit (now most recent); c pushes b out, so b is loaded again; huge is never kept
    assert loads == ["a", "b", "c", "b", "huge", "huge"] and (cache.hits, cache.misses) == (1, 6)
    assert cache.nbytes == 80  # c and b
    with pytest.raises(ValueError, match="media cache max_bytes must be an int >= 0, got -1"):
        MediaCache(max_bytes=-1)
