"""Seed 000's PyTorch wrapper, ``from kuration.core.torch import ShardDataset`` (the
``[torch]`` extra): :class:`ShardDataset` and :func:`pad_collate`, implemented in
:mod:`kuration.torch` over :mod:`kuration.core.loaders`."""

from kuration.torch import META, ShardDataset, pad_collate

__all__ = ["META", "ShardDataset", "pad_collate"]
