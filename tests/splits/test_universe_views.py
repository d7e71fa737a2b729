"""Lazy resolved-sample views, attribute placement, stems and tamper evidence of ``Universe``."""

from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa
import pytest

from kuration.errors import UniverseError
from kuration.splits import (
    ConstraintKind,
    DataSplitConfig,
    PreloadedAttributes,
    SampleRef,
    SampleRefs,
    Selector,
    Universe,
    evaluate_constraints,
    resolve_selectors,
    resolve_splits,
)
from kuration.splits.config import Constraint
from kuration.splits.sample_ref import source_stem

S = Selector


@pytest.fixture
def universe() -> Universe:
    return Universe.from_columns([f"rec_{i // 10:03d}.parquet" for i in range(300)], np.arange(300) % 10)


def test_resolving_builds_no_refs_until_they_are_read(universe, monkeypatch):
    built = []
    original = Universe.refs

    def counting(self, positions, **kwargs):
        built.append(len(positions))
        return original(self, positions, **kwargs)

    monkeypatch.setattr(Universe, "refs", counting)
    result = resolve_selectors([S(kind="glob", pattern="rec_00*")], universe)
    assert isinstance(result, SampleRefs) and len(result) == 100
    assert built == []
    assert result.uids()[:2] == ["rec_000.parquet#0", "rec_000.parquet#1"]
    assert built == []  # uids come straight from the columns
    assert result[5].uid == "rec_000.parquet#5"
    assert built == [1]


def test_sample_refs_behave_like_a_list(universe):
    result = resolve_selectors([S(kind="file_indices", source="rec_002.parquet", ids=["3-6"])], universe)
    as_list = list(result)
    assert [r.uid for r in as_list] == [f"rec_002.parquet#{i}" for i in range(3, 7)]
    assert result == as_list and as_list == list(result)
    assert result[-1].uid == "rec_002.parquet#6" and result[-4].uid == "rec_002.parquet#3"
    assert [r.uid for r in result[1:3]] == ["rec_002.parquet#4", "rec_002.parquet#5"]
    with pytest.raises(IndexError, match="out of range for 4 resolved samples"):
        result[4]
    assert result != as_list[:-1]
    assert "rec_002.parquet#3" in repr(result)


def test_iteration_crosses_chunk_boundaries_in_order(monkeypatch):
    monkeypatch.setattr(SampleRefs, "_CHUNK", 7)
    u = Universe.from_columns(["a.rec"] * 50, np.arange(50))
    assert [r.index for r in resolve_selectors([S(kind="all")], u)] == list(range(50))


def test_every_row_gets_its_own_tags_when_materialized():
    n = 20_000
    by_uid = {f"s{i // 100:04d}.rec#{i % 100}": ((f"t{i % 3}",) + (("rare",) if i % 997 == 0 else ()), (i % 2,))
              for i in range(n)}
    u = Universe.from_columns([f"s{i // 100:04d}.rec" for i in range(n)], np.arange(n) % 100,
                              attributes=PreloadedAttributes(by_uid))
    refs = list(resolve_selectors([S(kind="tag", any_of=("t1", "rare"))], u))
    expected = [i for i in range(n) if i % 3 == 1 or i % 997 == 0]
    assert [r.uid for r in refs] == [f"s{i // 100:04d}.rec#{i % 100}" for i in expected]
    for ref in refs:
        assert ref.tags == by_uid[ref.uid][0]
        assert ref.category_ids == ()  # only what the selectors needed is filled in


def test_preloaded_attributes_follow_the_uid_not_the_input_position():
    by_uid = {"b.rec#0": (("night",), ()), "a.rec#0": (("day",), ())}
    # given in b, a order; from_columns sorts to a, b
    u = Universe.from_columns(["b.rec", "a.rec"], [0, 0], attributes=PreloadedAttributes(by_uid))
    assert [r.uid for r in resolve_selectors([S(kind="tag", any_of=("night",))], u)] == ["b.rec#0"]


@pytest.mark.parametrize("source", ["e/b.", "e/...", "e/c..", "x/a.tar.gz", ".hidden", "plain", "d\\win.npz"])
def test_source_stem_is_exactly_the_posix_path_stem(source):
    assert source_stem(source) == PurePosixPath(source.replace("\\", "/")).stem


def test_a_refs_own_stem_is_what_stems_and_glob_match():
    refs = [SampleRef("day1/cam.npz", 0, stem="front"), SampleRef("day1/cam.npz", 1, stem="front"),
            SampleRef("day2/cam.npz", 0)]
    assert [r.uid for r in resolve_selectors([S(kind="stems", stems=("front",))], refs)] == [
        "day1/cam.npz#0", "day1/cam.npz#1"]
    assert [r.uid for r in resolve_selectors([S(kind="glob", pattern="fr*")], refs)] == [
        "day1/cam.npz#0", "day1/cam.npz#1"]
    u = Universe.from_refs(refs)
    assert list(u) == refs  # refs survive a trip through the universe unchanged


def test_one_source_with_two_stems_is_refused():
    with pytest.raises(UniverseError, match=r"source 'a.rec' is given stems 'x' and 'y'; a source has one stem"):
        Universe.from_refs([SampleRef("a.rec", 0, stem="x"), SampleRef("a.rec", 1, stem="y")])


@pytest.mark.parametrize("column", ["group", "materialized_path", "stem"])
def test_editing_any_column_of_the_stored_table_is_detected(column):
    u = Universe.from_columns(["a.rec", "b.rec"], [0, 0], group=["g1", "g2"], materialized_path=["/d/a", "/d/b"])
    table = u.to_arrow()
    assert len(Universe.from_arrow(table)) == 2
    values = table.column(column).to_pylist()
    values[1] = values[0]
    tampered = table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.string()))
    tampered = tampered.replace_schema_metadata(table.schema.metadata)
    with pytest.raises(UniverseError, match="no longer matches the digest"):
        Universe.from_arrow(tampered)


def test_train_anomalous_is_checkable_from_refs_that_carry_categories():
    refs = [SampleRef("a.rec", 0, category_ids=(2,)), SampleRef("b.rec", 0), SampleRef("c.rec", 0)]
    u = Universe.from_refs(refs)
    stages = {"train": np.array([0, 1]), "val": np.array([2]), "test": np.array([], np.int64)}
    (result,) = evaluate_constraints(stages, u, [Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS)]).results
    assert result.status == "violated" and result.offending == ("a.rec",)


def test_train_anomalous_is_unavailable_without_any_labels():
    u = Universe.from_columns(["a.rec", "b.rec"], [0, 0])
    stages = {"train": np.array([0]), "val": np.array([1]), "test": np.array([], np.int64)}
    (result,) = evaluate_constraints(stages, u, [Constraint(ConstraintKind.NO_TRAIN_ANOMALOUS)]).results
    assert result.status == "unavailable"


def test_resolve_splits_on_a_universe_returns_lazy_stages(universe):
    cfg = DataSplitConfig(train=(S(kind="glob", pattern="rec_00*"),), test=(S(kind="glob", pattern="rec_02*"),))
    stages = resolve_splits(cfg, universe)
    assert all(isinstance(v, SampleRefs) for v in stages.values())
    assert len(stages["predict"]) == 300 and len(stages["val"]) == 0
