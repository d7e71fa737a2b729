"""``OutputEncoder``: the domain seam, where application code turns records into tensors.

An encoder serves the spec's ``encoder:<hook>`` modalities. It returns, per timestep, a
mapping from hook name to a value of the modality's shape::

    class FrameEncoder:
        def timestep(self, record, ctx):           # ctx = {"schema": ..., "track": {...meta, source_id, entity_id}}
            return {"frame": decode_my_frame(record)}

        def encode_batch(self, records, ctx):      # optional, preferred when present
            return {"frame": decode_many(records)}  # arrays lead with len(records)

The writer calls it only for timesteps at which the entity is present; absent rows are
zero-filled and masked by ``_present``. A hook missing from what the encoder returns is an
error naming the source, entity and row, never a silent zero.

Encoders are registered by name (:func:`register_encoder`), so a worker process can rebuild
one from ``(name, options)`` instead of unpickling an object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kuration.errors import OutputError


class EncoderError(OutputError, ValueError):
    """An encoder is unknown, or returned something its modalities cannot hold."""


@runtime_checkable
class OutputEncoder(Protocol):
    def timestep(self, record: Mapping[str, Any], ctx: Mapping[str, Any]) -> Mapping[str, Any]: ...


class PassthroughEncoder:
    """The default: serves no ``encoder:`` modality (every modality comes from fields,
    segments or media)."""

    def timestep(self, record: Mapping[str, Any], ctx: Mapping[str, Any]) -> Mapping[str, Any]:
        return {}

    def __repr__(self) -> str:
        return "PassthroughEncoder()"


_ENCODERS: dict[str, Callable[..., OutputEncoder]] = {"passthrough": PassthroughEncoder}


def register_encoder(name: str, factory: Callable[..., OutputEncoder]) -> None:
    """Register ``factory`` under ``name``; :func:`get_encoder` calls it with the options."""
    if not isinstance(name, str) or not name:
        raise EncoderError(f"register_encoder: name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise EncoderError(f"register_encoder: factory for {name!r} must be callable, got {factory!r}")
    _ENCODERS[name] = factory


def get_encoder(name: str, **options: Any) -> OutputEncoder:
    if name not in _ENCODERS:
        raise EncoderError(
            f"no encoder named {name!r}; registered: {sorted(_ENCODERS)}. Call "
            "kuration.output.register_encoder(name, factory) first (in every worker process)."
        )
    encoder = _ENCODERS[name](**options)
    if not isinstance(encoder, OutputEncoder):
        raise EncoderError(f"encoder {name!r}: its factory returned {encoder!r}, which has no timestep(record, ctx)")
    return encoder


def encode_rows(
    encoder: OutputEncoder, records: Sequence[Mapping[str, Any]], ctx: Mapping[str, Any], hooks: Sequence[str],
    *, where: Callable[[int], str],
) -> dict[str, list[Any] | np.ndarray]:
    """Per hook, one value per record: through ``encode_batch`` when the encoder has it,
    else ``timestep`` per record. ``where(i)`` describes record ``i`` for error messages."""
    batch = getattr(encoder, "encode_batch", None)
    if callable(batch):
        out = batch(list(records), ctx)
        if not isinstance(out, Mapping):
            raise EncoderError(f"{type(encoder).__name__}.encode_batch returned {type(out).__name__}, not a mapping of "
                               "hook -> array")
        result: dict[str, list[Any] | np.ndarray] = {}
        for hook in hooks:
            if hook not in out:
                raise EncoderError(
                    f"{type(encoder).__name__}.encode_batch returned no {hook!r} for {where(0)} .. "
                    f"{where(len(records) - 1)}; it returned {sorted(out)}"
                )
            values = out[hook]
            if len(values) != len(records):
                raise EncoderError(
                    f"{type(encoder).__name__}.encode_batch: {hook!r} has {len(values)} values for {len(records)} "
                    f"records ({where(0)} ..); arrays must lead with len(records)"
                )
            result[hook] = values
        return result
    per_record: dict[str, list[Any]] = {hook: [] for hook in hooks}
    for i, record in enumerate(records):
        out = encoder.timestep(record, ctx)
        for hook in hooks:
            if out is None or hook not in out:
                got = sorted(out) if isinstance(out, Mapping) else out
                raise EncoderError(f"{type(encoder).__name__}.timestep returned no {hook!r} for {where(i)}; it "
                                   f"returned {got}")
            per_record[hook].append(out[hook])
    return dict(per_record)


__all__ = ["EncoderError", "OutputEncoder", "PassthroughEncoder", "encode_rows", "get_encoder", "register_encoder"]
