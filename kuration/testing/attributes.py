"""``AttributeLoaderContract``: what every :class:`~kuration.splits.universe.AttributeLoader`
promises.

An attribute loader gives a universe's rows their tags and category ids, lazily: only the
attributes a selector or constraint needs, and only for the sources it touches. A test module
subclasses the kit once per loader (``class TestMine(AttributeLoaderContract)``) and supplies
only how to store the kit's samples' attributes in the loader's native form. The kit builds
the universe over them itself (sorted, and in another order), then checks, through
``load`` and through selector resolution:

* ``loaded`` is exactly the attributes required, and an attribute not required has no pairs
  (a constraint must be able to say "unavailable" rather than "satisfied");
* every row has its own sample's tags and category ids, whatever order the universe is in:
  values follow the sample, never its position;
* the (row, value) pairs are well formed: ``int64`` rows inside the universe, tag codes
  into ``tag_names`` (unique strings), ``name_to_id`` naming every category the samples use;
* a load scoped to some sources fills those sources' rows exactly as a whole load does;
* a second load gives the same values;
* ``tag`` and ``categories`` selectors pick the samples that carry the tag or category.

A subclass supplies ``store(root, samples)``: write the samples' attributes under the new
folder ``root`` and return ``(loader, annotations)``, where ``annotations`` is the
universe's annotation column (one entry per sample, in the order given) or None. It may
override ``expected(sample)``, the ``(tags, category_ids)`` the loader gives a sample
(default: the sample's own), for a loader that derives tags, as COCO loaders add
``normal`` / ``anomalous``.

What it does not check: how often files are read (a loader may cache or not), or what a row
outside a scoped load holds (callers never read it).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kuration.splits.resolve import resolve_selectors
from kuration.splits.sample_ref import SampleRef
from kuration.splits.selectors import Selector, SelectorKind
from kuration.splits.universe import AttributeLoader, SampleAttributes, Universe

#: The category vocabulary the kit's samples use.
CATEGORY_NAMES = {"background": 0, "scratch": 1, "dent": 2}
BOTH = frozenset({"tags", "category_ids"})


@dataclass(frozen=True)
class KitSample:
    """One sample and the attributes the loader must give it (``index`` None: a whole file)."""

    source: str
    index: int | None
    tags: tuple[str, ...]
    category_ids: tuple[int, ...]

    @property
    def uid(self) -> str:
        return SampleRef(self.source, self.index).uid


#: Several sources, tags shared and not, rows without any attribute, a whole-file sample.
SAMPLES = (
    KitSample("day1/cam_a.npz", 0, ("day",), (0,)),
    KitSample("day1/cam_a.npz", 1, ("day", "blurry"), (1,)),
    KitSample("day1/cam_a.npz", 2, (), ()),
    KitSample("day1/cam_b.npz", 0, ("night",), (1, 2)),
    KitSample("day1/cam_b.npz", 7, ("night", "blurry"), (2,)),
    KitSample("day2/other.npz", 0, (), (0,)),
    KitSample("day2/other.npz", 3, ("day",), (1,)),
    KitSample("day2/whole.npz", None, (), ()),
)


def sorted_values(values: Sequence) -> tuple:
    return tuple(sorted(values))


class AttributeLoaderContract(abc.ABC):
    @abc.abstractmethod
    def store(self, root: Path, samples: Sequence[KitSample]) -> tuple[AttributeLoader, list[str | None] | None]:
        ...

    def expected(self, sample: KitSample) -> tuple[tuple[str, ...], tuple[int, ...]]:
        return sample.tags, sample.category_ids

    # ---- fixtures and helpers ---------------------------------------------------------

    def build(self, root: Path, samples: Sequence[KitSample], *, sort: bool = True) -> tuple[Universe, AttributeLoader]:
        """The universe of ``samples`` (canonically sorted, or in the order given), and its loader."""
        root.mkdir(parents=True)
        loader, annotations = self.store(root, samples)
        universe = Universe.from_columns([s.source for s in samples], [s.index for s in samples],
                                         annotation=annotations, attributes=loader, sort=sort)
        return universe, loader

    @pytest.fixture
    def built(self, tmp_path) -> tuple[Universe, AttributeLoader]:
        return self.build(tmp_path / "sorted", SAMPLES)

    def by_uid(self, universe: Universe, attributes: SampleAttributes,
               rows: np.ndarray | None = None) -> dict[str, tuple[tuple, tuple]]:
        """uid -> (sorted tags, sorted category ids) of ``rows`` (all rows when None)."""
        rows = np.arange(len(universe)) if rows is None else rows
        tags = attributes.tags_for_rows(rows) if "tags" in attributes.loaded else [()] * len(rows)
        cats = attributes.categories_for_rows(rows) if "category_ids" in attributes.loaded else [()] * len(rows)
        return {uid: (sorted_values(t), sorted_values(c))
                for uid, t, c in zip(universe.uids(rows), tags, cats, strict=True)}

    def want(self, samples: Sequence[KitSample] = SAMPLES) -> dict[str, tuple[tuple, tuple]]:
        out = {}
        for sample in samples:
            tags, cats = self.expected(sample)
            out[sample.uid] = (sorted_values(tags), sorted_values(cats))
        return out

    # ---- what is loaded -----------------------------------------------------------------

    @pytest.mark.parametrize("required", [frozenset(), frozenset({"tags"}), frozenset({"category_ids"}), BOTH],
                             ids=["nothing", "tags", "category_ids", "both"])
    def test_loaded_is_exactly_what_was_required(self, built, required):
        universe, loader = built
        got = loader.load(universe, required)
        assert isinstance(got, SampleAttributes)
        assert got.loaded == required
        if "tags" not in required:
            assert len(got.tag_rows) == len(got.tag_codes) == 0
        if "category_ids" not in required:
            assert len(got.category_rows) == len(got.category_ids) == 0

    def test_every_row_has_its_samples_attributes(self, built):
        universe, loader = built
        assert self.by_uid(universe, loader.load(universe, BOTH)) == self.want()

    def test_values_follow_the_sample_not_its_position(self, tmp_path):
        shuffled = [SAMPLES[i] for i in (5, 0, 7, 3, 1, 6, 2, 4)]
        universe, loader = self.build(tmp_path / "shuffled", shuffled, sort=False)
        assert universe.uids() == [s.uid for s in shuffled]
        assert self.by_uid(universe, loader.load(universe, BOTH)) == self.want()

    def test_the_pairs_are_well_formed(self, built):
        universe, loader = built
        got = loader.load(universe, BOTH)
        n = len(universe)
        for rows in (got.tag_rows, got.tag_codes, got.category_rows, got.category_ids):
            assert isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.ndim == 1
        assert len(got.tag_rows) == len(got.tag_codes) and len(got.category_rows) == len(got.category_ids)
        assert ((got.tag_rows >= 0) & (got.tag_rows < n)).all() and ((got.category_rows >= 0)
                                                                       & (got.category_rows < n)).all()
        assert ((got.tag_codes >= 0) & (got.tag_codes < len(got.tag_names))).all()
        assert all(isinstance(name, str) for name in got.tag_names) and len(set(got.tag_names)) == len(got.tag_names)
        assert got.name_to_id is not None, "category selectors name categories: name_to_id must map them"
        assert {name: got.name_to_id.get(name) for name in CATEGORY_NAMES} == CATEGORY_NAMES

    @pytest.mark.parametrize("sources", [["day1/cam_b.npz"], ["day1/cam_a.npz", "day2/whole.npz"],
                                         ["day2/other.npz"]], ids=["one", "two", "last"])
    def test_a_scoped_load_fills_those_sources_rows_as_a_whole_load_does(self, built, sources):
        universe, loader = built
        codes = frozenset(universe.source_names.index(name) for name in sources)
        rows = universe.rows_of_sources(sorted(codes))
        scoped = loader.load(universe, BOTH, sources=codes)
        assert scoped.loaded == BOTH
        whole = loader.load(universe, BOTH)
        assert self.by_uid(universe, scoped, rows) == self.by_uid(universe, whole, rows)
        assert self.by_uid(universe, scoped, rows) == {
            uid: value for uid, value in self.want().items() if uid.partition("#")[0] in sources}

    def test_a_second_load_gives_the_same_values(self, built):
        universe, loader = built
        first = self.by_uid(universe, loader.load(universe, BOTH))
        loader.load(universe, frozenset({"tags"}), sources=frozenset({0}))
        assert self.by_uid(universe, loader.load(universe, BOTH)) == first

    # ---- through selectors --------------------------------------------------------------

    def test_tag_and_category_selectors_pick_the_samples_that_carry_them(self, built):
        universe, _ = built
        want = self.want()
        tags = sorted({tag for tags, _ in want.values() for tag in tags})
        assert tags, "the loader gives no sample a tag"
        for tag in tags:
            picked = resolve_selectors([Selector(kind=SelectorKind.TAG, any_of=(tag,))], universe)
            assert sorted(r.uid for r in picked) == sorted(uid for uid, (t, _) in want.items() if tag in t), tag
        for name, category in CATEGORY_NAMES.items():
            picked = resolve_selectors([Selector(kind=SelectorKind.CATEGORIES, any_of=(name,))], universe)
            assert sorted(r.uid for r in picked) == sorted(uid for uid, (_, c) in want.items() if category in c), name


__all__ = ["CATEGORY_NAMES", "SAMPLES", "AttributeLoaderContract", "KitSample"]
