"""Interop with Cuvis.AI where its own tests found gaps (issue 10, section 6).

The error wording of ``categories`` selectors and the order of offender lists.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuration.errors import SelectorError
from kuration.splits import Constraint, SampleRef, Selector, Universe, evaluate_constraints, resolve_selectors


def S(**kwargs) -> Selector:
    return Selector(**kwargs)


# -- error wording shared with Cuvis.AI ---------------------------------------------------


def test_categories_errors_open_with_the_cuvis_wording():
    refs = [SampleRef("a.cu3s", 0, category_ids=(1,)), SampleRef("a.cu3s", 1)]
    with pytest.raises(SelectorError, match=r"^category 'ghost' not in dataset categories \['scrap'\]"):
        resolve_selectors([S(kind="categories", any_of=["ghost"])], refs, name_to_id={"scrap": 1})
    with pytest.raises(SelectorError, match=r"^category 'ghost' not in dataset categories \[\]; also unknown: \['rust'\]"):
        resolve_selectors([S(kind="categories", any_of=["scrap", "ghost", "rust"][1:])], refs, name_to_id={})
    with pytest.raises(SelectorError, match=r"^a 'categories' selector needs a category name->id map, but this dataset has none"):
        resolve_selectors([S(kind="categories", any_of=["scrap"])], refs)


# -- offender lists --------------------------------------------------------------------


def test_no_split_overlap_offenders_are_sorted_as_text():
    universe = Universe.from_columns(["a"] * 12, list(range(12)), group=[f"g{i}" for i in range(12)])
    rows = np.asarray([2, 9, 10, 11], np.int64)
    (result,) = evaluate_constraints({"train": rows, "test": rows}, universe, [Constraint("no_split_overlap")]).results
    # universe order would be a#2, a#9, a#10, a#11; Cuvis.AI sorts the uids as text
    assert result.offending == ("a#10", "a#11", "a#2", "a#9") and result.count == 4


def test_a_group_only_overlap_counts_its_samples():
    universe = Universe.from_columns(["r1", "r2", "r3"], [0, 0, 0], group=["site", "site", "other"])
    report = evaluate_constraints({"train": np.asarray([0, 2]), "val": np.asarray([1])}, universe, [Constraint("no_split_overlap")])
    (result,) = report.results
    assert result.status == "violated" and result.shared_groups == ("site",)
    assert result.count == 2 and result.offending == ("r1#0", "r2#0")
