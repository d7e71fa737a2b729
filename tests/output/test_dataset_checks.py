"""``verify_dataset``'s uniform answer: a verdict with the shard count and size, or the
first bad shard; never an exception for what it finds."""

from kuration.checks import CheckResult
from kuration.output.commit_protocol import COMMIT_FILE
from kuration.read import DatasetVerification, verify_dataset
from tests.output.committed_datasets import build, manifest_of


def test_a_sound_dataset_is_verified_with_its_shards_and_size(tmp_path):
    out = build(tmp_path / "out", rows=(8, 5))
    result = verify_dataset(out)
    assert isinstance(result, DatasetVerification) and isinstance(result, CheckResult) and result.passed
    total = sum(e["bytes"] for e in manifest_of(out)["entries"])
    assert (result.shards, result.bytes, result.bad_shards) == (3, total, ())
    assert result.verdict.startswith("3 shards, ") and result.verdict.endswith(
        " verified: every size and SHA-256 matches, commit chain intact")
    assert result.figures == {"shards": 3, "bytes": total, "train_shards": 2, "train_steps": 13, "test_shards": 1,
                              "test_steps": 3, "bad_shards": 0}


def test_a_bad_shard_fails_naming_the_first(tmp_path):
    out = build(tmp_path / "out", rows=(8, 5))
    entries = manifest_of(out)["entries"]
    (out / entries[0]["path"]).unlink()
    (out / entries[2]["path"]).write_bytes(b"rot")
    result = verify_dataset(out)
    assert result.severity == "error" and result.bad_shards == (entries[0]["path"], entries[2]["path"])
    assert result.verdict.startswith(f"2 of 3 shards bad; first: {entries[0]['path']}: missing, or its size or "
                                     "SHA-256 differs")
    assert result.figures["bad_shards"] == 2


def test_a_broken_commit_chain_fails_saying_so(tmp_path):
    out = build(tmp_path / "out")
    (out / COMMIT_FILE).unlink()
    result = verify_dataset(out)
    assert result.severity == "error" and result.shards == 0
    assert result.verdict.startswith("commit chain broken: ") and result.errors[0] in result.verdict


def test_no_dataset_fails_saying_none_is_committed_and_how_to_write_one(tmp_path):
    for out in (tmp_path / "never_created", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        result = verify_dataset(out, write_hint="run the writer, then check again")
        assert result.severity == "error" and result.shards == 0 and result.errors == (result.verdict,)
        assert result.verdict == (f"no dataset is committed at {out} (no {COMMIT_FILE} or dataset_manifest.json: "
                                  "nothing was written there, or a writer stopped before its first commit); run the "
                                  "writer, then check again")
    assert verify_dataset(tmp_path / "empty").verdict.endswith("; write the dataset there first")
