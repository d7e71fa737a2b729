"""inspect_dataset against datasets the writer wrote, datasets built directly, tampered ones and
the plan a dataset carries: every figure is recomputed here from the manifest it summarizes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from kuration import compare_datasets, inspect_dataset
from kuration.budget import ADMITTED_REASONS, hours_selection_review
from kuration.budget.plan_store import BUDGET_FILE, ITEMS_FILE
from kuration.errors import BudgetError, CommitError
from kuration.canonical.hashing import readable_json, sha256_hex
from kuration.inspect.figures import shards_from_sources
from kuration.inspect.report import REPORT_SCHEMA_VERSION
from kuration.read.dataset_plan import read_dataset_budget_plan
from tests.inspect.datasets import copy_dataset, plain_copy, publish
from tests.output.committed_datasets import build, manifest_of, rechain_shard, recommit
from tests.output.corpus import version_dir

REPORT_KEYS = {"schema_version", "kind", "root", "commit", "output", "sample_hz", "splits", "modalities", "padding",
               "shard_lengths", "sources", "scored_sources", "budget", "priorities", "skipped_sources", "provenance",
               "execution", "warnings", "problems", "verification", "shards"}
SPLIT_KEYS = {"shards", "steps", "bytes", "hours", "requested_hours", "padded_shards", "pad_rows"}
VERIFICATION_KEYS = {"performed", "valid", "shards_checked", "bad_shards", "problems"}


def test_the_report_recomputes_from_the_manifest_alone(written, corpus):
    report = inspect_dataset(written)
    manifest = manifest_of(version_dir(written))
    entries = manifest["entries"]
    for name in ("train", "val", "test"):
        mine = [e for e in entries if e["split"] == name]
        split = report.splits[name]
        assert (split["shards"], split["steps"], split["bytes"]) == (
            len(mine), sum(e["n_steps"] for e in mine), sum(e["bytes"] for e in mine))
        assert split["hours"] == pytest.approx(split["steps"] / corpus.schema.sample_hz / 3600)
        assert split["requested_hours"] == pytest.approx(manifest["budget"]["splits"][name]["requested"] / 3600)
        assert split["pad_rows"] == sum(e["rows"] - e["n_steps"] for e in mine)
        assert split["padded_shards"] == sum(e["rows"] > e["n_steps"] for e in mine)
    assert report.sample_hz == corpus.schema.sample_hz
    assert report.shard_lengths == dict(sorted(Counter(e["n_steps"] for e in entries).items()))
    assert report.sources == len({e["source_id"] for e in entries})
    pools = manifest["budget"]["pools"]["sources"]
    assert report.scored_sources == sum(pools.values()) + manifest["budget"]["not_in_split"]["sources"]
    assert report.scored_sources == len(corpus.scored.outcomes)  # every source given to scoring
    assert report.padding["pad_rows"] > 0  # the corpus spec pads: the figure is exercised
    assert [m["name"] for m in report.modalities] == sorted(corpus.spec.modalities)
    frame = next(m for m in report.modalities if m["name"] == "frame")
    assert frame == {"name": "frame", "dtype": "uint8", "shape": [12, 16, 3], "kind": "media", "source": "media:frame"}
    budget = manifest["budget"]["splits"]["train"]
    assert report.budget is not None and report.budget["splits"]["train"]["utilization"] == budget["utilization"]
    assert report.provenance["run_fingerprint"] == report.commit["run_fingerprint"]
    assert report.execution["written_shards"] == len(entries)
    assert report.verification == {"performed": False, "valid": None, "shards_checked": 0, "bad_shards": [],
                                   "problems": []}
    assert report.problems == []


def test_priorities_count_every_ranked_plan_item_once(written, corpus):
    report = inspect_dataset(written)
    plan = corpus.plan()
    reasons = plan.items.column("reason").cast("string").to_pylist()
    priority = np.asarray(plan.items.column("priority").to_pylist(), dtype=float)
    admitted = sum(r in ADMITTED_REASONS and np.isfinite(p) for r, p in zip(reasons, priority, strict=True))
    p = report.priorities
    assert p is not None and sum(p["admitted"]) == admitted == plan.admitted().num_rows
    assert sum(p["admitted"]) + sum(p["rejected"]) + p["unrankable"] == plan.items.num_rows
    assert p["reasons"] == dict(sorted(Counter(reasons).items()))
    assert p["edges"][0] == pytest.approx(np.min(priority[np.isfinite(priority)]))
    review = hours_selection_review(plan).split_review("train")["priority"]
    assert p["splits"]["train"] == review


def test_to_dict_has_a_stable_key_set_and_is_strict_json(written):
    data = inspect_dataset(written, verify=True).to_dict()
    assert set(data) == REPORT_KEYS and data["schema_version"] == REPORT_SCHEMA_VERSION
    assert all(set(split) == SPLIT_KEYS for split in data["splits"].values())
    assert set(data["verification"]) == VERIFICATION_KEYS
    assert json.loads(json.dumps(data, allow_nan=False)) == data


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
def test_verify_decodes_every_shard_of_every_container(tmp_path, container):
    out = build(tmp_path / "out", container)
    report = inspect_dataset(out, verify=True)
    assert report.verification["valid"] is True and report.verification["shards_checked"] == 3
    # the builder's config records neither a schema nor a plan: said, not guessed
    assert report.sample_hz is None and report.splits["train"]["hours"] is None and report.priorities is None
    assert any("sample_hz" in w for w in report.warnings) and any("budget plan" in w for w in report.warnings)


def test_verify_names_each_bad_shard(written, tmp_path):
    out = plain_copy(written, tmp_path / "out")
    entries = manifest_of(out)["entries"]
    (out / entries[1]["path"]).unlink()
    rechain_shard(out, 3, b"not an npz at all")  # a consistent checksum chain, garbage inside
    assert inspect_dataset(out).verification["valid"] is None  # nothing decoded without verify
    report = inspect_dataset(out, verify=True)
    bad = report.verification["bad_shards"]
    assert report.verification["valid"] is False
    assert [b["path"] for b in bad] == [entries[1]["path"], entries[3]["path"]]
    assert "missing" in bad[0]["error"] and "crafted" in bad[1]["error"]


def test_an_uncommitted_or_tampered_dataset_is_refused_not_reported(written, tmp_path):
    """Nothing at the path, and the current version's config.json edited after its commit."""
    with pytest.raises(CommitError, match="no dataset.commit.json"):
        inspect_dataset(tmp_path / "nothing")
    out = copy_dataset(written, tmp_path / "out")
    config = version_dir(out) / "config.json"
    config.write_bytes(config.read_bytes().replace(b'"format": 1', b'"format": 2'))
    with pytest.raises(CommitError, match="config.json: does not match the SHA-256 pinned"):
        inspect_dataset(out)


def test_an_empty_dataset_reports_zeros(tmp_path):
    report = inspect_dataset(publish(tmp_path / "empty"), verify=True)
    assert report.shards == 0 and report.shard_lengths == {} and report.sources == 0
    assert report.verification["valid"] is True and report.budget is None and report.scored_sources is None


@pytest.mark.parametrize(("budget", "scored"), [
    ({"splits": {}, "pools": {"sources": {"train": 25, "val": 10, "test": 5}}, "not_in_split": {"sources": 2}}, 42),
    # a source the budget admitted nothing of still counts: it was scored and planned over
    ({"splits": {}, "pools": {"sources": {"train": 1, "val": 0, "test": 0}}, "not_in_split": {"sources": 0}}, 1),
    # a budget block that does not count its sources (or counts them wrongly) says nothing
    ({"splits": {}}, None),
    ({"splits": {}, "pools": {"sources": {"train": 1, "val": 0}}, "not_in_split": {"sources": 0}}, None),
    ({"splits": {}, "pools": {"sources": {"train": True, "val": 0, "test": 0}}, "not_in_split": {"sources": 0}},
     None),
    ({"splits": {}, "pools": {"sources": {"train": -1, "val": 0, "test": 0}}, "not_in_split": {"sources": 0}}, None),
])
def test_the_sources_scored_come_from_the_budget_pools(tmp_path, budget, scored):
    assert inspect_dataset(publish(tmp_path / "out", budget=budget)).scored_sources == scored


def test_the_sources_scored_count_the_skipped_ones_and_the_phrase_names_them(tmp_path):
    budget = {"splits": {}, "pools": {"sources": {"train": 3, "val": 1, "test": 1}}, "not_in_split": {"sources": 0}}
    config = {"job": {"skipped_sources": {"a.parquet": "OSError: unreadable", "b.parquet": "OSError: unreadable"}}}
    report = inspect_dataset(publish(tmp_path / "out", budget=budget, config=config))
    assert report.scored_sources == 7
    assert shards_from_sources(report) == "0 shards from 0 of the 7 sources scored (2 skipped)"


# -- the plan a dataset carries ------------------------------------------------------------------

def test_the_dataset_carries_its_plan_through_the_commit_chain(written, corpus):
    plan = read_dataset_budget_plan(written)
    assert plan.items.equals(corpus.plan().items) and plan.accounting == corpus.plan().accounting
    # the review works from the dataset alone: its plan, or a version folder's path as a storage root's
    assert hours_selection_review(plan).to_dict() == hours_selection_review(corpus.plan()).to_dict()
    assert hours_selection_review(str(version_dir(written))).to_dict() == hours_selection_review(plan).to_dict()


def test_a_changed_plan_is_refused_and_fails_verification(written, tmp_path):
    out = copy_dataset(written, tmp_path / "out")
    items = version_dir(out) / "budget" / ITEMS_FILE
    items.write_bytes(items.read_bytes() + b"\0")
    with pytest.raises(BudgetError, match="plan_items.parquet does not match the SHA-256"):
        read_dataset_budget_plan(out)
    report = inspect_dataset(out, verify=True)
    assert report.priorities is None and report.problems[0].startswith("budget plan:")
    assert report.verification["valid"] is False  # every shard is fine; the plan is not

    # budget.json and the table rewritten consistently: the config's pin still catches it
    out2 = copy_dataset(written, tmp_path / "out2")
    record = version_dir(out2) / "budget" / BUDGET_FILE
    record.write_bytes(record.read_bytes().replace(b'"format": 1', b'"format": 1 '))
    with pytest.raises(BudgetError, match="budget.json: missing, or not the SHA-256 and size config.json pins"):
        read_dataset_budget_plan(out2)


def test_a_dataset_without_a_plan_says_so(tmp_path):
    out = build(tmp_path / "out")
    with pytest.raises(BudgetError, match=r"records no budget plan \(results.budget_plan\)"):
        read_dataset_budget_plan(out)


def test_a_malformed_plan_pin_is_a_problem_not_a_crash(tmp_path):
    out = publish(tmp_path / "out", config={"job": {}, "results": {"budget_plan": "budget/budget.json"}})
    report = inspect_dataset(out)
    assert report.problems and "results.budget_plan: must be an object" in report.problems[0]


def test_a_moved_dataset_still_inspects_and_compares_equal(written, tmp_path):
    moved = copy_dataset(written, tmp_path / "moved")
    assert compare_datasets(written, moved).identical
    assert inspect_dataset(version_dir(moved) / "dataset_manifest.json").shards == inspect_dataset(written).shards


def test_a_wrong_sample_rate_is_a_problem(tmp_path):
    out = publish(tmp_path / "out", config={"job": {"schema": {"sample_hz": -1}}})
    report = inspect_dataset(out)
    assert report.sample_hz is None and "sample_hz must be a positive number, got -1" in report.problems[0]


def test_recommit_helper_keeps_the_chain(tmp_path):
    """The tamper helper re-publishes a consistent chain: what these tests rely on."""
    out = build(tmp_path / "out")
    manifest = manifest_of(out)
    recommit(out, manifest)
    assert sha256_hex((out / "dataset_manifest.json").read_bytes()) == sha256_hex(readable_json(manifest))
    assert inspect_dataset(out).shards == 3
