"""write_dataset on a corpus shaped unlike the demo (several vehicles per tick with string
ids, frames in .npz archives, a baked split): the split decides the pools and is part of
the run, npz references decode into the right rows, media failures name source, entity
and row, and a provider that cannot decode its first reference publishes nothing."""

import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kuration import parse_entity_key
from kuration.sources.media import MediaError
from kuration.output.commit_protocol import COMMIT_FILE
from kuration.output.write_dataset import DatasetWriteError, DifferentRunError, write_planned_dataset
from kuration.read import load_committed, read_shard, verify_dataset
from kuration.sources import ParquetTickAdapter
from tests.output._vehicle_corpus import TOWNS, VehicleCorpus
from tests.output.corpus import planned_write_kwargs, snapshot, version_dir
from tests.sources.read_counts import count_reads

BUDGET = {"train_hours": 200 / 3600, "test_hours": 60 / 3600}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return VehicleCorpus(tmp_path_factory.mktemp("vehicles"))


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("vehicles-out") / "out"
    return out, corpus.write(out, **BUDGET)


def test_a_baked_split_puts_every_source_in_its_towns_split(corpus, written):
    out, result = written
    assert verify_dataset(out).ok and result.config["results"]["budget"]["pools"]["origin"] == "resolved_splits"
    splits = {(e["source_id"], e["split"]) for e in result.manifest["entries"]}
    assert splits and all(split == TOWNS[source.split("/")[0]] for source, split in splits)
    assert {split for _, split in splits} == {"train", "test"}
    split = result.config["provenance"]["split"]
    assert split["origin"] == "split_assignments" and len(split["sha256"]) == 64


def test_npz_frames_land_in_their_shard_rows(corpus, written):
    out, result = written
    dataset = load_committed(out)
    forms = set()
    for entry in dataset.entries:
        vehicle = parse_entity_key(entry["entity_id"])
        forms.add("single" if entry["source_id"].startswith("west/") else "keyed")
        shard = read_shard(dataset, entry)
        for i in range(entry["n_steps"]):
            tick = entry["start"] + i  # every vehicle is present at the first tick: track row == tick
            want = corpus.expected_frame(entry["source_id"], vehicle, tick) if shard.present[i] else 0
            assert (shard.arrays["cam"][i] == want).all(), (entry["path"], i)
    absent = [e for e in dataset.entries if not read_shard(dataset, e).present[: e["n_steps"]].all()]
    assert forms == {"single", "keyed"} and absent  # both reference forms, and rows where a vehicle is absent


def test_resuming_with_another_split_is_refused(corpus, tmp_path):
    out = tmp_path / "out"
    first = corpus.write(out, **BUDGET)
    before = snapshot(out)
    # The same pools (predict is never budgeted), one source fewer to predict: another split,
    # so another run, although it would admit the same spans.
    assignments = corpus.assignments
    other = assignments.filter(pc.invert(pc.and_(pc.equal(assignments.column("stage"), "predict"),
                                                 pc.equal(assignments.column("source"), "east/run_0.parquet"))))
    assert other.num_rows < assignments.num_rows
    with pytest.raises(DifferentRunError, match="holds a committed dataset of another run"):
        corpus.write(out, split_assignments=other, resume=True, **BUDGET)
    assert snapshot(out) == before
    again = corpus.write(out, resume=True, **BUDGET)
    assert (again.written, again.reused) == (0, len(first.manifest["entries"]))
    assert again.config["provenance"]["split"] == first.config["provenance"]["split"]


@pytest.mark.parametrize("change, message", [
    (dict(group_of=lambda source: source.split("/")[0]), "group_of and split_assignments: a resolved split carries"),
    (dict(split_assignments={"stage": ["train"]}), r"split_assignments: expected the pyarrow Table of a resolved split "
                                                   r"\(read_split_assignments\(root\)\[0\], .* got dict"),
    (dict(split_assignments=pa.table({"stage": ["train"], "source": ["north/run_0.parquet"]})),
     r"split_assignments: missing column\(s\) \['group'\]; it has \['stage', 'source'\]"),
])
def test_a_split_argument_that_cannot_work_is_refused_before_anything_is_scored(corpus, tmp_path, change, message):
    out = tmp_path / "out"
    with pytest.raises(DatasetWriteError, match=message):
        corpus.write(out, **BUDGET, **change)
    assert not out.exists()


def test_a_split_naming_none_of_the_sources_is_refused_before_publication(corpus, tmp_path):
    out = tmp_path / "out"
    elsewhere = corpus.assignments.set_column(
        corpus.assignments.column_names.index("source"), "source",
        pa.array([f"recordings/{s}" for s in corpus.assignments.column("source").to_pylist()]))
    with pytest.raises(DatasetWriteError, match=r"split_assignments names none of the 8 scored sources \(the split has "
                                                r"e\.g\. \['recordings/east/run_0\.parquet'.*the adapter "
                                                r"\['east/run_0\.parquet'.*must hold the adapter's source ids"):
        corpus.write(out, split_assignments=elsewhere, **BUDGET)
    assert not (out / COMMIT_FILE).exists()


class AttributeErrorMedia(ParquetTickAdapter):
    """A provider bug, as npy_index had on .npz references: a bare AttributeError."""

    def decode_media(self, column, refs, *, source_id):
        raise AttributeError("'NpzFile' object has no attribute 'shape'")


def test_a_provider_that_fails_its_first_decode_publishes_nothing(corpus, written, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(written[0], out)
    before = snapshot(out)
    broken = AttributeErrorMedia(corpus.recordings, corpus.schema)
    with pytest.raises(MediaError,
                       match=r"modality 'cam', source 'east/run_0\.parquet', entity str:'\w+', rows \d+-\d+ "
                                         r"\(ticks \d+-\d+\): the 'npy_index' media provider failed with "
                                         r"AttributeError: "
                                         r"'NpzFile' object has no attribute 'shape'\. A provider must return \(\d+, "
                                         r"\*\[4, 6, 3\]\) values or raise MediaError"):
        corpus.write(out, adapter=broken, force=True, **BUDGET)
    assert snapshot(out) == before and load_committed(out).record.state == "committed"  # the previous commit reads
    fresh = tmp_path / "fresh"
    with pytest.raises(MediaError):
        corpus.write(fresh, adapter=broken, **BUDGET)
    assert not fresh.exists()  # the preflight failed before the lease: not even the folder


def test_a_bad_reference_is_a_media_error_naming_source_entity_and_row(tmp_path):
    corpus = VehicleCorpus(tmp_path / "corpus")
    entry = next(e for e in corpus.write(tmp_path / "good", **BUDGET).manifest["entries"]
                 if not e["source_id"].startswith("west/") and e["shard_index"] == 1)
    vehicle, row = parse_entity_key(entry["entity_id"]), entry["start"] + 3
    path = corpus.recordings / entry["source_id"]
    table = pq.read_table(path)
    refs = table.column("cam").to_pylist()
    at = next(i
              for i, (t, v) in enumerate(zip(table.column("tick").to_pylist(), table.column("vehicle").to_pylist(),
                                             strict=True))
              if t == row and v == vehicle)
    refs[at] = refs[at].rsplit("/", 1)[0] + "/9999"
    pq.write_table(table.set_column(table.column_names.index("cam"), "cam", pa.array(refs)), path)
    with pytest.raises(MediaError, match=rf"modality 'cam', source '{entry['source_id']}', entity str:'{vehicle}', "
                                         rf"row {row} \(tick {row}\): .*row 9999 out of range, .*#{vehicle} has \d+ "
                                         r"rows"):
        corpus.write(tmp_path / "bad", **BUDGET)


def test_each_archive_is_read_once_per_write(corpus, tmp_path, monkeypatch):
    reads = count_reads(monkeypatch, ".npz")
    result = corpus.write(tmp_path / "out", **BUDGET)
    archives = {e["source_id"].replace(".parquet", ".frames.npz") for e in result.manifest["entries"]}
    assert len(reads) == len(archives) and set(reads.values()) == {1}
    assert len(result.manifest["entries"]) > 2 * len(archives)  # without the cache: one read per shard


def test_a_resume_reads_the_preflight_source_and_the_sources_it_writes_each_once(corpus, written, tmp_path,
                                                                                 monkeypatch):
    """The preflight runs before the lease, so before it is known which shards a resume
    keeps: it reads the first source to decode one reference of each media column, even when
    every shard is kept. The writer reuses the tracks it read, and reads no other source
    than those it writes."""
    out = tmp_path / "out"

    def write(**kwargs):
        return write_planned_dataset(out, written[1].budget_plan, adapter=corpus.adapter, schema=corpus.schema,
                                     spec=corpus.spec, **planned_write_kwargs(**kwargs))

    entries = write().manifest["entries"]
    reads = []
    real = corpus.adapter.read_ticks
    monkeypatch.setattr(corpus.adapter, "read_ticks", lambda source: reads.append(source) or real(source))
    sources = sorted({e["source_id"] for e in entries})
    assert (write(resume=True).written, reads) == (0, sources[:1])  # every shard kept: only the preflight's read
    reads.clear()
    for entry in entries:
        if entry["source_id"] in sources[:2]:
            (version_dir(out) / entry["path"]).unlink()
    again = write(resume=True)
    assert again.written == sum(e["source_id"] in sources[:2] for e in entries) and reads == sources[:2]
    assert verify_dataset(out).ok


def test_an_adapter_that_cannot_decode_media_is_refused_before_publication(corpus, tmp_path):
    class NoMedia(ParquetTickAdapter):
        decode_media = None

    out = tmp_path / "out"
    with pytest.raises(DatasetWriteError,
                       match=r"the output spec has media modalities \['cam'\], but the adapter NoMedia "
                                                r"has no decode_media\(column, refs, source_id=\.\.\.\)"):
        corpus.write(out, adapter=NoMedia(corpus.recordings, corpus.schema), **BUDGET)
    assert not (out / COMMIT_FILE).exists()
