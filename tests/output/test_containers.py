"""The shard container contract (:class:`kuration.testing.ShardContainerContract`), run
against all four containers.

Each container's test class only supplies the ``container`` fixture, then adds checks that
other tools read its files as documented and what its format alone can get wrong.
"""

from __future__ import annotations

import io
import json
import re
import struct
import sys
import time
import zipfile

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given

from kuration.errors import KurationError
from kuration.output.containers import (
    CONTAINER_TYPES, Hdf5Container, JsonContainer, MissingDependencyError, NpzContainer, ParquetContainer, ShardArrays,
    ShardFormatError, get_container,
)
from kuration.output.containers.json_container import text_limit
from kuration.output.shard_files import HashingWriter
from kuration.output.spec import CONTAINERS, OutputSpecError
from kuration.testing import ShardContainerContract
from kuration.testing.container import HOSTILE_TIMEOUT, SETTINGS, decode_hostile, modality, shards, small_case, write


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
