"""``Pipeline``: the seed's fluent shortcut, ``pipeline.sample(hours=...).review(path="out/", ...)``.

It only gathers keyword arguments and hands them on: :meth:`Pipeline.write` is
:func:`kuration.output.write_dataset.write_dataset` and :meth:`Pipeline.review` is
:func:`kuration.budget.hours_selection_review` of that write's result. There is no second
implementation of scoring, planning, writing or reviewing here, and no option the writer
does not take: every option name is checked against ``write_dataset``'s signature, and an
unknown one is an ``InputError`` listing the valid ones.

    from kuration import Pipeline

    pipeline = Pipeline(adapter=adapter, schema=settings.schema, strategy=settings.strategy,
                        segmenter=settings.segmenter)
    review = pipeline.sample(hours={"train": 10, "test": 1}, span_seconds=60).review(path="out/", spec=spec)
    print(review.render())            # the dataset is committed at out/, carrying its plan

Each step returns a new, frozen ``Pipeline``, so one prefix can be shared by several runs.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kuration.budget.review import SelectionReview, hours_selection_review
from kuration.errors import InputError, shown
from kuration.output.write_dataset import DatasetWriteResult, write_dataset
from kuration.scoring import Segmenter, Strategy
from kuration.sources.protocol import SourceAdapter
from kuration.sources.schema import Schema

#: What the pipeline itself supplies; every other keyword of ``write_dataset`` is an option.
_SUPPLIED = ("out", "schema", "adapter", "strategy", "segmenter")
OPTIONS = tuple(name for name in inspect.signature(write_dataset).parameters if name not in _SUPPLIED)
_HOURS = {"train": "train_hours", "val": "val_hours", "test": "test_hours"}


def _checked(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(f"Pipeline.{where}: unknown option(s) {unknown}; write_dataset takes {list(OPTIONS)}")
    return dict(options)


@dataclass(frozen=True)
class Pipeline:
    adapter: SourceAdapter
    schema: Schema
    strategy: Strategy
    segmenter: Segmenter
    #: Keyword arguments for ``write_dataset`` gathered so far.
    options: Mapping[str, Any] = field(default_factory=dict)

    def sample(self, *, hours: float | Mapping[str, float], **options: Any) -> Pipeline:
        """Budget the selection: ``hours`` is the train budget, or a mapping of split name
        (train, val, test) to hours; ``options`` are further ``write_dataset`` options
        (``span_seconds``, ``seed``, ``split_assignments``, ...)."""
        budget: dict[str, Any]
        if isinstance(hours, Mapping):
            unknown = sorted(set(hours) - set(_HOURS), key=str)
            if unknown or not hours:
                raise InputError(f"Pipeline.sample: hours must name splits among {list(_HOURS)}, got {shown(hours)}")
            budget = {_HOURS[name]: value for name, value in hours.items()}
        else:
            budget = {"train_hours": hours}
        return replace(self, options={**self.options, **_checked(options, "sample"), **budget})

    def with_options(self, **options: Any) -> Pipeline:
        """More ``write_dataset`` options (``workers``, ``executor``, ``memory_budget``, ...)."""
        return replace(self, options={**self.options, **_checked(options, "with_options")})

    def write(self, path: str | os.PathLike[str], **output_options: Any) -> DatasetWriteResult:
        """``write_dataset(path, ...)`` with everything gathered, plus ``output_options``
        (``spec`` is required by the writer; ``resume``, ``force``, ...)."""
        if not any(key in self.options for key in _HOURS.values()):
            raise InputError("Pipeline.write: no budget yet; call .sample(hours=...) first")
        options = {**self.options, **_checked(output_options, "write")}
        return write_dataset(path, schema=self.schema, adapter=self.adapter, strategy=self.strategy,
                             segmenter=self.segmenter, **options)

    def review(self, *, path: str | os.PathLike[str], max_examples: int = 5,
               **output_options: Any) -> SelectionReview:
        """Write the dataset at ``path`` (as :meth:`write`) and explain its selection:
        ``hours_selection_review`` of the write's result."""
        return hours_selection_review(self.write(path, **output_options), max_examples=max_examples)


__all__ = ["OPTIONS", "Pipeline"]
