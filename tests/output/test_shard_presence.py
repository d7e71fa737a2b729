"""``check_shard_presence``: every shard the committed manifest lists is there at its recorded
size, judged from one listing of the dataset folder (no shard is read); what it cannot see
(other bytes of the right size) is ``verify_dataset``'s to find."""

import pytest

from kuration.checks import CheckResult
from kuration.output.commit_protocol import COMMIT_FILE
from kuration.read import ShardPresence, check_shard_presence, verify_dataset
from tests.output.committed_datasets import build, manifest_of


def test_a_sound_dataset_has_every_shard_at_its_size(tmp_path):
    out = build(tmp_path / "out", rows=(8, 5))
    result = check_shard_presence(out)
    assert isinstance(result, ShardPresence) and isinstance(result, CheckResult) and result.passed
    total = sum(e["bytes"] for e in manifest_of(out)["entries"])
    assert (result.shards, result.bytes, result.absent) == (3, total, ())
    assert result.verdict.startswith("all 3 shards the manifest lists are present at their recorded sizes (")
    assert result.figures == {"shards": 3, "bytes": total, "missing_shards": 0, "wrong_size_shards": 0}


def test_a_missing_and_a_resized_shard_fail_naming_each(tmp_path):
    out = build(tmp_path / "out", rows=(8, 5))
    entries = manifest_of(out)["entries"]
    (out / entries[0]["path"]).unlink()
    (out / entries[2]["path"]).write_bytes(b"rot")
    result = check_shard_presence(out)
    assert result.severity == "error" and result.absent == (entries[0]["path"], entries[2]["path"])
    first, third = entries[0], entries[2]
    assert result.errors == (f"{out / first['path']}: missing (the manifest records {first['bytes']:,} bytes)",
                             f"{out / third['path']}: 3 bytes, the manifest records {third['bytes']:,}")
    assert result.verdict.startswith(f"2 of 3 shards absent or of another size; first: {result.errors[0]}")
    assert (result.figures["missing_shards"], result.figures["wrong_size_shards"]) == (1, 1)


def test_a_shard_replaced_by_a_link_fails(tmp_path):
    out = build(tmp_path / "out", rows=(8,))
    entry = manifest_of(out)["entries"][0]
    shard = out / entry["path"]
    moved = tmp_path / "elsewhere.npz"
    shard.rename(moved)
    shard.symlink_to(moved)  # same size behind the link, but readers open regular files only
    result = check_shard_presence(out)
    assert result.absent == (entry["path"],) and "not a regular file" in result.errors[0]


def test_same_size_other_bytes_pass_here_and_fail_the_integrity_check(tmp_path):
    out = build(tmp_path / "out", rows=(8,))
    entry = manifest_of(out)["entries"][0]
    (out / entry["path"]).write_bytes(b"\0" * entry["bytes"])
    assert check_shard_presence(out).passed  # sizes only: the contents are not read
    assert not verify_dataset(out).passed


@pytest.mark.parametrize("damage", ["no_commit_record", "nothing_written"])
def test_no_committed_dataset_fails_as_the_integrity_check_does(tmp_path, damage):
    if damage == "no_commit_record":
        out = build(tmp_path / "out")
        (out / COMMIT_FILE).unlink()
    else:
        out = tmp_path / "never_created"
    result = check_shard_presence(out, write_hint="run the writer, then check again")
    integrity = verify_dataset(out, write_hint="run the writer, then check again")
    assert result.severity == "error" and result.shards == 0
    assert (result.verdict, result.errors) == (integrity.verdict, integrity.errors)
