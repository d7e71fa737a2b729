"""The write side: declared output specs, encoders, shard containers and the writers.

:class:`OutputSpec` says what a timestep holds; an :class:`OutputEncoder` computes the
domain-specific parts; the containers (``npz``, ``json``, ``hdf5``, ``parquet``) store a
shard; :func:`write_track` writes one track's shards. The dataset writer and its commit
protocol build on these.
"""

from typing import TYPE_CHECKING

from kuration.lazy_exports import type_checking_exports
# eager: the name is also a module of this package (kuration.lazy_exports says why)
from kuration.output.write_track import write_track

if TYPE_CHECKING:
    from kuration.output.encoders import EncoderError, OutputEncoder, PassthroughEncoder, get_encoder, register_encoder
    from kuration.output.shard_assembly import MissingValueError, assemble_shard
    from kuration.output.spec import CONTAINERS, Modality, OutputSpec, OutputSpecError

__getattr__ = type_checking_exports(__name__, __file__)

__all__ = [
    "CONTAINERS", "EncoderError", "MissingValueError", "Modality", "OutputEncoder", "OutputSpec", "OutputSpecError",
    "PassthroughEncoder", "assemble_shard", "get_encoder", "register_encoder", "write_track",
]
