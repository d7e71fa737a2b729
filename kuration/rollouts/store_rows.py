"""What a rollout store's consumers read of it: the :class:`StoreRows` protocol.

Lineage (:mod:`kuration.rollouts.lineage`), packing (:mod:`kuration.rollouts.packing`) and
the typed projections (:mod:`kuration.rollouts.read_model`) read a store only through this
surface, and :class:`~kuration.rollouts.reader.RolloutZarrStoreReader` implements it. So the
reader is the one place that opens a store, checks its root attrs and array metadata and
turns zarr's errors into :class:`~kuration.errors.RolloutStoreError`; its consumers depend
on this protocol, not on the reader, and the reader can import them without a cycle.

What it does not do: validate a store's contracts (linkage, masks, digests), which is
:func:`kuration.rollouts.validation.validate_rollout_zarr_store`.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class StoreRows(Protocol):
    """Read-only access to one opened, schema-checked rollout store.

    Every method raises :class:`~kuration.errors.RolloutStoreError` for a store it cannot
    trust (naming the store and the array or file) and
    :class:`~kuration.errors.RolloutInputError` for a bad argument."""

    @property
    def store_dir(self) -> str:
        """The local folder the store is read from."""
        ...

    @property
    def attrs(self) -> dict[str, Any]:
        """A copy of the checked root attrs (schema, config, counts, widths, reason codes,
        ``manifest_sha256`` and, for a packed store, ``packing``)."""
        ...

    @property
    def counts(self) -> dict[str, int]:
        """Rows per factual table, from the root attrs."""
        ...

    def vocabulary(self, table: str, name: str) -> list[str]:
        """The strings the code column ``name`` of ``table`` decodes to."""
        ...

    def has_array(self, path: str) -> bool:
        """Whether the array at ``path`` is stored (an absent optional one reads as its
        sentinel)."""
        ...

    def array(self, path: str) -> np.ndarray:
        """The whole array at ``path``, checked against the schema."""
        ...

    def array_rows(self, path: str, positions: Any) -> np.ndarray:
        """Only the first-axis rows ``positions`` of the array at ``path``."""
        ...

    def manifest(self) -> dict[str, Any]:
        """``{"attrs": ..., "sidecar": ..., "sidecar_sha256": ...}``: the root attrs, the
        sidecar manifest read as strict JSON and its canonical digest (whether that matches
        ``attrs["manifest_sha256"]`` is for the caller to judge)."""
        ...


__all__ = ["StoreRows"]
