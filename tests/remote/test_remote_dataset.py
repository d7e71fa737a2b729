"""The dataset writer and reader against S3 on loopback: commit, verify, resume, corruption,
the exclusive-create lease, and writers SIGKILLed mid-upload, on the versions layout
(``ROOT/versions/vN/`` and the publish log ``ROOT/published/``, see docs/versions.md)."""

import json
import os
import random
import signal

import pytest

from kuration.errors import InputError
from kuration.output.destinations import FsspecDestination, LocalDestination
from kuration.output.commit_protocol import CommitError
from kuration.output.lease import LeaseError
from kuration.output.versions import DatasetRoot
from kuration.output.write_dataset import DatasetWriteError
from kuration.output.write_dataset import WriteOptions, write_planned_dataset
from kuration.read import load_committed, read_shard, verify_dataset
from kuration.sources import ParquetTickAdapter
from kuration.sources.protocol import SourceIdentity
from tests.output.corpus import Corpus
from kuration_cli import main as kuration
from tests.output.writer_processes import FORK, in_a_child, race_two_writers, run_writer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("remote-corpus"))


def _objects(s3_client, bucket):
    name = bucket[len("s3://"):]
    out = {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            out[item["Key"]] = s3_client.get_object(Bucket=name, Key=item["Key"])["Body"].read()
    return out


def _same_in_every_run(key: str) -> bool:
    """Whether the file at ``key`` (relative to a dataset root) holds the same bytes in two
    writes of one job: not config.json and the commit record (when it ran), nor a publish
    record (when, and the commit record's SHA-256), nor the lease or resume records."""
    return (not key.endswith(("config.json", "dataset.commit.json", ".kuration-writer.lock"))
            and not key.startswith("published/") and "/.kuration_resume/" not in key)


def _data(objects):
    return {k.split("/", 1)[1]: v for k, v in objects.items() if _same_in_every_run(k.split("/", 1)[1])}


def test_a_dataset_is_written_committed_and_read_from_s3(corpus, bucket, s3_client, tmp_path):
    url = f"{bucket}/run1"
    result = corpus.write(url)
    assert result.record.state == "committed" and result.out == url
    verification = verify_dataset(url)
    assert verification.ok and verification.shards == len(result.manifest["entries"])
    dataset = load_committed(url)
    shard = read_shard(dataset, dataset.entries[0])
    assert shard.arrays["frame"].dtype.name == "uint8"
    keys = set(_objects(s3_client, bucket))
    assert {"run1/versions/v1/dataset.commit.json", "run1/published/00000001.json"} <= keys  # committed, published
    assert "run1/.kuration-writer.lock" not in keys  # the lease is released
    assert not [k for k in keys if ".attempt-" in k or "/.kuration_resume/" in k]
    assert DatasetRoot(url).current().version == "v1" and dataset.root == f"{url}/versions/v1"
    # every shard is stored once, in the root's pool, named by its content key; none in the version folder
    assert {f"run1/shards/{e['content_key']}.npz" for e in result.manifest["entries"]} == {
        k for k in keys if k.startswith("run1/shards/")}
    assert not [k for k in keys if k.startswith(("run1/versions/v1/train/", "run1/versions/v1/test/"))]
    # the object-store layout written on a local disk (shares_by_link=False): the same bytes
    local = corpus.write(LocalDestination(tmp_path / "local", shares_by_link=False))
    assert _data(_objects(s3_client, bucket)) == {
        k: v for k, v in ((str(p.relative_to(tmp_path / "local")), p.read_bytes())
                          for p in (tmp_path / "local").rglob("*")
                          if p.is_file()) if _same_in_every_run(k)
    } and local.manifest == result.manifest  # the same bytes as a local write


def test_resume_on_s3_rebuilds_a_corrupt_shard_only_once_the_damaged_pool_object_is_removed(corpus, bucket,
                                                                                             s3_client):
    """A pool object is never overwritten: a resume that would write a corrupt shard's pool
    object again refuses, naming it, and commits nothing. Once the damaged object is removed,
    the resume commits v2, which names v1's verified pool objects (no copy) and writes the
    missing one; v1, which names the same object, verifies again too."""
    url = f"{bucket}/run1"
    reference = corpus.write(url)
    entries = reference.manifest["entries"]
    key = f"run1/{entries[1]['stored_at']}"
    name = bucket[len("s3://"):]
    data = bytearray(s3_client.get_object(Bucket=name, Key=key)["Body"].read())
    data[100] ^= 0xFF
    s3_client.put_object(Bucket=name, Key=key, Body=bytes(data))
    assert verify_dataset(url).bad_shards == (entries[1]["path"],)
    with pytest.raises(CommitError, match=rf"{entries[1]['stored_at']}: the shard pool already holds an object under "
                                          "this content key, with other bytes"):
        corpus.write(url, resume=True)
    assert _objects(s3_client, bucket)[key] == bytes(data)  # never overwritten
    s3_client.delete_object(Bucket=name, Key=key)  # what the error says to do with a damaged object
    again = corpus.write(url, resume=True)
    assert (again.written, again.reused) == (1, len(entries) - 1) and verify_dataset(url).ok
    assert (again.version, DatasetRoot(url).current().version) == ("v2", "v2")
    assert again.manifest["entries"] == entries  # the same objects, named again
    assert not [k for k in _objects(s3_client, bucket) if k.startswith(("run1/versions/v2/train/",
                                                                         "run1/versions/v2/test/"))]
    assert verify_dataset(f"{url}@v1").ok


def test_a_held_remote_lease_stops_a_second_writer_and_says_how_to_clear_it(corpus, bucket, s3_client):
    s3_client.put_object(Bucket=bucket[len("s3://"):], Key="run1/.kuration-writer.lock", Body=b'{"pid": 1}')
    with pytest.raises(LeaseError, match=r"another writer holds this destination \(\{\"pid\": 1\}\).*delete .*"
                                         r"\.kuration-writer\.lock by hand"):
        corpus.write(f"{bucket}/run1")
    assert set(_objects(s3_client, bucket)) == {"run1/.kuration-writer.lock"}  # nothing else was written


def test_an_existing_remote_dataset_is_protected(corpus, bucket):
    url = f"{bucket}/run1"
    corpus.write(url)
    with pytest.raises(DatasetWriteError, match="pass resume=True"):
        corpus.write(url)


def test_a_version_staged_on_s3_is_listed_published_by_the_cli_and_the_old_one_stays_readable(
        corpus, bucket, s3_client, capsys):
    """Versions on an object store: a forced rebuild left staged is invisible to readers,
    ``kuration versions`` lists it, ``kuration publish`` audits it and appends publish record
    2 (a conditional put); v1 stays readable as ``ROOT@v1``, its objects untouched."""
    url = f"{bucket}/run1"
    first = corpus.write(url)
    v1 = {k: v for k, v in _objects(s3_client, bucket).items() if k.startswith("run1/versions/v1/")}
    staged = corpus.write(url, plan=corpus.plan(train_hours=20 / 3600), force=True, publish=False)
    assert (staged.version, staged.published) == ("v2", False)
    assert load_committed(url).manifest == first.manifest  # readers still see v1
    assert kuration(["versions", url, "--json"]) == 0
    assert [(r["version"], r["current"]) for r in json.loads(capsys.readouterr().out)] == [("v1", True),
                                                                                            ("v2", False)]
    assert kuration(["publish", url, "--version", "v2"]) == 0
    assert [(r.sequence, r.version) for r in DatasetRoot(url).publish_log()] == [(1, "v1"), (2, "v2")]
    assert load_committed(url).manifest == staged.manifest and verify_dataset(url).ok
    assert load_committed(f"{url}@v1").manifest == first.manifest and verify_dataset(f"{url}@v1").ok
    assert {k: v for k, v in _objects(s3_client, bucket).items() if k.startswith("run1/versions/v1/")} == v1


def test_ftp_and_sftp_are_refused():
    for url, name in (("ftp://host/data", "ftp"), ("sftp://host/data", "sftp"), ("simplecache::ftp://h/d", "ftp")):
        with pytest.raises(InputError, match=f"{name} cannot publish a dataset safely"):
            FsspecDestination(url)


def test_writers_killed_mid_upload_leave_nothing_readable_and_resume_reproduces_the_run(corpus, bucket, s3_client):
    """21 forked writers against the S3 endpoint (a reference write, ten killed at random
    moments, ten resumes), each uploading a whole dataset: 20 s to 50 s. A plan of 12 shards,
    half the default: every request is one to the S3 server in this process, and a kill
    lands among the uploads whatever their number."""
    plan = corpus.plan(train_hours=15 / 3600, test_hours=10 / 3600)
    finished, duration = run_writer(corpus, f"{bucket}/reference", plan)
    assert finished
    expected = _data({k: v for k, v in _objects(s3_client, bucket).items() if k.startswith("reference/")})
    rng = random.Random(7)
    name = bucket[len("s3://"):]
    for i in range(10):
        url = f"{bucket}/run{i}"
        run_writer(corpus, url, plan, kill_after=rng.uniform(0.0, duration))
        try:
            load_committed(url)
            assert verify_dataset(url).ok
        except CommitError:
            pass  # partial: rejected
        # A killed writer's lease object stays; the operator removes it once sure no writer runs.
        s3_client.delete_object(Bucket=name, Key=f"run{i}/.kuration-writer.lock")
        assert run_writer(corpus, url, plan, resume=True)[0]
        got = _data({k: v for k, v in _objects(s3_client, bucket).items() if k.startswith(f"run{i}/")})
        assert got == expected, f"kill {i}: resume did not reproduce the uninterrupted run"
        assert DatasetRoot(url).current().version == "v1", f"kill {i}: the resume finished v1 and published it"


class _WeakIdentity(ParquetTickAdapter):
    """Recordings named, not hashed: their shards have no content key, so on an object store
    they go into the version folder (as attempt objects moved into place), not the pool."""

    def identity(self, source_id):
        return SourceIdentity("logical", source_id)


def _write_weak(corpus, url, plan, resume=False):
    adapter = _WeakIdentity(corpus.adapter.root_url, corpus.schema)
    return write_planned_dataset(url, plan, adapter=adapter, schema=corpus.schema, spec=corpus.spec,
                                 options=WriteOptions(resume=resume)).written


def _write_killed_at_the_first_copy(corpus, url, plan):
    import s3fs

    def killed(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)  # the attempt object is uploaded whole, never copied to its name

    s3fs.S3FileSystem.cp_file = killed
    _write_weak(corpus, url, plan)
    os._exit(0)


def test_an_attempt_object_a_killed_writer_left_is_swept_by_the_resume(corpus, bucket, s3_client):
    url, plan = f"{bucket}/run", corpus.plan()
    child = FORK.Process(target=_write_killed_at_the_first_copy, args=(corpus, url, plan))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    attempts = [k for k in _objects(s3_client, bucket) if "/.kuration-tmp." in k and ".attempt-" in k]
    assert len(attempts) == 1 and attempts[0].startswith("run/versions/v1/")
    s3_client.delete_object(Bucket=bucket[len("s3://"):], Key="run/.kuration-writer.lock")
    written = in_a_child(_write_weak, corpus, url, plan, True)
    assert [k for k in _objects(s3_client, bucket) if "/.kuration-tmp." in k] == [] and verify_dataset(url).ok
    assert written == len(load_committed(url).entries)  # a weak identity authorizes no reuse
    assert not [k for k in _objects(s3_client, bucket) if k.startswith("run/shards/")]  # no content key, no pool


def test_two_concurrent_writers_on_s3_one_proceeds_the_other_gets_a_lease_error(corpus, bucket):
    url = f"{bucket}/race"
    assert race_two_writers(corpus, url) == [0, 3]
    assert verify_dataset(url).ok


def test_a_memory_budget_on_s3_checkpoints_in_the_given_local_folder(corpus, bucket, s3_client, tmp_path):
    from kuration.output.write_dataset import write_dataset
    from kuration.scoring.cache import FsspecScoreCache

    def write(**kw):
        return write_dataset(f"{bucket}/budgeted", schema=corpus.schema, adapter=corpus.adapter,
                             strategy=corpus.settings.strategy, segmenter=corpus.settings.segmenter, spec=corpus.spec,
                             train_hours=40 / 3600, test_hours=20 / 3600, span_seconds=10.0, memory_budget="1KiB", **kw)
    with pytest.raises(DatasetWriteError, match="checkpoints must be local files"):
        write()
    result = write(cache=FsspecScoreCache(tmp_path / "ckpt"))
    assert verify_dataset(f"{bucket}/budgeted").ok
    assert result.config["results"]["scoring"]["memory"]["resident_bytes"] == 0
    assert list((tmp_path / "ckpt").rglob("*.arrow"))
    assert not [k for k in _objects(s3_client, bucket) if ".kuration_checkpoints" in k]  # nothing of them remotely
