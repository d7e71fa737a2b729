"""Caught before the destination is touched (issue 25): ``segment:`` features into integer
and bool modalities when every span's value is whole, refused at planning with the feature,
the span and the value when one is not; the preflight before the lease, which decodes one
reference of each media column, encodes one record, and checks the plan's sources are the
adapter's; a write it refuses leaves a committed dataset byte-identical and verified, and a
new folder uncreated."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.demo.corpus import DEMO_OUTPUT_SPEC, write_demo_landing_zone
from kuration.landing.settings import load_curation_settings
from kuration.output import OutputSpec
from kuration.output.destinations import LocalDestination
from kuration.output.preflight import preflight
from kuration.output.shard_assembly import MissingValueError, cast_whole
from kuration.output.spec import CONTAINERS, Modality
from kuration.output.write_dataset import DatasetWriteError, plan_shards, write_dataset, write_planned_dataset
from kuration.read import iter_shards, verify_dataset
from kuration.sources import ParquetTickAdapter
from kuration.sources.media import MediaError
from tests.output.corpus import planned_write_kwargs, snapshot

#: A spec without media: the cheapest shards that carry the two label modalities.
LABELS = {"shard_length": 32, "short_policy": "pad", "container": "npz", "modalities": {
    "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
    "label": {"dtype": "int64", "shape": [], "source": "segment:tag.near_miss"},
    "landing": {"dtype": "bool", "shape": [], "source": "segment:tag.landing"},
}}


def _write(corpus, out, *, adapter, **kwargs):
    """``corpus.write`` through another adapter."""
    return write_planned_dataset(out, corpus.plan(), adapter=adapter, schema=corpus.schema, spec=corpus.spec,
                                 **planned_write_kwargs(**kwargs))


def _refused_untouched(committed, new, write, error, message) -> None:
    """``write(out, **intent)`` raises ``error`` matching ``message`` as a forced rewrite of
    the committed dataset, which stays byte-identical and verified, and as a first write to
    ``new``, which is never created."""
    out, _ = committed
    before = snapshot(out)
    with pytest.raises(error, match=message):
        write(out, force=True)
    assert snapshot(out) == before and verify_dataset(out).ok
    with pytest.raises(error, match=message):
        write(new)
    assert not new.exists()


def _spec(base=LABELS, **changes):
    return OutputSpec.from_dict({**base, **changes})


def _span_values(plan, feature):
    """(source, entity key, span) -> the admitted span's value of ``feature``."""
    admitted = plan.admitted()
    return {(row["source_id"], row["entity_id"], row["span_index"]): row[feature]
            for row in admitted.select(["source_id", "entity_id", "span_index", feature]).to_pylist()}


@pytest.mark.parametrize("container", CONTAINERS)
def test_whole_valued_float_tags_write_and_read_back_as_int64_and_bool_in_every_container(corpus, tmp_path,
                                                                                         container):
    plan = corpus.plan()
    assert plan.admitted().schema.field("tag.near_miss").type == pa.float64()  # what the segment table stores
    corpus.write(tmp_path / "out", plan=plan, spec=_spec(container=container))
    near_miss, landing = _span_values(plan, "tag.near_miss"), _span_values(plan, "tag.landing")
    assert set(near_miss.values()) == {0.0, 1.0} and set(landing.values()) == {0.0, 1.0}  # both values are written
    shards = list(iter_shards(tmp_path / "out", with_meta=True))
    assert shards
    for arrays, entry in shards:
        assert arrays["label"].dtype == np.int64 and arrays["landing"].dtype == np.bool_
        span = (entry["source_id"], entry["entity_id"], entry["span_index"])
        present = arrays["_present"]
        assert (arrays["label"][present] == int(near_miss[span])).all() and not arrays["label"][~present].any()
        assert (arrays["landing"][present] == bool(landing[span])).all() and not arrays["landing"][~present].any()


def _with_value(plan, feature, value, at=2):
    """``plan`` with ``feature`` set to ``value`` in its ``at``-th admitted span (every other
    value as it was); and that span's (source, entity key, span index)."""
    items = plan.items
    admitted = np.flatnonzero(items.column("admitted").to_numpy(zero_copy_only=False))
    values = items.column(feature).to_numpy().copy()
    values[admitted[at]] = value
    row = items.slice(int(admitted[at]), 1).to_pylist()[0]
    changed = items.set_column(items.schema.get_field_index(feature), feature, pa.array(values, pa.float64()))
    return dataclasses.replace(plan, items=changed), (row["source_id"], row["entity_id"], row["span_index"])


@pytest.mark.parametrize(("dtype", "value", "shown", "held"), [
    ("int64", 2.5, r"2\.5", r"-9223372036854775808 to 9223372036854775807"),
    ("int64", math.nan, "nan", r"-9223372036854775808 to 9223372036854775807"),
    ("int64", math.inf, "inf", r"-9223372036854775808 to 9223372036854775807"),
    ("int8", 300.0, r"300\.0", "-128 to 127"),
    ("uint8", -1.0, r"-1\.0", "0 to 255"),
    ("bool", 2.0, r"2\.0", "0 to 1"),
])
def test_a_span_value_the_modality_cannot_hold_is_refused_at_planning(corpus, committed, tmp_path, dtype, value,
                                                                      shown, held):
    plan, (source, entity, span) = _with_value(corpus.plan(), "tag.landing", value)
    spec = _spec(modalities={**LABELS["modalities"], "landing": {"dtype": dtype, "shape": [],
                                                                 "source": "segment:tag.landing"}})
    message = (rf"modality 'landing' \(segment:tag\.landing\): segment feature 'tag\.landing' is {shown} at source "
               rf"'{source}', entity {entity.replace('(', '[(]').replace(')', '[)]')}, span {span}, which {dtype} "
               rf"cannot hold: it takes whole values from {held}\. Declare a float dtype")
    with pytest.raises(MissingValueError, match=message):
        plan_shards(plan, adapter=corpus.adapter, schema=corpus.schema, spec=spec)
    _refused_untouched(committed, tmp_path / "new", functools.partial(corpus.write, plan=plan, spec=spec),
                       MissingValueError, message)


def test_the_first_span_in_plan_order_is_named(corpus):
    plan, _ = _with_value(corpus.plan(), "tag.landing", 0.5, at=4)
    plan, first = _with_value(plan, "tag.landing", 7.0, at=1)
    with pytest.raises(MissingValueError, match=rf"is 7\.0 at source '{first[0]}', entity .*, span {first[2]},"):
        plan_shards(plan, adapter=corpus.adapter, schema=corpus.schema, spec=_spec())


@given(value=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-2**63, 2**63 - 1).map(float),
       dtype=st.sampled_from(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]))
def test_a_whole_float_in_range_casts_exactly_and_anything_else_is_refused(value, dtype):
    modality = Modality("x", dtype, (), "segment", "f")
    info = (0, 1) if dtype == "bool" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    fits = math.isfinite(value) and value.is_integer() and info[0] <= int(value) <= info[1]
    if fits:
        out = cast_whole(np.array([value]), modality, "v", where="here")
        assert out.dtype == np.dtype(dtype) and int(out[0]) == int(value)
    else:
        with pytest.raises(MissingValueError, match=rf"v is {re_float(value)} at here, which {dtype} cannot hold"):
            cast_whole(np.array([value]), modality, "v", where="here")


def re_float(value: float) -> str:
    return repr(value).replace(".", r"\.").replace("+", r"\+")


@given(value=st.integers(-2**63, 2**63 - 1), dtype=st.sampled_from(["bool", "int8", "uint16", "int64", "uint64"]))
def test_integer_segment_values_cast_when_in_range(value, dtype):
    modality = Modality("x", dtype, (), "segment", "f")
    low, high = (0, 1) if dtype == "bool" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    if low <= value <= high:
        assert int(cast_whole(np.array([value], np.int64), modality, "v", where="here")[0]) == value
    else:
        with pytest.raises(MissingValueError, match=rf"v is {value} at here, which {dtype} cannot hold"):
            cast_whole(np.array([value], np.int64), modality, "v", where="here")


def test_a_float_segment_into_a_float_modality_is_cast_as_before():
    out = cast_whole(np.array([2.5]), Modality("x", "float32", (), "segment", "f"), "v", where="here")
    assert out.dtype == np.float32 and out[0] == 2.5


# -- the preflight ------------------------------------------------------------------------------


class _Lease:
    """Fails the test if a destination's lease is taken."""

    def __init__(self, monkeypatch):
        monkeypatch.setattr(LocalDestination, "lease", self.taken)

    @staticmethod
    def taken(destination):
        raise AssertionError(f"{destination.url}: the lease was taken before the preflight failed")


class UndecodableMedia(ParquetTickAdapter):
    def decode_media(self, column, refs, *, source_id):
        raise MediaError(f"{refs[0]!r}: the codec is not installed", reference=0)


def test_media_that_cannot_be_decoded_fails_in_the_preflight_before_the_lease(corpus, committed, tmp_path,
                                                                              monkeypatch):
    broken = UndecodableMedia(corpus.adapter.root_url, corpus.schema)
    shards = plan_shards(corpus.plan(), adapter=broken, schema=corpus.schema, spec=corpus.spec)  # nothing read yet
    message = r"modality 'frame', source '.*', entity .*, row \d+ \(tick \d+\): '.*': the codec is not installed"
    with pytest.raises(MediaError, match=message):
        preflight(shards)
    _Lease(monkeypatch)
    _refused_untouched(committed, tmp_path / "new", functools.partial(_write, corpus, adapter=broken), MediaError,
                       message)


class HalfEncoder:
    """Returns a float for an int64 modality: its kind, not its value, is wrong."""

    def timestep(self, record, ctx):
        return {"half": float(record["_tick"]) / 2}


class FlatEncoder:
    """Returns a scalar for a [2] modality."""

    def timestep(self, record, ctx):
        return {"pair": 1.0}


@pytest.mark.parametrize(("encoder", "modality", "message"), [
    (HalfEncoder(), {"half": {"dtype": "int64", "shape": [], "source": "encoder:half"}},
     r"modality 'half' \(encoder:half\): encoder hook 'half' is float64, which int64 cannot hold without changing "
     "kind"),
    (FlatEncoder(), {"pair": {"dtype": "float32", "shape": [2], "source": "encoder:pair"}},
     r"modality 'pair' \(encoder:pair\): encoder hook 'pair' has shape \[\] per row, the spec declares \[2\]"),
])
def test_an_encoder_output_its_modality_cannot_hold_fails_in_the_preflight(corpus, committed, tmp_path, monkeypatch,
                                                                           encoder, modality, message):
    spec = _spec(modalities={**LABELS["modalities"], **modality})
    shards = plan_shards(corpus.plan(), adapter=corpus.adapter, schema=corpus.schema, spec=spec, encoder=encoder)
    with pytest.raises(MissingValueError, match=message):
        preflight(shards)
    _Lease(monkeypatch)
    _refused_untouched(committed, tmp_path / "new", functools.partial(corpus.write, spec=spec, encoder=encoder),
                       MissingValueError, message)


class OneSourceShort(ParquetTickAdapter):
    def list_sources(self):
        return super().list_sources()[1:]


def test_a_plan_admitting_a_source_the_adapter_does_not_list_fails_in_the_preflight(corpus, committed, tmp_path,
                                                                                    monkeypatch):
    short = OneSourceShort(corpus.adapter.root_url, corpus.schema)
    missing = corpus.adapter.list_sources()[0]
    _Lease(monkeypatch)
    message = (rf"the budget plan admits 1 source\(s\) the adapter OneSourceShort does not list \(e\.g\. "
               rf"\['{missing}'\]; .*Plan again over this adapter's sources")
    _refused_untouched(committed, tmp_path / "new", functools.partial(_write, corpus, adapter=short),
                       DatasetWriteError, message)


def test_the_preflight_reads_one_source_and_the_writer_reuses_it(corpus, tmp_path, monkeypatch):
    reads = []
    real = corpus.adapter.read_ticks
    monkeypatch.setattr(corpus.adapter, "read_ticks", lambda source: reads.append(source) or real(source))
    shards = plan_shards(corpus.plan(), adapter=corpus.adapter, schema=corpus.schema, spec=corpus.spec)
    checked = preflight(shards)
    assert reads == [shards.sources[0]] and set(checked.tracks) == {shards.sources[0]}
    assert set(checked.probed) == {"frame"} and checked.probed["frame"].startswith(f"source {shards.sources[0]!r}")
    reads.clear()
    corpus.write(tmp_path / "out")
    assert reads == list(shards.sources)  # the preflight's source once, each other source once
    reads.clear()
    assert preflight(plan_shards(corpus.plan(), adapter=corpus.adapter, schema=corpus.schema,
                                 spec=_spec())).tracks == {} and reads == []  # nothing to decode or encode: no read


def test_the_issue_reproduction_an_int64_tag_rewrite_commits_and_a_fractional_one_changes_nothing(tmp_path):
    """Issue 25 on six demo recordings through ``write_dataset``: a forced rewrite with an
    int64 tag modality once failed mid-write with the dataset unreadable; it commits now,
    and a rewrite whose segment values are not whole fails at planning, the dataset before
    it byte-identical and verified."""
    landing = Path(write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=2, sites=3,
                                           minutes=(1, 2)).root)
    settings = load_curation_settings(landing / "schema.json", landing / "strategy.json", window=10, stride=5)
    adapter = ParquetTickAdapter(landing / "recordings", settings.schema)
    assert len(adapter.list_sources()) == 6

    def write(modalities, **intent):
        spec = _spec(DEMO_OUTPUT_SPEC, modalities={**DEMO_OUTPUT_SPEC["modalities"], **modalities})
        return write_dataset(tmp_path / "dataset", schema=settings.schema, adapter=adapter, strategy=settings.strategy,
                             segmenter=settings.segmenter, spec=spec, train_hours=0.02, test_hours=0.005,
                             span_seconds=10, **intent)

    write({})
    assert verify_dataset(tmp_path / "dataset").ok
    tagged = write({"tag": {"dtype": "int64", "shape": [], "source": "segment:tag.near_miss"}}, force=True)
    assert tagged.record.state == "committed" and verify_dataset(tmp_path / "dataset").ok
    labels = np.concatenate([arrays["tag"] for arrays in iter_shards(tmp_path / "dataset")])
    assert labels.dtype == np.int64 and set(labels.tolist()) == {0, 1}
    before = snapshot(tmp_path / "dataset")
    with pytest.raises(MissingValueError, match=r"segment feature 'wind\.max' is \d+\.\d+ at source '.*', entity "
                                                r".*, span \d+, which int64 cannot hold"):
        write({"gust": {"dtype": "int64", "shape": [], "source": "segment:wind.max"}}, force=True)
    assert snapshot(tmp_path / "dataset") == before and verify_dataset(tmp_path / "dataset").ok
