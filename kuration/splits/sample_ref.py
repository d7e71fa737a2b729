"""``SampleRef``: one addressable sample of the universe, and its identity.

A sample is one read position (``index``) within one logical ``source`` (a recording,
an episode file), or a whole file (``index=None``, as Cuvis.AI's disk-enumerated
modules make them). Its identity is ``uid = "source#index"``, or just ``source`` for a
whole-file sample, exactly as Cuvis.AI derives it; tags and category ids are metadata and
never part of identity, so populating them lazily cannot change which sample a ref is.
``group`` is the leakage-grouping key and defaults to the source.

Identity is derived, never given: ``uid=`` is accepted only when it equals the derived
uid (what a Cuvis.AI ``model_dump`` carries), and refused otherwise, because a universe
keyed on a free-form uid could not be written to ``universe.csv`` or reproduced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np

from kuration.errors import UniverseError, shown
from kuration.splits._bounds import MAX_INDEX, ItemsError, typed_items


def sample_uid(source: str, index: int | None) -> str:
    """A sample's identity: ``source#index``, or ``source`` for a whole-file sample."""
    return source if index is None else f"{source}#{index}"


def _items(values: object, kinds: tuple[type, ...], name: str, source: str) -> tuple:
    try:
        return typed_items(values, kinds)
    except ItemsError as exc:
        if not exc.wrong:
            raise UniverseError(f"SampleRef.{name} must be a list, got {shown(values)} for source {source!r}") from None
        wrong = [exc.items[i] for i in exc.wrong]
        raise UniverseError(f"SampleRef.{name} entries must be {kinds[0].__name__}s, got {shown(wrong)} for source "
                            f"{source!r}") from None


def posix_source(source: str) -> str:
    """Normalize a source id to posix separators, the form identities are compared in."""
    return str(source).replace("\\", "/")


def source_stem(source: str) -> str:
    """The filename stem of a source (``runs/day1/flight_03.parquet`` -> ``flight_03``).

    Exactly ``PurePosixPath(source).stem``, which is what Cuvis.AI matches ``stems`` and
    ``glob`` against, edge cases (``b.``, ``...``) included."""
    return PurePosixPath(posix_source(source)).stem


@dataclass(frozen=True, slots=True)
class SampleRef:
    """One sample of the universe.

    ``index=None`` makes a whole-file sample. ``materialized_path`` and ``format`` are
    where the sample physically lives and a provenance hint; like tags they are not
    identity. Raises :class:`~kuration.errors.UniverseError` on a bad field.
    """

    source: str
    index: int | None = None
    stem: str = ""
    annotation: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    category_ids: tuple[int, ...] = ()
    materialized_path: str | None = None
    format: str | None = None
    uid: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source:
            raise UniverseError(f"SampleRef.source must be a non-empty string, got {shown(self.source)}")
        source = posix_source(self.source)
        index = self.index
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_INDEX):
            raise UniverseError(
                f"SampleRef.index must be None (a whole-file sample) or an int in [0, 2**63 - 1], "
                f"got {shown(index)} for source {source!r}"
            )
        for name in ("stem", "annotation", "group", "materialized_path", "format"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise UniverseError(f"SampleRef.{name} must be a string, got {shown(value)} for source {source!r}")
        tags = _items(self.tags, (str,), "tags", source)
        category_ids = _items(self.category_ids, (int, np.integer), "category_ids", source)
        uid = sample_uid(source, index)
        if self.uid and self.uid not in (uid, sample_uid(self.source, index)):
            raise UniverseError(
                f"SampleRef.uid {shown(self.uid)} differs from the uid {uid!r} of source {source!r}, index {index!r}; "
                "identity is derived from (source, index) only. Drop uid=, or put the identity into source and index."
            )
        object.__setattr__(self, "source", source)
        if not self.stem:
            object.__setattr__(self, "stem", source_stem(source))
        if self.group is None or self.group == "":
            object.__setattr__(self, "group", source)
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "category_ids", tuple(int(c) for c in category_ids))
        object.__setattr__(self, "uid", uid)

    @classmethod
    def _from_trusted_columns(cls, columns: Mapping[str, Sequence]) -> list[SampleRef]:
        """Build many refs from values a :class:`Universe` already validated and normalized:
        ``columns`` holds one equally long list per field (every name in ``_FIELDS``).

        Skips ``__post_init__`` (which would re-normalize and re-check every field): this
        is what makes materializing hundreds of thousands of resolved samples affordable."""
        d = cls.__dict__
        s_source, s_index, s_stem, s_annotation, s_group = (d[f].__set__ for f in _FIELDS[:5])
        s_tags, s_category_ids, s_path, s_format, s_uid = (d[f].__set__ for f in _FIELDS[5:])
        new = object.__new__
        out: list[SampleRef] = []
        append = out.append
        # Unrolled on purpose: a loop over the ten setters per ref doubles the cost.
        for src, idx, st, ann, grp, tg, cat, mp, fmt, uid_ in zip(*(columns[name] for name in _FIELDS), strict=True):
            ref = new(cls)
            s_source(ref, src)
            s_index(ref, idx)
            s_stem(ref, st)
            s_annotation(ref, ann)
            s_group(ref, grp)
            s_tags(ref, tg)
            s_category_ids(ref, cat)
            s_path(ref, mp)
            s_format(ref, fmt)
            s_uid(ref, uid_)
            append(ref)
        return out


_FIELDS = ("source", "index", "stem", "annotation", "group", "tags", "category_ids", "materialized_path", "format",
           "uid")
