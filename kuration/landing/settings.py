"""Curation settings: the schema, strategy and segmenter a scoring run uses, from files.

Teams keep ``schema.json`` and ``strategy.json`` next to their data (or anywhere fsspec
reaches); the segmenter is a window and a stride. ``load_curation_settings`` reads and
validates all three together, so a typo fails before any source is read.

The files are read strictly (:mod:`kuration.canonical.strict_json`): duplicate keys, NaN/Infinity,
numbers beyond the float or int64 range and nesting deeper than 64 levels are refused. Every
error names the file and is the file's own class (:class:`SchemaError` for ``schema.json``,
:class:`StrategyError`, :class:`OutputSpecError`), with the key it is about.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kuration import storage
from kuration.errors import KurationError
from kuration.output.spec import OutputSpec, OutputSpecError
from kuration.sources.schema import Schema, SchemaError
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy, StrategyError

T = TypeVar("T")


@dataclass(frozen=True)
class CurationSettings:
    schema: Schema
    strategy: Strategy
    segmenter: Segmenter


def declared(url: str | os.PathLike[str], data: Any, error: type[KurationError], build: Callable[[Any], T]) -> T:
    """``build(data)`` for the JSON ``data`` read from ``url``; its errors (which name the
    key) get the file's name."""
    try:
        return build(data)
    except error as exc:
        raise error(f"{os.fspath(url)}: {exc}") from None


def _load(url: str | os.PathLike[str], what: str, error: type[KurationError], build: Callable[[Any], T]) -> T:
    """``build`` of the object in ``url`` (:func:`declared`)."""
    return declared(url, storage.read_json(url, what=what, error=error), error, build)


def load_schema(url: str | os.PathLike[str]) -> Schema:
    """``schema.json`` alone: what a recording's ticks hold (:class:`SchemaError` names the file)."""
    return _load(url, "schema", SchemaError, Schema.from_dict)


def load_output_spec(url: str | os.PathLike[str], schema: Schema) -> OutputSpec:
    """``output_spec.json``: what each timestep of a training shard holds, checked against ``schema``."""
    return _load(url, "output spec", OutputSpecError, lambda data: OutputSpec.from_dict(data).validate_against(schema))


def load_curation_settings(
    schema_url: str | os.PathLike[str],
    strategy_url: str | os.PathLike[str],
    *,
    window: float,
    stride: float,
    unit: str = "seconds",
) -> CurationSettings:
    schema = load_schema(schema_url)
    strategy = _load(strategy_url, "strategy", StrategyError,
                     lambda data: Strategy.from_dict(data).validate_against(schema))
    segmenter = Segmenter(window, stride, unit=unit, sample_hz=schema.sample_hz)
    return CurationSettings(schema, strategy, segmenter)
