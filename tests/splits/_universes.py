"""Shared helpers for the split tests: small universes, a counting attribute loader, and a
brute-force reference resolver.

The reference resolver is written independently of ``kuration.splits.resolve``: it walks
plain lists of ``SampleRef`` the slow, obvious way, following the Cuvis.AI semantics
(``cuvis_ai_core.data.selectors.resolve_selectors``). Property tests compare the real,
columnar resolver against it.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Mapping, Sequence

from kuration.errors import SelectorError
from kuration.splits import PreloadedAttributes, SampleAttributes, SampleRef, Selector, Universe
from kuration.splits.selectors import SelectorKind, expand_ids

#: COCO-style category vocabulary used by the test universes.
NAME_TO_ID = {"background": 0, "scratch": 1, "dent": 2}


class CountingLoader:
    """An ``AttributeLoader`` that records every ``load`` call and delegates.

    ``by_uid`` maps a uid to its ``(tags, category_ids)``; rows are looked up by uid, so
    the loader is correct whatever order the universe was built in.
    """

    def __init__(
        self,
        by_uid: Mapping[str, tuple[Sequence[str], Sequence[int]]],
        *,
        name_to_id: Mapping[str, int] | None = NAME_TO_ID,
    ) -> None:
        self.by_uid = dict(by_uid)
        self.name_to_id = name_to_id
        self.calls: list[frozenset[str]] = []
        self.scopes: list[frozenset[int] | None] = []

    def load(self, universe: Universe, required: frozenset[str], *, sources=None) -> SampleAttributes:
        self.calls.append(frozenset(required))
        self.scopes.append(None if sources is None else frozenset(sources))
        return PreloadedAttributes(self.by_uid, name_to_id=self.name_to_id).load(universe, required, sources=sources)


def sort_refs(refs: Sequence[SampleRef]) -> list[SampleRef]:
    """Canonical order: ``(source, index)`` with sources compared as posix strings."""
    return sorted(refs, key=lambda r: (r.source, r.index))


def universe_from_refs(refs: Sequence[SampleRef], *, name_to_id=NAME_TO_ID, counting: bool = False):
    """A canonically sorted ``Universe`` whose attributes come from the refs' tags / categories.

    Built with ``from_columns`` (which sorts) and a uid-keyed loader, so the input order of
    ``refs`` does not matter. Returns ``(universe, loader)``.
    """
    loader = CountingLoader({r.uid: (r.tags, r.category_ids) for r in refs}, name_to_id=name_to_id)
    universe = Universe.from_columns(
        [r.source for r in refs],
        [r.index for r in refs],
        group=[r.group for r in refs],
        annotation=[r.annotation for r in refs],
        attributes=loader,
    )
    return universe, loader


# -- the brute-force reference ------------------------------------------------------


def _norm(path: str) -> str:
    windowsish = bool(re.match(r"[A-Za-z]:[/\\]", path)) or "\\" in path
    normalized = posixpath.normpath(path.replace("\\", "/"))
    return normalized.casefold() if windowsish else normalized


def _same_source(selector_path: str, source: str) -> bool:
    """Cuvis.AI's rule: both sides normalized on their own, so a Windows-looking selector
    path (case-folded) names only a posix source whose own case is already folded."""
    return _norm(selector_path) == _norm(source)


def _dedup(refs: Sequence[SampleRef]) -> list[SampleRef]:
    seen: set[str] = set()
    out = []
    for r in refs:
        if r.uid not in seen:
            seen.add(r.uid)
            out.append(r)
    return out


def ref_resolve_one(sel: Selector, refs: Sequence[SampleRef], name_to_id: Mapping[str, int] | None) -> list[SampleRef]:
    kind = sel.kind
    if kind is SelectorKind.ALL:
        return list(refs)
    if kind is SelectorKind.FILES:
        return [r for r in refs if any(_same_source(p, r.source) for p in sel.paths)]
    if kind is SelectorKind.FILE_INDICES:
        wanted = set(expand_ids(sel.ids))
        return [r for r in refs if _same_source(sel.source, r.source) and r.index in wanted]
    if kind is SelectorKind.DIR_INDICES:
        out = []
        for p in expand_ids(sel.ids):
            if p >= len(refs):
                raise SelectorError(f"dir_indices position {p} out of range")
            out.append(refs[p])
        return _dedup(out)
    if kind is SelectorKind.STEMS:
        return [r for r in refs if r.stem in set(sel.stems)]
    if kind is SelectorKind.GLOB:
        return [r for r in refs if fnmatch.fnmatchcase(r.stem, sel.pattern)
                or fnmatch.fnmatchcase(r.source, sel.pattern)]
    if kind is SelectorKind.TAG:
        return [r for r in refs if set(r.tags) & set(sel.any_of)]
    if kind is SelectorKind.CATEGORIES:
        if not name_to_id or any(n not in name_to_id for n in sel.any_of):
            raise SelectorError("unknown category")
        ids = {name_to_id[n] for n in sel.any_of}
        return [r for r in refs if set(r.category_ids) & ids]
    parts = [ref_resolve_one(child, refs, name_to_id) for child in sel.of]
    if kind is SelectorKind.UNION:
        return _dedup([r for part in parts for r in part])
    first = _dedup(parts[0])
    rest = [{r.uid for r in part} for part in parts[1:]]
    if kind is SelectorKind.EXCEPT:
        return [r for r in first if not any(r.uid in s for s in rest)]
    return [r for r in first if all(r.uid in s for s in rest)]


def ref_resolve(selectors: Sequence[Selector], refs: Sequence[SampleRef], name_to_id=NAME_TO_ID) -> list[SampleRef]:
    """Stage semantics: union in selector order, first occurrence kept; zero-match raises."""
    out: list[SampleRef] = []
    for sel in selectors:
        matched = ref_resolve_one(sel, refs, name_to_id)
        if not matched:
            raise SelectorError(f"selector {sel.describe()} matched 0 samples")
        out.extend(matched)
    return _dedup(out)


def uids(refs: Sequence[SampleRef]) -> list[str]:
    return [r.uid for r in refs]
