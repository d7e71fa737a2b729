"""write_dataset / write_planned_dataset: the commit protocol, protection, resume, the lease,
and readers that accept only committed, consistent datasets."""

import json
import os
import shutil
from pathlib import Path

import pytest

from kuration.budget import BudgetOptions, hours_selection_review, plan_budget
from kuration.output import OutputSpec
from kuration.output.commit_protocol import COMMIT_FILE, MANIFEST_FILE, SPEC_MARKER_FILE, CommitError, publish_writing
from kuration.output.dataset_summary import summarize_dataset
from kuration.output.destinations import open_destination
from kuration.output.lease import DestinationLease, LeaseError
from kuration.output.write_dataset import (
    DatasetWriteError, DifferentRunError, WriteOptions, write_dataset, write_planned_dataset,
)
from kuration.read import load_committed, read_shard, verify_dataset
from kuration.read.dataset_plan import read_dataset_budget_plan
from kuration.sources import ParquetTickAdapter
from tests.output.corpus import SPEC, Corpus, comparable_record, snapshot, version_dir

#: The plan a dataset carries (the new run's, after a replacement), besides its shards.
PLAN_FILES = {"budget/budget.json", "budget/plan_items.parquet", "budget/admitted.parquet"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("corpus"))


def test_a_written_dataset_is_committed_verified_and_readable(corpus, tmp_path):
    result = corpus.write(tmp_path / "out")
    assert result.record.state == "committed" and result.written == len(result.manifest["entries"]) > 0
    assert verify_dataset(tmp_path / "out").ok
    dataset = load_committed(tmp_path / "out")
    entries = dataset.entries
    assert entries == sorted(entries, key=lambda e: (e["source_id"], e["entity_id"], e["span_index"], e["shard_index"]))
    assert all(not Path(e["path"]).is_absolute() and e["path"].split("/")[0] in ("train", "test") for e in entries)
    shard = read_shard(dataset, entries[0])
    assert shard.arrays["frame"].dtype.name == "uint8" and shard.arrays["frame"].shape == (32, 12, 16, 3)
    assert result["results"]["budget"]["splits"]["train"]["requested"] == 40.0
    assert set(result.config["provenance"]) >= {"run_fingerprint", "output_spec", "encoder", "adapter", "sources",
                                                "plan"}
    assert "train" in hours_selection_review(result).render()
    assert not list((tmp_path / "out").glob(".kuration_resume/*/*"))


def test_an_existing_destination_is_protected(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    before = snapshot(out)
    with pytest.raises(DatasetWriteError, match="pass resume=True to finish or reuse the same run, or force=True"):
        corpus.write(out)
    with pytest.raises(DatasetWriteError, match="resume=True and force=True"):
        corpus.write(out, resume=True, force=True)
    assert snapshot(out) == before


def test_a_failure_before_publication_leaves_every_published_byte(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    before = snapshot(out)
    bad_spec = OutputSpec.from_dict({**SPEC, "shard_length": 16})
    with pytest.raises(DatasetWriteError, match="the budget plan priced shards of 32 steps"):
        corpus.write(out, spec=bad_spec, force=True)

    class Unreadable(ParquetTickAdapter):
        def identity(self, source_id):
            raise OSError(f"{source_id}: permission denied")
    with pytest.raises(OSError, match="permission denied"):
        write_planned_dataset(out, corpus.plan(), adapter=Unreadable(corpus.adapter.root_url, corpus.schema),
                              schema=corpus.schema, spec=corpus.spec, options=WriteOptions(force=True))
    assert snapshot(out) == before and load_committed(out)


def test_force_writes_a_new_version_holding_only_its_shards_and_keeps_the_old_one(corpus, tmp_path):
    out = tmp_path / "out"
    first = corpus.write(out, plan=corpus.plan(train_hours=60 / 3600))
    second = corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)
    assert len(second.manifest["entries"]) < len(first.manifest["entries"])
    assert (first.version, second.version, second.published) == ("v1", "v2", True)
    current = version_dir(out)
    on_disk = {str(p.relative_to(current)) for p in current.glob("*/*")}
    assert on_disk == {e["path"] for e in second.manifest["entries"]} | PLAN_FILES and verify_dataset(out).ok
    assert load_committed(out, version="v1").manifest == first.manifest  # the old version is never destroyed
    assert read_dataset_budget_plan(out).items.equals(corpus.plan(train_hours=20 / 3600).items)


def test_resume_reuses_verified_shards_and_rebuilds_corrupt_or_missing_ones(corpus, tmp_path):
    out = tmp_path / "out"
    reference = corpus.write(out)
    reference_record = comparable_record(out)
    first, second, third = (version_dir(out) / e["path"] for e in reference.manifest["entries"][:3])
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x01
    first.write_bytes(bytes(data))
    second.write_bytes(second.read_bytes()[:-10])
    third.unlink()
    assert not verify_dataset(out).ok and len(verify_dataset(out).bad_shards) == 3
    again = corpus.write(out, resume=True)
    assert (again.written, again.reused) == (3, len(reference.manifest["entries"]) - 3)
    assert again.version == "v2"  # a committed version is never rewritten: the repair is a new one
    assert again.manifest == reference.manifest and verify_dataset(out).ok
    assert comparable_record(out) == reference_record


def test_resume_rebuilds_a_shard_whose_resume_record_has_an_odd_source_id(corpus, tmp_path):
    """Was a bug (found by mypy): a resume record is a file, so its entry can hold anything;
    one whose source_id was unhashable crashed the resume instead of costing a rebuild."""
    out = tmp_path / "out"
    reference = corpus.write(out)
    entry, run = reference.manifest["entries"][0], reference.record.run_fingerprint
    record = version_dir(out) / ".kuration_resume" / run[:16] / "odd.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"run": run, "entry": {**entry, "source_id": [entry["source_id"]]}}))
    again = corpus.write(out, resume=True)
    assert (again.written, again.reused) == (1, len(reference.manifest["entries"]) - 1)
    assert again.manifest == reference.manifest and verify_dataset(out).ok


def test_resume_refuses_a_destination_of_another_run(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    before = snapshot(out)
    other = OutputSpec.from_dict({**SPEC, "short_policy": "keep"})
    plan = plan_budget(corpus.scored.segments, BudgetOptions(train_hours=40 / 3600, test_hours=20 / 3600,
                                                             span_seconds=10.0, chunking=other.chunking),
                       strategy=corpus.settings.strategy)
    with pytest.raises(DifferentRunError, match="holds a committed dataset of another run .* Pass force=True"):
        corpus.write(out, plan=plan, spec=other, resume=True)
    assert snapshot(out) == before
    assert corpus.write(out, plan=plan, spec=other, force=True).reused == 0


def test_a_changed_marker_cannot_authorize_reuse(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    marker = version_dir(out) / SPEC_MARKER_FILE
    marker.write_bytes(marker.read_bytes().replace(b'"format": 1', b'"format": 1, "x": 0'))
    changed = corpus.write(out, resume=True)
    assert changed.reused == 0 and "belongs to another run" in changed.config["results"]["resume"]["reuse_refused"]
    (version_dir(out) / SPEC_MARKER_FILE).unlink()
    assert corpus.write(out, resume=True).reused == 0


def test_weak_source_identities_never_authorize_reuse(corpus, tmp_path):
    class Weak(ParquetTickAdapter):
        def identity(self, source_id):
            from kuration.sources.protocol import SourceIdentity
            return SourceIdentity(kind="logical", value=source_id)  # a name, not content: weak
    adapter = Weak(corpus.adapter.root_url, corpus.schema)
    out = tmp_path / "out"
    write_planned_dataset(out, corpus.plan(), adapter=adapter, schema=corpus.schema, spec=corpus.spec)
    again = write_planned_dataset(out, corpus.plan(), adapter=adapter, schema=corpus.schema, spec=corpus.spec,
                                  options=WriteOptions(resume=True))
    assert again.reused == 0 and again.written > 0


def test_on_other_run_replace_resumes_the_same_run_and_replaces_another(corpus, tmp_path):
    out = tmp_path / "out"
    first = corpus.write(out)
    same = corpus.write(out, resume=True, on_other_run="replace")
    assert (same.written, same.reused, same.replaced) == (0, len(first.manifest["entries"]), "")
    other = corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), resume=True, on_other_run="replace")
    assert other.replaced.startswith(f"{out}/versions/v1: holds a committed dataset of another run (run ")
    assert not other.config["results"]["resume"]["requested"]  # replaced as force=True would
    # ... keeping the old run's shards whose content is the same (their content keys match)
    old_keys = {e["content_key"] for e in first.manifest["entries"]}
    kept = sum(e["content_key"] in old_keys for e in other.manifest["entries"])
    assert 0 < kept == other.reused and other.written == len(other.manifest["entries"]) - kept
    assert other.config["results"]["resume"]["reused_from_run"] == first.record.run_fingerprint
    on_disk = {str(p.relative_to(version_dir(out))) for p in version_dir(out).glob("*/*")}
    assert on_disk == {e["path"] for e in other.manifest["entries"]} | PLAN_FILES and verify_dataset(out).ok
    assert read_dataset_budget_plan(out).items.equals(corpus.plan(train_hours=20 / 3600).items)


def test_on_other_run_replace_replaces_a_torn_commit_record_which_refuse_keeps(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    commit = version_dir(out) / COMMIT_FILE
    commit.write_bytes(commit.read_bytes()[:40])
    before = snapshot(out)
    with pytest.raises(CommitError, match="Re-run the write with force=True"):
        corpus.write(out, resume=True)  # on_other_run="refuse" is the default
    assert snapshot(out) == before
    replaced = corpus.write(out, resume=True, on_other_run="replace")
    assert replaced.reused == 0 and COMMIT_FILE in replaced.replaced and verify_dataset(out).ok


def test_on_other_run_is_checked_before_anything_is_read(corpus, tmp_path):
    with pytest.raises(DatasetWriteError, match=r"on_other_run must be one of \['refuse', 'replace'\], got 'keep'"):
        corpus.write(tmp_path / "out", resume=True, on_other_run="keep")
    with pytest.raises(DatasetWriteError, match="on_other_run='replace' goes with resume=True"):
        corpus.write(tmp_path / "out", on_other_run="replace")
    assert not (tmp_path / "out").exists()


def test_the_summary_gives_hours_emitted_against_requested_and_a_preview(corpus, tmp_path):
    result = corpus.write(tmp_path / "out")
    summary = summarize_dataset(result, sample_hz=corpus.schema.sample_hz, preview_rows=2)
    train = result.manifest["splits"]["train"]
    assert summary.splits["train"].emitted_hours == train["steps"] / corpus.schema.sample_hz / 3600
    assert summary.splits["train"].requested_hours == pytest.approx(40 / 3600)
    assert (summary.splits["train"].shards, summary.splits["train"].bytes) == (train["shards"], train["bytes"])
    assert (summary.commit_state, summary.shards, summary.written, summary.reused) == (
        "committed", len(result.manifest["entries"]), result.written, 0)
    first = result.manifest["entries"][0]
    assert summary.preview[0] == {"path": first["path"], "split": first["split"], "n_steps": first["n_steps"],
                                  "bytes": first["bytes"], "sha256": first["sha256"][:12]}
    assert len(summary.preview) == 2 and summary.more == summary.shards - 2
    counted = _write_count_plan(corpus, tmp_path / "counted")
    assert summarize_dataset(counted, sample_hz=corpus.schema.sample_hz).splits["train"].requested_hours is None


def _write_count_plan(corpus, out):
    plan = plan_budget(corpus.scored.segments, BudgetOptions(train_count=2, chunking=corpus.spec.chunking),
                       strategy=corpus.settings.strategy, group_of=None)
    return corpus.write(out, plan=plan)


def test_readers_reject_a_dataset_being_written(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    folder = version_dir(out)  # opened alone, a version folder is a plain seed-layout dataset
    publish_writing(open_destination(folder), run_fingerprint="x", marker=b"{}")
    with pytest.raises(CommitError, match="state='writing': a writer is running or was interrupted"):
        load_committed(folder)
    with pytest.raises(CommitError, match="is not the one publish record 1 pins"):
        load_committed(out)  # a published version rewritten afterwards is refused through its root
    assert not verify_dataset(out).ok and not verify_dataset(folder).ok


@pytest.mark.parametrize("tamper, message", [
    (lambda out: (out / COMMIT_FILE).unlink(), "not a committed dataset"),
    (lambda out: (out / COMMIT_FILE).write_bytes((out / COMMIT_FILE).read_bytes().replace(b"committed", b"commitxed")),
     "checksum does not match"),
    (lambda out: (out / MANIFEST_FILE).write_bytes((out / MANIFEST_FILE).read_bytes() + b" "),
     "does not match the SHA-256 pinned"),
    (lambda out: (out / COMMIT_FILE).write_bytes(b'{"state": "committed", "state": "committed"}'),
     "not a valid commit record"),
])
def test_readers_reject_tampered_metadata(corpus, tmp_path, tamper, message):
    out = tmp_path / "out"
    corpus.write(out)
    folder = version_dir(out)
    tamper(folder)
    with pytest.raises(CommitError, match=message):
        load_committed(folder)
    with pytest.raises(CommitError):
        load_committed(out)


def test_symlinked_metadata_is_refused(corpus, tmp_path):
    out = tmp_path / "out"
    corpus.write(out)
    real = tmp_path / "elsewhere.json"
    shutil.move(version_dir(out) / MANIFEST_FILE, real)
    os.symlink(real, version_dir(out) / MANIFEST_FILE)
    with pytest.raises(CommitError, match="is a symlink"):
        load_committed(out)


@pytest.mark.parametrize("intent", [{"resume": True}, {"force": True}, {"resume": True, "on_other_run": "replace"}])
def test_a_split_folder_linked_elsewhere_is_neither_reused_nor_written_through(corpus, tmp_path, intent):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    corpus.write(out)
    folder = version_dir(out)
    shutil.move(folder / "train", elsewhere)
    os.symlink(elsewhere, folder / "train")
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    root = snapshot(out)
    with pytest.raises(CommitError, match=r"train: is a symlink"):
        corpus.write(out, **intent)
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before  # nothing written behind the link
    assert snapshot(out) == root  # refused before publication: no new version either


def test_a_second_writer_gets_a_lease_error(corpus, tmp_path):
    out = tmp_path / "out"
    with DestinationLease(out):
        with pytest.raises(LeaseError, match=r"another writer holds this destination \(pid \d+ on .* since "):
            corpus.write(out)
    corpus.write(out)  # released


def test_write_dataset_scores_plans_and_writes(corpus, tmp_path):
    calls = []
    result = write_dataset(tmp_path / "out", schema=corpus.schema, adapter=corpus.adapter,
                           strategy=corpus.settings.strategy, segmenter=corpus.settings.segmenter, spec=corpus.spec,
                           train_hours=40 / 3600, test_hours=20 / 3600, span_seconds=10.0,
                           progress=lambda *call: calls.append(call))
    assert verify_dataset(tmp_path / "out").ok and result.config["job"]["segmenter"]["window"] == 10
    sources = corpus.adapter.list_sources()
    scoring = [c for c in calls if c[0] == "score"]
    writing = [c for c in calls if c[0] == "write"]
    assert calls == scoring + writing  # every source scored before any is written
    assert [c[1:3] for c in scoring] == [(i, len(sources)) for i in range(1, len(sources) + 1)]
    written_sources = sorted({e["source_id"] for e in result.manifest["entries"]})
    assert [c[1:] for c in writing] == [(i, len(written_sources), s) for i, s in enumerate(written_sources, start=1)]
    with pytest.raises(DatasetWriteError, match="sample_hz=20 but the schema says 10 Hz"):
        write_dataset(tmp_path / "o2", schema=corpus.schema, adapter=corpus.adapter, strategy=corpus.settings.strategy,
                      segmenter=corpus.settings.segmenter, spec=corpus.spec, train_hours=1, sample_hz=20)
    assert not (tmp_path / "o2").exists()


def test_resume_and_force_sweep_up_killed_writers_temp_files_and_nothing_else(corpus, tmp_path):
    from kuration.output.commit_protocol import CHECKPOINT_DIR

    out = tmp_path / "out"
    corpus.write(out)
    v1 = version_dir(out).relative_to(out)
    leftovers = [
        f"{v1}/.dataset_manifest.json.k3x_9abq.tmp",          # a metadata temp file of an earlier release
        f"{v1}/..kuration_output_spec.json.a1b2c3d4.tmp",
        f"{v1}/.kuration-tmp.dataset.commit.json.zz81_0qp.tmp",  # today's: one prefix for every temp file
        f"{v1}/train/.kuration-tmp.x_shard0000.npz.4242.0badcafe.tmp",
        ".kuration-tmp.stray.zz81_0qp.tmp",                     # at the root, in the publish log, the checkpoints
        "published/.kuration-tmp.00000002.json.0badcafe0bad.tmp",
        f"{CHECKPOINT_DIR}/0123456789abcdef/.kuration-tmp.entry.arrow.q1w2e3r4.tmp",
    ]
    kept = ["notes.txt", f"{v1}/.dataset_manifest.json.bak", f"{CHECKPOINT_DIR}/0123456789abcdef/entry.arrow"]
    for name in leftovers + kept:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"x")
    assert corpus.write(out, resume=True).version == "v1"  # the same run, unchanged: swept, not rewritten
    assert [name for name in leftovers if (out / name).exists()] == []
    assert all((out / name).exists() for name in kept)  # not a writer's: never removed
    for name in leftovers[4:]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"x")
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)
    assert [name for name in leftovers[4:] if (out / name).exists()] == [] and verify_dataset(out).ok


def test_a_destination_holding_only_a_killed_writers_temp_file_is_not_protected(corpus, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".kuration-tmp.dataset.commit.json.k3x9abqz.tmp").write_bytes(b"{")
    corpus.write(out)
    assert verify_dataset(out).ok and not list(out.glob(".kuration-tmp.*"))
