"""write_track: shard files per short policy, entries that match the bytes, portable names."""

import hashlib

import numpy as np
import pytest

from kuration.output import OutputSpec, OutputSpecError, write_track
from kuration.output.containers import get_container
from kuration.output.destinations import open_destination
from kuration.output.encoders import PassthroughEncoder
from kuration.output.shard_files import StagedShard, shard_stem
from kuration.output.write_track import ShardWriter, shard_targets
from tests.output.drone_track import SCHEMA, FakeMedia, make_track

MODALITIES = {
    "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
    "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
    "frame": {"dtype": "uint8", "shape": [4, 5, 3], "source": "media:frame"},
    "label": {"dtype": "int64", "shape": [], "source": "segment:label"},
}


def _spec(container="npz", policy="keep", length=4):
    return OutputSpec.from_dict({"shard_length": length, "short_policy": policy, "container": container,
                                 "modalities": MODALITIES})


@pytest.mark.parametrize("container", ["npz", "json", "hdf5", "parquet"])
def test_every_container_writes_shards_that_read_back_as_assembled(tmp_path, container):
    track = make_track(n=10, absent=(2, 7))
    spec = _spec(container, "pad")
    entries = write_track(tmp_path, track, spec, schema=SCHEMA, split="train", adapter=FakeMedia())
    assert [(e["start"], e["stop"], e["n_steps"], e["rows"], e["padded"]) for e in entries] == [
        (0, 4, 4, 4, False), (4, 8, 4, 4, False), (8, 10, 2, 4, True)]
    reader = get_container(container)
    for entry in entries:
        data = (tmp_path / entry["path"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]
        shard = reader.read(data, spec.modalities, presence=True)
        a, b = entry["start"], entry["stop"]
        assert shard.n_steps == b - a and shard.present[: b - a].tolist() == track.present[a:b].tolist()
        np.testing.assert_array_equal(shard.arrays["pos"][: b - a], track.values["pos"][a:b])
        assert shard.arrays["pos"].dtype == np.float32 and shard.arrays["frame"].dtype == np.uint8
        assert shard.arrays["label"].tolist()[: b - a] == [7 if p else 0 for p in track.present[a:b]]
    assert not list(tmp_path.rglob("*.tmp"))  # temp files never outlive a write


def test_keep_writes_the_short_tail_and_drop_discards_it(tmp_path):
    track = make_track(n=10)
    keep = write_track(tmp_path / "k", track, _spec(policy="keep"), schema=SCHEMA, split="test", adapter=FakeMedia())
    drop = write_track(tmp_path / "d", track, _spec(policy="drop"), schema=SCHEMA, split="test", adapter=FakeMedia())
    assert [(e["n_steps"], e["rows"]) for e in keep] == [(4, 4), (4, 4), (2, 2)]
    assert [(e["n_steps"], e["rows"]) for e in drop] == [(4, 4), (4, 4)]


def test_a_span_is_written_with_its_index_in_the_name(tmp_path):
    entries = write_track(tmp_path, make_track(n=10), _spec(), schema=SCHEMA, split="val", adapter=FakeMedia(),
                          span_index=3, start=4, stop=9)
    assert [(e["start"], e["stop"]) for e in entries] == [(4, 8), (8, 9)]
    stem = shard_stem("src/a", "str:'drone_1'", 3)
    assert [e["path"] for e in entries] == [f"val/{stem}_shard0000.npz", f"val/{stem}_shard0001.npz"]
    assert stem.startswith("src__a_drone_1_span003_") and entries[0]["span_index"] == 3


def test_names_are_portable_bounded_and_do_not_alias():
    a, b = shard_stem("a b", "str:'x'", None), shard_stem("a_b", "str:'x'", None)
    assert a != b and a.rsplit("_", 1)[0] == b.rsplit("_", 1)[0]  # same prefix, the hash tells them apart
    long = shard_stem("s" * 500 + "/é ü", "str:'" + "e" * 300 + "'", 12)
    assert len(long) < 140 and all(c.isascii() and (c.isalnum() or c in "._-") for c in long)
    assert shard_stem("x", "int:1", None) != shard_stem("x", "str:'1'", None)


def test_bad_arguments_fail_before_writing(tmp_path):
    with pytest.raises(OutputSpecError, match="split must be one of"):
        write_track(tmp_path, make_track(), _spec(), schema=SCHEMA, split="holdout")
    with pytest.raises(OutputSpecError, match=r"rows \[2, 99\) are outside the track's 6 rows"):
        write_track(tmp_path, make_track(), _spec(), schema=SCHEMA, split="train", start=2, stop=99)
    assert not list(tmp_path.iterdir())


def _targets(spec, n=10):
    return shard_targets(spec, split="train", source_id="src/a", entity_id="str:'drone_1'", span_index=None, start=0,
                         stop=n)


def test_the_shard_writer_delivers_entries_in_order_and_runs_callbacks_after_them(tmp_path):
    spec, track, events = _spec(), make_track(n=10), []
    destination = open_destination(tmp_path)
    with ShardWriter(destination, spec, schema=SCHEMA, encoder=PassthroughEncoder(), adapter=FakeMedia(),
                     on_entry=lambda e: events.append(e["shard_index"])) as writer:
        writer.after(lambda: events.append("before any shard"))
        for target in _targets(spec):
            writer.write(target, track)
            writer.after(lambda k=target.shard_index: events.append(f"after {k}"))
    assert events == ["before any shard", 0, "after 0", 1, "after 1", 2, "after 2"]
    expected = write_track(tmp_path / "plain", track, spec, schema=SCHEMA, split="train", adapter=FakeMedia())
    for entry in expected:
        assert (tmp_path / entry["path"]).read_bytes() == (tmp_path / "plain" / entry["path"]).read_bytes()


def test_a_failed_seal_surfaces_and_no_temp_file_outlives_the_writer(tmp_path, monkeypatch):
    spec, track, entries = _spec(), make_track(n=10), []
    real_seal = StagedShard.seal
    calls = []

    def seal(self):
        calls.append(self.path.name)
        if len(calls) == 2:
            self.discard()
            raise OSError("disk full")
        return real_seal(self)

    monkeypatch.setattr(StagedShard, "seal", seal)
    with pytest.raises(OSError, match="disk full"):
        with ShardWriter(open_destination(tmp_path), spec, schema=SCHEMA, encoder=PassthroughEncoder(),
                         adapter=FakeMedia(),
                         on_entry=entries.append) as writer:
            for target in _targets(spec):
                writer.write(target, track)
    assert [e["shard_index"] for e in entries] == [0]
    assert not list(tmp_path.rglob("*.tmp"))


def test_an_error_in_the_caller_waits_for_the_pending_seal_and_delivers_nothing_more(tmp_path):
    spec, track, entries = _spec(), make_track(n=10), []
    with pytest.raises(KeyError, match="stop here"):
        with ShardWriter(open_destination(tmp_path), spec, schema=SCHEMA, encoder=PassthroughEncoder(),
                         adapter=FakeMedia(),
                         on_entry=entries.append) as writer:
            targets = _targets(spec)
            writer.write(targets[0], track)
            writer.write(targets[1], track)
            raise KeyError("stop here")
    assert [e["shard_index"] for e in entries] == [0]
    assert not list(tmp_path.rglob("*.tmp"))  # the pending shard was sealed (or dropped) before the with ended
    with pytest.raises(RuntimeError, match="outside its with block"):
        writer.write(targets[2], track)


def test_a_track_written_as_many_shards_reads_a_media_file_once(tmp_path):
    from kuration.sources.media import cached

    loads = []

    def load():
        loads.append("frames.npy")
        return np.ones((10, 4, 5, 3), np.uint8)

    class WholeFileMedia:  # a provider that reads its whole file, through the write's cache
        def decode_media(self, column, refs, *, source_id):
            frames = cached(("test-whole-file", "frames.npy"), load)
            return frames[: len(refs)].copy()

    entries = write_track(tmp_path, make_track(n=10), _spec(), schema=SCHEMA, split="train", adapter=WholeFileMedia())
    assert len(entries) == 3 and loads == ["frames.npy"]
