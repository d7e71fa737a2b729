"""The output encoder contract (:class:`kuration.testing.OutputEncoderContract`) over the
built-in passthrough encoder (it serves no hook), the test suite's tick-parity encoder that
write workers run, and a record-by-record and a batch encoder over the drone track."""

from __future__ import annotations

from kuration.output.encoders import PassthroughEncoder, register_encoder
from kuration.testing import OutputEncoderContract
from tests.output.drone_track import SCHEMA, BatchEncoder, StepEncoder, make_track
from tests.output.write_worker_helpers import TriggeredEncoder


class TestPassthroughEncoder(OutputEncoderContract):
    registered_as = ("passthrough", {})

    def make_encoder(self):
        return PassthroughEncoder()

    def modalities(self):
        return {}


TRIGGER = {"trigger": "/nonexistent/kuration-trigger", "source": "rec_0", "mode": "raise"}
register_encoder("kit-tick-parity", TriggeredEncoder)


class TestTriggeredEncoder(OutputEncoderContract):
    """Never triggered here: its trigger file does not exist."""

    registered_as = ("kit-tick-parity", TRIGGER)

    def make_encoder(self):
        return TriggeredEncoder(**TRIGGER)

    def modalities(self):
        return {"parity": {"dtype": "int64", "shape": [], "source": "encoder:tick_parity"}}


class TestStepEncoder(OutputEncoderContract):
    def make_encoder(self):
        return StepEncoder()

    def modalities(self):
        return {"act": {"dtype": "int64", "shape": [2], "source": "encoder:act"}}

    def schema(self):
        return SCHEMA

    def track(self):
        return make_track(n=9, absent=(2, 5))


class TestBatchEncoder(TestStepEncoder):
    def make_encoder(self):
        return BatchEncoder()
