"""The dataset writer's errors, below both halves of the writer: the parent
(:mod:`kuration.output.write_dataset`, which re-exports them) and the write workers
(:mod:`kuration.output.write_workers`), so a worker raises the same error the parent
would."""

from __future__ import annotations

from kuration.errors import OutputError


class DatasetWriteError(OutputError, RuntimeError):
    """The dataset cannot be written as asked (the destination exists, the plan does not fit
    the spec, a planned span is not in its source any more, ...)."""


class DifferentRunError(DatasetWriteError):
    """``resume=True`` on a destination written by another run (spec, plan, sources or code
    differ): resuming would replace it, which only ``force=True`` may do."""


class EmptyPlanError(DatasetWriteError):
    """The budget plan gives the writer no shard to write (it admits nothing, or only spans
    shorter than one shard that the short policy drops): committing it would publish an
    empty dataset that every check passes. ``allow_empty=True`` writes one on purpose."""


class WriteWorkerError(DatasetWriteError):
    """With ``write_workers`` > 1, a shard could not be written in a worker process: the
    worker raised something that is not a Kuration error (the message names the source,
    the shard and the original exception), or a worker process died (the message names the
    sources in flight). Nothing is committed; ``resume=True`` finishes the write, keeping
    every shard finished so far, once the cause is fixed."""


__all__ = ["DatasetWriteError", "DifferentRunError", "EmptyPlanError", "WriteWorkerError"]
