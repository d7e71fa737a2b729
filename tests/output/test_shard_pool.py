"""The content-addressed shard pool (kuration.output.shard_pool), written on a local disk
through the object-store code path (``LocalDestination(shares_by_link=False)``): each shard
stored once at ``ROOT/shards/<content key>.npz``, named by the manifest's ``stored_at``;
every reader resolves it; a version folder opened alone is refused; a rebuild that changes
one recording adds only that recording's pool objects and the version's metadata; a pool
object is never overwritten; gc removes the objects no kept version names, and a SIGKILL
during it leaves every kept version verified."""

import dataclasses
import json
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

from kuration.errors import CommitError
from kuration.inspect import check_quality, compare_datasets, inspect_dataset
from kuration.canonical.hashing import sha256_hex
from kuration.output.commit_protocol import COMMIT_FILE, CommitRecord
from kuration.output.destinations import LocalDestination
from kuration.output.version_gc import collect_garbage
from kuration.output.versions import DatasetRoot
from kuration.read import (
    DatasetIntegrityError, check_shard_presence, iter_shards, load_committed, read_shard, verify_dataset,
)
from kuration.read.committed import check_entry
from kuration.sources import CuratedDatasetAdapter
from kuration_cli import main as kuration
from tests.output.corpus import Corpus, fail_the_third_read, version_dir
from tests.output.reuse_corpus import GrowingCorpus
from tests.output.writer_processes import FORK, gc_killed_at_unlink


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("pool-corpus"))


def pooled(out: Path) -> LocalDestination:
    """The root ``out`` written as on an object store: shards in its pool, none linked."""
    return LocalDestination(out, shares_by_link=False)


def pool_files(out: Path) -> set[str]:
    return {f"shards/{p.name}" for p in (out / "shards").iterdir()} if (out / "shards").is_dir() else set()


def without_pool(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "stored_at"}


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
    """A pooled root (v1) and the same plan written the local way."""
    base = tmp_path_factory.mktemp("pool-written")
    return corpus.write(pooled(base / "pooled")), corpus.write(base / "linked"), base


def test_a_pooled_write_stores_each_shard_once_named_by_its_content_key(written):
    result, linked, base = written
    out, entries = base / "pooled", result.manifest["entries"]
    assert all(e["stored_at"] == f"shards/{e['content_key']}.npz" for e in entries)
    assert pool_files(out) == {e["stored_at"] for e in entries}
    # the same shards, byte for byte, as the linked layout; the version folder holds metadata only
    assert [without_pool(e) for e in entries] == linked.manifest["entries"]
    for entry in entries:
        assert (out / entry["stored_at"]).read_bytes() == (version_dir(base / "linked") / entry["path"]).read_bytes()
    assert not [p for p in version_dir(out).iterdir() if p.name in ("train", "val", "test")]


def test_every_reader_reads_a_pooled_version(written, tmp_path, capsys):
    result, linked, base = written
    out, plain = base / "pooled", base / "linked"
    for ref in (out, f"{out}@v1"):
        got, want = list(iter_shards(ref, verify=True)), list(iter_shards(plain, verify=True))
        assert len(got) == len(want) == len(result.manifest["entries"])
        for a, b in zip(got, want, strict=True):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a if not k.startswith("_meta"))
    dataset = load_committed(out)
    assert dataset.reference == f"{out}@v1" and dataset.shard_path(dataset.entries[0]) == str(
        out / dataset.entries[0]["stored_at"])
    assert read_shard(dataset, dataset.entries[0]).n_steps == dataset.entries[0]["n_steps"]
    assert verify_dataset(out).ok and check_shard_presence(out).ok
    assert inspect_dataset(out, verify=True).verification["valid"] is True
    comparison = compare_datasets(plain, out, verify=True)
    assert comparison.shards["added"] == comparison.shards["removed"] == comparison.shards["changed"] == []
    assert check_quality(out, {"verify": True, "min_shards": 1}).ok
    assert kuration(["diff", str(plain), f"{out}@v1"]) == 0 and kuration(["versions", str(out)]) == 0
    capsys.readouterr()
    curated, reference = CuratedDatasetAdapter(out), CuratedDatasetAdapter(plain)
    source = curated.list_sources()[0]
    assert curated.identity(source) == reference.identity(source)
    assert np.array_equal(curated.read_ticks(source).tick, reference.read_ticks(source).tick)


def test_a_shard_dataset_reads_a_pooled_version_pinned_through_its_root(written):
    torch_module = pytest.importorskip("kuration.torch")
    result, _, base = written
    items = torch_module.ShardDataset(base / "pooled")
    assert len(items) == len(result.manifest["entries"]) and items._source["dataset"] == f"{base / 'pooled'}@v1"
    assert int(items[0]["_present"].sum()) == result.manifest["entries"][0]["n_steps"]


def test_a_pooled_version_folder_opened_alone_is_refused_saying_to_open_it_through_its_root(written, tmp_path):
    _, _, base = written
    out = base / "pooled"
    for alone in (version_dir(out), tmp_path / "copied"):
        if alone != version_dir(out):
            shutil.copytree(version_dir(out), alone)
        with pytest.raises(CommitError, match=r"is stored in its dataset root's shard pool \(shards/.*\), outside this "
                                              r"version folder, which was opened alone; open .* instead"):
            load_committed(alone)
        assert not verify_dataset(alone).ok
    with pytest.raises(CommitError, match=rf"open {out}@v1 instead"):
        load_committed(version_dir(out))


def test_a_tampered_pool_object_is_a_located_integrity_error(corpus, tmp_path):
    out = tmp_path / "out"
    entry = corpus.write(pooled(out)).manifest["entries"][1]
    data = bytearray((out / entry["stored_at"]).read_bytes())
    data[len(data) // 2] ^= 0x01
    (out / entry["stored_at"]).write_bytes(bytes(data))
    verification = verify_dataset(out)
    assert verification.bad_shards == (entry["path"],)
    assert (f"{version_dir(out)}: entry {entry['path']} (pool object {entry['stored_at']}" in verification.errors[0]
            and "size or SHA-256 differs" in verification.errors[0])
    dataset = load_committed(out)
    with pytest.raises(DatasetIntegrityError, match=rf"versions/v1: entry {entry['path']} \(pool object "
                                                    rf"{entry['stored_at']}.*size or SHA-256 differs"):
        read_shard(dataset, dataset.entries[1])
    (out / entry["stored_at"]).unlink()
    presence = check_shard_presence(out)
    assert "missing" in presence.errors[0] and entry["stored_at"] in presence.errors[0]


@pytest.mark.parametrize("stored_at", ["../shards/x.npz", "/shards/x.npz", "train/x.npz", "shards", "shards/../x.npz",
                                       "versions/v1/train/x.npz", 7])
def test_a_stored_at_outside_the_pool_is_refused(written, stored_at):
    result, _, _ = written
    dataset = load_committed(written[2] / "pooled")
    entry = {**result.manifest["entries"][0], "stored_at": stored_at}
    with pytest.raises(CommitError, match=r"entry\.stored_at: "):
        check_entry(entry, dataset.spec, "entry")


def test_an_edited_manifest_naming_an_object_outside_the_pool_is_refused(corpus, tmp_path):
    """The manifest is pinned by the commit record: even a re-pinned one (what a crafted
    artifact would do) is checked, and ``..`` never leaves the root."""
    out = tmp_path / "out"
    corpus.write(pooled(out))
    manifest_path = version_dir(out) / "dataset_manifest.json"
    manifest = json.loads(manifest_path.read_bytes())
    manifest["entries"][0]["stored_at"] = "shards/../versions/v1/config.json"
    data = json.dumps(manifest).encode()
    manifest_path.write_bytes(data)
    with pytest.raises(CommitError, match="does not match the SHA-256 pinned"):
        load_committed(out)
    commit = version_dir(out) / COMMIT_FILE
    record = CommitRecord.parse(commit.read_bytes(), where=str(commit))
    commit.write_bytes(dataclasses.replace(record, manifest_sha256=sha256_hex(data)).to_bytes())
    with pytest.raises(CommitError, match=r"entries\[0\]\.stored_at: .*must be relative, with no empty, '\.' or "):
        load_committed(f"{out}@v1")


# -- a rebuild ---------------------------------------------------------------------------------------


@pytest.fixture
def growing(tmp_path_factory):
    return GrowingCorpus(tmp_path_factory.mktemp("pool-growing"))


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_size) for p in root.rglob("*") if p.is_file()}


def test_a_rebuild_that_changes_one_recording_adds_only_its_pool_objects_and_the_metadata(growing, tmp_path):
    out, plan = tmp_path / "out", growing.plan()
    first = growing.write(pooled(out), plan=plan)
    before = _files(out)
    changed = growing.late_source
    adapter = growing.revise_late_source()  # the changed file: a new content hash
    second = growing.write(pooled(out), plan=plan, adapter=adapter, resume=True, on_other_run="replace")
    mine = [e for e in second.manifest["entries"] if e["source_id"] == changed]
    assert second.version == "v2" and mine and second.written == len(mine) == len(first.manifest["entries"]) - \
        second.reused
    new = {name: size for name, (_, size) in _files(out).items() if name not in before}
    assert {n for n in new if n.startswith("shards/")} == {e["stored_at"] for e in mine}
    assert {n for n in new if not n.startswith("shards/")} <= {
        n for n in new if n.startswith("versions/v2/") or n.startswith("published/")}
    assert all(_files(out)[name] == held for name, held in before.items())  # nothing rewritten
    shard_bytes = sum(e["bytes"] for e in mine)
    assert sum(size for n, size in new.items() if n.startswith("shards/")) == shard_bytes
    assert verify_dataset(out).ok and verify_dataset(f"{out}@v1").ok


def test_a_resumed_pooled_version_keeps_the_pool_objects_it_finished(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    fail_the_third_read(corpus, monkeypatch)
    with pytest.raises(RuntimeError, match="injected fault"):
        corpus.write(pooled(out))
    monkeypatch.undo()
    finished = _files(out / "shards")
    assert finished
    resumed = corpus.write(pooled(out), resume=True)
    assert resumed.version == "v1" and 0 < resumed.reused <= len(finished) and verify_dataset(out).ok
    assert all(_files(out / "shards")[name] == held for name, held in finished.items())  # kept, not rewritten


def test_a_pool_object_is_never_overwritten(corpus, tmp_path):
    out = tmp_path / "out"
    entries = corpus.write(pooled(out)).manifest["entries"]
    shutil.rmtree(out / "versions")
    shutil.rmtree(out / "published")
    (out / entries[0]["stored_at"]).write_bytes(b"other bytes")
    with pytest.raises(CommitError, match=rf"{entries[0]['stored_at']}: the shard pool already holds an object under "
                                          r"this content key, with other bytes.*never overwritten"):
        corpus.write(pooled(out), force=True)
    assert (out / entries[0]["stored_at"]).read_bytes() == b"other bytes"
    (out / entries[0]["stored_at"]).unlink()
    again = corpus.write(pooled(out), resume=True, on_other_run="replace")
    assert again.manifest["entries"] == entries and verify_dataset(out).ok


# -- gc ----------------------------------------------------------------------------------------------


def _history(corpus, out, published: int):
    """``published`` versions of three plans in turn (other spans: few shards in common)."""
    plans = [corpus.plan(), corpus.plan(train_hours=20 / 3600, span_seconds=5.0),
             corpus.plan(train_hours=30 / 3600, span_seconds=8.0)]
    return [corpus.write(pooled(out), plan=plans[i % 3], force=i > 0) for i in range(published)]


def _named(out: Path, versions) -> set[str]:
    return {e["stored_at"] for v in versions for e in load_committed(f"{out}@{v}").entries}


def test_gc_removes_the_pool_objects_no_kept_version_names_and_keeps_the_others(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    _history(corpus, out, published=3)
    staged = corpus.write(pooled(out), plan=corpus.plan(test_hours=10 / 3600), force=True, publish=False)
    assert pool_files(out) == _named(out, ["v1", "v2", "v3", "v4"])
    only_v1 = _named(out, ["v1"]) - _named(out, ["v2", "v3", "v4"])
    assert only_v1  # the versions differ: some objects are v1's alone
    dry = collect_garbage(out, 2, dry_run=True)
    assert set(dry.pool.removed) == only_v1 and pool_files(out) == _named(out, ["v1", "v2", "v3", "v4"])
    assert kuration(["gc", str(out), "--keep", "2", "--dry-run"]) == 0
    assert (f"shards/ would remove {len(only_v1)} pool object(s) no kept version names, kept "
            f"{len(pool_files(out)) - len(only_v1)}") in capsys.readouterr().out
    result = collect_garbage(out, 2)
    assert result.removed == ("v1",) and set(result.pool.removed) == only_v1
    assert pool_files(out) == _named(out, ["v2", "v3", "v4"])  # what the kept versions (the staged v4 too) name
    assert all(verify_dataset(out, version=v).ok for v in ("v2", "v3", staged.version))


def test_gc_keeps_the_pool_objects_an_interrupted_build_recorded_for_its_resume(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _history(corpus, out, published=2)
    fail_the_third_read(corpus, monkeypatch)
    with pytest.raises(RuntimeError, match="injected fault"):
        corpus.write(pooled(out), plan=corpus.plan(train_hours=30 / 3600, span_seconds=4.0), force=True)
    monkeypatch.undo()
    recorded = {json.loads(p.read_bytes())["entry"]["stored_at"]
                for p in (version_dir(out, "v3") / ".kuration_resume").rglob("*.json") if p.name != "adopted.json"}
    assert recorded and not recorded & _named(out, ["v1", "v2"])
    collect_garbage(out, 1)
    assert DatasetRoot(out).versions() == ["v2", "v3"] and recorded <= pool_files(out)


@pytest.mark.parametrize("into_the_pool", [-10, 1, 2, 5])
def test_a_sigkill_during_a_pooled_gc_leaves_every_kept_version_verified_and_a_rerun_finishes(corpus, tmp_path,
                                                                                            into_the_pool):
    """Killed while removing the old versions' metadata (-10: ten unlinks before the pool
    sweep), or after the 1st, 2nd or 5th pool object it removed."""
    out = tmp_path / "out"
    _history(corpus, out, published=5)
    kept = {v: _files(out / "versions" / v) for v in ("v4", "v5")}
    named = _named(out, kept)
    # every file of the removed versions, plus the commit record gc sets aside in each
    version_files = sum(1 for v in ("v1", "v2", "v3") for p in (out / "versions" / v).rglob("*") if p.is_file()) + 3
    garbage = pool_files(out) - named
    assert len(garbage) >= 5
    child = FORK.Process(target=gc_killed_at_unlink, args=(out, 2, version_files + into_the_pool))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert named <= pool_files(out)
    for version, files in kept.items():
        assert _files(out / "versions" / version) == files and verify_dataset(out, version=version).ok
    if into_the_pool > 0:
        assert len(garbage - pool_files(out)) == into_the_pool  # the sweep had begun
    rerun = collect_garbage(out, 2)  # the lease died with the child
    assert DatasetRoot(out).versions() == ["v4", "v5"] and "v1" not in rerun.plan.kept
    assert pool_files(out) == named and all(verify_dataset(out, version=v).ok for v in kept)
