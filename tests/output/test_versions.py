"""Versions of a dataset root (kuration.output.versions): every write commits a new immutable
version, publishing it is one atomic step, and readers see the current version while
another is written, staged, or fails; a version folder alone is a seed-layout dataset."""

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from kuration.errors import CommitError
from kuration.output.commit_protocol import COMMIT_FILE
from kuration.output.version_listing import describe_versions
from kuration.output.versions import PublishRecord, DatasetRoot, resolve_dataset, split_version_ref, version_number
from kuration.read import iter_shards, load_committed, verify_dataset
from kuration_cli import main as kuration
from tests.output.corpus import SPEC, Corpus, data_files, fail_the_third_read, snapshot, version_dir
from tests.output.reuse_corpus import GrowingCorpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("versions-corpus"))


def test_a_write_commits_v1_and_publishes_it(corpus, tmp_path):
    out = tmp_path / "out"
    result = corpus.write(out)
    root = DatasetRoot(out)
    assert (result.version, result.published, result.out) == ("v1", True, str(out))
    assert root.versions() == ["v1"] and root.current().version == "v1" and not root.current().forced
    assert result.version_url == str(out / "versions" / "v1") == resolve_dataset(out)
    assert load_committed(out).manifest == result.manifest == load_committed(f"{out}@v1").manifest


def test_a_version_folder_copied_alone_is_a_seed_layout_dataset(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    alone = tmp_path / "alone"
    shutil.copytree(version_dir(out), alone)
    assert (alone / COMMIT_FILE).is_file() and verify_dataset(alone).ok
    assert load_committed(alone).manifest == load_committed(out).manifest


def test_a_plain_seed_layout_root_still_loads_and_a_new_version_shares_its_shards(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    plain = tmp_path / "plain"
    shutil.copytree(version_dir(out), plain)  # what a dataset written before versions looks like
    assert describe_versions(plain)[0]["version"] == "v0" and verify_dataset(plain).ok
    rebuilt = corpus.write(plain, force=True)
    assert (rebuilt.version, rebuilt.reused, rebuilt.written) == ("v1", len(rebuilt.manifest["entries"]), 0)
    assert version_dir(plain).name == "v1" and verify_dataset(plain).ok
    assert load_committed(plain, version="v0").manifest == rebuilt.manifest  # the plain dataset is kept
    entry = rebuilt.manifest["entries"][0]["path"]
    assert os.path.samefile(plain / entry, version_dir(plain) / entry)  # shared, not copied


def test_a_staged_version_is_invisible_until_published(corpus, tmp_path):
    out = tmp_path / "out"
    first = corpus.write(out)
    staged = corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True, publish=False)
    assert (staged.version, staged.published) == ("v2", False)
    assert load_committed(out).manifest == first.manifest  # readers still see v1
    assert load_committed(out, version="v2").manifest == staged.manifest and verify_dataset(out, version="v2").ok
    record = DatasetRoot(out).publish("v2")
    assert (record.sequence, record.version) == (2, "v2")
    assert load_committed(out).manifest == staged.manifest
    assert [r.version for r in DatasetRoot(out).publish_log()] == ["v1", "v2"]


def test_a_first_write_left_staged_has_nothing_to_read_and_says_how_to_publish(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out, publish=False)
    staged = r"no version is published yet \(staged: v1\).*kuration publish .* --version v1"
    with pytest.raises(CommitError, match=staged):
        load_committed(out)
    assert not verify_dataset(out).ok and verify_dataset(out, version="v1").ok


def test_a_write_that_fails_midway_leaves_the_current_version_as_it_was(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = corpus.write(out)
    current = snapshot(version_dir(out))
    fail_the_third_read(corpus, monkeypatch)
    with pytest.raises(RuntimeError, match="injected fault"):
        corpus.write(out, plan=corpus.plan(train_hours=20 / 3600, span_seconds=5.0), force=True, reuse_shards=False)
    assert DatasetRoot(out).versions() == ["v1", "v2"]  # the failed one is there, unpublished
    assert snapshot(version_dir(out)) == current and load_committed(out).manifest == first.manifest
    assert verify_dataset(out).ok and [row["state"] for row in describe_versions(out)] == ["committed", "writing"]


def test_a_version_ref_names_a_version_and_bad_names_are_refused(corpus, tmp_path):
    assert split_version_ref("s3://bucket/ds@v12") == ("s3://bucket/ds", "v12")
    assert split_version_ref("runs/a@b") == ("runs/a@b", None)
    for bad in ("v0x", "V1", "v01", "latest", "v"):
        with pytest.raises(CommitError, match="is not a version name: versions are v1, v2"):
            version_number(bad)
    out = tmp_path / "out"
    corpus.write(out)
    with pytest.raises(CommitError, match="names v1, and version='v2' another"):
        resolve_dataset(f"{out}@v1", "v2")
    with pytest.raises(CommitError, match="no dataset.commit.json"):
        load_committed(out, version="v7")


def test_an_edited_or_misnumbered_publish_record_fails_closed(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    record = out / "published" / "00000001.json"
    body = json.loads(record.read_bytes())
    record.write_text(json.dumps({**body, "version": "v2"}))
    with pytest.raises(CommitError, match="publish record was edited"):
        load_committed(out)
    record.write_bytes(PublishRecord(7, "v1", body["commit_sha256"], body["published"]).to_bytes())
    with pytest.raises(CommitError, match="holds sequence 7; the publish log was changed by hand"):
        load_committed(out)


def test_two_publishers_of_one_sequence_number_cannot_both_win(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    corpus.write(out)
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True, publish=False)
    root = DatasetRoot(out)
    # another publisher took sequence 2 between this one's listing and its create
    real = root._record_names
    monkeypatch.setattr(root, "_record_names", lambda: [n for n in real() if n != "00000002.json"])
    DatasetRoot(out).publish("v2")
    with pytest.raises(CommitError, match="another publisher took publish record 2 at the same moment"):
        root.publish("v1")
    assert DatasetRoot(out).current().version == "v2"


def test_only_a_committed_version_can_be_published(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    (out / "versions" / "v2").mkdir()
    with pytest.raises(CommitError, match="holds nothing, not a committed dataset"):
        DatasetRoot(out).publish("v2")


def test_a_shard_dataset_keeps_reading_the_version_it_was_created_on(corpus, tmp_path):
    torch_reader = pytest.importorskip("kuration.torch")
    out = tmp_path / "out"
    first = corpus.write(out)
    dataset = torch_reader.ShardDataset(out)
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)  # v2 is current now
    in_a_worker = pickle.loads(pickle.dumps(dataset))  # a DataLoader worker loads again
    assert len(in_a_worker) == len(first.manifest["entries"])
    assert in_a_worker[0]["pos"].shape[-1] == 3 and version_dir(out).name == "v2"


def test_a_rebuild_that_changes_one_recording_adds_about_its_shards_bytes(tmp_path_factory):
    """Storage: kept shards are hard links to the previous version's files, so the bytes a
    rebuild adds on disk are those of the shards it writes (and its metadata)."""
    growing = GrowingCorpus(tmp_path_factory.mktemp("growing"))
    out = tmp_path_factory.mktemp("storage") / "out"
    growing.write(out, plan=growing.plan(growing.before))
    before = _bytes_on_disk(out)
    rebuilt = growing.write(out, resume=True, on_other_run="replace")
    new_shards = sum(e["bytes"] for e in rebuilt.manifest["entries"] if e["source_id"] == growing.late_source)
    added = _bytes_on_disk(out) - before
    assert rebuilt.written > 0 and new_shards > 0
    metadata = sum(p.stat().st_size for p in version_dir(out).iterdir() if p.is_file())
    metadata += sum(p.stat().st_size for p in (version_dir(out) / "budget").iterdir())
    assert new_shards <= added - metadata <= 1.5 * new_shards


def _bytes_on_disk(root: Path) -> int:
    """Bytes of the distinct files (inodes) under ``root``: a hard link counts once."""
    seen = {}
    for path in root.rglob("*"):
        if path.is_file():
            stat = path.stat()
            seen[(stat.st_dev, stat.st_ino)] = stat.st_size
    return sum(seen.values())


def test_iter_shards_and_diff_read_any_kept_version(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    first = corpus.write(out)
    second = corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)
    assert sum(1 for _ in iter_shards(f"{out}@v1")) == len(first.manifest["entries"])
    assert sum(1 for _ in iter_shards(out)) == len(second.manifest["entries"])
    assert kuration(["diff", f"{out}@v1", f"{out}@v2"]) == 1  # they differ
    assert kuration(["diff", f"{out}@v2", str(out)]) == 0  # the current version is v2
    capsys.readouterr()


def test_kuration_versions_lists_each_version_and_marks_the_current_one(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    corpus.write(out)
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True, publish=False)
    assert kuration(["versions", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("* v1    committed") and lines[1].startswith("  v2    committed")
    assert "train 0.0111 h" in lines[0] and "run " in lines[0]
    assert kuration(["versions", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["version"], r["current"], r["state"]) for r in rows] == [("v1", True, "committed"),
                                                                        ("v2", False, "committed")]


def test_kuration_publish_audits_refuses_a_failing_version_and_records_a_forced_one(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    corpus.write(out)
    staged = corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True, publish=False)
    assert kuration(["publish", str(out), "--version", "v9"]) == 2
    assert "has no version 'v9' (it has v1, v2)" in capsys.readouterr().err
    shard = out / "versions" / "v2" / staged.manifest["entries"][-1]["path"]
    good = shard.read_bytes()
    shard.write_bytes(good[:-5])
    assert kuration(["publish", str(out), "--version", "v2"]) == 1
    err = capsys.readouterr().err
    assert "check failed: dataset_integrity: 1 of" in err and "v2 not published" in err
    assert DatasetRoot(out).current().version == "v1"
    policy = tmp_path / "quality.json"
    policy.write_text(json.dumps({"min_shards": 10_000}))
    shard.write_bytes(good)
    assert kuration(["publish", str(out), "--version", "v2", "--policy", str(policy)]) == 1
    assert "dataset_quality: min_shards" in capsys.readouterr().err
    assert kuration(["publish", str(out), "--version", "v2", "--policy", str(policy), "--force",
                     "--reason", "approved by data-eng"]) == 0
    record = DatasetRoot(out).current()
    assert (record.version, record.forced) == ("v2", True)
    assert record.reason.startswith("approved by data-eng; published over: dataset_quality: min_shards")
    assert describe_versions(out)[1]["forced"] and "FORCED" in _versions_text(out, capsys)


def _versions_text(out, capsys) -> str:
    capsys.readouterr()
    kuration(["versions", str(out)])
    return capsys.readouterr().out


def test_every_version_holds_the_seed_layout_and_the_root_only_versions_and_the_log(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)
    assert sorted(p.name for p in out.iterdir()) == [".kuration-writer.lock", "published", "versions"]
    assert data_files(out).keys() >= {"dataset_manifest.json", ".kuration_output_spec.json"}
    assert SPEC["container"] == "npz"
