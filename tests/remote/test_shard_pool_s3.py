"""The shard pool on S3 (loopback moto server): a rebuild that changes one recording puts only
that recording's shards into ``ROOT/shards/`` and the version's metadata (no server-side
copy), a writer killed between pool puts leaves objects its resume keeps as they are
(create-only), and gc removes the pool objects no kept version names."""

import os
import signal

import pytest

from kuration.output.version_gc import collect_garbage
from kuration.output.versions import DatasetRoot
from kuration.read import load_committed, verify_dataset
from tests.output.corpus import Corpus
from tests.output.reuse_corpus import GrowingCorpus
from tests.output.writer_processes import FORK, run_writer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("pool-s3-corpus"))


def _objects(s3_client, bucket, prefix: str) -> dict[str, tuple[str, int]]:
    """Key (below ``prefix``) -> (ETag, size) of every object under ``prefix``."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket[len("s3://"):], Prefix=prefix)
    return {item["Key"][len(prefix):]: (item["ETag"], item["Size"]) for page in pages
            for item in page.get("Contents", [])}


def test_a_rebuild_on_s3_that_changes_one_recording_puts_only_its_shards_and_the_metadata(bucket, s3_client,
                                                                                         tmp_path_factory):
    """Scores a landing zone of its own (one recording of it is rewritten) and writes it to
    S3 twice: about 45 s on moto."""
    growing = GrowingCorpus(tmp_path_factory.mktemp("pool-s3-growing"))
    url, plan = f"{bucket}/ds", growing.plan()
    first = growing.write(url, plan=plan)
    before = _objects(s3_client, bucket, "ds/")
    assert {k for k in before if k.startswith("shards/")} == {e["stored_at"] for e in first.manifest["entries"]}
    changed = growing.late_source
    adapter = growing.revise_late_source()  # the changed file: a new content hash
    second = growing.write(url, plan=plan, adapter=adapter, resume=True, on_other_run="replace")
    mine = [e for e in second.manifest["entries"] if e["source_id"] == changed]
    assert second.written == len(mine) > 0 and second.reused == len(second.manifest["entries"]) - len(mine)
    after = _objects(s3_client, bucket, "ds/")
    new = {key: size for key, (etag, size) in after.items() if before.get(key) != (etag, size)}
    assert {k for k in new if k.startswith("shards/")} == {e["stored_at"] for e in mine}
    assert all(k.startswith(("shards/", "versions/v2/", "published/")) for k in new)
    assert not [k for k in new if k.startswith(("versions/v2/train/", "versions/v2/test/"))]  # no copies
    assert sum(size for k, size in new.items() if k.startswith("shards/")) == sum(e["bytes"] for e in mine)
    assert all(after[k] == held for k, held in before.items())  # nothing rewritten
    assert verify_dataset(url).ok and verify_dataset(f"{url}@v1").ok


def _write_killed_at_a_pool_put(corpus, url, plan, puts):
    import s3fs

    real, seen = s3fs.S3FileSystem.pipe_file, [0]

    def put(self, path, *args, **kwargs):
        done = real(self, path, *args, **kwargs)
        if "/shards/" in path:
            seen[0] += 1
            if seen[0] == puts:
                os.kill(os.getpid(), signal.SIGKILL)  # the object is in the pool, its resume record is not
        return done

    s3fs.S3FileSystem.pipe_file = put
    corpus.write(url, plan=plan)
    os._exit(0)


def test_a_writer_killed_between_pool_puts_leaves_objects_its_resume_keeps_as_they_are(corpus, bucket, s3_client):
    url, plan = f"{bucket}/ds", corpus.plan()
    child = FORK.Process(target=_write_killed_at_a_pool_put, args=(corpus, url, plan, 3))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    left = {k: held for k, held in _objects(s3_client, bucket, "ds/").items() if k.startswith("shards/")}
    assert len(left) == 3
    s3_client.delete_object(Bucket=bucket[len("s3://"):], Key="ds/.kuration-writer.lock")
    assert run_writer(corpus, url, plan, resume=True)[0]
    dataset = load_committed(url)
    after = _objects(s3_client, bucket, "ds/")
    assert {k for k in after if k.startswith("shards/")} == {e["stored_at"] for e in dataset.entries}
    assert all(after[k] == held for k, held in left.items()) and verify_dataset(url).ok


def test_gc_on_s3_removes_the_pool_objects_no_kept_version_names(corpus, bucket, s3_client):
    url = f"{bucket}/ds"
    plans = [corpus.plan(), corpus.plan(train_hours=20 / 3600, span_seconds=5.0), corpus.plan(span_seconds=8.0)]
    written = [corpus.write(url, plan=plan, force=i > 0) for i, plan in enumerate(plans)]
    named = {v.version: {e["stored_at"] for e in v.manifest["entries"]} for v in written}
    pool = {k for k in _objects(s3_client, bucket, "ds/") if k.startswith("shards/")}
    assert pool == set().union(*named.values())
    kept = _objects(s3_client, bucket, "ds/versions/v3/")
    result = collect_garbage(url, 1)
    assert result.removed == ("v1", "v2") and set(result.pool.removed) == pool - named["v3"]
    assert {k for k in _objects(s3_client, bucket, "ds/") if k.startswith("shards/")} == named["v3"]
    assert _objects(s3_client, bucket, "ds/versions/v3/") == kept and DatasetRoot(url).versions() == ["v3"]
    assert verify_dataset(url).ok
