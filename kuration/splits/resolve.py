"""Resolving selectors against a universe: the one resolver every caller goes through.

``resolve_selectors`` turns one stage's selector list into samples: each selector is
resolved to row positions, and the stage is their order-preserving union with
first-occurrence dedup on ``uid`` (the Cuvis.AI semantics). A top-level selector that
matches nothing raises, so a typo fails loudly instead of silently shrinking a split.
Inside a set operation an empty operand is meaningful (``except`` subtracts whatever is
there) and does not raise.

Positions, not ``SampleRef`` objects, flow through the algebra: each kind maps to numpy
operations over the universe's columns. Source-level kinds (``files``, ``stems``,
``glob``, ``file_indices``) look only at the distinct sources, never at every row.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kuration.errors import SelectorError
from kuration.splits.sample_ref import SampleRef
from kuration.splits.selectors import Selector, SelectorKind, expand_ids_array, required_attrs_of
from kuration.splits.universe import SampleRefs, Universe

logger = logging.getLogger(__name__)


def normalize_source_for_match(path: str) -> str:
    """How a selector's source and a universe source are compared (never identity).

    A ``splits.json`` authored on Windows must select the same files on a posix server:
    backslashes are separators, ``.`` / ``..`` collapse lexically, and Windows-looking
    paths (a drive letter or backslashes) compare case-insensitively.
    """
    normalized = posixpath.normpath(path.replace("\\", "/"))
    return normalized.casefold() if _windowsish(path) else normalized


def _windowsish(path: str) -> bool:
    return bool(re.match(r"[A-Za-z]:[/\\]", path)) or "\\" in path


class _Resolver:
    """Resolves selectors over one universe, caching the lookups they share."""

    def __init__(
        self, universe: Universe, name_to_id: Mapping[str, int] | None, load_together: frozenset[str] = frozenset()
    ) -> None:
        self.universe = universe
        #: Attributes to load in the same pass whenever a whole-universe load is needed.
        self._load_together = load_together
        self.n = len(universe)
        self._name_to_id = name_to_id
        self._norm_sources: dict[str, list[int]] | None = None
        self._folded_sources: dict[str, list[int]] = {}

    def source_codes_for(self, path: str) -> list[int]:
        if self._norm_sources is None:
            table: dict[str, list[int]] = {}
            folded: dict[str, list[int]] = {}
            for code, name in enumerate(self.universe.source_names):
                normalized = normalize_source_for_match(name)
                table.setdefault(normalized, []).append(code)
                folded.setdefault(normalized.casefold(), []).append(code)
            self._norm_sources, self._folded_sources = table, folded
        codes = self._norm_sources.get(normalize_source_for_match(path), [])
        if not codes and _windowsish(path):
            # Cuvis.AI folds the case of a Windows-looking selector path but not of the
            # posix universe source, so such a path never names a mixed-case source. We
            # keep that rule (a file must select the same samples in both tools) and say
            # how to write the path so that it does match.
            near = self._folded_sources.get(normalize_source_for_match(path), [])
            if near:
                logger.warning(
                    "selector path %r looks Windows-authored and is compared case-folded, so it does not match "
                    "the source %r; write it as %r (forward slashes, exact case)",
                    path, self.universe.source_names[near[0]], self.universe.source_names[near[0]],
                )
        return codes

    def resolve(self, sel: Selector, scope: np.ndarray | None = None) -> np.ndarray:
        """Row positions ``sel`` picks, in its order.

        ``scope`` (a row mask, or None for everything) says which rows can still matter
        to the caller: inside ``intersect`` only rows its other operands kept, inside
        ``except`` only rows of the left operand. Attribute selectors load tags and
        categories for the scope's sources only and answer within it; every other kind
        ignores it (it is cheap anyway), and the caller's filtering makes both agree."""
        return _BY_KIND[sel.kind](self, sel, scope)

    # -- one method per kind, each (selector, scope) -> row positions ------------------

    def _all(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    def _files(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        found = {p: self.source_codes_for(p) for p in sel.paths}
        _warn_partial(sel, [p for p, codes in found.items() if not codes], len(found), "source")
        return self.universe.rows_of_sources(sorted({c for codes in found.values() for c in codes}))

    def _file_indices(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        u = self.universe
        wanted = np.unique(expand_ids_array(sel.ids, what=f"selector {sel.describe()}"))
        rows = u.rows_of_sources(self.source_codes_for(sel.source or ""))
        hit = rows[np.isin(u.indices[rows], wanted)]
        if len(hit):
            missing = np.setdiff1d(wanted, u.indices[hit])
            _warn_partial(sel, missing.tolist(), len(wanted), "index")
        return hit

    def _dir_indices(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        positions = expand_ids_array(sel.ids, what=f"selector {sel.describe()}")
        out_of_range = positions[positions >= self.n]
        if len(out_of_range):
            shown = out_of_range[:10].tolist()
            raise SelectorError(
                f"dir_indices positions {shown}{' ...' if len(out_of_range) > 10 else ''} out of range "
                f"(universe size {self.n}, valid positions 0-{self.n - 1})"
            )
        return _first_occurrences(positions)

    def _stems(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        wanted_stems = set(sel.stems)
        stems = self.universe.stems()
        return self.universe.rows_of_sources([c for c, stem in enumerate(stems) if stem in wanted_stems])

    def _glob(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        return self.universe.rows_of_sources(self.universe.glob_source_codes(sel.pattern or ""))

    def _tag(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        attrs = self._attributes("tags", scope)
        return np.flatnonzero(self._within(attrs.rows_with_tags(sel.any_of, self.n), scope))

    def _categories(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        attrs = self._attributes("category_ids", scope)
        name_to_id = self._category_ids(sel, attrs.name_to_id, scope)
        ids = [name_to_id[n] for n in sel.any_of]
        return np.flatnonzero(self._within(attrs.rows_with_categories(ids, self.n), scope))

    def _category_ids(self, sel: Selector, loaded: Mapping[str, int] | None,
                      scope: np.ndarray | None) -> Mapping[str, int]:
        """The category name -> id map a ``categories`` selector is read with (the one
        given, else the annotations'), every name it uses checked against it."""
        name_to_id = self._name_to_id if self._name_to_id is not None else loaded
        if self._name_to_id is None and scope is not None and any(n not in (name_to_id or {}) for n in sel.any_of):
            # a name may live in an annotation file outside the scope: ask the whole universe
            name_to_id = self.universe.attributes(frozenset({"category_ids"})).name_to_id
        # Both messages open with Cuvis.AI's wording, so code matching on it works here too.
        if name_to_id is None:
            raise SelectorError(
                "a 'categories' selector needs a category name->id map, but this dataset has none "
                f"(selector {sel.describe()}); give rows an 'annotation' (a COCO file) or pass name_to_id"
            )
        unknown = [name for name in sel.any_of if name not in name_to_id]
        if unknown:
            also = f"; also unknown: {unknown[1:]}" if len(unknown) > 1 else ""
            raise SelectorError(
                f"category '{unknown[0]}' not in dataset categories {sorted(name_to_id)}{also} "
                f"(selector {sel.describe()})"
            )
        return name_to_id

    def _union(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        return _first_occurrences(np.concatenate([self.resolve(child, scope) for child in sel.of]))

    def _except(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        first = _first_occurrences(self.resolve(sel.of[0], scope))
        inside_first = self._mask(first)
        remove = np.logical_or.reduce([self._mask(self.resolve(child, inside_first)) for child in sel.of[1:]])
        return first[~remove[first]]

    def _intersect(self, sel: Selector, scope: np.ndarray | None) -> np.ndarray:
        # Operands that read no attributes go first; their common rows scope the ones that
        # do. The left operand still sets the order.
        parts: dict[int, np.ndarray] = {}
        keep = scope.copy() if scope is not None else np.ones(self.n, dtype=bool)
        plain_first = sorted(range(len(sel.of)), key=lambda i: bool(required_attrs_of([sel.of[i]])))
        for i in plain_first:
            parts[i] = self.resolve(sel.of[i], keep)
            keep &= self._mask(parts[i])
        first = _first_occurrences(parts[0])
        return first[keep[first]]

    def _attributes(self, name: str, scope: np.ndarray | None):
        if scope is None:
            return self.universe.attributes(self._load_together | {name})
        return self.universe.attributes(frozenset({name}),
                                        sources=np.unique(self.universe.source_codes[scope]).tolist())

    @staticmethod
    def _within(mask: np.ndarray, scope: np.ndarray | None) -> np.ndarray:
        return mask if scope is None else mask & scope

    def _mask(self, positions: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[positions] = True
        return mask


#: Each kind's method of :class:`_Resolver`.
_BY_KIND: dict[SelectorKind, Callable[[_Resolver, Selector, np.ndarray | None], np.ndarray]] = {
    SelectorKind.ALL: _Resolver._all,
    SelectorKind.FILES: _Resolver._files,
    SelectorKind.FILE_INDICES: _Resolver._file_indices,
    SelectorKind.DIR_INDICES: _Resolver._dir_indices,
    SelectorKind.STEMS: _Resolver._stems,
    SelectorKind.GLOB: _Resolver._glob,
    SelectorKind.TAG: _Resolver._tag,
    SelectorKind.CATEGORIES: _Resolver._categories,
    SelectorKind.UNION: _Resolver._union,
    SelectorKind.EXCEPT: _Resolver._except,
    SelectorKind.INTERSECT: _Resolver._intersect,
}


def _first_occurrences(positions: np.ndarray) -> np.ndarray:
    """``positions`` with repeats removed, keeping each value's first occurrence in order."""
    if len(positions) < 2:
        return positions.astype(np.int64, copy=False)
    _, first = np.unique(positions, return_index=True)
    if len(first) == len(positions):
        return positions.astype(np.int64, copy=False)
    return positions[np.sort(first)].astype(np.int64, copy=False)


def _warn_partial(sel: Selector, missing: list, requested: int, noun: str) -> None:
    """Some but not all of what the selector names exist: warn, naming what is missing.

    Matching nothing is left to the caller (it raises at top level; inside ``except`` it
    is legitimate). Matching part silently would train on less than the file asks for.
    """
    if not missing or len(missing) == requested:
        return
    shown = ", ".join(str(m) for m in missing[:20]) + (" ..." if len(missing) > 20 else "")
    where = f" of {sel.source!r}" if sel.source else ""
    logger.warning(
        "selector '%s'%s matched %d of %d requested %s(es); missing %s: %s",
        sel.kind.value, where, requested - len(missing), requested, noun, noun, shown,
    )


def resolve_positions(
    selectors: Sequence[Selector],
    universe: Universe,
    *,
    name_to_id: Mapping[str, int] | None = None,
    stage: str | None = None,
    load_together: frozenset[str] | None = None,
) -> np.ndarray:
    """Row positions a stage's selectors pick: unioned in order, first occurrence kept.

    ``load_together`` names the attributes to load in one pass when any whole-universe
    load is needed (default: all the selectors need); scoped loads stay narrow."""
    if load_together is None:
        load_together = required_attrs_of(sel for sel in selectors if isinstance(sel, Selector))
    resolver = _Resolver(universe, name_to_id, load_together)
    parts: list[np.ndarray] = []
    for i, sel in enumerate(selectors):
        if not isinstance(sel, Selector):
            raise SelectorError(f"{stage or 'selectors'}[{i}]: expected a Selector, got {sel!r}")
        matched = resolver.resolve(sel)
        if len(matched) == 0:
            raise SelectorError(
                f"{stage + ' ' if stage else ''}selector #{i} ({sel.describe()}) matched 0 samples in a universe "
                f"of {len(universe)} samples from {len(universe.source_names)} sources; check the names against "
                "the universe, or remove the selector"
            )
        parts.append(matched)
    if not parts:
        return np.empty(0, np.int64)
    return _first_occurrences(np.concatenate(parts))


def resolve_selectors(
    selectors: Sequence[Selector],
    refs: Sequence[SampleRef] | Universe,
    *,
    name_to_id: Mapping[str, int] | None = None,
) -> Sequence[SampleRef]:
    """Resolve one stage's selector list to samples (order-preserving union, dedup by uid).

    ``refs`` is the universe in canonical order: a :class:`Universe` (the result is then a
    lazy :class:`SampleRefs` sequence that builds ``SampleRef`` objects as they are read),
    or a list of ``SampleRef`` whose tags / category ids are already populated (the
    objects returned are then the very objects passed in). Raises :class:`SelectorError` on a selector
    matching zero samples, an out-of-range ``dir_indices`` position, or an unknown
    category name.
    """
    if isinstance(refs, Universe):
        positions = resolve_positions(selectors, refs, name_to_id=name_to_id)
        return SampleRefs(refs, positions, attrs=required_attrs_of(selectors))
    ref_list = list(refs)
    positions = resolve_positions(selectors, Universe.from_refs(ref_list, name_to_id=name_to_id), name_to_id=name_to_id)
    return [ref_list[p] for p in positions.tolist()]


def required_attrs(cfg_or_selectors) -> frozenset[str]:
    """Which lazily loaded attributes a ``DataSplitConfig`` or selector list needs."""
    if hasattr(cfg_or_selectors, "all_selectors"):
        return cfg_or_selectors.required_attrs()
    return required_attrs_of(cfg_or_selectors)
