"""``OutputEncoderContract``: what every :class:`~kuration.output.encoders.OutputEncoder` promises.

An encoder serves a spec's ``encoder:<hook>`` modalities: per present timestep, a value of
each hook's modality. A test module subclasses the kit once per encoder
(``class TestMine(OutputEncoderContract)``) and supplies the encoder and the modalities it
serves; the kit encodes a track (generated from the schema, or the subclass's own) directly
and through the shard writer's assembly:

* it is an ``OutputEncoder``, and each present record gets a value for every hook, of the
  modality's shape and exactly representable in its dtype;
* ``encode_batch``, when the encoder has it, agrees with ``timestep`` record by record and
  leads with ``len(records)``;
* a record's values depend on that record and the track alone: encoding the records one by
  one, all at once or in reverse order gives the same values, so where a shard starts or a
  worker's batch ends changes nothing;
* the records it is given are not changed;
* a second encoder built the same way, and a pickled copy (what a write worker gets), give
  the same values and the same code fingerprint (what a resumed write's reuse compares);
* rebuilt by its registered name (``registered_as``), it gives the same values;
* the writer's shard holds those values on present rows and zeros on absent ones.

A subclass supplies ``make_encoder()`` and ``modalities()``, the spec's modalities the
encoder serves (``{"act": {"dtype": "float32", "shape": [2], "source": "encoder:act"}}``).
It may override ``schema()`` (default :data:`KIT_SCHEMA`), ``track()`` (default: generated
from the schema, with absent rows) and ``registered_as``, ``(name, options)`` for
:func:`~kuration.output.get_encoder`, when the encoder is registered.

What it does not check: what the values mean (that is the encoder's own tests' job), or
speed; an encoder that needs a model or a file brings them in ``make_encoder``.
"""

from __future__ import annotations

import abc
import copy
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from kuration.canonical.hashing import code_fingerprint
from kuration.output.encoders import OutputEncoder, encode_rows, get_encoder
from kuration.output.shard_assembly import assemble_shard
from kuration.output.spec import OutputSpec
from kuration.sources.schema import Schema
from kuration.sources.tracks import Track

#: What the kit's default track holds: fields, a global, a media column.
KIT_SCHEMA = {
    "sample_hz": 10, "time": "t", "entity": "agent",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "speed": {"dtype": "float64"},
               "gear": {"dtype": "int16"}},
    "globals": {"battery": {"dtype": "float32"}},
    "media": {"frame": {"dtype": "uint8", "shape": [2, 2], "provider": "npy_index"}},
}
#: Rows of the default track where the entity is absent.
ABSENT = (2, 7)


def kit_track(schema: Schema, *, rows: int = 12, seed: int = 0) -> Track:
    """``rows`` rows of one entity following ``schema``: random values of each field's dtype
    and shape, a media reference per present row, some tags; absent at :data:`ABSENT`."""
    rng = np.random.default_rng(seed)
    present = np.ones(rows, bool)
    present[[r for r in ABSENT if r < rows]] = False
    values = {}
    for name, field in schema.all_fields().items():
        dtype = np.dtype(field.numpy_dtype)
        if dtype.kind == "b":
            column = rng.integers(0, 2, (rows, *field.shape)).astype(bool)
        elif dtype.kind in "iu":
            column = rng.integers(0, 100, (rows, *field.shape)).astype(dtype)
        else:
            column = rng.normal(size=(rows, *field.shape)).astype(dtype)
        column[~present] = 0
        values[name] = column
    media = {name: np.array([f"media/{name}.npy#{i}" if p else None for i, p in enumerate(present)], dtype=object)
             for name in schema.media}
    tags: list[tuple[str, ...]] = [("gust",) if i % 3 == 0 else () for i in range(rows)]
    return Track("rec_0", "drone_1", np.arange(100, 100 + rows), present, values, media, tags,
                 float(schema.sample_hz), {"label": 7})


def frozen(value: Any) -> Any:
    """A record value in a form ``==`` compares exactly: numbers by their bits."""
    array = np.asarray(value)
    if array.dtype.kind in "biufc":
        return array.dtype.str, array.shape, array.tobytes()
    return value if isinstance(value, (str, tuple, type(None))) else repr(value)


def bits(value: Any, dtype: np.dtype) -> tuple:
    array = np.asarray(value).astype(dtype)
    return array.shape, array.tobytes()


class OutputEncoderContract(abc.ABC):
    registered_as: tuple[str, Mapping[str, Any]] | None = None

    @abc.abstractmethod
    def make_encoder(self) -> OutputEncoder:
        ...

    @abc.abstractmethod
    def modalities(self) -> dict[str, dict[str, Any]]:
        ...

    def schema(self) -> Schema:
        return Schema.from_dict(KIT_SCHEMA)

    def track(self) -> Track:
        return kit_track(self.schema())

    # ---- helpers ----------------------------------------------------------------------

    def spec(self) -> OutputSpec:
        """The encoder's modalities, beside one field modality (a spec needs one, and an
        encoder that serves none has something to sit next to)."""
        schema = self.schema()
        field, declared = next(iter(schema.all_fields().items()))
        modalities = {"kit_field": {"dtype": declared.dtype, "shape": list(declared.shape),
                                     "source": f"field:{field}"}, **self.modalities()}
        return OutputSpec.from_dict({"shard_length": len(self.track()), "short_policy": "keep",
                                     "presence_mask": True, "modalities": modalities})

    def hooks(self) -> dict[str, np.dtype]:
        """Each hook the encoder serves and the dtype its modality declares."""
        return {m.key: np.dtype(m.numpy_dtype) for m in self.spec().of_kind("encoder").values()}

    def present_records(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The present rows' records and the context, as the shard writer makes them."""
        track = self.track()
        ctx = {"schema": self.schema(), "track": {**track.meta, "source_id": track.source_id,
                                                  "entity_id": track.entity_id}}
        return [record for record in track.records() if record["_present"]], ctx

    def encoded(self, encoder: OutputEncoder, records: Sequence[Mapping[str, Any]],
                ctx: Mapping[str, Any]) -> dict[str, list[tuple]]:
        """Per hook, each record's value as (shape, bytes) in the declared dtype."""
        hooks = self.hooks()
        if not records:
            return {hook: [] for hook in hooks}
        values = encode_rows(encoder, records, ctx, sorted(hooks), where=lambda i: f"record {i}")
        return {hook: [bits(v, dtype) for v in values[hook]] for hook, dtype in hooks.items()}

    # ---- the values -------------------------------------------------------------------

    def test_is_an_output_encoder(self):
        assert isinstance(self.make_encoder(), OutputEncoder)

    def test_every_present_record_gets_each_hook_in_the_declared_shape_and_dtype(self):
        encoder, (records, ctx) = self.make_encoder(), self.present_records()
        modalities = {m.key: m for m in self.spec().of_kind("encoder").values()}
        for i, record in enumerate(records):
            out = encoder.timestep(record, ctx)
            assert isinstance(out, Mapping), f"record {i}: timestep returned {type(out).__name__}"
            for hook, modality in modalities.items():
                assert hook in out, f"record {i}: no {hook!r} in {sorted(out)}"
                value = np.asarray(out[hook])
                assert value.shape == modality.shape, (hook, value.shape, modality.shape)
                assert np.can_cast(value.dtype, modality.numpy_dtype, casting="same_kind"), (
                    f"{hook!r}: {value.dtype} values, which {modality.dtype} cannot hold without changing kind")
                if np.dtype(modality.numpy_dtype).kind in "iub":  # an integer cast wraps silently
                    assert np.array_equal(value.astype(modality.numpy_dtype), value), (
                        f"{hook!r}: {value!r} is out of range for {modality.dtype}")

    def test_encode_batch_agrees_with_timestep(self):
        encoder, (records, ctx) = self.make_encoder(), self.present_records()
        batch = getattr(encoder, "encode_batch", None)
        if not callable(batch):
            pytest.skip(f"{type(encoder).__name__} has no encode_batch: the writer calls timestep per record")
        out = batch(list(records), ctx)
        for hook, dtype in self.hooks().items():
            assert len(out[hook]) == len(records), hook
            one_by_one = [bits(encoder.timestep(record, ctx)[hook], dtype) for record in records]
            assert [bits(value, dtype) for value in out[hook]] == one_by_one, hook

    def test_a_records_values_depend_on_that_record_alone(self):
        encoder, (records, ctx) = self.make_encoder(), self.present_records()
        whole = self.encoded(encoder, records, ctx)
        singles = [self.encoded(encoder, [record], ctx) for record in records]
        backwards = self.encoded(encoder, records[::-1], ctx)
        halves = [self.encoded(encoder, part, ctx) for part in (records[: len(records) // 2],
                                                                records[len(records) // 2:])]
        for hook in self.hooks():
            assert [single[hook][0] for single in singles] == whole[hook], hook
            assert backwards[hook][::-1] == whole[hook], hook
            assert halves[0][hook] + halves[1][hook] == whole[hook], hook

    def test_the_records_are_not_changed(self):
        encoder, (records, ctx) = self.make_encoder(), self.present_records()
        before = copy.deepcopy(records)
        self.encoded(encoder, records, ctx)
        for record in records:
            encoder.timestep(record, ctx)
        assert [{key: frozen(value) for key, value in record.items()} for record in records] == [
            {key: frozen(value) for key, value in record.items()} for record in before]

    # ---- rebuilding -------------------------------------------------------------------

    def test_a_second_or_pickled_encoder_gives_the_same_values_and_fingerprint(self):
        records, ctx = self.present_records()
        first, second = self.make_encoder(), self.make_encoder()
        assert code_fingerprint(first) == code_fingerprint(second)
        copied = pickle.loads(pickle.dumps(first))
        want = self.encoded(first, records, ctx)
        assert self.encoded(second, records, ctx) == want
        assert self.encoded(copied, records, ctx) == want
        assert code_fingerprint(first) == code_fingerprint(second), "using the encoder changed its fingerprint"

    def test_rebuilt_by_its_registered_name_it_gives_the_same_values(self):
        if self.registered_as is None:
            pytest.skip("registered_as is None: the encoder is not rebuilt by name")
        name, options = self.registered_as
        records, ctx = self.present_records()
        rebuilt = get_encoder(name, **options)
        assert type(rebuilt) is type(self.make_encoder())
        assert self.encoded(rebuilt, records, ctx) == self.encoded(self.make_encoder(), records, ctx)

    # ---- through the writer -----------------------------------------------------------

    def test_the_writers_shard_holds_the_values_on_present_rows_and_zeros_elsewhere(self):
        track, spec, encoder = self.track(), self.spec(), self.make_encoder()
        records, ctx = self.present_records()
        want = self.encoded(encoder, records, ctx)
        shard = assemble_shard(track, 0, len(track), spec, schema=self.schema(), encoder=self.make_encoder())
        assert shard.present is not None and np.array_equal(shard.present, track.present)
        rows = np.flatnonzero(track.present)
        for name, modality in spec.of_kind("encoder").items():
            column = shard.arrays[name]
            assert column.dtype == modality.numpy_dtype and column.shape == (len(track), *modality.shape)
            assert [bits(column[row], column.dtype) for row in rows] == want[modality.key], name
            assert not column[~track.present].any(), f"{name}: absent rows must stay zero"


__all__ = ["ABSENT", "KIT_SCHEMA", "OutputEncoderContract", "kit_track"]
