"""Media providers: npy_index decoding, errors naming source and column, bounded batches."""

from __future__ import annotations

import io
import re
import uuid

import fsspec
import numpy as np
import pytest

from kuration.media import MediaError, NpyIndexProvider, decode_in_batches, get_media_provider, register_media_provider
from kuration.schema import MediaSpec, Schema
from kuration.sources import ParquetTickAdapter

from tests.sources._parquet_files import write_table

SPEC = MediaSpec("cam", "uint8", (2, 3), "npy_index")
FRAMES = np.arange(5 * 2 * 3, dtype=np.uint8).reshape(5, 2, 3)


@pytest.fixture
def local_root(tmp_path):
    (tmp_path / "frames").mkdir()
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

    with pytest.raises(MediaError, match=r"no media provider named 'png'; registered: \[.*'hdf5_rows', 'npy_index', 'zarr_rows'.*\]"):
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
