"""inspect_dataset, compare_datasets, check_quality, the plan a dataset carries and the three
verbs on a dataset in S3 (moto on loopback), against the same dataset written locally."""

from __future__ import annotations

import json

import pytest

from kuration.budget import hours_selection_review
from kuration.inspect import check_quality, compare_datasets, inspect_dataset
from kuration.cli import EXIT_CHECK_FAILED, EXIT_OK
from kuration.read.dataset_plan import read_dataset_budget_plan
from kuration_cli import main as kuration
from tests.output.corpus import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("inspect-s3-corpus"))


def test_a_dataset_in_s3_inspects_verifies_and_compares_like_its_local_copy(corpus, bucket, s3_client, tmp_path,
                                                                            capsys):
    url = f"{bucket}/run1"
    corpus.write(url)
    current = f"{url}/versions/v1"  # what readers of the dataset root open
    local = tmp_path / "local"
    corpus.write(local)
    remote_report = inspect_dataset(url, verify=True)
    local_report = inspect_dataset(local)
    assert remote_report.verification["valid"] is True and remote_report.root == current
    assert remote_report.splits == local_report.splits and remote_report.priorities == local_report.priorities
    comparison = compare_datasets(local, url)
    assert comparison.shards["added"] == comparison.shards["removed"] == comparison.shards["changed"] == []
    assert read_dataset_budget_plan(url).items.equals(corpus.plan().items)
    assert hours_selection_review(current).to_dict() == hours_selection_review(corpus.plan()).to_dict()
    assert check_quality(url, {"verify": True, "min_shards": 1}).ok

    assert kuration(["inspect", url, "--verify", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["root"] == current
    assert kuration(["diff", str(local), url, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["shards"]["changed"] == []
    policy = tmp_path / "quality.json"
    policy.write_text(json.dumps({"min_sources": 100}))
    assert kuration(["check", url, "--policy", str(policy)]) == EXIT_CHECK_FAILED

    # a shard changed in the bucket, out of band: verification names it
    entry = remote_report.to_dict()
    manifest = s3_client.get_object(Bucket=bucket[5:], Key="run1/versions/v1/dataset_manifest.json")
    first = json.loads(manifest["Body"].read())
    path, pooled = first["entries"][0]["path"], first["entries"][0]["stored_at"]  # on S3 in the root's shard pool
    s3_client.put_object(Bucket=bucket[5:], Key=f"run1/{pooled}", Body=b"changed")
    assert entry["verification"]["valid"] is True
    assert [b["path"] for b in inspect_dataset(url, verify=True).verification["bad_shards"]] == [path]
