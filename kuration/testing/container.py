"""``ShardContainerContract``: what every shard container promises
(:class:`~kuration.output.containers.ShardContainer`).

A test module subclasses it once per container and supplies only the ``container`` fixture
(``class TestMine(ShardContainerContract)`` with ``@pytest.fixture def container(self):
return MyContainer()``); the four built-in containers' tests in ``tests/output`` run it the
same way, then add checks that other tools read their files as documented. Through
``write`` and ``read`` alone:

* round trips are bit-exact for every dtype and shape the spec allows, ``_present`` and
  ``n_steps`` included (a hypothesis property over random shards, special floats and raw
  bit patterns), and a 64-row frame shard;
* ``write`` gets a sequential, write-only stream and writes the bytes a ``BytesIO`` gets,
  whatever the arrays' layout or byte order, without closing it; ``write_path``, when the
  container has it, writes the same bytes to a file;
* ``read`` raises :class:`ShardFormatError` naming the problem for every kind of bad shard
  (truncated, garbage, a missing or extra modality, a presence mask the spec does not
  declare, a wrong shape, a value the declared dtype cannot hold, more rows than the spec
  allows) and for damaged bytes (a hypothesis property), and nothing else;
* ``write`` refuses a shard it could not read back.

Class attributes a subclass may change: ``keeps_nan_bits = False`` where the format cannot
store a NaN's sign and payload (JSON's ``NaN`` token: NaN elements are then compared by
NaN-ness, every other element bit for bit); ``can_hold_ragged_rows = False`` where the format
cannot hold columns of different lengths (Parquet). Two tests forge shards the container's
own writer refuses; they do it through :meth:`ShardContainerContract.write_unchecked`, which
a container whose module has no ``check_shard`` overrides (or the two tests skip, saying so).

A container that is not ``safe_for_untrusted`` and is not one of the built-in four reads its
damaged bytes in this process: the isolated decoder only runs the built-in containers.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kuration.output.containers import CONTAINER_TYPES, ShardArrays, ShardFormatError
from kuration.output.shard_files import HashingWriter
from kuration.output.spec import DTYPES, Modality, OutputSpec
from kuration.read.isolated import decode_isolated
from kuration.testing.strategies import damaged

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
    arrays: dict[str, np.ndarray] = {"label": np.arange(4, dtype=np.int64),
                                     "pos": np.arange(12, dtype=np.float32).reshape(4, 3)}
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
    width: Literal[16, 32, 64] = {2: 16, 4: 32, 8: 64}[dtype.itemsize]  # type: ignore[assignment]
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
    in the isolated worker with a time limit. A container of a plugin's own that is not safe
    is read here too (the isolated worker runs only the built-in containers)."""
    if container.safe_for_untrusted or CONTAINER_TYPES.get(container.name) is not type(container):
        return container.read(data, mods, presence=presence, max_rows=max_rows)
    spec = OutputSpec.from_dict({"shard_length": max_rows, "container": container.name, "presence_mask": presence,
                                 "modalities": {n: m.to_dict() for n, m in mods.items()}})
    return decode_isolated(spec, container.name, data, timeout=HOSTILE_TIMEOUT)


# -- the contract ---------------------------------------------------------------------------


class ShardContainerContract:
    """Subclass once per container and supply the ``container`` fixture (see the module doc)."""

    #: False where the format cannot store a NaN's sign and payload (JSON's ``NaN`` token).
    keeps_nan_bits = True
    #: False where the format itself cannot hold columns of different lengths (Parquet).
    can_hold_ragged_rows = True

    @pytest.fixture
    def container(self):
        raise TypeError(f"{type(self).__name__} must define the container fixture: the ShardContainer under test")

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
            assert got.present is not None
            assert got.present.dtype == np.bool_ and np.array_equal(got.present, sent.present)
        assert got.n_steps == sent.n_steps and isinstance(got.n_steps, int)
        assert all(a.flags.writeable for a in got.arrays.values())
        assert got.rows == sent.rows

    # round trips

    def write_unchecked(self, container, shard: ShardArrays, monkeypatch) -> bytes:
        """The bytes ``container.write`` gives ``shard`` with its own checks switched off, to
        forge a shard it refuses. This works for a container whose module checks shards
        through a ``check_shard(shard, name)`` function, as the built-in ones do; another
        container overrides it, or the tests that forge shards skip."""
        module = sys.modules[type(container).__module__]
        if not callable(getattr(module, "check_shard", None)):
            pytest.skip(f"{type(container).__name__}: override write_unchecked to forge a shard its writer refuses")
        with monkeypatch.context() as patch:
            patch.setattr(module, "check_shard",
                          lambda shard, name: (dict(sorted(shard.arrays.items())), shard.present, shard.n_steps))
            return write(container, shard)

    def test_name_extension_and_registry(self, container):
        # a container may take a built-in name only by being that built-in container
        assert CONTAINER_TYPES.get(container.name, type(container)) is type(container)
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
        data = self.write_unchecked(container, ShardArrays(shard.arrays, shard.present, n_steps), monkeypatch)
        with pytest.raises(ShardFormatError, match=rf"_n_steps is {n_steps}, expected 0 <= _n_steps <= rows \(4\)"):
            container.read(data, mods, presence=True)

    def test_rows_disagree(self, container, monkeypatch):
        if not self.can_hold_ragged_rows:
            pytest.skip(f"{container.name} cannot hold columns of different lengths")
        mods, shard = small_case()
        data = self.write_unchecked(container, ShardArrays({**shard.arrays, "label": np.arange(5)}, shard.present, 3),
                                    monkeypatch)
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
        (lambda s: ShardArrays({**s.arrays, "x": [1, 2, 3, 4]}, s.present, 3),  # type: ignore[dict-item]
         "expected a numpy array, got list"),
        (lambda s: ShardArrays(s.arrays, np.ones(4, np.uint8), 3), r"_present must be bool of shape \(4,\)"),
        (lambda s: ShardArrays({}, None, 0), "needs at least one modality"),
    ])
    def test_writer_refuses_bad_shards(self, container, bad, message):
        _, shard = small_case()
        with pytest.raises(ShardFormatError, match=message):
            container.write(HashingWriter(io.BytesIO()), bad(shard))


__all__ = ["HOSTILE_SETTINGS", "HOSTILE_TIMEOUT", "SETTINGS", "ShardContainerContract", "decode_hostile", "modality",
           "shards", "small_case", "write"]
