"""Shard containers: the :class:`ShardContainer` protocol and its four implementations.

``npz`` (the tensor default) and ``json`` (human-readable) need nothing beyond numpy;
``hdf5`` needs h5py (``kuration[array]``) and ``parquet`` pyarrow (``kuration[parquet]``),
both imported only when a shard is written or read. All four store the same thing, each
modality as ``(rows, *shape)`` plus ``_present`` and ``_n_steps``, and read it back to the
declared dtypes bit-exactly (JSON excepted only for NaN sign/payload bits). Pick one by the
name ``OutputSpec.container`` holds with :func:`get_container`.
"""

from __future__ import annotations

from kuration.output.containers._common import MissingDependencyError
from kuration.output.containers.hdf5_container import Hdf5Container
from kuration.output.containers.json_container import JsonContainer
from kuration.output.containers.npz_container import NpzContainer
from kuration.output.containers.parquet_container import ParquetContainer
from kuration.output.containers.protocol import ShardArrays, ShardContainer, ShardFormatError, ShardStream
from kuration.output.spec import OutputSpecError

#: Every container by the name ``OutputSpec.container`` uses, in ``spec.CONTAINERS`` order.
CONTAINER_TYPES: dict[str, type[ShardContainer]] = {
    "npz": NpzContainer,
    "json": JsonContainer,
    "hdf5": Hdf5Container,
    "parquet": ParquetContainer,
}


def get_container(name: str) -> ShardContainer:
    """A container by name (``npz``, ``json``, ``hdf5`` or ``parquet``)."""
    try:
        container_type = CONTAINER_TYPES[name]
    except (KeyError, TypeError):
        raise OutputSpecError(
            f"output.container: unknown shard container {name!r}; valid containers are {list(CONTAINER_TYPES)}"
        ) from None
    return container_type()


__all__ = [
    "CONTAINER_TYPES", "Hdf5Container", "JsonContainer", "MissingDependencyError", "NpzContainer", "ParquetContainer",
    "ShardArrays", "ShardContainer", "ShardFormatError", "ShardStream", "get_container",
]
