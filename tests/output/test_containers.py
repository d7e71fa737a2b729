"""The shard container contract, run against all four containers.

:class:`ShardContainerContract` states what every container promises (bit-exact round trips
of every dtype and shape, writes to a sequential stream that give the same bytes as a
``BytesIO``, and a :class:`ShardFormatError` that names the problem for every kind of bad
shard); each container's test class only supplies the ``container`` fixture and adds checks
that other tools read its files as documented. JSON is the one container that does not keep
a NaN's sign and payload bits (``keeps_nan_bits = False``): for it, NaN elements are compared
by NaN-ness and every other element bit for bit.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import sys
import tempfile
import time
import zipfile
from datetime import timedelta
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kuration.errors import KurationError
from kuration.output.containers import (
    CONTAINER_TYPES, Hdf5Container, JsonContainer, MissingDependencyError, NpzContainer, ParquetContainer, ShardArrays,
    ShardFormatError, get_container,
)
from kuration.output.containers.json_container import text_limit
from kuration.output.shard_files import HashingWriter
from kuration.output.spec import CONTAINERS, DTYPES, Modality, OutputSpec, OutputSpecError
from kuration.read.isolated import decode_isolated
from tests.hostile import damaged

# the contract's property test runs once per subclass (differing executors) with a stateless
# container fixture; the examples it replays from the database are valid for every container
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.differing_executors])
#: Damaged bytes: bounded in examples and per example; a decode the worker stops takes HOSTILE_TIMEOUT.
HOSTILE_SETTINGS = settings(max_examples=120, deadline=timedelta(seconds=30),
                            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                   HealthCheck.differing_executors])
HOSTILE_TIMEOUT = 3.0
SHAPES = [(), (3,), (2, 2), (4, 5, 3)]
NAMES = ["a", "b", "frame", "label", "pos"]


# -- helpers --------------------------------------------------------------------------------


def modality(name: str, dtype: str, shape: tuple[int, ...] = ()) -> Modality:
    return Modality(name, dtype, tuple(shape), "field", name)


def write(container, shard: ShardArrays) -> bytes:
    # What a container gets in production: write-only, no seek, tell or read-back.
    buffer = io.BytesIO()
    sink = HashingWriter(buffer)
    container.write(sink, shard)
    assert not sink.closed, "a container must not close the caller's stream"
    return buffer.getvalue()


def assert_file_is_the_stream(container, shard: ShardArrays, data: bytes) -> None:
    """A container's ``write_path`` (local shards use it) writes exactly ``write``'s bytes."""
    write_path = getattr(container, "write_path", None)
    if write_path is None:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"shard{container.extension}"
        write_path(path, shard)
        assert path.read_bytes() == data


def small_case() -> tuple[dict[str, Modality], ShardArrays]:
    mods = {"label": modality("label", "int64"), "pos": modality("pos", "float32", (3,))}
    arrays = {"label": np.arange(4, dtype=np.int64), "pos": np.arange(12, dtype=np.float32).reshape(4, 3)}
    return mods, ShardArrays(arrays, np.array([True, True, True, False]), 3)


def _special_floats(dtype: np.dtype) -> list[float]:
    info = np.finfo(dtype)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, info.max, info.min, info.tiny, -info.tiny,
              info.smallest_subnormal, -info.smallest_subnormal, info.eps, 1 / 3]
    return [float(dtype.type(v)) for v in values]


def values(dtype: np.dtype, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    if dtype.kind == "b":
        return hnp.arrays(dtype, shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edges = st.sampled_from(sorted({int(info.min), int(info.max), 0, 1, int(info.min) + 1, int(info.max) - 1}))
        return hnp.arrays(dtype, shape, elements=st.one_of(edges, st.integers(int(info.min), int(info.max))))
    width = dtype.itemsize * 8
    chosen = st.one_of(st.sampled_from(_special_floats(dtype)), st.floats(width=width))
    # raw bit patterns: every NaN payload and sign, every subnormal
    bits = hnp.arrays(np.dtype(f"u{dtype.itemsize}"), shape).map(lambda a: a.view(dtype))
    return st.one_of(hnp.arrays(dtype, shape, elements=chosen), bits)


@st.composite
def shards(draw) -> tuple[dict[str, Modality], ShardArrays]:
    rows = draw(st.integers(0, 9))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    mods, arrays = {}, {}
    for name in names:
        dtype, shape = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(SHAPES))
        mods[name] = modality(name, dtype, shape)
        arrays[name] = draw(values(np.dtype(dtype), (rows, *shape)))
    present = draw(hnp.arrays(np.bool_, rows)) if draw(st.booleans()) else None
    return mods, ShardArrays(arrays, present, draw(st.integers(0, rows)))


def decode_hostile(container, data: bytes, mods: dict[str, Modality], *, presence: bool = True,
                   max_rows: int = 8) -> ShardArrays:
    """Read bytes that may be crafted the way :func:`kuration.read.read_shard` does for an
    untrusted dataset: in this process when the container is safe for untrusted bytes, else
    in the isolated worker with a time limit."""
    if container.safe_for_untrusted:
        return container.read(data, mods, presence=presence, max_rows=max_rows)
    spec = OutputSpec.from_dict({"shard_length": max_rows, "container": container.name, "presence_mask": presence,
                                 "modalities": {n: m.to_dict() for n, m in mods.items()}})
    return decode_isolated(spec, container.name, data, timeout=HOSTILE_TIMEOUT)


def permissive_write(monkeypatch, container):
    """Let ``container.write`` write what its own checks refuse (to forge bad shards)."""
    module = sys.modules[type(container).__module__]
    monkeypatch.setattr(module, "check_shard",
                        lambda shard, name: (dict(sorted(shard.arrays.items())), shard.present, shard.n_steps))


# -- the contract ---------------------------------------------------------------------------


class ShardContainerContract:
    """Subclass once per container and supply the ``container`` fixture."""

    #: False where the format cannot store a NaN's sign and payload (JSON's ``NaN`` token).
    keeps_nan_bits = True
    #: False where the format itself cannot hold columns of different lengths (Parquet).
    can_hold_ragged_rows = True

    @pytest.fixture
    def container(self):
        raise NotImplementedError("subclasses supply the container")

    def assert_same(self, got: ShardArrays, sent: ShardArrays) -> None:
        assert sorted(got.arrays) == sorted(sent.arrays)
        for name, a in sent.arrays.items():
            b = got.arrays[name]
            assert b.dtype == a.dtype, name
            assert b.shape == a.shape, name
            if self.keeps_nan_bits or a.dtype.kind != "f":
                assert b.tobytes() == a.tobytes(), name
            else:
                nan = np.isnan(a)
                assert np.array_equal(np.isnan(b), nan), name
                assert b[~nan].tobytes() == a[~nan].tobytes(), name
        if sent.present is None:
            assert got.present is None
        else:
            assert got.present.dtype == np.bool_ and np.array_equal(got.present, sent.present)
        assert got.n_steps == sent.n_steps and isinstance(got.n_steps, int)
        assert all(a.flags.writeable for a in got.arrays.values())
        assert got.rows == sent.rows

    # round trips

    def test_name_extension_and_registry(self, container):
        assert CONTAINER_TYPES[container.name] is type(container)
        assert container.extension.startswith(".") and len(container.extension) > 1

    @SETTINGS
    @given(case=shards())
    def test_round_trip_is_bit_exact(self, container, case):
        mods, shard = case
        data = write(container, shard)
        plain = io.BytesIO()
        container.write(plain, shard)
        assert plain.getvalue() == data  # a seekable file gets the very same bytes
        assert_file_is_the_stream(container, shard, data)
        self.assert_same(container.read(data, mods, presence=shard.present is not None), shard)

    def test_uint8_frames_64_rows(self, container):
        rng = np.random.default_rng(7)
        frame = rng.integers(0, 256, (64, 150, 280, 3), dtype=np.uint8)
        shard = ShardArrays({"frame": frame}, np.ones(64, bool), 60)
        data = write(container, shard)
        assert_file_is_the_stream(container, shard, data)
        self.assert_same(container.read(data, {"frame": modality("frame", "uint8", (150, 280, 3))}, presence=True),
                         shard)

    def test_sequential_stream_gets_the_bytes_a_bytesio_gets(self, container):
        mods, shard = small_case()
        plain = io.BytesIO()
        container.write(plain, shard)
        assert write(container, shard) == plain.getvalue() == write(container, shard)

    def test_through_the_hashing_writer(self, container):
        mods, shard = small_case()
        sink = io.BytesIO()
        writer = HashingWriter(sink)
        container.write(writer, shard)
        assert writer.bytes_written == len(sink.getvalue())
        assert writer.sha256 == hashlib.sha256(sink.getvalue()).hexdigest()
        self.assert_same(container.read(sink.getvalue(), mods, presence=True), shard)

    def test_arrays_in_any_layout_or_byte_order_write_the_same_bytes(self, container):
        mods, shard = small_case()
        pos = shard.arrays["pos"]
        odd = ShardArrays({"label": shard.arrays["label"].astype(">i8"), "pos": np.asfortranarray(pos)},
                          shard.present, shard.n_steps)
        assert write(container, odd) == write(container, shard)
        assert_file_is_the_stream(container, odd, write(container, shard))

    def test_zero_rows(self, container):
        mods = {"t": modality("t", "float16", (4, 5, 3)), "s": modality("s", "uint64")}
        shard = ShardArrays({"t": np.empty((0, 4, 5, 3), np.float16), "s": np.empty(0, np.uint64)}, np.empty(0, bool),
                            0)
        assert_file_is_the_stream(container, shard, write(container, shard))
        self.assert_same(container.read(write(container, shard), mods, presence=True), shard)

    # bad bytes

    def test_truncated_bytes(self, container):
        mods, shard = small_case()
        data = write(container, shard)
        for cut in sorted({0, 10, len(data) // 2, len(data.rstrip()) - 1}):
            with pytest.raises(ShardFormatError, match=container.name):
                container.read(data[:cut], mods, presence=True)

    def test_garbage_bytes(self, container):
        mods, _ = small_case()
        with pytest.raises(ShardFormatError, match=f"{container.name} shard"):
            container.read(b"this is not a shard at all" * 10, mods, presence=True)

    def test_missing_modality(self, container):
        mods, shard = small_case()
        declared = {**mods, "vel": modality("vel", "float32", (3,))}
        with pytest.raises(ShardFormatError,
                           match=r"modality 'vel' is missing; the shard holds \['_present', 'label', 'pos'\]"):
            container.read(write(container, shard), declared, presence=True)

    def test_extra_array(self, container):
        mods, shard = small_case()
        with pytest.raises(ShardFormatError,
                           match=r"unexpected \w+\(s\) \['pos'\]; the declared modalities are \['label'\]"):
            container.read(write(container, shard), {"label": mods["label"]}, presence=True)

    def test_presence_mismatch(self, container):
        mods, shard = small_case()
        with pytest.raises(ShardFormatError, match="holds a _present mask, but the spec has presence_mask: false"):
            container.read(write(container, shard), mods, presence=False)
        bare = ShardArrays(shard.arrays, None, 3)
        with pytest.raises(ShardFormatError, match="no _present mask, but the spec has presence_mask: true"):
            container.read(write(container, bare), mods, presence=True)

    @pytest.mark.parametrize("shape", [(4,), (3, 1)])
    def test_wrong_shape(self, container, shape):
        mods, shard = small_case()
        declared = {**mods, "pos": modality("pos", "float32", shape)}
        with pytest.raises(ShardFormatError, match=r"'pos'.*(shape|values per row)"):
            container.read(write(container, shard), declared, presence=True)

    def test_value_out_of_range_for_declared_dtype(self, container):
        mods, shard = small_case()
        arrays = {**shard.arrays, "label": np.array([0, 300, 2, 3], np.int64)}
        declared = {**mods, "label": modality("label", "uint8")}
        with pytest.raises(ShardFormatError,
                           match=r"modality 'label': value 300 at row 1 is out of range for uint8 \(0\.\.255\)"):
            container.read(write(container, ShardArrays(arrays, shard.present, 3)), declared, presence=True)

    def test_non_integral_float_for_int_modality(self, container):
        mods, shard = small_case()
        arrays = {**shard.arrays, "label": np.array([0, 1, 2.5, 3])}
        with pytest.raises(ShardFormatError,
                           match=r"'label': value 2\.5 at row 2 is not a whole number, so it cannot be int64"):
            container.read(write(container, ShardArrays(arrays, shard.present, 3)), mods, presence=True)

    def test_inexact_float_for_narrower_float(self, container):
        mods, shard = small_case()
        pos = np.zeros((4, 3))
        pos[1, 2] = 0.1
        with pytest.raises(ShardFormatError,
                           match=r"'pos': value 0\.1 at row 1, element \[2\] is not exactly representable as float32"):
            container.read(write(container, ShardArrays({**shard.arrays, "pos": pos}, shard.present, 3)), mods,
                           presence=True)

    def test_booleans_for_a_number_modality(self, container):
        mods, shard = small_case()
        arrays = {**shard.arrays, "label": np.array([True, False, True, True])}
        with pytest.raises(ShardFormatError, match="'label': expected int64 numbers, found booleans"):
            container.read(write(container, ShardArrays(arrays, shard.present, 3)), mods, presence=True)

    def test_exactly_representable_values_are_converted(self, container):
        # what a format widened on disk comes back as the declared dtype
        mods = {"x": modality("x", "uint8", (2,)), "y": modality("y", "float32")}
        wide = ShardArrays({"x": np.array([[0, 255], [7, 8]], np.int64), "y": np.array([0.5, -0.0])}, None, 2)
        got = container.read(write(container, wide), mods, presence=False)
        assert got.arrays["x"].dtype == np.uint8 and got.arrays["x"].tolist() == [[0, 255], [7, 8]]
        assert got.arrays["y"].tobytes() == np.array([0.5, -0.0], np.float32).tobytes()

    @pytest.mark.parametrize("n_steps", [5, -1])
    def test_n_steps_outside_rows(self, container, monkeypatch, n_steps):
        mods, shard = small_case()
        permissive_write(monkeypatch, container)
        data = write(container, ShardArrays(shard.arrays, shard.present, n_steps))
        with pytest.raises(ShardFormatError, match=rf"_n_steps is {n_steps}, expected 0 <= _n_steps <= rows \(4\)"):
            container.read(data, mods, presence=True)

    def test_rows_disagree(self, container, monkeypatch):
        if not self.can_hold_ragged_rows:
            pytest.skip(f"{container.name} cannot hold columns of different lengths")
        mods, shard = small_case()
        permissive_write(monkeypatch, container)
        data = write(container, ShardArrays({**shard.arrays, "label": np.arange(5)}, shard.present, 3))
        with pytest.raises(ShardFormatError,
                           match=r"modality 'label' has 5 rows, expected 4 \(the rows of '_present'\)"):
            container.read(data, mods, presence=True)

    # hostile bytes

    @HOSTILE_SETTINGS
    @given(data=st.data())
    def test_damaged_bytes_raise_only_shard_format_errors(self, container, data):
        mods, shard = small_case()
        raw = data.draw(damaged(write(container, shard)))
        try:
            decode_hostile(container, raw, mods)
        except ShardFormatError as exc:
            # named, and mapped by the container itself: the worker's catch-all never had to
            assert f"{container.name} shard" in str(exc) and "the decoder failed" not in str(exc), str(exc)

    def test_more_rows_than_the_spec_allows_are_refused_before_decoding(self, container):
        mods, shard = small_case()
        with pytest.raises(ShardFormatError, match=rf"{container.name} shard: .*more than the 3 "):
            container.read(write(container, shard), mods, presence=True, max_rows=3)
        self.assert_same(container.read(write(container, shard), mods, presence=True, max_rows=4), shard)

    # the writer refuses what it could not read back

    @pytest.mark.parametrize("bad, message", [
        (lambda s: ShardArrays(s.arrays, s.present, 5), r"n_steps is 5, expected 0 <= n_steps <= rows \(4\)"),
        (lambda s: ShardArrays(s.arrays, s.present, True), "n_steps must be an integer"),
        (lambda s: ShardArrays({**s.arrays, "_n_steps": np.arange(4)}, s.present, 3), "'_n_steps' is not allowed"),
        (lambda s: ShardArrays({**s.arrays, "a/b": np.arange(4)}, s.present, 3), "'a/b' is not allowed"),
        (lambda s: ShardArrays({**s.arrays, "x": np.array(4)}, s.present, 3), "'x': is 0-d"),
        (lambda s: ShardArrays({**s.arrays, "x": np.arange(5)}, s.present, 3), "'x' has 5 rows but 'label' has 4"),
        (lambda s: ShardArrays({**s.arrays, "x": np.zeros(4, complex)}, s.present, 3),
         "dtype complex128 is not one of"),
        (lambda s: ShardArrays({**s.arrays, "x": [1, 2, 3, 4]}, s.present, 3), "expected a numpy array, got list"),
        (lambda s: ShardArrays(s.arrays, np.ones(4, np.uint8), 3), r"_present must be bool of shape \(4,\)"),
        (lambda s: ShardArrays({}, None, 0), "needs at least one modality"),
    ])
    def test_writer_refuses_bad_shards(self, container, bad, message):
        _, shard = small_case()
        with pytest.raises(ShardFormatError, match=message):
            container.write(HashingWriter(io.BytesIO()), bad(shard))


# -- one subclass per container, with what other tools see -----------------------------------


class TestNpzContainer(ShardContainerContract):
    @pytest.fixture
    def container(self):
        return NpzContainer()

    def test_plain_np_load_reads_it(self, container):
        mods, shard = small_case()
        with np.load(io.BytesIO(write(container, shard))) as npz:
            assert sorted(npz.files) == ["_n_steps", "_present", "label", "pos"]
            assert npz["_n_steps"].shape == () and npz["_n_steps"].dtype == np.int64 and int(npz["_n_steps"]) == 3
            assert npz["_present"].dtype == np.bool_
            assert np.array_equal(npz["pos"], shard.arrays["pos"])

    def test_members_are_stored_uncompressed_with_a_fixed_time(self, container):
        _, shard = small_case()
        with zipfile.ZipFile(io.BytesIO(write(container, shard))) as zf:
            for info in zf.infolist():
                assert info.compress_type == zipfile.ZIP_STORED
                assert info.date_time == (1980, 1, 1, 0, 0, 0)

    def test_reads_what_np_savez_writes(self, container):
        mods, shard = small_case()
        plain = io.BytesIO()
        np.savez(plain, _n_steps=np.int64(3), _present=shard.present, **shard.arrays)
        self.assert_same(container.read(plain.getvalue(), mods, presence=True), shard)

    def test_missing_or_bad_n_steps(self, container):
        mods, shard = small_case()
        plain = io.BytesIO()
        np.savez(plain, _present=shard.present, **shard.arrays)
        with pytest.raises(ShardFormatError,
                           match=r"expected one _n_steps\.npy member \(the real step count\), found 0"):
            container.read(plain.getvalue(), mods, presence=True)
        plain = io.BytesIO()
        np.savez(plain, _n_steps=np.float64(3), _present=shard.present, **shard.arrays)
        with pytest.raises(ShardFormatError, match="_n_steps must be an integer"):
            container.read(plain.getvalue(), mods, presence=True)

    def test_pickled_member_is_refused(self, container):
        mods, shard = small_case()
        plain = io.BytesIO()
        np.savez(plain, _n_steps=np.int64(3), _present=shard.present, label=np.array([1, "x", None, 2], object),
                 pos=shard.arrays["pos"])
        with pytest.raises(ShardFormatError, match="member 'label.npy' cannot be read as a .npy array"):
            container.read(plain.getvalue(), mods, presence=True)

    @pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, 9])  # 9: deflate64, zipfile lacks it
    def test_a_compressed_member_is_refused(self, container, method):
        mods, shard = small_case()
        plain = write(container, shard)
        if method == 9:  # zipfile cannot write it: patch the method into the local and central headers
            data = bytearray(plain)
            for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
                for match in re.finditer(re.escape(signature), bytes(data)):
                    struct.pack_into("<H", data, match.start() + offset, 9)
            data = bytes(data)
        else:
            buffer = io.BytesIO()
            with zipfile.ZipFile(io.BytesIO(plain)) as source, zipfile.ZipFile(buffer, "w", method) as target:
                for info in source.infolist():
                    target.writestr(info.filename, source.read(info), compress_type=method)
            data = buffer.getvalue()
        with pytest.raises(ShardFormatError, match=rf"npz shard: member '\w+\.npy' is compressed or encrypted \(zip "
                                                   rf"method {method}"):
            container.read(data, mods, presence=True)

    def test_a_header_that_claims_more_than_the_spec_allows_is_refused_unread(self, container):
        mods, shard = small_case()
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(write(container, shard))) as source, zipfile.ZipFile(buffer, "w") as target:
            for info in source.infolist():  # a valid zip (CRCs right) of a crafted header
                target.writestr(info.filename,
                                source.read(info).replace(b"(4, 3), }" + b" " * 10, b"(1000000000000, 3)}"))
        data = buffer.getvalue()
        # 12 TB of float32 if believed: refused from the header, before any allocation
        with pytest.raises(ShardFormatError, match=r"npz shard: modality 'pos' declares shape \(1000000000000, 3\), "
                                                   r"more than the 24 values a shard of this spec can hold"):
            container.read(data, mods, presence=True, max_rows=8)

    def test_a_header_read_before_is_checked_again_for_another_limit(self, container):
        mods, shard = small_case()
        data = write(container, shard)
        self.assert_same(container.read(data, mods, presence=True, max_rows=8), shard)  # its headers parsed, kept
        with pytest.raises(ShardFormatError, match=r"npz shard: modality '\w+' declares shape \(4, ?[\d, ]*\), "
                                                   r"more than the \d+ values a shard of this spec can hold"):
            container.read(data, mods, presence=True, max_rows=2)
        crafted = data.replace(b"(4, 3), }", b"(5, 3), }", 1)  # pos's header, one byte apart from a kept one
        with pytest.raises(ShardFormatError, match=r"member 'pos\.npy' cannot be read as a \.npy array: it holds 48 "
                                                   r"bytes of data, its header declares 60"):
            container.read(crafted, mods, presence=True, max_rows=8, verified=True)

    def test_duplicate_member(self, container):
        mods, shard = small_case()
        buffer = io.BytesIO(write(container, shard))
        with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(buffer, "a") as zf:
            zf.writestr("pos.npy", b"")
        with pytest.raises(ShardFormatError, match=r"array\(s\) \['pos'\] appear more than once"):
            container.read(buffer.getvalue(), mods, presence=True)


    def test_a_damaged_member_fails_its_crc_unless_the_caller_verified_the_shard(self, container):
        mods, shard = small_case()
        data = bytearray(write(container, shard))
        at = data.index(np.arange(12, dtype=np.float32).tobytes())  # pos's values, inside its member
        data[at + 5] ^= 0x01
        with pytest.raises(ShardFormatError, match=r"member 'pos\.npy' cannot be read as a \.npy array: its CRC-32 "
                                                   r"does not match the zip directory's"):
            container.read(bytes(data), mods, presence=True)
        # a caller that checked the shard's SHA-256 (iter_shards, read_shard) gets no second, weaker check
        damaged_pos = container.read(bytes(data), mods, presence=True, verified=True).arrays["pos"]
        assert damaged_pos.tobytes() != shard.arrays["pos"].tobytes()

    def test_a_header_numpy_cannot_tokenize_is_a_format_error(self, container):
        mods, shard = small_case()
        data = write(container, shard).replace(b"{'descr': '<i8'", b"z'descr': '<i8'", 1)  # label's header
        with pytest.raises(ShardFormatError, match=r"member 'label\.npy' cannot be read as a \.npy array"):
            container.read(data, mods, presence=True)

    def test_arrays_come_back_writable(self, container):
        mods, shard = small_case()
        got = container.read(write(container, shard), mods, presence=True)
        assert all(a.flags.writeable for a in got.arrays.values()) and got.present.flags.writeable


class TestJsonContainer(ShardContainerContract):
    keeps_nan_bits = False

    @pytest.fixture
    def container(self):
        return JsonContainer()

    def doc(self, container) -> dict:
        return json.loads(write(container, small_case()[1]))

    def read_doc(self, container, doc, mods=None, presence=True):
        return container.read(json.dumps(doc).encode(), mods or small_case()[0], presence=presence)

    def test_document_layout(self, container):
        doc = self.doc(container)
        assert list(doc) == ["format", "n_steps", "present", "modalities"]
        assert doc["format"] == "kuration-shard-json/1" and doc["n_steps"] == 3
        assert doc["present"] == [True, True, True, False]
        assert doc["modalities"]["label"] == [0, 1, 2, 3]
        assert doc["modalities"]["pos"][1] == [3.0, 4.0, 5.0]

    def test_non_finite_floats_use_python_tokens(self, container):
        shard = ShardArrays({"x": np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)}, None, 4)
        data = write(container, shard)
        assert data == (b'{"format":"kuration-shard-json/1","n_steps":4,'
                        b'"modalities":{"x":[NaN,Infinity,-Infinity,-0.0]}}\n')
        self.assert_same(container.read(data, {"x": modality("x", "float32")}, presence=False), shard)

    def test_uint64_beyond_int64_round_trips(self, container):
        shard = ShardArrays({"x": np.array([2**64 - 1, 0, 2**63], np.uint64)}, None, 3)
        got = container.read(write(container, shard), {"x": modality("x", "uint64")}, presence=False)
        self.assert_same(got, shard)

    def test_uint8_value_out_of_range(self, container):
        doc = self.doc(container)
        doc["modalities"]["label"][1] = 300
        with pytest.raises(ShardFormatError,
                           match=r"json shard: modality 'label': value 300 at row 1 is out of range for uint8"):
            self.read_doc(container, doc, {**small_case()[0], "label": modality("label", "uint8")})

    @pytest.mark.parametrize("value, message", [
        (2**63, r"value 9223372036854775808 at row 1 is out of range for int64"),
        (1.5, r"value 1\.5 at row 1 is not a whole number, so it cannot be int64"),
        (float("nan"), r"value nan at row 1 is not a whole number"),
        (None, r"value None at row 1 is not a number \(expected int64\)"),
        ("1", r"expected int64 numbers, found <U\d+ values"),
        ([1], r"modality 'label' is not a rectangular array"),
    ])
    def test_bad_int_values(self, container, value, message):
        doc = self.doc(container)
        doc["modalities"]["label"][1] = value
        with pytest.raises(ShardFormatError, match=message):
            self.read_doc(container, doc)

    def test_integral_floats_for_an_int_modality_are_accepted(self, container):
        doc = self.doc(container)
        doc["modalities"]["label"] = [0.0, 1.0, 2**64 - 1, 3]
        got = self.read_doc(container, doc, {**small_case()[0], "label": modality("label", "uint64")})
        assert got.arrays["label"].tolist() == [0, 1, 2**64 - 1, 3]

    def test_duplicate_keys(self, container):
        data = write(container, small_case()[1]).replace(b'"n_steps":3', b'"n_steps":3,"n_steps":4')
        with pytest.raises(ShardFormatError, match="key 'n_steps' appears twice in one object"):
            container.read(data, small_case()[0], presence=True)
        data = write(container, small_case()[1]).replace(b'"label":', b'"label":[9,9,9,9],"label":')
        with pytest.raises(ShardFormatError, match="key 'label' appears twice"):
            container.read(data, small_case()[0], presence=True)

    @pytest.mark.parametrize("edit, message", [
        (lambda d: d.update(extra=1), r"json shard: unknown key\(s\) \['extra'\]; valid keys: \['format', 'n_steps', "),
        (lambda d: d.update(format="kuration-shard-json/2"), "\"format\" is 'kuration-shard-json/2', expected"),
        (lambda d: d.pop("n_steps"), "no \"n_steps\""),
        (lambda d: d.update(n_steps=2.0), "_n_steps must be an integer, found 2.0"),
        (lambda d: d.update(modalities=[]), "\"modalities\" must be an object"),
        (lambda d: d.update(present=[1, 1, 1, 0]), r"the _present mask: expected booleans \(true/false\) for bool"),
        (lambda d: d.update(present=True), "present mask must be a list"),
        (lambda d: d["modalities"].update(_present=[True] * 4), r"unexpected array\(s\) \['modalities._present'\]"),
    ])
    def test_bad_documents(self, container, edit, message):
        doc = self.doc(container)
        edit(doc)
        with pytest.raises(ShardFormatError, match=message):
            self.read_doc(container, doc)

    def test_not_json_at_all(self, container):
        with pytest.raises(ShardFormatError, match="not UTF-8"):
            container.read(b"\xff\xfe", small_case()[0], presence=True)
        with pytest.raises(ShardFormatError, match="expected an object"):
            container.read(b"[1, 2]", small_case()[0], presence=True)

    @pytest.mark.parametrize("label, as_int, as_float", [
        ("9" * 400, r"value 9{77}\.\.\. at row 0 is out of range for int64",
         r"value 9{77}\.\.\. at row 0 is not exactly representable as float64"),
        ("-" + "9" * 5000, "Exceeds the limit \\(4300 digits\\)", "Exceeds the limit \\(4300 digits\\)"),
        ("18446744073709551616", "value 18446744073709551616 at row 0 is out of range for int64", None),
        ("1e999", r"number 1e999 is beyond the float range", r"number 1e999 is beyond the float range"),
        ("-1e400", r"number -1e400 is beyond the float range", r"number -1e400 is beyond the float range"),
    ])
    def test_numbers_no_dtype_can_hold_are_refused(self, container, label, as_int, as_float):
        mods, shard = small_case()
        data = write(container, shard).replace(b'"label":[0,', b'"label":[' + label.encode() + b",")
        with pytest.raises(ShardFormatError, match=f"json shard: .*{as_int}"):
            container.read(data, mods, presence=True)
        if as_float is not None:
            with pytest.raises(ShardFormatError, match=f"json shard: .*{as_float}"):
                container.read(data, {**mods, "label": modality("label", "float64")}, presence=True)

    @SETTINGS
    @given(case=shards())
    def test_every_shard_the_writer_makes_fits_the_text_limit(self, container, case):
        mods, shard = case
        assert len(write(container, shard)) <= text_limit(mods, shard.rows)

    def test_a_shard_longer_than_its_spec_allows_is_refused_unparsed(self, container):
        mods, shard = small_case()
        data = write(container, shard).replace(b'"format"', b" " * text_limit(mods, 4) + b'"format"')
        with pytest.raises(ShardFormatError,
                           match=rf"json shard: {len(data)} bytes, more than the {text_limit(mods, 4)} "
                                                   "a shard of 4 rows of the declared modalities takes"):
            container.read(data, mods, presence=True, max_rows=4)


class TestHdf5Container(ShardContainerContract):
    @pytest.fixture
    def container(self):
        return Hdf5Container()

    def test_h5py_sees_datasets_and_attributes(self, container):
        _, shard = small_case()
        with h5py.File(io.BytesIO(write(container, shard)), "r") as f:
            assert sorted(f) == ["_present", "label", "pos"]
            assert f.attrs["format"] == "kuration-shard-hdf5/1" and int(f.attrs["_n_steps"]) == 3
            for name in f:
                assert f[name].chunks is None and f[name].compression is None  # contiguous, unfiltered
            assert f["pos"].shape == (4, 3) and f["pos"].dtype == np.float32
            assert f["_present"].dtype == np.bool_

    def test_group_instead_of_dataset(self, container):
        mods, shard = small_case()
        buffer = io.BytesIO(write(container, shard))
        with h5py.File(buffer, "a") as f:
            del f["pos"]
            f.create_group("pos")
        with pytest.raises(ShardFormatError, match="'pos' is a Group, expected a dataset"):
            container.read(buffer.getvalue(), mods, presence=True)

    def test_missing_attributes(self, container):
        mods, shard = small_case()
        for attr, message in [("_n_steps", "no root attribute _n_steps"), ("format", "root attribute format is None")]:
            buffer = io.BytesIO(write(container, shard))
            with h5py.File(buffer, "a") as f:
                del f.attrs[attr]
            with pytest.raises(ShardFormatError, match=message):
                container.read(buffer.getvalue(), mods, presence=True)

    def test_a_dataspace_claiming_a_terabyte_is_refused(self, container):
        mods, shard = small_case()
        data = write(container, shard)
        dims = struct.pack("<QQ", 4, 3)
        assert data.count(dims) == 2  # pos's dataspace: its dims and its max dims
        with pytest.raises(ShardFormatError, match=r"hdf5 shard: damaged HDF5 structure \(KeyError: .*invalid dataset "
                                                   r"size"):
            container.read(data.replace(dims, struct.pack("<QQ", 2**40, 3)), mods, presence=True, max_rows=8)

    def test_a_dataset_holding_more_than_the_spec_allows_is_refused_unread(self, container):
        mods = {"pos": modality("pos", "float32", (3,))}
        shard = ShardArrays({"pos": np.zeros((6, 3), np.float32)}, None, 6)
        with pytest.raises(ShardFormatError, match=r"hdf5 shard: modality 'pos' declares shape \(6, 3\), more than "
                                                   r"the 12 values"):
            container.read(write(container, shard), mods, presence=False, max_rows=4)

    def test_a_global_heap_flip_that_hangs_libhdf5_is_stopped_by_the_isolated_decoder(self, container):
        mods, shard = small_case()
        data = bytearray(write(container, shard))
        size = data.find(b"GCOL") + 24  # the first heap object's size: the 21 bytes of the format attribute
        assert struct.unpack_from("<Q", data, size)[0] == len("kuration-shard-hdf5/1")
        data[size] ^= 0x40  # in process, libhdf5 never returns from reading the attribute
        started = time.monotonic()
        with pytest.raises(ShardFormatError,
                           match=rf"hdf5 shard: decoding did not finish within {HOSTILE_TIMEOUT:g} s, "
                                                   "so the isolated decoder was stopped"):
            decode_hostile(container, bytes(data), mods)
        # only catches a hang; the message says the limit fired
        assert time.monotonic() - started < HOSTILE_TIMEOUT + 30
        self.assert_same(decode_hostile(container, write(container, shard), mods), shard)  # a new worker

    def test_missing_h5py_names_the_extra(self, container, monkeypatch):
        monkeypatch.setitem(sys.modules, "h5py", None)
        with pytest.raises(MissingDependencyError, match=r'pip install "kuration\[array\]"') as info:
            container.write(HashingWriter(io.BytesIO()), small_case()[1])
        assert isinstance(info.value, KurationError)


class TestParquetContainer(ShardContainerContract):
    can_hold_ragged_rows = False

    @pytest.fixture
    def container(self):
        return ParquetContainer()

    def table(self, container, shard=None) -> pa.Table:
        return pq.read_table(pa.BufferReader(write(container, shard or small_case()[1])))

    def test_pyarrow_sees_the_documented_columns(self, container):
        shard = ShardArrays({"h": np.array([1.5, -0.0], np.float16), "t": np.zeros((2, 2, 2), np.uint8)},
                            np.array([True, False]), 1)
        table = self.table(container, shard)
        assert table.column_names == ["h", "t", "_present"] and table.num_rows == 2
        assert table.schema.field("h").type == pa.float16()
        assert table.schema.field("t").type == pa.list_(pa.uint8(), 4)  # fixed_size_list, flattened C order
        assert table.schema.field("t").metadata == {b"kuration.shape": b"[2, 2]"}
        assert table.schema.field("_present").type == pa.bool_()
        assert table.schema.metadata[b"kuration.format"] == b"kuration-shard-parquet/1"
        assert table.schema.metadata[b"kuration.n_steps"] == b"1"

    def rewrite(self, table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return sink.getvalue().to_pybytes()

    def test_variable_list_columns_are_read_and_checked(self, container):
        mods, shard = small_case()
        table = self.table(container)
        pos = pa.array(shard.arrays["pos"].tolist(), pa.list_(pa.float32()))
        fixed = table.set_column(table.column_names.index("pos"), pa.field("pos", pos.type), pos)
        self.assert_same(container.read(self.rewrite(fixed), mods, presence=True), shard)
        ragged = pa.array([[0.0, 1.0, 2.0], [3.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], pa.list_(pa.float32()))
        bad = table.set_column(table.column_names.index("pos"), pa.field("pos", ragged.type), ragged)
        with pytest.raises(ShardFormatError, match=r"column 'pos' row 1 holds 1 values, expected 3"):
            container.read(self.rewrite(bad), mods, presence=True)

    def test_nulls_and_wrong_kinds(self, container):
        mods, _ = small_case()
        table = self.table(container)
        index = table.column_names.index("label")
        nulls = table.set_column(index, pa.field("label", pa.int64()), pa.array([0, None, 2, 3], pa.int64()))
        with pytest.raises(ShardFormatError, match=r"column 'label' holds 1 null\(s\)"):
            container.read(self.rewrite(nulls), mods, presence=True)
        listed = table.set_column(index, pa.field("label", pa.list_(pa.int64())), pa.array([[0], [1], [2], [3]]))
        with pytest.raises(ShardFormatError, match=r"column 'label' is a list column .* expected scalars"):
            container.read(self.rewrite(listed), mods, presence=True)

    @pytest.mark.parametrize("metadata, message", [
        ({b"kuration.format": b"kuration-shard-parquet/1"}, "kuration.n_steps must be a decimal integer"),
        ({b"kuration.format": b"kuration-shard-parquet/1", b"kuration.n_steps": b"three"}, "found b'three'"),
        ({b"kuration.n_steps": b"3"}, "kuration.format is None, expected 'kuration-shard-parquet/1'"),
    ])
    def test_bad_metadata(self, container, metadata, message):
        table = self.table(container).replace_schema_metadata(metadata)
        with pytest.raises(ShardFormatError, match=message):
            container.read(self.rewrite(table), small_case()[0], presence=True)

    def test_a_footer_name_that_is_not_utf8_is_refused(self, container):
        mods, shard = small_case()
        data = write(container, shard)
        assert data.count(b"label") == 2
        with pytest.raises(ShardFormatError,
                           match="parquet shard: not a readable Parquet file .*can't decode byte 0xe9"):
            container.read(data.replace(b"label", b"\xe9abel"), mods, presence=True)

    def test_a_footer_claiming_more_rows_than_the_spec_allows_is_refused_undecoded(self, container, monkeypatch):
        mods, shard = small_case()
        decoded = []
        monkeypatch.setattr(pq.ParquetFile, "read", lambda *a, **k: decoded.append(1))
        with pytest.raises(ShardFormatError,
                           match=r"parquet shard: 4 rows, more than the 2 a shard of this spec holds"):
            container.read(write(container, shard), mods, presence=True, max_rows=2)
        assert not decoded

    def test_missing_pyarrow_names_the_extra(self, container, monkeypatch):
        monkeypatch.setitem(sys.modules, "pyarrow", None)
        with pytest.raises(MissingDependencyError, match=r'pip install "kuration\[parquet\]"'):
            container.read(b"", small_case()[0], presence=True)


# -- the registry ---------------------------------------------------------------------------


def test_registry_has_every_container_the_spec_allows():
    assert tuple(CONTAINER_TYPES) == CONTAINERS
    for name in CONTAINERS:
        container = get_container(name)
        assert container.name == name and isinstance(container, CONTAINER_TYPES[name])
    assert [get_container(n).extension for n in CONTAINERS] == [".npz", ".json", ".h5", ".parquet"]


def test_unknown_container_lists_the_valid_ones():
    with pytest.raises(OutputSpecError,
                       match=r"unknown shard container 'zip'; valid containers are \['npz', 'json', 'hdf5', "
                             r"'parquet'\]"):
        get_container("zip")
