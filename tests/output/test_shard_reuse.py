"""Shard reuse across runs: a rebuilt dataset keeps every shard whose content key matches a
verified shard of the dataset at its destination, byte for byte and in place, and rewrites
the rest; the result is the dataset a fresh write of the same plan gives. Tampered shards,
weak identities, a changed output spec or encoder, and a crash mid-rebuild are covered."""

import hashlib
import importlib
import json
import os
import re
import shutil

import pytest

from kuration.output import OutputSpec, PassthroughEncoder
from kuration.canonical.hashing import readable_json, sha256_hex
from kuration.output.commit_protocol import COMMIT_FILE, CONFIG_FILE, MANIFEST_FILE, CommitError, CommitRecord
from kuration.output.dataset_summary import summarize_dataset
from kuration.read import load_committed, verify_dataset
from kuration.sources import ParquetTickAdapter
from kuration.sources.protocol import SourceIdentity
from tests.output.corpus import SPEC, data_files, snapshot, version_dir
from tests.output.reuse_corpus import GrowingCorpus
from tests.output.writer_processes import run_writer

#: The module, not the ``write_track`` function ``kuration.output`` exports under that name.
WRITE_TRACK = importlib.import_module("kuration.output.write_track")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return GrowingCorpus(tmp_path_factory.mktemp("growing"))


@pytest.fixture(scope="module")
def fresh(corpus, tmp_path_factory):
    """A from-scratch write of the plan over every recording: what every rebuild must equal."""
    out = tmp_path_factory.mktemp("fresh") / "out"
    corpus.write(out)
    return data_files(out)


@pytest.fixture(scope="module")
def template(corpus, tmp_path_factory):
    """The dataset written before the late recording landed, and its entries."""
    out = tmp_path_factory.mktemp("before") / "out"
    return out, corpus.write(out, plan=corpus.plan(corpus.before))


@pytest.fixture
def before(template, tmp_path):
    """A copy of that dataset (bytes and names are all a dataset is), and its write result."""
    out = tmp_path / "out"
    shutil.copytree(template[0], out)
    return out, template[1]


def _stats(out, entries):
    return {e["path"]: (os.stat(out / e["path"]).st_ino, os.stat(out / e["path"]).st_mtime_ns) for e in entries}


def test_a_new_recording_rewrites_only_its_shards_and_keeps_the_rest_in_place(corpus, fresh, before):
    out, first = before
    old = first.manifest["entries"]
    v1 = version_dir(out)
    old_bytes = {e["path"]: (v1 / e["path"]).read_bytes() for e in old}
    old_stats = _stats(v1, old)
    rebuilt = corpus.write(out, resume=True, on_other_run="replace")  # what the shards asset does
    new = rebuilt.manifest["entries"]
    late = [e for e in new if e["source_id"] == corpus.late_source]
    assert late and (rebuilt.written, rebuilt.reused) == (len(late), len(old)) == (len(new) - len(old), len(old))
    assert rebuilt.replaced.startswith(f"{out}/versions/v1: holds a committed dataset of another run")
    # shared, not rewritten: the new version's kept shards are the old version's files (hard
    # links: the same inodes), and the old version is whole and byte-identical
    v2 = version_dir(out)
    assert v2.name == "v2" and _stats(v2, old) == old_stats == _stats(v1, old)
    assert {p: (v1 / p).read_bytes() for p in old_bytes} == old_bytes and verify_dataset(out, version="v1").ok
    # the rebuilt dataset is the fresh write of the same plan: manifest, marker, plan and every shard
    assert data_files(out) == fresh and verify_dataset(out).ok
    assert rebuilt.config["results"]["resume"]["reused_from_run"] == first.record.run_fingerprint
    assert rebuilt.config["results"]["reused_shards"] == len(old)
    summary = summarize_dataset(rebuilt, sample_hz=corpus.schema.sample_hz)
    assert (summary.written, summary.reused, summary.reused_from_run) == (
        len(late), len(old), first.record.run_fingerprint)
    assert not list(v2.glob(".kuration_resume/*/*"))  # the adopted record went with the commit


def test_every_entry_records_its_content_key_and_keys_tell_shards_apart(template):
    entries = template[1].manifest["entries"]
    keys = [e["content_key"] for e in entries]
    assert all(isinstance(k, str) and len(k) == 64 for k in keys) and len(set(keys)) == len(keys)


def test_force_keeps_matching_shards_too_and_reuse_shards_false_rewrites_every_one(corpus, fresh, before):
    out, old = before[0], before[1].manifest["entries"]
    forced = corpus.write(out, force=True)
    assert forced.reused == len(old) and data_files(out) == fresh
    again = corpus.write(out, force=True, reuse_shards=False)
    assert (again.written, again.reused) == (len(again.manifest["entries"]), 0)
    assert again.config["results"]["resume"]["reuse_refused"] == "reuse_shards=False"
    assert data_files(out) == fresh and verify_dataset(out).ok


def _older_shard_stem(source_id, entity, span_index):
    """The shard stem datasets were written with before the recording-stem names: the whole
    source id and the type-tagged entity key, flattened (``flight.parquet_str_drone_07_<hash>``)."""
    def flat(text):
        return (re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x")[:48]
    digest = hashlib.sha256(f"{source_id}\0{entity}".encode()).hexdigest()[:12]
    span = "" if span_index is None else f"_span{span_index:03d}"
    return f"{flat(source_id)}_{flat(entity)}{span}_{digest}"


@pytest.mark.parametrize("intent", [{"resume": True, "on_other_run": "replace"}, {"resume": True}, {"force": True}])
def test_a_dataset_with_the_old_shard_names_is_rewritten_under_the_new_ones(corpus, fresh, tmp_path, monkeypatch,
                                                                             intent):
    """Reuse keeps a shard only at its own path and never renames one (on an object store
    that is a copy), so shards named the old way are written again under the new names,
    whatever the intent, and the old files go with the commit."""
    out = tmp_path / "out"
    monkeypatch.setattr(WRITE_TRACK, "shard_stem", _older_shard_stem)
    old = corpus.write(out)
    monkeypatch.undo()
    assert all(".parquet_str_" in e["path"] for e in old.manifest["entries"]) and verify_dataset(out).ok
    rebuilt = corpus.write(out, **intent)
    assert (rebuilt.written, rebuilt.reused) == (len(rebuilt.manifest["entries"]), 0)
    assert not any(".parquet" in e["path"] or "str_" in e["path"] for e in rebuilt.manifest["entries"])
    assert data_files(out) == fresh and verify_dataset(out).ok  # no old file left, all of it a fresh write


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "swap"])
def test_a_damaged_old_shard_is_rewritten_not_reused(corpus, fresh, before, damage):
    out, old = before[0], before[1].manifest["entries"]
    victim = version_dir(out) / old[1]["path"]
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01  # same size, another SHA-256
        victim.write_bytes(bytes(data))
    elif damage == "truncate":
        victim.write_bytes(bytes(data[:-7]))
    elif damage == "remove":
        victim.unlink()
    else:  # another shard's valid bytes under this name
        victim.write_bytes((version_dir(out) / old[2]["path"]).read_bytes())
    rebuilt = corpus.write(out, resume=True, on_other_run="replace")
    assert rebuilt.reused == len(old) - 1 and rebuilt.written == len(rebuilt.manifest["entries"]) - len(old) + 1
    assert data_files(out) == fresh and verify_dataset(out).ok


def test_an_edited_manifest_entry_cannot_authorize_reuse(corpus, fresh, before):
    """The candidate entry must be exactly the one this write records: a content key copied
    onto another entry (its path kept) is refused, even with the commit chain re-sealed."""
    out, first = before
    v1 = version_dir(out)
    manifest = json.loads((v1 / MANIFEST_FILE).read_bytes())
    manifest["entries"][0]["content_key"] = manifest["entries"][1]["content_key"]
    data = readable_json(manifest)
    (v1 / MANIFEST_FILE).write_bytes(data)
    record = first.record
    resealed = CommitRecord(record.state, record.run_fingerprint, record.spec_marker_sha256, sha256_hex(data),
                            record.config_sha256)
    (v1 / COMMIT_FILE).write_bytes(resealed.to_bytes())
    rebuilt = corpus.write(out, resume=True, on_other_run="replace")
    assert rebuilt.reused == len(manifest["entries"]) - 1 and data_files(out) == fresh


def test_a_weak_source_identity_is_never_reused(corpus, tmp_path):
    class Weak(ParquetTickAdapter):
        def identity(self, source_id):
            return SourceIdentity(kind="logical", value=source_id)  # a name, not content

    adapter = Weak(corpus.adapter.root_url, corpus.schema)
    out = tmp_path / "out"
    first = corpus.write(out, plan=corpus.plan(corpus.before), adapter=adapter)
    assert {e["content_key"] for e in first.manifest["entries"]} == {None}
    rebuilt = corpus.write(out, adapter=adapter, resume=True, on_other_run="replace")
    assert rebuilt.reused == 0 and rebuilt.written == len(rebuilt.manifest["entries"])
    assert verify_dataset(out).ok


def test_a_changed_output_spec_reuses_nothing(corpus, before):
    out = before[0]
    fewer = {**SPEC, "modalities": {k: v for k, v in SPEC["modalities"].items() if k != "battery"}}
    rebuilt = corpus.write(out, spec=OutputSpec.from_dict(fewer), resume=True, on_other_run="replace")
    assert rebuilt.reused == 0 and rebuilt.written == len(rebuilt.manifest["entries"])
    assert "content key" in rebuilt.config["results"]["resume"]["reuse_refused"] and verify_dataset(out).ok


def test_a_changed_encoder_reuses_nothing(corpus, before):
    class Renamed(PassthroughEncoder):
        """Other code: its fingerprint differs, so might its output."""

    out = before[0]
    rebuilt = corpus.write(out, plan=corpus.plan(corpus.before), encoder=Renamed(), resume=True,
                           on_other_run="replace")
    assert rebuilt.reused == 0 and rebuilt.written == len(rebuilt.manifest["entries"]) and verify_dataset(out).ok


def test_a_crash_mid_rebuild_resumes_keeping_the_old_shards(corpus, fresh, before):
    out, old = before[0], before[1].manifest["entries"]
    old_stats = _stats(version_dir(out), old)
    entries = json.loads(fresh[MANIFEST_FILE])["entries"]
    late = sorted(e["path"] for e in entries if e["source_id"] == corpus.late_source)
    assert late
    # killed as the first shard of the new recording takes its name: publication had begun
    finished, _ = run_writer(corpus, out, corpus.plan(), kill_on_rename=(late[0].split("/")[1], 1), resume=True,
                             on_other_run="replace")
    assert not finished
    # readers still see the old version, whole; the killed one is not readable
    assert load_committed(out).manifest == before[1].manifest and verify_dataset(out).ok
    with pytest.raises(CommitError, match="state='writing'"):
        load_committed(out, version="v2")
    resumed = corpus.write(out, resume=True)  # the same new run, resumed as the protocol says
    assert resumed.version == "v2"
    assert resumed.reused == len(old) and resumed.written == len(resumed.manifest["entries"]) - len(old)
    assert _stats(version_dir(out), old) == old_stats and data_files(out) == fresh and verify_dataset(out).ok


def test_a_crash_before_publication_leaves_the_old_dataset_intact(corpus, before):
    out = before[0]
    current = version_dir(out)
    intact = snapshot(current)
    finished, _ = run_writer(corpus, out, corpus.plan(), kill_on_rename=("dataset.commit.json", 1), resume=True,
                             on_other_run="replace")
    assert not finished and version_dir(out) == current and snapshot(current) == intact and verify_dataset(out).ok
    config = json.loads((current / CONFIG_FILE).read_bytes())
    assert config["results"]["written_shards"] == len(load_committed(out).entries)
