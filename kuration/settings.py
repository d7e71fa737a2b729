"""Curation settings: the schema, strategy and segmenter a scoring run uses, from files.

Teams keep ``schema.json`` and ``strategy.json`` next to their data (or anywhere fsspec
reaches); the segmenter is a window and a stride. ``load_curation_settings`` reads and
validates all three together, so a typo fails before any source is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from kuration import storage
from kuration.errors import KurationError
from kuration.schema import Schema
from kuration.segments import Segmenter
from kuration.strategy import Strategy


@dataclass(frozen=True)
class CurationSettings:
    schema: Schema
    strategy: Strategy
    segmenter: Segmenter


def read_json(url: str | os.PathLike[str], *, what: str) -> dict:
    where = os.fspath(url)
    if not storage.exists(where):
        raise KurationError(f"{what} not found: {where}")
    try:
        data = json.loads(storage.read_bytes(where))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise KurationError(f"{where}: {what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise KurationError(f"{where}: {what} must be a JSON object")
    return data


def load_output_spec(url: str | os.PathLike[str], schema: Schema):
    """``output_spec.json``: what each timestep of a training shard holds, checked against ``schema``."""
    from kuration.output.spec import OutputSpec, OutputSpecError

    try:
        return OutputSpec.from_dict(read_json(url, what="output spec")).validate_against(schema)
    except OutputSpecError as exc:
        raise OutputSpecError(f"{os.fspath(url)}: {exc}") from None


def load_curation_settings(
    schema_url: str | os.PathLike[str],
    strategy_url: str | os.PathLike[str],
    *,
    window: float,
    stride: float,
    unit: str = "seconds",
) -> CurationSettings:
    schema = Schema.from_dict(read_json(schema_url, what="schema"))
    strategy = Strategy.from_dict(read_json(strategy_url, what="strategy"))
    strategy.validate_against(schema)
    segmenter = Segmenter(window, stride, unit=unit, sample_hz=schema.sample_hz)
    return CurationSettings(schema, strategy, segmenter)
