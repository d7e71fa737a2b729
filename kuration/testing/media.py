"""``MediaProviderContract``: what every media provider promises (:mod:`kuration.sources.media`).

A test module subclasses it once per provider (``class TestMine(MediaProviderContract)``) and
supplies only how to store named arrays in that provider's native form and how to refer to
one row; the built-in providers' tests in ``tests/sources`` run it the same way. Through
``provider.decode`` alone:

* valid references decode to the stored rows bit for bit, in the order given, as
  ``(len(refs), *shape)`` of the declared dtype, whatever the rows' pattern (dense,
  sparse, repeated, descending) and in bounded batches;
* ``None`` is an absent slot of zeros, and a batch of only ``None`` reads nothing;
* a reference that cannot be decoded (malformed, a row out of range or with too many
  digits, an array or a store that is not there, a declared shape or dtype the store does
  not hold) raises :class:`MediaError` naming source, column and reference, with the
  reference's batch position in ``MediaError.reference``;
* inside a :func:`media_cache` scope the values are the same and each batch is the
  caller's own; a store rewritten after a scope is read again by the next one.

:class:`WholeFileProviderContract` adds what a provider that reads whole files promises:
inside one scope each file is read once.

A subclass supplies:

* ``provider_name``: the registered name;
* ``write(folder, arrays)``: store ``{name: array}`` under the new folder ``folder`` and
  return the ``root`` to decode against (the folder, or a file or store inside it);
* ``ref(name, row)``: the reference to row ``row`` of array ``name``;
* ``missing_root(folder)``: a root under ``folder`` where no store exists.

It may override:

* ``stored(seed)``: the arrays the tests store, when the provider holds only some kinds of
  values (a provider that decodes millimetres into float32 metres holds only such floats).
  It keeps the default's names and at least its rows: ``cam`` (9 rows) and ``cam_b`` (6) of
  one item shape, ``depth`` (7), ``flow`` (5) and ``label`` (8); every dtype and shape comes
  from these arrays. Every array must come back bit for bit;
* ``remove_store(folder)``: delete what ``write`` stored (default: the folder), for a
  provider whose store is not the folder itself.
"""

from __future__ import annotations

import abc
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from kuration.sources.media import MediaError, MediaSpec, decode_in_batches, get_media_provider, media_cache

SOURCE = "rec_7"


def default_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """Arrays of every kind a provider must not change: image bytes, floats with NaN
    payloads and signed zeros, scalar items."""
    rng = np.random.default_rng(seed)
    depth = rng.normal(size=(7, 2, 3)).astype(np.float32)
    depth.reshape(-1)[:3] = [-0.0, np.nan, -np.inf]
    depth.reshape(-1).view(np.uint32)[3] = 0x7FC0_BEEF  # a NaN with a payload
    return {
        "cam": rng.integers(0, 256, (9, 4, 5, 3), dtype=np.uint8),
        "cam_b": rng.integers(0, 256, (6, 4, 5, 3), dtype=np.uint8),
        "depth": depth,
        "flow": rng.normal(size=(5, 2)),
        "label": rng.integers(-300, 300, 8).astype(np.int16),
    }


def bits(array: np.ndarray) -> tuple:
    return array.dtype, array.shape, array.tobytes()


class MediaProviderContract(abc.ABC):
    provider_name: str

    def stored(self, seed: int = 0) -> dict[str, np.ndarray]:
        return default_arrays(seed)

    def remove_store(self, folder: Path) -> Path:
        shutil.rmtree(folder)
        return folder

    @abc.abstractmethod
    def write(self, folder: Path, arrays: dict[str, np.ndarray]) -> str:
        ...

    @abc.abstractmethod
    def ref(self, name: str, row: int) -> str:
        ...

    @abc.abstractmethod
    def missing_root(self, folder: Path) -> str:
        ...

    # ---- fixtures and helpers ---------------------------------------------------------

    @pytest.fixture
    def arrays(self) -> dict[str, np.ndarray]:
        return self.stored()

    @pytest.fixture
    def root(self, tmp_path, arrays) -> str:
        return self.write(tmp_path / "store", arrays)

    def spec(self, name: str, arrays: dict[str, np.ndarray] | None = None) -> MediaSpec:
        array = (arrays or self.stored())[name]
        return MediaSpec(name, array.dtype.name, tuple(array.shape[1:]), self.provider_name)

    def decode(self, refs, root: str, name: str = "cam", spec: MediaSpec | None = None) -> np.ndarray:
        provider = get_media_provider(self.provider_name)
        return provider.decode(refs, spec or self.spec(name), root=root, source_id=SOURCE)

    def refs(self, name: str, rows) -> list[str]:
        return [self.ref(name, int(r)) for r in rows]

    def raises_at(self, position: int, *details: str, column: str = "cam"):
        """A context that expects a MediaError naming source, column and the details
        (patterns), with ``reference == position``."""
        return _RaisesAt(position, column, details)

    # ---- decoding ---------------------------------------------------------------------

    @pytest.mark.parametrize("name", ["cam", "depth", "flow", "label"])
    def test_valid_references_decode_to_the_stored_rows_bit_for_bit(self, root, arrays, name):
        rows = [3, 0, 3, len(arrays[name]) - 1, 1]
        got = self.decode(self.refs(name, rows), root, name)
        assert bits(got) == bits(arrays[name][rows])

    @pytest.mark.parametrize("rows", [[0, 1, 2, 3], [8, 7, 6, 5], [0, 8], [4, 4, 4], [8, 0, 4, 2, 6], [5]],
                             ids=["dense", "descending", "sparse", "repeated", "shuffled", "one"])
    def test_the_order_of_the_references_is_the_order_of_the_rows(self, root, arrays, rows):
        assert bits(self.decode(self.refs("cam", rows), root)) == bits(arrays["cam"][rows])

    def test_references_into_several_arrays_keep_their_places(self, root, arrays):
        refs = [self.ref("cam", 2), self.ref("cam_b", 5), self.ref("cam", 0), self.ref("cam_b", 0)]
        want = np.stack([arrays["cam"][2], arrays["cam_b"][5], arrays["cam"][0], arrays["cam_b"][0]])
        assert bits(self.decode(refs, root)) == bits(want)

    def test_batches_decode_to_the_whole(self, root, arrays):
        rows = [i * 4 % 9 for i in range(9)]
        provider = get_media_provider(self.provider_name)
        batches = list(decode_in_batches(provider, self.refs("cam", rows), self.spec("cam"), root=root,
                                         source_id=SOURCE, batch_size=2))
        assert [start for start, _ in batches] == [0, 2, 4, 6, 8]
        assert all(len(batch) <= 2 for _, batch in batches)
        assert bits(np.concatenate([batch for _, batch in batches])) == bits(arrays["cam"][rows])

    def test_an_empty_batch_is_an_empty_array_of_the_declared_kind(self, root, arrays):
        got = self.decode([], root)
        assert got.dtype == arrays["cam"].dtype and got.shape == (0, *arrays["cam"].shape[1:])

    # ---- absent slots -----------------------------------------------------------------

    def test_none_is_an_absent_slot_of_zeros_in_its_place(self, root, arrays):
        got = self.decode([self.ref("depth", 3), None, self.ref("depth", 0), None], root, "depth")
        zeros = np.zeros_like(arrays["depth"][0])
        want = np.stack([arrays["depth"][3], zeros, arrays["depth"][0], zeros])
        assert bits(got) == bits(want)

    def test_a_batch_of_only_absent_slots_reads_nothing(self, tmp_path):
        cam = self.stored()["cam"]
        got = self.decode([None, None, None], self.missing_root(tmp_path))
        assert bits(got) == bits(np.zeros((3, *cam.shape[1:]), cam.dtype))

    # ---- errors -----------------------------------------------------------------------

    @pytest.mark.parametrize("make", [
        lambda ref: ref.rpartition("#")[0],               # no row
        lambda ref: ref.rpartition("#")[0] + "#",         # an empty row
        lambda ref: "#" + ref.rpartition("#")[2],         # no path
        lambda ref: ref.rpartition("#")[0] + "#-1",
        lambda ref: ref.rpartition("#")[0] + "#+1",
        lambda ref: ref.rpartition("#")[0] + "#1.0",
        lambda ref: ref.rpartition("#")[0] + "#1 ",
        lambda ref: ref.rpartition("#")[0] + "#0x1",
        lambda ref: ref.rpartition("#")[0] + "#\u0661",   # ARABIC-INDIC DIGIT ONE: a decimal, not a row
        lambda ref: ref.rpartition("#")[0] + "#\uff11",   # FULLWIDTH DIGIT ONE
        lambda ref: "",
        lambda ref: 1,
    ], ids=["no-row", "empty-row", "no-path", "negative", "plus", "float", "space", "hex", "arabic-indic",
            "fullwidth", "empty", "int"])
    def test_a_malformed_reference_raises_naming_it(self, root, make):
        bad = make(self.ref("cam", 1))
        with self.raises_at(1, re.escape(repr(bad))):
            self.decode([self.ref("cam", 0), bad, self.ref("cam", 2)], root)

    @pytest.mark.parametrize("digits", [19, 400, 5000])
    def test_a_row_with_too_many_digits_raises_naming_it(self, root, digits):
        bad = self.ref("cam", 1).rpartition("#")[0] + "#" + "9" * digits
        with self.raises_at(1, "9" * 10):
            self.decode([self.ref("cam", 0), bad], root)

    def test_a_row_out_of_range_raises_naming_it(self, root):
        with self.raises_at(1, "row 9 out of range", "has 9 rows"):
            self.decode([self.ref("cam", 8), self.ref("cam", 9)], root)

    def test_an_array_that_is_not_there_raises_naming_it(self, root):
        with self.raises_at(1, "nope"):
            self.decode([self.ref("cam", 0), self.ref("nope", 0), self.ref("cam", 1)], root)

    def test_a_store_that_is_not_there_raises_naming_it(self, tmp_path):
        missing = self.missing_root(tmp_path)
        with self.raises_at(1, re.escape(missing)):
            self.decode([None, self.ref("cam", 0)], missing)

    def test_a_declared_shape_the_store_does_not_hold_raises(self, root, arrays):
        held = list(arrays["cam"].shape[1:])
        declared = held[::-1] if held[::-1] != held else [*held, 2]
        spec = MediaSpec("cam", arrays["cam"].dtype.name, tuple(declared), self.provider_name)
        with self.raises_at(1, re.escape(f"holds items of shape {held}, declared {declared}")):
            self.decode([None, self.ref("cam", 0)], root, spec=spec)

    def test_a_declared_dtype_of_another_kind_raises(self, root, arrays):
        held = arrays["depth"].dtype.name
        other = "uint8" if np.dtype(held).kind == "f" else "float32"
        spec = MediaSpec("depth", other, arrays["depth"].shape[1:], self.provider_name)
        with self.raises_at(0, f"holds {held}, declared {other}", column="depth"):
            self.decode([self.ref("depth", 0)], root, "depth", spec=spec)

    # ---- the media cache --------------------------------------------------------------

    def test_inside_a_media_cache_the_values_are_the_same_and_each_batch_is_the_callers(self, root, arrays):
        refs = self.refs("cam", [1, 2])
        with media_cache():
            first = self.decode(refs, root)
            second = self.decode(refs, root)
            assert bits(first) == bits(second) == bits(arrays["cam"][[1, 2]])
            assert first.flags.writeable
            first[:] = 0
            assert bits(self.decode(refs, root)) == bits(arrays["cam"][[1, 2]])

    def test_a_store_rewritten_after_a_cache_scope_is_read_again(self, tmp_path):
        refs = self.refs("cam", [1, 2])
        folder = tmp_path / "store"
        first, second = self.stored(0), self.stored(1)
        root = self.write(folder, first)
        with media_cache():
            assert bits(self.decode(refs, root)) == bits(first["cam"][[1, 2]])
        assert self.write(self.remove_store(folder), second) == root
        with media_cache():
            assert bits(self.decode(refs, root)) == bits(second["cam"][[1, 2]])
        assert bits(self.decode(refs, root)) == bits(second["cam"][[1, 2]])


class WholeFileProviderContract(MediaProviderContract):
    def test_inside_a_media_cache_each_file_is_read_once(self, tmp_path):
        folder = tmp_path / "store"
        arrays = self.stored(0)
        root = self.write(folder, arrays)
        with media_cache() as cache:
            first = self.decode(self.refs("cam", [0, 1]), root)
            self.remove_store(folder)  # the files are gone: only the cache can answer now
            again = self.decode(self.refs("cam", [1, 8]), root)
        assert bits(first) == bits(arrays["cam"][[0, 1]])
        assert bits(again) == bits(arrays["cam"][[1, 8]])
        assert cache.hits >= 1
        with pytest.raises(MediaError):  # and nothing outlives the scope
            self.decode(self.refs("cam", [1]), root)


class _RaisesAt:
    def __init__(self, position: int, column: str, details: tuple[str, ...]) -> None:
        self.position, self.details = position, details
        self._raises = pytest.raises(MediaError, match=re.escape(f"{SOURCE}: media {column!r}"))

    def __enter__(self):
        self._info = self._raises.__enter__()
        return self._info

    def __exit__(self, *exc) -> bool:
        if not self._raises.__exit__(*exc):
            return False  # another exception: it goes on as it is
        error = self._info.value
        assert error.reference == self.position, (error.reference, str(error))
        for detail in self.details:
            assert re.search(detail, str(error)), (detail, str(error))
        return True


__all__ = ["SOURCE", "MediaProviderContract", "WholeFileProviderContract", "bits", "default_arrays"]
