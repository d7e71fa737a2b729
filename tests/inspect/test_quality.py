"""Quality policies: strict parsing that names the key, and gates that fail closed."""

from __future__ import annotations

import json
import math

import pytest

from kuration.checks import CheckResult
from kuration.errors import InputError
from kuration.inspect import QualityPolicy, check_quality, inspect_dataset, load_policy
from kuration.inspect.quality import MEASURES, POLICY_KEYS
from tests.inspect.datasets import hostile_config, plain_copy, publish
from tests.output.committed_datasets import manifest_of, rechain_shard
from tests.output.corpus import version_dir

PASSING = {"min_sources": 3, "min_shards": 24, "required_modalities": ["pos", "frame"], "verify": True,
           "min_budget_utilization": 1.0}


@pytest.mark.parametrize(("policy", "message"), [
    ({"min_source": 1}, r"unknown key\(s\) \['min_source'\]; valid keys: \['min_sources', 'min_shards'"),
    ({}, "names no gate, so it would approve any dataset"),
    ([], "must be a JSON object of gates, got list"),
    ({"min_sources": True}, "min_sources must be a whole number >= 0, got True"),
    ({"min_shards": 3.0}, "min_shards must be a whole number >= 0, got 3.0"),
    ({"max_skipped_sources": -1}, "max_skipped_sources must be a whole number >= 0, got -1"),
    ({"min_sources": "3"}, "min_sources must be a whole number >= 0, got '3'"),
    ({"required_modalities": "pos"}, "required_modalities must be a list of modality names"),
    ({"required_modalities": ["pos", 3]}, "required_modalities must be a list of modality names"),
    ({"verify": 1}, "verify must be true or false, got 1"),
    ({"min_budget_utilization": math.inf}, "min_budget_utilization must be a finite number >= 0"),
    ({"min_budget_utilization": math.nan}, "min_budget_utilization must be a finite number >= 0"),
    ({"min_budget_utilization": -0.1}, "min_budget_utilization must be a finite number >= 0"),
    ({"min_budget_utilization": "95%"}, "min_budget_utilization must be a finite number >= 0"),
])
def test_a_bad_policy_is_refused_naming_the_key(policy, message):
    with pytest.raises(InputError, match=message):
        QualityPolicy.from_dict(policy)


@pytest.mark.parametrize(("text", "message"), [
    ('{"min_shards": 1, "min_shards": 2}', "duplicate key 'min_shards'"),
    ('{"min_budget_utilization": NaN}', "non-finite number NaN is not allowed"),
    ('{"min_budget_utilization": 1e999}', "beyond the float range"),
    ('{"min_shards": 1', "not a valid quality policy"),
])
def test_a_policy_file_is_parsed_strictly(tmp_path, text, message):
    path = tmp_path / "quality.json"
    path.write_text(text)
    with pytest.raises(InputError, match=f"{path}: .*{message}"):
        load_policy(path)


def test_a_missing_policy_file_is_named(tmp_path):
    with pytest.raises(InputError, match=f"{tmp_path / 'absent.json'}: cannot read the quality policy"):
        load_policy(tmp_path / "absent.json")


def test_every_gate_passes_on_a_dataset_that_meets_them(written, tmp_path):
    (tmp_path / "quality.json").write_text(json.dumps(PASSING))
    result = check_quality(written, load_policy(tmp_path / "quality.json"))
    assert isinstance(result, CheckResult) and result.ok and result.verdict == "all 5 gates passed"
    assert [g["gate"] for g in result.gates] == [k for k in POLICY_KEYS if k in PASSING]
    shards = next(g for g in result.gates if g["gate"] == "min_shards")
    assert (shards["value"], shards["threshold"]) == (len(manifest_of(version_dir(written))["entries"]), 24)
    assert result.report is not None and result.report.verification["valid"] is True
    assert set(result.to_dict()) >= {"ok", "verdict", "errors", "gates"}


def test_each_failing_gate_is_an_error_with_value_and_threshold(written):
    shards = len(manifest_of(version_dir(written))["entries"])
    result = check_quality(written, {"min_sources": 4, "min_shards": shards + 1, "required_modalities": ["lidar"],
                                     "min_budget_utilization": 1.01})
    assert not result.ok and len(result.errors) == 4
    assert result.verdict.startswith("4 of 4 gates failed; first: min_sources: 3 sources among the shards")
    gates = {g["gate"]: g for g in result.gates}
    assert (gates["min_shards"]["value"], gates["min_shards"]["threshold"]) == (shards, shards + 1)
    assert gates["required_modalities"]["detail"].startswith("missing ['lidar']")
    assert gates["min_budget_utilization"]["value"] == 1.0


def test_verify_fails_on_a_bad_shard_and_on_a_report_made_without_verify(written, tmp_path):
    out = plain_copy(written, tmp_path / "out")
    rechain_shard(out, 0, b"garbage")
    result = check_quality(out, {"verify": True})
    assert not result.ok and result.gates[0]["value"] == 1
    assert manifest_of(out)["entries"][0]["path"] in result.errors[0]
    unverified = check_quality(inspect_dataset(written), {"verify": True})
    assert not unverified.ok and "made without verification" in unverified.errors[0]


def test_figures_the_dataset_does_not_record_fail_their_gate(tmp_path):
    out = publish(tmp_path / "out")  # no budget block, skipped sources not recorded
    result = check_quality(out, {"max_skipped_sources": 0, "min_budget_utilization": 0.5})
    assert [g["passed"] for g in result.gates] == [False, False]
    assert "records no split with a budget request" in result.errors[0]
    assert "does not record the skipped sources" in result.errors[1]


def test_what_the_gates_measured_is_named_after_the_figure(written, tmp_path):
    shards = len(manifest_of(version_dir(written))["entries"])
    result = check_quality(written, PASSING)
    assert result.measured() == {"sources": 3, "shards": shards, "bad_shards": 0, "lowest_budget_utilization": 1.0}
    assert set(MEASURES) == set(POLICY_KEYS) - {"required_modalities"}  # a list of names is no figure to follow
    # a figure the dataset does not record (here the skipped sources) is left out, not shown as a number
    assert check_quality(written, {"max_skipped_sources": 0, "min_shards": 1}).measured() == {"shards": shards}
    skipped = check_quality(publish(tmp_path / "out", config=hostile_config()), {"max_skipped_sources": 1})
    assert skipped.measured() == {"skipped_sources": 1}


def test_skipped_sources_are_counted(tmp_path):
    out = publish(tmp_path / "out", config=hostile_config())
    assert not check_quality(out, {"max_skipped_sources": 0}).ok
    assert check_quality(out, {"max_skipped_sources": 1}).ok


def test_the_advisory_answer_warns_on_a_failed_gate_and_errs_only_when_it_cannot_judge(written, tmp_path):
    from kuration.inspect import advisory_quality

    policy = tmp_path / "quality.json"
    absent = advisory_quality(written, policy_json=None, policy_url=str(policy))
    assert absent.passed and absent.verdict == f"no quality policy: add {policy} (a kur-check policy) or set " \
                                               "policy_json in the check's run config"
    policy.write_text('{"min_shards": 1000000, "min_sources": 1}')
    failed = advisory_quality(written, policy_json=None, policy_url=str(policy))
    assert failed.severity == "warn" and failed.ok and not failed.passed
    assert failed.verdict.startswith("1 of 2 gates failed; first: min_shards: ")
    assert failed.warnings[0].startswith("min_shards: ") and [g["passed"] for g in failed.gates] == [True, False]
    # run config wins over the file
    assert advisory_quality(written, policy_json='{"min_sources": 1}', policy_url=str(policy)).passed
    bad_policy = advisory_quality(written, policy_json='{"min_sources": 1, "min_sources": 2}', policy_url=str(policy))
    assert bad_policy.severity == "error" and "duplicate" in bad_policy.verdict
    missing = advisory_quality(tmp_path / "no-dataset", policy_json='{"min_sources": 1}', policy_url=str(policy))
    assert missing.severity == "error" and missing.verdict.startswith("cannot check the dataset: ")
