"""CuratedDatasetAdapter: the adapter contract over a committed dataset, the write ->
re-ingest -> write chain with every container, identity, tampering, moves, and the
manifest rules re-ingesting adds."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.output import OutputSpec
from kuration.output.commit_protocol import COMMIT_FILE, MANIFEST_FILE
from kuration.output.shard_files import shard_stem
from kuration.output.write_dataset import DatasetWriteError, WriteOptions, write_planned_dataset
from kuration.output.write_track import write_track
from kuration.read import verify_dataset
from kuration.scoring import FsspecScoreCache, score_sources
from kuration.sources import CuratedDatasetAdapter, SourceError, TickDataError
from kuration.sources.curated import ENTITY_COLUMN, TIME_COLUMN, plan_curated_sources
from kuration.sources.entities import entity_key
from kuration.sources.media import MediaError
from kuration.sources.schema import Schema
from kuration.sources.ticks import Ticks
from kuration.sources.tracks import Track, tracks_from_ticks

from tests.output.committed_datasets import build, manifest_of, rechain_shard, recommit
from tests.output.corpus import Corpus, snapshot, version_dir
from kuration.testing import AdapterContract
from tests.sources.curated_datasets import (
    DATASET, EPISODE_SCHEMA, EPISODE_SPEC, SEGMENTER, STRATEGY, present_rows, publish, rewrite, spec_with,
    write_episodes,
)


class TestCuratedContract(AdapterContract):
    """The shared contract, with the frame a field: a re-ingested dataset has no media columns."""

    @pytest.fixture
    def schema(self) -> Schema:
        return Schema.from_dict({"sample_hz": 10, "time": TIME_COLUMN, "fields": {
            "frame": {"dtype": "uint8", "shape": [2, 2]}, "pos": {"dtype": "float32", "shape": [3]},
            "speed": {"dtype": "float64"}}})

    def write(self, root, episodes):
        write_episodes(root / DATASET, episodes)

    def make_adapter(self, root, schema):
        return CuratedDatasetAdapter(root / DATASET)

    def expected_ids(self, count):
        return [shard_stem(f"ep{i}", "none:None", None) for i in range(count)]

    def test_decode_media_returns_the_frames_in_bounded_batches(self, adapter):
        source_id = adapter.list_sources()[0]
        with pytest.raises(MediaError, match=re.escape("declare 'field:frame'")):
            adapter.decode_media("frame", ["x#0"], source_id=source_id)

    def test_decode_media_absent_slot_is_zero_and_order_is_kept(self, adapter, episodes):
        # No references to decode: the frame is a field, and comes back with every row.
        source_id = adapter.list_sources()[0]
        np.testing.assert_array_equal(adapter.read_ticks(source_id).columns["frame"], episodes[0]["frame"])


# ---- write -> re-ingest -> write, every container ----------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("curated-corpus"))


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
def test_write_reingest_write_round_trips_every_container(corpus, tmp_path, container):
    # 150 s: enough spans that some hold the demo's radio drop-outs (absent rows)
    first = corpus.write(tmp_path / "first", plan=corpus.plan(train_hours=100 / 3600, test_hours=50 / 3600),
                         spec=spec_with(container))
    adapter = CuratedDatasetAdapter(tmp_path / "first")
    assert adapter.schema.entity == ENTITY_COLUMN and adapter.schema.sample_hz == corpus.schema.sample_hz
    assert {name: (f.dtype, f.shape) for name, f in adapter.schema.fields.items()} == {
        name: (m.dtype, m.shape) for name, m in spec_with(container).modalities.items()}

    second = rewrite(adapter, tmp_path / "second")
    assert second.record.state == "committed"
    verification = verify_dataset(tmp_path / "second")
    assert verification.ok, verification.errors
    spans = {(e["source_id"], e["entity_id"], e["span_index"]) for e in first.manifest["entries"]}
    assert len(adapter.list_sources()) == len(spans)
    by_source: dict[str, list[dict]] = {}
    for entry in second.manifest["entries"]:
        assert entry["container"] == container
        by_source.setdefault(entry["source_id"], []).append(entry)
    assert sorted(by_source) == adapter.list_sources()  # every span admitted again, whole
    absent_before = 0
    for source_id, entries in by_source.items():
        origin = adapter.curated_source(source_id)
        assert {(e["entity_id"], e["split"]) for e in entries} == {(origin.entity_key, origin.split)}
        before = present_rows(tmp_path / "first", list(origin.entries))
        after = present_rows(tmp_path / "second", sorted(entries, key=lambda e: e["start"]))
        assert set(after) == set(before)
        for name, values in before.items():
            assert after[name].dtype == values.dtype == spec_with(container).modalities[name].numpy_dtype
            np.testing.assert_array_equal(after[name], values, err_msg=f"{source_id}: {name}")
        # absent rows are dropped on the way in: the second dataset holds present rows only
        assert sum(e["n_steps"] for e in entries) == len(before["pos"])
        absent_before += origin.n_steps - len(before["pos"])
    assert absent_before > 0


def test_the_original_split_is_kept_and_the_grouping_is_the_original_source(corpus, tmp_path):
    first = corpus.write(tmp_path / "first")
    adapter = CuratedDatasetAdapter(tmp_path / "first")
    table = adapter.split_assignments()
    assert table.column_names == ["stage", "source", "group"]
    for stage, source, group in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
        origin = adapter.curated_source(source)
        assert (stage, group) == (origin.split, origin.original_source_id)
        assert {e["split"] for e in first.manifest["entries"] if e["source_id"] == group} == {stage}
    assert adapter.group_of == {row["source"]: row["group"] for row in table.to_pylist()}


def test_a_rewrite_can_change_container_and_shard_length(corpus, tmp_path):
    corpus.write(tmp_path / "first")
    adapter = CuratedDatasetAdapter(tmp_path / "first")
    second = rewrite(adapter, tmp_path / "second", container="parquet", shard_length=7, short_policy="keep")
    assert {e["container"] for e in second.manifest["entries"]} == {"parquet"}
    assert max(e["n_steps"] for e in second.manifest["entries"]) == 7
    again = CuratedDatasetAdapter(tmp_path / "second")
    source = again.list_sources()[0]
    origin = again.curated_source(source)
    # re-ingesting the re-ingested: the same rows under the second dataset's sources
    np.testing.assert_array_equal(again.read_ticks(source).columns["pos"],
                                  adapter.read_ticks(origin.original_source_id).columns["pos"])



def test_scoring_in_worker_processes_gives_what_one_process_gives(dataset):
    adapter = CuratedDatasetAdapter(dataset)
    one = score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY)
    two = score_sources(adapter, segmenter=SEGMENTER, strategy=STRATEGY, workers=2)  # the adapter is pickled
    assert not one.skipped and one.count("scored") == len(adapter.list_sources())
    assert two.segments.equals(one.segments)


def test_overlapping_counted_segments_are_separate_sources(corpus, tmp_path):
    # a count budget admits windows (10 s every 5 s here): one entity's admitted rows overlap
    plan = corpus.plan(train_hours=None, test_hours=None, span_seconds=None, train_count=12, test_count=4)
    corpus.write(tmp_path / "first", plan=plan)
    adapter = CuratedDatasetAdapter(tmp_path / "first")
    by_track: dict[tuple[str, str], list[set[int]]] = {}
    for source in adapter.list_sources():
        origin = adapter.curated_source(source)
        ticks = adapter.read_ticks(source).tick
        assert len(np.unique(ticks)) == len(ticks)  # one span: no tick twice
        by_track.setdefault((origin.original_source_id, origin.entity_key), []).append(set(ticks.tolist()))
    assert any(a & b for spans in by_track.values() for i, a in enumerate(spans) for b in spans[i + 1:])
    again = rewrite(adapter, tmp_path / "again")
    assert len({e["source_id"] for e in again.manifest["entries"]}) == len(adapter.list_sources())
    assert verify_dataset(tmp_path / "again").ok


# ---- identity ---------------------------------------------------------------------------


@pytest.fixture
def dataset(corpus, tmp_path) -> Path:
    """A dataset root holding one published version."""
    corpus.write(tmp_path / "first")
    return tmp_path / "first"


@pytest.fixture
def plain(dataset, tmp_path) -> Path:
    """The dataset's current version copied alone: a plain seed-layout dataset, which tests
    may re-commit in place (a published version is never rewritten: its publish record pins
    its commit record, so readers of the root would refuse it)."""
    return Path(shutil.copytree(version_dir(dataset), tmp_path / "plain"))


def test_re_curating_a_dataset_onto_itself_never_touches_the_version_it_reads(dataset, tmp_path):
    """The adapter reads one version folder. A write onto that folder (however the path is
    spelled) is refused before anything is touched. A write onto its dataset root commits a
    new version beside it, as every write does: the version read stays byte for byte, and the
    adapter keeps reading it (the seed refused the root too, since a write there replaced the
    shards being read; versions never replace a file)."""
    adapter = CuratedDatasetAdapter(dataset)
    folder = version_dir(dataset)
    assert adapter.dataset_url == str(folder)
    sources, before = adapter.list_sources(), snapshot(dataset)
    (tmp_path / "elsewhere").mkdir()
    alias = tmp_path / "elsewhere" / ".." / dataset.name / folder.relative_to(dataset)  # spelled otherwise
    for out in (folder, alias):
        with pytest.raises(DatasetWriteError, match=r"is the dataset CuratedDatasetAdapter\(.*\) reads; writing onto "
                                                    r"it would replace its shards while they are read"):
            rewrite(adapter, out)
    first = rewrite(adapter, tmp_path / "second")

    def onto(out: Path):
        return write_planned_dataset(out, first.budget_plan, adapter=adapter, schema=adapter.schema,
                                     spec=adapter.passthrough_spec(),
                                     options=WriteOptions(resume=True, on_other_run="replace"))

    with pytest.raises(DatasetWriteError, match="is the dataset .* reads"):
        onto(folder)
    assert snapshot(dataset) == before
    onto(dataset)
    assert version_dir(dataset) != folder and verify_dataset(dataset).ok  # a new version, published
    assert {k: v for k, v in snapshot(dataset).items() if k in before} == before  # the read version, unchanged
    assert verify_dataset(folder).ok and adapter.list_sources() == sources and adapter.dataset_url == str(folder)
    assert adapter.read_ticks(sources[0]).columns["pos"].size


def test_identity_is_strong_and_the_same_from_two_adapters(dataset):
    one, two = CuratedDatasetAdapter(dataset), CuratedDatasetAdapter(dataset)
    ids = one.list_sources()
    tokens = [one.identity(s) for s in ids]
    assert all(t.strong and t.kind == "fingerprint" for t in tokens)
    assert [two.identity(s) for s in ids] == tokens
    assert len(set(tokens)) == len(ids)


def test_identity_changes_when_a_shard_changes_and_only_for_its_source(plain):
    """On a plain dataset re-committed in place, the same adapter follows the new commit."""
    adapter = CuratedDatasetAdapter(plain)
    ids = adapter.list_sources()
    before = {s: adapter.identity(s) for s in ids}
    entries = manifest_of(plain)["entries"]
    index = 0
    changed = next(s for s in ids if entries[index] in adapter.curated_source(s).entries)
    data = bytearray((plain / entries[index]["path"]).read_bytes())
    data[-1] ^= 0xFF
    rechain_shard(plain, index, bytes(data))  # a consistent chain over a different shard
    after = {s: adapter.identity(s) for s in ids}  # the same adapter follows the new commit
    assert after[changed] != before[changed]
    assert {s: t for s, t in after.items() if s != changed} == {s: t for s, t in before.items() if s != changed}
    assert CuratedDatasetAdapter(plain).identity(changed) == after[changed]


def test_a_tampered_shard_is_refused_by_identity_and_read(dataset):
    adapter = CuratedDatasetAdapter(dataset)
    source = adapter.list_sources()[0]
    entry = adapter.curated_source(source).entries[-1]
    path = version_dir(dataset) / entry["path"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))  # the manifest still records the old size and SHA-256
    with pytest.raises(SourceError, match=re.escape(source) + ".*changed or is corrupt"):
        adapter.identity(source)
    with pytest.raises(SourceError, match=re.escape(source) + ".*SHA-256 differs from the manifest"):
        adapter.read_ticks(source)
    other = adapter.list_sources()[-1]
    assert adapter.identity(other).strong and len(adapter.read_ticks(other))  # the others are fine
    path.unlink()
    with pytest.raises(SourceError, match="missing"):
        adapter.identity(source)


def test_a_moved_dataset_reads_the_same_and_keeps_its_identities(dataset, tmp_path):
    before = CuratedDatasetAdapter(dataset)
    ids = before.list_sources()
    tokens = [before.identity(s) for s in ids]
    ticks = before.read_ticks(ids[0])
    moved = tmp_path / "elsewhere" / "run"
    moved.parent.mkdir()
    shutil.move(dataset, moved)
    after = CuratedDatasetAdapter(version_dir(moved) / MANIFEST_FILE)  # the manifest's path works too
    assert after.list_sources() == ids and [after.identity(s) for s in ids] == tokens
    again = after.read_ticks(ids[0])
    np.testing.assert_array_equal(again.tick, ticks.tick)
    np.testing.assert_array_equal(again.columns["frame"], ticks.columns["frame"])



def test_cached_scores_are_reused_exactly_when_the_content_is_unchanged(dataset, tmp_path):
    """The moved root and its version folder opened alone share identities; the folder is
    then re-committed in place with one shard changed (a plain dataset now: its root's
    publish record no longer vouches for it)."""
    cache = FsspecScoreCache(tmp_path / "cache")

    def score(path: Path) -> dict[str, str]:
        result = score_sources(CuratedDatasetAdapter(path), segmenter=SEGMENTER, strategy=STRATEGY, cache=cache)
        return {o.source_id: o.status for o in result.outcomes}

    first = score(dataset)
    assert set(first.values()) == {"scored"}
    moved = tmp_path / "moved"
    shutil.move(dataset, moved)
    assert set(score(moved).values()) == {"cached"}  # a new adapter over the moved copy: same identities
    folder = version_dir(moved)
    assert set(score(folder).values()) == {"cached"}  # the version folder opened alone: the same too
    entries = manifest_of(folder)["entries"]
    donor = next(e for e in entries[1:] if (e["n_steps"], e["rows"]) == (entries[0]["n_steps"], entries[0]["rows"]))
    rechain_shard(folder, 0, (folder / donor["path"]).read_bytes())  # another valid shard's rows in its place
    changed = CuratedDatasetAdapter(folder)
    (source,) = [s for s in changed.list_sources()
                 if entries[0]["path"] in {e["path"] for e in changed.curated_source(s).entries}]
    after = score(folder)
    assert after.pop(source) == "scored" and set(after.values()) == {"cached"}


# ---- what the manifest must hold ----------------------------------------------------------


def test_a_dataset_that_is_not_committed_is_refused(dataset, tmp_path):
    """Nothing at the path; a version folder without its commit record, opened alone; and its
    root, whose publish record names a version whose commit record is gone."""
    with pytest.raises(SourceError, match="not a committed dataset"):
        CuratedDatasetAdapter(tmp_path / "nothing_here")
    folder = version_dir(dataset)
    record = json.loads((folder / COMMIT_FILE).read_bytes())
    (folder / COMMIT_FILE).unlink()
    with pytest.raises(SourceError, match=f"not a committed dataset.*no {re.escape(COMMIT_FILE)}"):
        CuratedDatasetAdapter(folder)
    with pytest.raises(SourceError, match=f"not a committed dataset.*its {re.escape(COMMIT_FILE)} is not the one "
                                          "publish record 1 pins"):
        CuratedDatasetAdapter(dataset)
    assert record["state"] == "committed"


def test_a_dataset_torn_after_the_adapter_was_made_is_refused(dataset):
    adapter = CuratedDatasetAdapter(dataset)
    source = adapter.list_sources()[0]
    (version_dir(dataset) / COMMIT_FILE).write_bytes(b'{"state": "committed"')  # the version it reads
    with pytest.raises(SourceError, match=re.escape(COMMIT_FILE)):
        adapter.read_ticks(source)


def test_a_rewrite_with_other_modalities_needs_a_new_adapter(tmp_path):
    out = tmp_path / DATASET
    write_episodes(out, [{"pos": np.zeros((3, 3), np.float32), "speed": np.ones(3),
                          "frame": np.zeros((3, 2, 2), np.uint8)}])
    adapter = CuratedDatasetAdapter(out)
    manifest = manifest_of(out)
    del manifest["output"]["modalities"]["speed"]
    recommit(out, manifest)
    with pytest.raises(SourceError, match="make a new CuratedDatasetAdapter"):
        adapter.list_sources()
    assert "speed" not in CuratedDatasetAdapter(out).schema.fields


def test_entries_without_the_rows_they_hold_are_refused(tmp_path):
    out = build(tmp_path / "built")  # a hand-built manifest: no start / stop
    with pytest.raises(SourceError, match=r"entries\[0\]: lacks \['start', 'stop'\]"):
        CuratedDatasetAdapter(out)


def test_overlapping_shards_of_one_span_are_refused():
    entries = [{"path": f"train/s{k}.npz", "split": "train", "source_id": "s", "entity_id": "int:1", "span_index": 0,
                "shard_index": k, "start": start, "stop": start + 4, "n_steps": 4} for k, start in enumerate((0, 2))]
    with pytest.raises(SourceError, match=r"entries\[0\] \(train/s0.npz\) and entries\[1\] .* overlap"):
        plan_curated_sources(entries, where="m.json")
    entries[1].update(start=4, stop=8)
    (source,) = plan_curated_sources(entries, where="m.json").values()
    assert (source.entity_id, source.span_index, source.n_steps) == (1, 0, 8)
    entries[1]["entity_id"] = "int:01"
    with pytest.raises(SourceError, match=r"entries\[1\]\.entity_id: .*canonical"):
        plan_curated_sources(entries, where="m.json")


def test_presence_mask_false_is_refused(tmp_path):
    spec = OutputSpec.from_dict({**EPISODE_SPEC.to_dict(), "presence_mask": False})
    out = tmp_path / DATASET
    raw = {"t": np.arange(3), "pos": np.zeros((3, 3), np.float32), "speed": np.ones(3),
           "frame": np.zeros((3, 2, 2), np.uint8)}
    (track,) = tracks_from_ticks(EPISODE_SCHEMA, Ticks.from_columns(EPISODE_SCHEMA, "ep", raw))
    publish(out, spec, write_track(out, track, spec, schema=EPISODE_SCHEMA, split="train"))
    with pytest.raises(SourceError, match="presence_mask: false"):
        CuratedDatasetAdapter(out)


def test_sample_hz_comes_from_the_config_or_the_argument(tmp_path):
    out = tmp_path / DATASET
    raw = {"t": np.arange(3), "pos": np.zeros((3, 3), np.float32), "speed": np.ones(3),
           "frame": np.zeros((3, 2, 2), np.uint8)}
    (track,) = tracks_from_ticks(EPISODE_SCHEMA, Ticks.from_columns(EPISODE_SCHEMA, "ep", raw))
    publish(out, EPISODE_SPEC, write_track(out, track, EPISODE_SPEC, schema=EPISODE_SCHEMA, split="val"),
            config={"job": {}})
    with pytest.raises(SourceError, match=r"records no job\.schema\.sample_hz.*pass sample_hz="):
        CuratedDatasetAdapter(out)
    assert CuratedDatasetAdapter(out, sample_hz=4).schema.sample_hz == 4
    with pytest.raises(SourceError, match="sample_hz must be a positive number"):
        CuratedDatasetAdapter(out, sample_hz=float("nan"))
    assert CuratedDatasetAdapter(write_episodes(tmp_path / "rated", [raw]), sample_hz=10).schema.sample_hz == 10
    with pytest.raises(SourceError, match=r"sample_hz=4 but .* records 10 Hz"):
        CuratedDatasetAdapter(tmp_path / "rated", sample_hz=4)


def test_importing_kuration_sources_does_not_load_the_read_side():
    program = "import sys, kuration.sources; print('kuration.read.committed' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# ---- any track, any shards: what comes back is the present rows, at start + row ---------


ENTITY_IDS = st.one_of(st.integers(-5, 5), st.text("ab1", min_size=1, max_size=3),
                       st.tuples(st.integers(0, 3), st.text("xy", max_size=2)), st.booleans())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entity=ENTITY_IDS, present=st.lists(st.booleans(), min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 30), min_size=2, max_size=5, unique=True),
       shard_length=st.integers(1, 6), policy=st.sampled_from(["keep", "pad", "drop"]),
       container=st.sampled_from(["npz", "json"]))
def test_reingested_rows_are_the_written_present_rows(tmp_path_factory, entity, present, cuts, shard_length, policy,
                                                      container):
    schema = Schema.from_dict({"sample_hz": 5, "time": "t", "entity": "e",
                               "fields": {"pos": {"dtype": "float32", "shape": [2]}}})
    spec = OutputSpec.from_dict({"shard_length": shard_length, "short_policy": policy, "container": container,
                                 "modalities": {"pos": {"dtype": "float32", "shape": [2], "source": "field:pos"}}})
    n = len(present)
    mask = np.asarray(present)
    values = np.where(mask[:, None], np.arange(2 * n, dtype=np.float32).reshape(n, 2) + 1, 0).astype(np.float32)
    track = Track("rec/1", entity, np.arange(n) + 100, mask, {"pos": values}, {}, [()] * n, 5.0)
    bounds = sorted({min(c, n - 1) for c in cuts} | {n})  # spans [b0, b1), [b1, b2), ...: disjoint, at least one
    out = tmp_path_factory.mktemp("prop")
    entries = []
    for span, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        entries += write_track(out, track, spec, schema=schema, split="train", span_index=span, start=a, stop=b)
    publish(out, spec, entries, config={"job": {"schema": schema.to_dict()}})
    adapter = CuratedDatasetAdapter(out)
    if not entries:  # every span shorter than a shard, and dropped
        assert adapter.list_sources() == [] and adapter.schema.entity is None
        return
    assert adapter.schema.entity == ENTITY_COLUMN and adapter.schema.sample_hz == 5
    written = sorted({(e["span_index"], e["start"], e["stop"]) for e in entries})
    assert len(adapter.list_sources()) == len({span for span, _, _ in written})
    for source_id in adapter.list_sources():
        origin = adapter.curated_source(source_id)
        rows = np.concatenate([np.arange(a, b) for span, a, b in written if span == origin.span_index])
        rows = rows[mask[rows]]
        ticks = adapter.read_ticks(source_id)
        np.testing.assert_array_equal(ticks.tick, rows)
        np.testing.assert_array_equal(ticks.columns["pos"], values[rows])
        assert all(entity_key(e) == entity_key(entity) for e in ticks.entity)
        assert origin.original_source_id == "rec/1" and origin.entity_key == entity_key(entity)


def test_untrusted_decodes_hdf5_shards_in_a_worker_with_the_same_result(corpus, tmp_path):
    corpus.write(tmp_path / "first", spec=spec_with("hdf5"))
    trusted, isolated = CuratedDatasetAdapter(tmp_path / "first"), CuratedDatasetAdapter(tmp_path / "first",
                                                                                          untrusted=True)
    source = trusted.list_sources()[0]
    a, b = trusted.read_ticks(source), isolated.read_ticks(source)
    np.testing.assert_array_equal(a.tick, b.tick)
    for name in a.columns:
        np.testing.assert_array_equal(a.columns[name], b.columns[name])
    assert isolated.identity(source) == trusted.identity(source)


def test_an_unknown_source_names_the_dataset_and_how_to_list_sources(dataset):
    adapter = CuratedDatasetAdapter(dataset)
    original = adapter.curated_source(adapter.list_sources()[0]).original_source_id
    for call in (adapter.read_ticks, adapter.identity, adapter.curated_source):
        with pytest.raises(TickDataError, match=re.escape(f"{original}: no such source in the curated dataset "
                                                          f"{dataset}") + r".*list_sources\(\)"):
            call(original)  # the original source id is not a re-ingested one: spans are
