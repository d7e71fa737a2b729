"""Retention of a dataset root's versions (kuration.output.version_gc) and reader pins
(kuration.output.version_pins): what gc removes and why it keeps the rest, that it never
removes the current, a newer or a pinned version, that a SIGKILL during gc leaves every
kept version verified, and that the pipeline applies keep_versions after a publish."""

import datetime as _dt
import json
import pickle
import shutil
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuration.errors import CommitError, InputError
from kuration.output.commit_protocol import COMMIT_FILE, publish_writing
from kuration.output.destinations import open_destination
from kuration.output.lease import DestinationLease, LeaseError
from kuration.output.version_gc import collect_garbage, decide_retention, plan_gc
from kuration.output.version_pins import (
    VersionPin, active_pins, pin_version, pinned_version, unpin_version,
)
from kuration.output.version_listing import describe_versions
from kuration.output.versions import DatasetRoot, version_name
from kuration.output.write_plan import WriteOptions
from kuration.read import iter_shards, load_committed, verify_dataset
from kuration_cli import main as kuration
from tests.output.corpus import Corpus
from tests.output.writer_processes import FORK, gc_killed_at_unlink


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("gc-corpus"))


def _history(corpus, out, published: int, staged: int = 0):
    """``published`` versions, each made current in turn (alternating plans, so versions
    differ in content and share most shards), then ``staged`` newer ones left unpublished."""
    plans = [corpus.plan(), corpus.plan(train_hours=20 / 3600)]
    for index in range(published + staged):
        corpus.write(out, plan=plans[index % 2], force=index > 0, publish=index < published)


def _tree(out) -> dict[str, tuple[bytes, int]]:
    """Every file under ``out`` (hidden ones too, not the lease): its bytes and inode."""
    return {str(p.relative_to(out)): (p.read_bytes(), p.stat().st_ino) for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != ".kuration-writer.lock"}


def _expired_pin(out, version: str, holder: str) -> None:
    past = _dt.datetime(2020, 1, 1, tzinfo=_dt.timezone.utc)
    pin = VersionPin(version, holder, past.isoformat(timespec="seconds"),
                     (past + _dt.timedelta(hours=1)).isoformat(timespec="seconds"))
    (out / "pins").mkdir(exist_ok=True)
    (out / "pins" / f"{holder}.json").write_bytes(pin.to_bytes())


def test_keep_two_of_five_published_versions_removes_exactly_the_three_oldest(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=5)
    result = collect_garbage(out, 2)
    assert result.removed == ("v1", "v2", "v3") and not result.dry_run
    assert {f.version: f.why for f in result.plan.fates if not f.removed} == {
        "v4": "within keep_versions=2", "v5": "current"}
    assert all(f.why == "older than the newest 2 committed versions" for f in result.plan.fates if f.removed)
    assert DatasetRoot(out).versions() == ["v4", "v5"]
    for version in ("v4", "v5"):  # their shards were hard links to the removed versions' files
        assert verify_dataset(out, version=version).ok
    assert [row["version"] for row in describe_versions(out)] == ["v4", "v5"]
    assert collect_garbage(out, 2).removed == ()  # nothing more to do


def test_gc_never_removes_the_current_a_newer_or_a_pinned_version_and_ignores_an_expired_pin(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=3, staged=2)  # v3 current, v4 and v5 staged
    pin_version(out, "v1", holder="long-job", ttl_seconds=3600)
    _expired_pin(out, "v2", "crashed-job")
    plan = plan_gc(out, 1)
    assert plan.current == "v3" and plan.removed == ("v2",) and plan.expired_pins == ("crashed-job",)
    why = {f.version: f.why for f in plan.fates}
    assert why["v1"].startswith("pinned by long-job until ") and why["v3"] == "current"
    assert why["v4"] == why["v5"] == "newer than current"
    assert collect_garbage(out, 1).removed == ("v2",)
    assert DatasetRoot(out).versions() == ["v1", "v3", "v4", "v5"]
    assert sorted(p.name for p in (out / "pins").iterdir()) == ["long-job.json"]  # the expired pin went
    assert all(verify_dataset(out, version=v).ok for v in ("v1", "v3", "v4", "v5"))
    unpin_version(out, "long-job")
    assert collect_garbage(out, 1).removed == ("v1",)


def test_folders_of_killed_builds_older_than_the_current_version_are_removed(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=2)
    shutil.copytree(out / "versions" / "v2", out / "versions" / "v3")
    publish_writing(open_destination(out / "versions" / "v3"), run_fingerprint="f" * 64, marker=b"{}")
    corpus.write(out, force=True)  # v4, current: the killed v3 is older now
    plan = plan_gc(out, 3)
    assert plan.removed == ("v3",) and plan.fates[2].why == "never committed (writing): a killed or failed build"
    assert collect_garbage(out, 3).removed == ("v3",) and DatasetRoot(out).versions() == ["v1", "v2", "v4"]


def test_nothing_published_means_nothing_removed_and_a_plain_root_dataset_is_never_touched(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=0, staged=2)
    result = collect_garbage(out, 1)
    assert result.removed == () and "nothing is published yet" in result.plan.note
    plain = tmp_path / "plain"
    shutil.copytree(out / "versions" / "v1", plain)  # a dataset written before versions
    before = _tree(plain)
    for _ in range(3):
        corpus.write(plain, force=True)
    assert collect_garbage(plain, 1).removed == ("v1", "v2")
    assert {k: v for k, v in _tree(plain).items() if not k.startswith(("versions/", "published/"))} == before
    assert verify_dataset(plain, version="v0").ok and verify_dataset(plain).ok


def test_a_dry_run_changes_nothing_and_names_what_a_run_removes(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=4)
    _expired_pin(out, "v1", "old")
    before = _tree(out)
    dry = collect_garbage(out, 2, dry_run=True)
    assert dry.dry_run and dry.removed == ("v1", "v2") and _tree(out) == before
    assert collect_garbage(out, 2).removed == dry.removed


@pytest.mark.parametrize("unlinks", [1, 9, 40])
def test_a_sigkill_during_gc_leaves_every_kept_version_verified_and_a_rerun_finishes(corpus, tmp_path, unlinks):
    out = tmp_path / "out"
    _history(corpus, out, published=5)
    kept = {v: _tree(out / "versions" / v) for v in ("v4", "v5")}
    child = FORK.Process(target=gc_killed_at_unlink, args=(out, 2, unlinks))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert not (out / "versions" / "v1" / COMMIT_FILE).exists()  # the commit record went first
    for version, files in kept.items():
        assert _tree(out / "versions" / version) == files and verify_dataset(out, version=version).ok
    assert str(load_committed(out).root).endswith("v5")
    with pytest.raises(CommitError, match="removed by gc"):
        load_committed(out, version="v1")  # half removed: refused, never read
    rerun = collect_garbage(out, 2)  # the lease died with the child
    assert DatasetRoot(out).versions() == ["v4", "v5"] and "v1" not in rerun.plan.kept
    assert all(verify_dataset(out, version=v).ok for v in kept)


def test_gc_while_a_writer_holds_the_lease_is_refused_and_removes_nothing(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=3)
    before = _tree(out)
    with DestinationLease(out):
        with pytest.raises(LeaseError, match=r"another writer holds this destination \(pid \d+ on "):
            collect_garbage(out, 1)
    assert _tree(out) == before


def test_reading_a_removed_version_says_gc_removed_it_and_lists_the_kept_ones(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=4)
    collect_garbage(out, 2)
    with pytest.raises(CommitError, match=r"v1 was published once and has been removed by gc \(keep_versions\); the "
                                          r"kept versions are v3, v4"):
        load_committed(f"{out}@v1")
    assert not verify_dataset(out, version="v2").ok


def test_a_reader_on_a_pinned_old_version_keeps_reading_it_after_gc(corpus, tmp_path):
    torch_reader = pytest.importorskip("kuration.torch")
    out = tmp_path / "out"
    first = corpus.write(out)
    with pinned_version(out, holder="train-job", ttl_seconds=3600) as ref:
        assert ref == f"{out}@v1"
        dataset = torch_reader.ShardDataset(ref)
        for _ in range(3):
            corpus.write(out, plan=corpus.plan(train_hours=20 / 3600), force=True)
        assert collect_garbage(out, 1).removed == ("v2", "v3")
        in_a_worker = pickle.loads(pickle.dumps(dataset))
        assert len(in_a_worker) == len(first.manifest["entries"]) and in_a_worker[0]["pos"].shape[-1] == 3
        assert sum(1 for _ in iter_shards(ref)) == len(first.manifest["entries"])
        assert describe_versions(out)[0]["pinned"] == ["train-job"]
    assert active_pins(out) == [] and collect_garbage(out, 1).removed == ("v1",)


def test_a_pin_made_while_gc_removes_its_version_keeps_it(corpus, tmp_path, monkeypatch):
    from kuration.output import version_gc

    out = tmp_path / "out"
    _history(corpus, out, published=3)
    real = version_gc.active_pins

    def pinned_meanwhile(root):  # a reader pins v1 between gc's plan and its removal
        if not (out / "pins").exists():
            (out / "pins").mkdir()
            fresh = VersionPin("v1", "late", "2999-01-01T00:00:00+00:00", "2999-01-02T00:00:00+00:00")
            (out / "pins" / "late.json").write_bytes(fresh.to_bytes())
        return real(root)

    monkeypatch.setattr(version_gc, "active_pins", pinned_meanwhile)
    result = collect_garbage(out, 1)
    assert result.removed == ("v2",) and result.late_pins == ("v1",)
    assert verify_dataset(out, version="v1").ok  # its commit record was put back


class _Killed(BaseException):
    """Stands for a SIGKILL at one line of gc (nothing after it runs; the lease is freed as
    a dead holder's is)."""


def test_a_gc_killed_while_a_pin_arrives_leaves_the_record_aside_and_the_next_gc_puts_it_back(
        corpus, tmp_path, monkeypatch):
    from kuration.output import version_gc

    out = tmp_path / "out"
    _history(corpus, out, published=3)
    before = {name: data for name, (data, _) in _tree(out / "versions" / "v1").items()}

    def pinned_then_killed(root):  # v1's record is aside, a reader pins v1, and gc dies
        fresh = VersionPin("v1", "late", "2999-01-01T00:00:00+00:00", "2999-01-02T00:00:00+00:00")
        (out / "pins").mkdir(exist_ok=True)
        (out / "pins" / "late.json").write_bytes(fresh.to_bytes())
        raise _Killed

    monkeypatch.setattr(version_gc, "active_pins", pinned_then_killed)
    with pytest.raises(_Killed):
        collect_garbage(out, 1)
    monkeypatch.undo()
    assert not (out / "versions" / "v1" / COMMIT_FILE).exists()
    with pytest.raises(CommitError):
        load_committed(out, version="v1")  # in that moment: refused, never read half
    rerun = collect_garbage(out, 1)
    assert rerun.removed == ("v2",) and "v1" in rerun.plan.kept
    after = {name: data for name, (data, _) in _tree(out / "versions" / "v1").items()}
    assert after == before and verify_dataset(out, version="v1").ok  # the same bytes, the record back
    unpin_version(out, "late")
    assert collect_garbage(out, 1).removed == ("v1",)


def test_a_record_set_aside_for_an_unpinned_version_goes_with_its_folder(corpus, tmp_path):
    from kuration.output.version_gc import SET_ASIDE_COMMIT

    out = tmp_path / "out"
    _history(corpus, out, published=3)
    folder = out / "versions" / "v1"
    (folder / SET_ASIDE_COMMIT).write_bytes((folder / COMMIT_FILE).read_bytes())
    (folder / COMMIT_FILE).unlink()  # a gc killed after setting v1's record aside, and no pin came
    assert collect_garbage(out, 1).removed == ("v1", "v2") and not folder.exists()


def test_pins_refuse_bad_holders_uncommitted_versions_and_a_torn_pin_stops_gc(corpus, tmp_path):
    out = tmp_path / "out"
    _history(corpus, out, published=3)
    with pytest.raises(InputError, match="letters, digits, '.', '_' and '-', starting with a letter or digit"):
        pin_version(out, "v1", holder="../escape", ttl_seconds=60)
    with pytest.raises(InputError, match="ttl_seconds must be a positive number"):
        pin_version(out, "v1", holder="job", ttl_seconds=0)
    (out / "versions" / "v9").mkdir()
    with pytest.raises(CommitError, match="v9: not a committed version"):
        pin_version(out, "v9", holder="job", ttl_seconds=60)
    pin = pin_version(out, None, holder="job", ttl_seconds=60)
    assert pin.version == "v3" and [p.holder for p in active_pins(out)] == ["job"]
    body = json.loads((out / "pins" / "job.json").read_bytes())
    (out / "pins" / "job.json").write_text(json.dumps({**body, "version": "v1"}))
    with pytest.raises(CommitError, match=r"pins/job\.json: not a version pin, or one edited by hand.*removes "
                                          "nothing"):
        collect_garbage(out, 1)
    assert DatasetRoot(out).versions() == ["v1", "v2", "v3", "v9"]


def test_keep_versions_must_be_a_positive_integer(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    corpus.write(out)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InputError, match="keep_versions must be an integer >= 1"):
            collect_garbage(out, bad)
        with pytest.raises(InputError, match="keep_versions must be an integer >= 1"):
            WriteOptions(keep_versions=bad)
    assert kuration(["gc", str(out), "--keep", "0"]) == 2
    assert "keep_versions must be an integer >= 1" in capsys.readouterr().err


def test_a_write_that_publishes_applies_keep_versions_under_its_lease(corpus, tmp_path):
    out = tmp_path / "out"
    removed = [corpus.write(out, force=index > 0, keep_versions=2).versions_removed for index in range(4)]
    assert removed == [(), (), ("v1",), ("v2",)] and DatasetRoot(out).versions() == ["v3", "v4"]
    staged = corpus.write(out, force=True, publish=False, keep_versions=1)
    assert staged.versions_removed == () and DatasetRoot(out).versions() == ["v3", "v4", "v5"]  # no publish, no gc
    assert all(verify_dataset(out, version=v).ok for v in ("v3", "v4", "v5"))


def test_kuration_gc_pin_and_unpin_on_the_command_line(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    _history(corpus, out, published=4)
    assert kuration(["pin", str(out), "--holder", "eval", "--version", "v1", "--hours", "2"]) == 0
    assert f"{out}@v1: pinned by eval until " in capsys.readouterr().out
    assert kuration(["versions", str(out)]) == 0
    assert "pinned by eval" in capsys.readouterr().out.splitlines()[0]
    assert kuration(["gc", str(out), "--keep", "2", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("v1     kept         pinned by eval until ")
    assert lines[1] == "v2     would remove older than the newest 2 committed versions"
    assert lines[2:] == ["v3     kept         within keep_versions=2", "v4     kept         current"]
    assert kuration(["unpin", str(out), "--holder", "eval"]) == 0
    assert capsys.readouterr().out == f"{out}: eval holds no pin now\n"
    assert kuration(["gc", str(out), "--keep", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["removed"] == ["v1", "v2"] and report["plan"]["current"] == "v4"
    assert kuration(["publish", str(out), "--version", "v3", "--keep", "1"]) == 0
    assert "v3 is current" in capsys.readouterr().out and DatasetRoot(out).versions() == ["v3", "v4"]


_STATES = st.sampled_from(["committed", "committed", "committed", "writing", "empty", "torn"])


@settings(max_examples=300, deadline=None)
@given(states=st.lists(_STATES, min_size=1, max_size=12), data=st.data())
def test_retention_always_keeps_current_newer_and_pinned_and_exactly_keep_committed_up_to_current(states, data):
    versions = {version_name(i + 1): state for i, state in enumerate(states)}
    names = list(versions)
    current = data.draw(st.sampled_from([None, *[v for v in names if versions[v] == "committed"]]))
    keep = data.draw(st.integers(1, 6))
    pinned = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
    pins = [VersionPin(v, f"h{i}", "2000-01-01T00:00:00+00:00", "2999-01-01T00:00:00+00:00")
            for i, v in enumerate(pinned)]
    fates = decide_retention(versions, current, pins, keep)
    kept = {f.version for f in fates if not f.removed}
    assert [f.version for f in fates] == names
    if current is None:
        assert kept == set(names)
        return
    number = int(current[1:])
    assert kept >= {v for v in names if int(v[1:]) >= number} | set(pinned)
    committed_up_to = [v for v in names if versions[v] == "committed" and int(v[1:]) <= number]
    if not pinned:
        assert len(kept & set(committed_up_to)) == min(keep, len(committed_up_to))
        assert kept - set(committed_up_to) == {v for v in names if int(v[1:]) > number}
