"""Plan, then act: plan_shards runs every static check before anything is read, plan_write
reads the destination without changing it, and publish carries out the plan, deciding
nothing; a write that fails a static check leaves every published byte as it was."""

import dataclasses
import inspect

import pytest

from kuration.output import OutputSpec
from kuration.output.destinations import open_destination
from kuration.output.encoders import EncoderError
from kuration.output.shard_assembly import MissingValueError
from kuration.output.write_dataset import (
    DatasetWriteError, DatasetWriteOptions, WriteContext, WriteOptions, plan_shards, plan_write, publish, write_dataset,
)
from kuration.read import load_committed, verify_dataset
from tests.output.corpus import SPEC, data_files, snapshot, version_dir


def _spec(**modalities):
    return OutputSpec.from_dict({**SPEC, "modalities": {**SPEC["modalities"], **modalities}})


def _shards(corpus, spec=None, **kwargs):
    return plan_shards(corpus.plan(), adapter=corpus.adapter, schema=corpus.schema, spec=spec or corpus.spec, **kwargs)


@pytest.mark.parametrize(("modality", "error", "message"), [
    ({"source": "segment:gust.max", "dtype": "float32", "shape": []}, MissingValueError,
     r"modality 'x': no segment feature 'gust.max' in the span's meta for source '.*', entity .*; it has \["),
    ({"source": "segment:wind.max", "dtype": "int64", "shape": []}, MissingValueError,
     r"modality 'x' \(segment:wind.max\): segment feature 'wind.max' is \d+\.\d+ at source '.*', entity .*, span "
     r"\d+, which int64 cannot hold: it takes whole values"),
    ({"source": "segment:wind.max", "dtype": "float32", "shape": [2]}, MissingValueError,
     r"segment feature 'wind.max' has shape \[\] per row, the spec declares \[2\]"),
    ({"source": "encoder:x", "dtype": "float32", "shape": []}, EncoderError,
     r"modalities \['x'\] come from an encoder .* no encoder was given .* pass encoder="),
])
def test_a_modality_nothing_can_make_fails_before_publication(corpus, committed, tmp_path, modality, error, message):
    """Each of these once failed at the first shard, with the destination already in
    state=writing: now planning refuses them, and the committed dataset stays readable."""
    out, _ = committed
    before = snapshot(out)
    with pytest.raises(error, match=message):
        corpus.write(out, spec=_spec(x=modality), force=True)
    assert snapshot(out) == before and load_committed(out)
    with pytest.raises(error, match=message):
        corpus.write(tmp_path / "new", spec=_spec(x=modality))
    assert not (tmp_path / "new").exists()  # refused before the lease: not even the folder


def test_a_config_body_json_cannot_hold_fails_before_publication(corpus, committed, tmp_path):
    out, _ = committed
    before = snapshot(out)
    with pytest.raises(DatasetWriteError, match=r"config.json cannot hold this run's record \(.*set.*\): every value "
                                                r"of job="):
        corpus.write(out, job={"sources": {"a", "b"}}, force=True)
    assert snapshot(out) == before and load_committed(out)


def test_plan_shards_reads_nothing(corpus):
    class Untouchable(type(corpus.adapter)):
        def read_ticks(self, source_id):
            raise AssertionError("planning read a recording")

        def identity(self, source_id):
            raise AssertionError("planning asked for an identity")

    adapter = Untouchable(corpus.adapter.root_url, corpus.schema)
    shards = plan_shards(corpus.plan(), adapter=adapter, schema=corpus.schema, spec=corpus.spec)
    assert shards.targets and shards.sources == tuple(sorted({t.source_id for t, _ in shards.targets}))
    assert set(shards.by_source()) == set(shards.sources)
    assert sum(len(planned) for planned in shards.by_source().values()) == len(shards.targets)


def test_plan_write_reads_the_destination_and_changes_nothing(corpus, committed):
    out, first = committed
    before = snapshot(out)
    destination = open_destination(out)
    with destination.lease():
        plan = plan_write(destination, _shards(corpus), options=WriteOptions(resume=True))
    assert snapshot(out) == before
    assert plan.run_fingerprint == first.record.run_fingerprint
    assert plan.to_write == 0 and not plan.in_workers and plan.replaced == ""
    assert dict(plan.kept) == {e["path"]: e for e in first.manifest["entries"]}
    assert dict(plan.content_keys) == {e["path"]: e["content_key"] for e in first.manifest["entries"]}
    assert plan.config["provenance"] == first.config["provenance"] and plan.config["job"] == first.config["job"]
    assert plan.config["results"]["resume"] == {"requested": True, "reuse_refused": "",
                                                "reused_from_run": first.record.run_fingerprint}
    assert "splits" not in plan.config["results"] and "finished" not in plan.config["timestamps"]
    marker = (version_dir(out) / ".kuration_output_spec.json").read_bytes()
    assert plan.marker == marker
    # this run's committed version, every shard verified: nothing to write, nothing to adopt
    assert (plan.version, plan.unchanged, dict(plan.adopt)) == ("v1", True, {})


def test_publish_gives_the_bytes_write_planned_dataset_gives(corpus, committed, tmp_path):
    out, _ = committed
    destination = open_destination(tmp_path / "by_hand")
    with destination.lease():
        plan = plan_write(destination, _shards(corpus), context=WriteContext(job={"note": "by hand"}))
        result = publish(destination, plan)
    assert (result.written, result.reused) == (plan.to_write, 0) == (len(plan.shards.targets), 0)
    assert data_files(tmp_path / "by_hand") == data_files(out) and verify_dataset(tmp_path / "by_hand").ok
    assert result.config["job"]["note"] == "by hand"
    assert result.config["results"]["splits"] == result.manifest["splits"]


def test_publish_refuses_a_plan_made_for_another_destination(corpus, tmp_path):
    planned_for = open_destination(tmp_path / "a")
    with planned_for.lease():
        plan = plan_write(planned_for, _shards(corpus))
    elsewhere = open_destination(tmp_path / "b")
    with pytest.raises(DatasetWriteError, match=r"the write plan is for .*/a; plan again for this dataset root"):
        with elsewhere.lease():
            publish(elsewhere, plan)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [".kuration-writer.lock"]


def test_write_dataset_gathers_exactly_its_keyword_arguments():
    """Pipeline checks option names against write_dataset's signature: the options object
    holds each of them, under the same name and default, and nothing else."""
    parameters = {name: p.default for name, p in inspect.signature(write_dataset).parameters.items() if name != "out"}
    fields = {name: f.default for name, f in DatasetWriteOptions.__dataclass_fields__.items() if f.init}
    assert list(fields) == list(parameters)
    assert fields == {name: dataclasses.MISSING if default is inspect.Parameter.empty else default
                      for name, default in parameters.items()}
