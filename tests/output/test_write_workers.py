"""``write_workers=N``: shards written and hashed in worker processes are byte-identical to
one process's, in every container; a worker's failure, and a worker process that dies, fail
the write with nothing committed, and ``resume=True`` finishes it; plugins reach the write
workers; a bad worker count, or an adapter or encoder that cannot reach a worker, is
refused before publication."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kuration.errors import InputError
from kuration.output import EncoderError, OutputSpec
from kuration.output.commit_protocol import COMMIT_FILE, CommitError
from kuration.output.write_dataset import WriteWorkerError, write_dataset
from kuration.output.write_track import ShardTarget
from kuration.output.write_workers import shard_tasks
from kuration.pipeline import OPTIONS
from kuration.landing.plugins import PluginError
from kuration.read import load_committed, verify_dataset
from tests.output.corpus import Corpus, comparable_record, data_files
from tests.output.write_worker_helpers import HookLessEncoder, TriggeredEncoder, spec_dict
from tests.plugins.plugin_factory import plugin_kit_session


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("write-workers-corpus"))


def _same_dataset(one, two) -> None:
    assert data_files(two) == data_files(one)
    assert comparable_record(two) == comparable_record(one)


@pytest.mark.parametrize("container", ["npz", "hdf5", "json"])
def test_two_workers_write_the_bytes_one_worker_writes(corpus, tmp_path, container):
    spec = OutputSpec.from_dict(spec_dict(container))
    calls: dict[int, list] = {1: [], 2: []}
    results = {n: corpus.write(tmp_path / f"w{n}", spec=spec, write_workers=n,
                               progress=lambda *args, n=n: calls[n].append(args)) for n in (1, 2)}
    _same_dataset(tmp_path / "w1", tmp_path / "w2")
    entries = results[1].manifest["entries"]
    assert {e["split"] for e in entries} == {"train", "test"} and len({e["source_id"] for e in entries}) == 3
    assert results[2].written == results[1].written == len(entries) and results[2].reused == 0
    assert calls[2] == calls[1] and [c[0] for c in calls[1]] == [1, 2, 3]  # once per source, in source order
    assert verify_dataset(tmp_path / "w2").ok


def test_the_entries_do_not_depend_on_which_worker_finishes_first(corpus, tmp_path):
    # Three workers on tasks cut from three sources finish in any order; the manifest is sorted.
    plan = corpus.plan(train_hours=80 / 3600)
    one = corpus.write(tmp_path / "one", plan=plan)
    three = corpus.write(tmp_path / "three", plan=plan, write_workers=3)
    assert three.manifest == one.manifest and three.manifest_sha256 == one.manifest_sha256
    _same_dataset(tmp_path / "one", tmp_path / "three")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(train=st.integers(10, 90), test=st.integers(0, 40), span=st.sampled_from([4.0, 10.0, 25.0]),
       container=st.sampled_from(["npz", "json"]))
def test_any_small_plan_is_written_alike_by_one_and_two_workers(corpus, tmp_path_factory, train, test, span,
                                                                 container):
    plan = corpus.plan(train_hours=train / 3600, test_hours=test / 3600, span_seconds=span)
    assume(plan.admitted().num_rows > 0)  # an empty plan is refused alike (tests/output/test_empty_plan.py)
    spec = OutputSpec.from_dict(spec_dict(container))
    root = tmp_path_factory.mktemp("plan")
    corpus.write(root / "w1", plan=plan, spec=spec)
    corpus.write(root / "w2", plan=plan, spec=spec, write_workers=2)
    _same_dataset(root / "w1", root / "w2")


def _target(source: str, k: int) -> ShardTarget:
    return ShardTarget(f"train/{source}_{k}.npz", "train", source, "str:'d'", None, k, 32 * k, 32 * k + 32)


@given(counts=st.lists(st.integers(0, 12), min_size=1, max_size=6), workers=st.integers(1, 4))
def test_tasks_cover_every_shard_once_in_order_and_each_reads_one_source(counts, workers):
    pending = {f"s{i}": [(_target(f"s{i}", k), {}) for k in range(n)] for i, n in enumerate(counts)}
    tasks = shard_tasks(pending, workers)
    assert [t.index for t in tasks] == list(range(len(tasks)))
    assert [shard for t in tasks for shard in t.shards] == [shard for shards in pending.values() for shard in shards]
    assert all({target.source_id for target, _ in t.shards} == {t.source_id} and t.shards for t in tasks)
    longest = max(1, math.ceil(sum(counts) / (2 * workers)))
    assert all(len(t.shards) <= longest for t in tasks)


def _encoded(corpus, tmp_path):
    """The encoded spec, the last source (written by the last task) and its reference dataset."""
    spec = OutputSpec.from_dict(spec_dict(encoded=True))
    last = sorted(corpus.plan().admitted().column("source_id").unique().to_pylist())[-1]
    trigger = tmp_path / "trigger"
    return spec, last, trigger


@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_a_failing_or_dying_worker_fails_the_write_uncommitted_and_resume_finishes_it(corpus, tmp_path, mode):
    spec, last, trigger = _encoded(corpus, tmp_path)
    encoder = TriggeredEncoder(trigger, last, mode)
    corpus.write(tmp_path / "reference", spec=spec, encoder=encoder)  # no trigger yet: nothing fails
    trigger.touch()
    out = tmp_path / "out"
    expected = (rf"source '{last}', shard (train|test)/.*_shard\d{{4}}\.npz: ValueError: tick \d+: the encoder's "
                r"model is not loaded; nothing was committed.*resume=True" if mode == "raise" else
                rf"a write worker process died while the workers were writing source\(s\) \[.*'{last}'.*\]"
                r".*resume=True")
    with pytest.raises(WriteWorkerError, match=expected) as caught:
        corpus.write(out, spec=spec, encoder=encoder, write_workers=2)
    if mode == "raise":  # the worker's traceback comes along as the cause
        assert "in timestep" in str(caught.value.__cause__) and "write_worker_helpers.py" in str(caught.value.__cause__)
    with pytest.raises(CommitError):
        load_committed(out)
    trigger.unlink()
    resumed = corpus.write(out, spec=spec, encoder=encoder, write_workers=2, resume=True)
    _same_dataset(tmp_path / "reference", out)
    # The tasks before the failing one finished (at most two run at once) and were kept.
    assert resumed.reused > 0 and resumed.written + resumed.reused == len(resumed.manifest["entries"])


def test_a_kuration_error_in_a_worker_is_raised_as_with_one_worker(corpus, tmp_path):
    # Which shard fails first differs (two run at once); the error and its wording do not.
    spec = OutputSpec.from_dict(spec_dict(encoded=True))
    for n in (1, 2):
        with pytest.raises(EncoderError, match=r"^HookLessEncoder.timestep returned no 'tick_parity' for source '.*', "
                                               r"entity .*, row \d+ \(tick \d+\); it returned \[\]$"):
            corpus.write(tmp_path / f"w{n}", spec=spec, encoder=HookLessEncoder(), write_workers=n)


@pytest.mark.parametrize("value", [0, -2, 1.5, True, "2", None])
def test_a_bad_worker_count_is_refused_naming_it_before_anything_is_touched(corpus, tmp_path, value):
    with pytest.raises(InputError, match=r"^write_workers must be"):
        corpus.write(tmp_path / "planned", write_workers=value)
    with pytest.raises(InputError, match=r"^write_workers must be"):
        write_dataset(tmp_path / "scored", schema=corpus.schema, adapter=corpus.adapter,
                      strategy=corpus.settings.strategy, segmenter=corpus.settings.segmenter, spec=corpus.spec,
                      train_hours=0.01, write_workers=value)
    assert not (tmp_path / "planned").exists() and not (tmp_path / "scored").exists()
    assert "write_workers" in OPTIONS  # Pipeline(...).with_options(write_workers=2) passes it on


class _LambdaEncoder:
    def __init__(self) -> None:
        self.hook = lambda record: record["_tick"] % 2

    def timestep(self, record, ctx):
        return {"tick_parity": self.hook(record)}


def test_an_encoder_that_cannot_reach_a_worker_is_refused_before_publication(corpus, tmp_path):
    spec = OutputSpec.from_dict(spec_dict(encoded=True))
    with pytest.raises(InputError, match=r"write_workers > 1 sends the adapter .* the encoder \(_LambdaEncoder\).* "
                                         r"cannot be pickled.*or write with write_workers=1"):
        corpus.write(tmp_path / "out", spec=spec, encoder=_LambdaEncoder(), write_workers=2)
    assert not (tmp_path / "out" / COMMIT_FILE).exists()
    assert corpus.write(tmp_path / "one", spec=spec, encoder=_LambdaEncoder()).written > 0  # fine in this process


@pytest.fixture
def plugin_kit(tmp_path, monkeypatch):
    yield from plugin_kit_session(tmp_path / "plugins", monkeypatch, prefix="kwrite")


def test_write_workers_import_every_loaded_plugin(corpus, tmp_path, plugin_kit):
    picky = plugin_kit.write_failing_in_workers()
    with pytest.raises(PluginError, match=rf"plugin module '{picky}' \(declared in the dataset write's parent "
                                          r"process, whose plugins and user code every write worker imports\) raised "
                                          r"at import: RuntimeError: licence server unreachable from this worker"):
        corpus.write(tmp_path / "out", write_workers=2)
