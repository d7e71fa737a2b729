"""Attributes are paid for only where a selector looks: annotation files of other sources stay unread."""

import json
from pathlib import Path

import pytest

import kuration.splits.universe as universe_module
from kuration.splits import Selector, read_universe_csv, resolve_selectors

S = Selector


@pytest.fixture
def labelled(tmp_path: Path, monkeypatch):
    """Six recordings, each with its own COCO file; returns (universe, list of files read)."""
    rows = ["source,index,annotation"]
    for day in ("day1", "day2"):
        for cam in ("a", "b", "c"):
            name = f"{day}/cam_{cam}"
            # category 1 "scratch" on clip 1; day2/cam_c alone declares category 7 "crack" on clip 0
            categories = [{"id": 1, "name": "scratch"}]
            annotations = [{"id": 1, "image_id": 1, "category_id": 1}]
            if name == "day2/cam_c":
                categories.append({"id": 7, "name": "crack"})
                annotations.append({"id": 2, "image_id": 0, "category_id": 7})
            doc = {"images": [{"id": i, "tags": ["night"] if cam == "b" else []} for i in range(3)],
                   "annotations": annotations, "categories": categories}
            (tmp_path / "ann" / day).mkdir(parents=True, exist_ok=True)
            (tmp_path / "ann" / f"{name}.json").write_text(json.dumps(doc))
            rows.append(f"{name}.rec,0-2,ann/{name}.json")
    (tmp_path / "universe.csv").write_text("\n".join(rows) + "\n")
    reads: list[str] = []
    real = universe_module._read_coco

    def counting(url):
        reads.append(Path(url).relative_to(tmp_path / "ann").as_posix())
        return real(url)

    monkeypatch.setattr(universe_module, "_read_coco", counting)
    return read_universe_csv(tmp_path / "universe.csv"), reads


def test_intersect_reads_only_the_annotations_of_rows_the_other_operands_kept(labelled):
    universe, reads = labelled
    got = resolve_selectors([S(kind="intersect", of=[
        S(kind="tag", any_of=["anomalous"]), S(kind="files", paths=["day1/cam_b.rec"])])], universe)
    assert got.uids() == ["day1/cam_b.rec#1"]
    assert reads == ["day1/cam_b.json"]


def test_except_reads_only_the_left_operands_annotations(labelled):
    universe, reads = labelled
    got = resolve_selectors([S(kind="except", of=[
        S(kind="glob", pattern="day2/*"), S(kind="tag", any_of=["night", "anomalous"])])], universe)
    assert got.uids() == ["day2/cam_a.rec#0", "day2/cam_a.rec#2", "day2/cam_c.rec#2"]
    assert sorted(reads) == ["day2/cam_a.json", "day2/cam_b.json", "day2/cam_c.json"]


def test_a_top_level_tag_reads_every_file_once(labelled):
    universe, reads = labelled
    assert len(resolve_selectors([S(kind="tag", any_of=["night"])], universe)) == 6
    resolve_selectors([S(kind="tag", any_of=["anomalous"])], universe)
    assert sorted(reads) == sorted(f"{d}/cam_{c}.json" for d in ("day1", "day2") for c in "abc")


def test_scoped_and_unscoped_answers_agree(labelled):
    universe, _ = labelled
    scoped = resolve_selectors([S(kind="intersect", of=[
        S(kind="glob", pattern="day1/*"), S(kind="categories", any_of=["scratch"])])], universe).uids()
    everything = resolve_selectors([S(kind="categories", any_of=["scratch"])], universe).uids()
    assert scoped == [u for u in everything if u.startswith("day1/")]
    assert scoped == ["day1/cam_a.rec#1", "day1/cam_b.rec#1", "day1/cam_c.rec#1"]


def test_a_category_declared_outside_the_scope_is_still_known(labelled):
    universe, _ = labelled
    got = resolve_selectors([S(kind="union", of=[S(kind="all"), S(kind="intersect", of=[
        S(kind="files", paths=["day1/cam_a.rec"]), S(kind="categories", any_of=["crack"])])])], universe)
    assert len(got) == 18  # "crack" lives only in day2/cam_c.json, yet it is a known name
    with pytest.raises(ValueError, match=r"^category 'dent' not in dataset categories \['crack', 'scratch'\]"):
        resolve_selectors([S(kind="intersect", of=[
            S(kind="files", paths=["day1/cam_a.rec"]), S(kind="categories", any_of=["dent"])])], universe)


def test_materialized_refs_read_only_their_own_sources_files(labelled):
    universe, reads = labelled
    picked = resolve_selectors([S(kind="glob", pattern="day1/cam_b*")], universe)
    assert reads == []  # no attribute selector, nothing read
    refs = list(universe.refs(picked.positions, attrs=frozenset({"tags"})))
    assert [r.tags for r in refs] == [("normal", "night"), ("anomalous", "night"), ("normal", "night")]
    assert reads == ["day1/cam_b.json"]
