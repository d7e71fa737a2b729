"""Shard assembly: routing per source kind, presence, padding, and missing values that must raise."""

import numpy as np
import pytest

from kuration.output import EncoderError, MissingValueError, OutputSpec, assemble_shard, get_encoder, register_encoder
from kuration.output.encoders import PassthroughEncoder
from tests.output.drone_track import SCHEMA, BatchEncoder, FakeMedia, StepEncoder, make_track


def _spec(policy="keep", length=4, presence=True, **modalities):
    mods = modalities or {"pos": {"dtype": "float32", "shape": [3], "source": "field:pos"}}
    return OutputSpec.from_dict({"shard_length": length, "short_policy": policy, "presence_mask": presence,
                                 "modalities": mods})


def test_fields_are_routed_and_absent_rows_are_zero_and_masked():
    track = make_track()
    shard = assemble_shard(track, 0, 4, _spec(), schema=SCHEMA)
    assert shard.n_steps == 4 and shard.rows == 4
    assert shard.present.tolist() == [True, True, False, True]
    np.testing.assert_array_equal(shard.arrays["pos"][[0, 1, 3]], track.values["pos"][[0, 1, 3]])
    assert not shard.arrays["pos"][2].any()


def test_pad_fills_to_shard_length_with_masked_zero_rows():
    shard = assemble_shard(make_track(), 4, 6, _spec("pad"), schema=SCHEMA)
    assert (shard.n_steps, shard.rows) == (2, 4)
    assert shard.present.tolist() == [True, True, False, False]
    assert not shard.arrays["pos"][2:].any() and shard.arrays["pos"].dtype == np.float32


def test_without_a_presence_mask_there_is_none():
    assert assemble_shard(make_track(), 0, 4, _spec(presence=False), schema=SCHEMA).present is None


def test_globals_and_same_kind_casts():
    spec = _spec(wind={"dtype": "float64", "shape": [], "source": "field:wind"},
                 battery={"dtype": "float16", "shape": [], "source": "field:battery"})
    shard = assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA)
    assert shard.arrays["wind"].dtype == np.float64 and shard.arrays["wind"][[0, 1, 3]].tolist() == [3.5] * 3
    assert shard.arrays["battery"].dtype == np.float16


def test_segment_features_repeat_on_present_rows():
    spec = _spec(label={"dtype": "int64", "shape": [], "source": "segment:label"})
    shard = assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA)
    assert shard.arrays["label"].tolist() == [7, 7, 0, 7]


def test_a_whole_float_segment_feature_is_an_integer_label():
    spec = _spec(label={"dtype": "int64", "shape": [], "source": "segment:label"})
    shard = assemble_shard(make_track(meta={"label": 7.0}), 0, 4, spec, schema=SCHEMA)
    assert shard.arrays["label"].dtype == np.int64 and shard.arrays["label"].tolist() == [7, 7, 0, 7]


def test_a_missing_segment_feature_raises_with_context():
    spec = _spec(label={"dtype": "int64", "shape": [], "source": "segment:label"})
    with pytest.raises(MissingValueError, match=r"no segment feature 'label' in the span's meta for source 'src/a', "
                                                r"entity str:'drone_1'; it has \['other'\]"):
        assemble_shard(make_track(meta={"other": 1}), 0, 4, spec, schema=SCHEMA)


def test_a_nan_segment_feature_cannot_become_an_integer():
    spec = _spec(label={"dtype": "int64", "shape": [], "source": "segment:label"})
    with pytest.raises(MissingValueError, match=r"segment feature 'label' is nan at source 'src/a', entity "
                                                r"str:'drone_1', which int64 cannot hold: it takes whole values"):
        assemble_shard(make_track(meta={"label": float("nan")}), 0, 4, spec, schema=SCHEMA)


def test_media_is_decoded_once_per_shard_for_present_rows_only():
    media = FakeMedia()
    spec = _spec(frame={"dtype": "uint8", "shape": [4, 5, 3], "source": "media:frame"})
    shard = assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA, media=media)
    assert media.calls == [["frames.npy#0", "frames.npy#1", "frames.npy#3"]]
    assert [int(f[0, 0, 0]) for f in shard.arrays["frame"]] == [1, 2, 0, 4]


def test_a_present_row_without_a_media_reference_raises():
    track = make_track()
    track.media["frame"][1] = None
    spec = _spec(frame={"dtype": "uint8", "shape": [4, 5, 3], "source": "media:frame"})
    with pytest.raises(MissingValueError,
                       match=r"no 'frame' reference at source 'src/a', entity str:'drone_1', row 1 \(tick 11\)"):
        assemble_shard(track, 0, 4, spec, schema=SCHEMA, media=FakeMedia())
    with pytest.raises(MissingValueError, match="pass adapter="):
        assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA)


@pytest.mark.parametrize("encoder", [StepEncoder(), BatchEncoder()])
def test_encoder_hooks_fill_present_rows(encoder):
    spec = _spec(act={"dtype": "int64", "shape": [2], "source": "encoder:act"})
    shard = assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA, encoder=encoder)
    assert shard.arrays["act"].tolist() == [[0, 10], [1, 11], [0, 0], [3, 13]]


def test_encode_batch_is_preferred_over_timestep():
    BatchEncoder.calls = 0
    spec = _spec(act={"dtype": "int64", "shape": [2], "source": "encoder:act"})
    assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA, encoder=BatchEncoder())
    assert BatchEncoder.calls == 1


def test_a_hook_the_encoder_does_not_return_raises_naming_the_row():
    spec = _spec(act={"dtype": "int64", "shape": [2], "source": "encoder:act"})
    with pytest.raises(EncoderError, match=r"PassthroughEncoder.timestep returned no 'act' for source 'src/a', "
                                           r"entity str:'drone_1', row 0 \(tick 10\); it returned \[\]"):
        assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA, encoder=PassthroughEncoder())


def test_an_encoder_value_of_the_wrong_shape_raises():
    class Wrong:
        def timestep(self, record, ctx):
            return {"act": np.zeros(3)}
    spec = _spec(act={"dtype": "float64", "shape": [2], "source": "encoder:act"})
    with pytest.raises(MissingValueError, match=r"encoder hook 'act' has shape \[3\] per row, the spec declares \[2\]"):
        assemble_shard(make_track(), 0, 4, spec, schema=SCHEMA, encoder=Wrong())


def test_encoders_are_rebuilt_by_name():
    register_encoder("test-step", StepEncoder)
    assert isinstance(get_encoder("test-step"), StepEncoder)
    assert isinstance(get_encoder("passthrough"), PassthroughEncoder)
    with pytest.raises(EncoderError, match="no encoder named 'nope'"):
        get_encoder("nope")
    register_encoder("bad", lambda: object())
    with pytest.raises(EncoderError, match="has no timestep"):
        get_encoder("bad")


def test_a_shard_without_present_rows_never_calls_the_encoder():
    class Exploding:
        def timestep(self, record, ctx):
            raise AssertionError("called for an absent row")

        def encode_batch(self, records, ctx):
            raise AssertionError("called with no records")
    spec = _spec(act={"dtype": "int64", "shape": [2], "source": "encoder:act"})
    shard = assemble_shard(make_track(n=4, absent=(0, 1, 2, 3)), 0, 4, spec, schema=SCHEMA, encoder=Exploding())
    assert not shard.present.any() and not shard.arrays["act"].any()


def test_segment_features_are_written_canonical_but_fields_keep_their_bits():
    signed_nan = np.array([0xFFF8000000000001], np.uint64).view(np.float64)[0]
    track = make_track(meta={"zero": -0.0, "missing": signed_nan})
    track.values["battery"][0] = -0.0
    spec = _spec(zero={"dtype": "float32", "shape": [], "source": "segment:zero"},
                 missing={"dtype": "float64", "shape": [], "source": "segment:missing"},
                 battery={"dtype": "float64", "shape": [], "source": "field:battery"})
    shard = assemble_shard(track, 0, 4, spec, schema=SCHEMA)
    assert (shard.arrays["zero"].view(np.uint32) == 0).all()
    assert (shard.arrays["missing"][[0, 1, 3]].view(np.uint64) == np.array([np.nan]).view(np.uint64)[0]).all()
    assert np.signbit(shard.arrays["battery"][0]), "a recorded -0.0 is the recording's value, written as it is"
