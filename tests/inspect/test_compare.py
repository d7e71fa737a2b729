"""compare_datasets and its recursive differences: every change a test makes is found, at the
right path, and nothing else."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kuration import compare_datasets
from kuration.inspect.compare import SECTIONS, differences
from tests.hostile import FUZZ
from tests.inspect.datasets import plain_copy, publish
from tests.output.committed_datasets import build, manifest_of, rechain_shard, recommit, spec_for
from tests.output.corpus import version_dir


def test_a_dataset_equals_itself(written):
    comparison = compare_datasets(written, written)
    assert comparison.identical and comparison.shards["unchanged"] == len(manifest_of(version_dir(written))["entries"])
    assert all(diffs == [] for diffs in comparison.sections.values())
    assert set(comparison.to_dict()) == {"schema_version", "kind", "left", "right", "identical", "shards", "splits",
                                         "modalities", "sections"}
    assert set(comparison.sections) == set(SECTIONS)


def test_another_budget_changes_shards_splits_pipeline_and_results(written, smaller):
    comparison = compare_datasets(written, smaller)
    left, right = manifest_of(version_dir(written))["entries"], manifest_of(version_dir(smaller))["entries"]
    a, b = {e["path"] for e in left}, {e["path"] for e in right}
    assert comparison.shards["removed"] == sorted(a - b) and comparison.shards["added"] == sorted(b - a)
    assert comparison.shards["unchanged"] == len(a & b) and not comparison.identical
    assert comparison.splits["train"]["changed"] and not comparison.splits["test"]["changed"]
    assert comparison.splits["train"]["right"]["shards"] == sum(e["split"] == "train" for e in right)
    pipeline = {d["path"]: d for d in comparison.sections["pipeline"]}
    assert pipeline["/budget/train_hours"] == {"path": "/budget/train_hours", "change": "changed",
                                               "left": 40 / 3600, "right": 20 / 3600}
    assert any(d["path"] == "/budget/splits/train/requested" for d in comparison.sections["results"])
    assert comparison.sections["schema"] == [] and comparison.sections["strategy"] == []


def test_a_rewritten_shard_is_changed_by_its_sha256(written, tmp_path):
    out = plain_copy(written, tmp_path / "out")
    old = manifest_of(out)["entries"][2]
    new = rechain_shard(out, 2, b"other bytes")
    comparison = compare_datasets(written, out)
    assert comparison.shards["changed"] == [{"path": old["path"], "left_sha256": old["sha256"],
                                             "right_sha256": new["sha256"]}]
    assert comparison.shards["added"] == comparison.shards["removed"] == []


def test_modalities_added_removed_and_changed(tmp_path):
    left = build(tmp_path / "left")
    spec = spec_for("npz").to_dict()
    spec["modalities"]["pos"]["dtype"] = "float64"
    del spec["modalities"]["label"]
    spec["modalities"]["speed"] = {"dtype": "float32", "shape": [], "source": "field:speed"}
    right = publish(tmp_path / "right", config={"job": {"output": spec}})
    manifest = json.loads((right / "dataset_manifest.json").read_bytes())
    manifest["output"] = spec
    recommit(right, manifest)
    comparison = compare_datasets(left, right)
    assert [m["name"] for m in comparison.modalities["added"]] == ["speed"]
    assert [m["name"] for m in comparison.modalities["removed"]] == ["label"]
    assert [(c["name"], c["left"]["dtype"], c["right"]["dtype"]) for c in comparison.modalities["changed"]] == [
        ("pos", "float32", "float64")]
    assert {"path": "/modalities/pos/dtype", "change": "changed", "left": "float32", "right": "float64"} in \
        comparison.sections["output"]


def test_differences_name_the_path_and_the_kind_of_change():
    left = {"a": {"b": [1, 2, 3]}, "x/y": 1, "t~": True, "gone": None}
    right = {"a": {"b": [1, 5]}, "x/y": 1.0, "t~": 1, "new": {"k": "v"}}
    assert differences(left, right) == [
        {"path": "/a/b/1", "change": "changed", "left": 2, "right": 5},
        {"path": "/a/b/2", "change": "removed", "left": 3, "right": None},
        {"path": "/gone", "change": "removed", "left": None, "right": None},
        {"path": "/new", "change": "added", "left": None, "right": {"k": "v"}},
        {"path": "/t~0", "change": "changed", "left": True, "right": 1},  # a bool is not the number 1
        {"path": "/x~1y", "change": "changed", "left": 1, "right": 1.0},  # RFC 6901 escapes ~ and /
    ]


#: JSON values; -0.0 is folded into 0.0 (they compare equal, and a config's sign of zero is no change).
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False).map(lambda f: f + 0.0) | st.text(
    max_size=5)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=4), max_leaves=20)


@FUZZ
@given(JSON, JSON)
def test_differences_are_empty_exactly_when_the_values_are_equal(a, b):
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (differences(a, b) == []) == same
    assert differences(a, a) == []
    # every difference points at a place that exists on the side it says it does
    for d in differences(a, b):
        assert d["change"] in ("added", "removed", "changed")
