"""``SampleRef``: one addressable sample of the universe, and its identity.

A sample is one read position (``index``) within one logical ``source`` (a recording,
an episode file). Its identity is ``uid = "source#index"``; tags and category ids are
metadata and never part of identity, so populating them lazily cannot change which
sample a ref is. ``group`` is the leakage-grouping key and defaults to the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath


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

    ``materialized_path`` and ``format`` are where the sample physically lives and a
    provenance hint; like tags they are not identity.
    """

    source: str
    index: int
    stem: str = ""
    annotation: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    category_ids: tuple[int, ...] = ()
    materialized_path: str | None = None
    format: str | None = None
    uid: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        source = posix_source(self.source)
        if not source:
            raise ValueError("SampleRef.source must be a non-empty string")
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise ValueError(
                f"SampleRef.index must be a non-negative int, got {self.index!r} for source {source!r}"
            )
        object.__setattr__(self, "source", source)
        if not self.stem:
            object.__setattr__(self, "stem", source_stem(source))
        if self.group is None or self.group == "":
            object.__setattr__(self, "group", source)
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "category_ids", tuple(int(c) for c in self.category_ids))
        object.__setattr__(self, "uid", f"{source}#{self.index}")

    @classmethod
    def _from_trusted_columns(
        cls,
        source: list[str],
        index: list[int],
        stem: list[str],
        annotation: list[str | None],
        group: list[str],
        tags: list[tuple[str, ...]],
        category_ids: list[tuple[int, ...]],
        materialized_path: list[str | None],
        format: list[str | None],
        uid: list[str],
    ) -> list[SampleRef]:
        """Build many refs from values a :class:`Universe` already validated and normalized.

        Skips ``__post_init__`` (which would re-normalize and re-check every field): this
        is what makes materializing hundreds of thousands of resolved samples affordable."""
        d = cls.__dict__
        s_source, s_index, s_stem, s_annotation, s_group = (d[f].__set__ for f in _FIELDS[:5])
        s_tags, s_category_ids, s_path, s_format, s_uid = (d[f].__set__ for f in _FIELDS[5:])
        new = object.__new__
        out = []
        append = out.append
        # Unrolled on purpose: a loop over the ten setters per ref doubles the cost.
        for src, idx, st, ann, grp, tg, cat, mp, fmt, uid_ in zip(
            source, index, stem, annotation, group, tags, category_ids, materialized_path, format, uid
        ):
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


_FIELDS = ("source", "index", "stem", "annotation", "group", "tags", "category_ids", "materialized_path", "format", "uid")
