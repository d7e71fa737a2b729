"""Version retention on S3 (loopback moto server): gc removes the old versions' objects and
nothing of the kept ones (whose shards are server-side copies), honours reader pins stored
as objects, applies keep_versions after a publish under the writer's lease, and is refused
while a writer holds the exclusive-create lease."""

import pytest

from kuration.errors import CommitError
from kuration.output.lease import LeaseError
from kuration.output.version_gc import collect_garbage
from kuration.output.version_pins import active_pins, pinned_version
from kuration.output.versions import DatasetRoot
from kuration.read import iter_shards, load_committed, verify_dataset
from tests.output.corpus import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("gc-s3-corpus"))


def _keys(s3_client, bucket, prefix: str) -> set[str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket[len("s3://"):], Prefix=prefix)
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def test_gc_on_s3_removes_every_object_of_the_old_versions_and_keeps_the_pinned_one(corpus, bucket, s3_client):
    url = f"{bucket}/ds"
    first = corpus.write(url)
    with pinned_version(url, holder="train-job", ttl_seconds=600) as ref:
        for _ in range(3):
            corpus.write(url, plan=corpus.plan(train_hours=20 / 3600), force=True)
        kept = {v: _keys(s3_client, bucket, f"ds/versions/{v}/") for v in ("v3", "v4")}
        result = collect_garbage(url, 2)
        assert result.removed == ("v2",) and DatasetRoot(url).versions() == ["v1", "v3", "v4"]
        assert _keys(s3_client, bucket, "ds/versions/v2/") == set()
        assert sum(1 for _ in iter_shards(ref)) == len(first.manifest["entries"])  # pinned: still readable
        assert [pin.holder for pin in active_pins(url)] == ["train-job"]
    assert collect_garbage(url, 2).removed == ("v1",) and _keys(s3_client, bucket, "ds/pins/") == set()
    for version, keys in kept.items():
        assert _keys(s3_client, bucket, f"ds/versions/{version}/") == keys and verify_dataset(url, version=version).ok
    with pytest.raises(CommitError, match="v1 was published once and has been removed by gc"):
        load_committed(url, version="v1")


def test_a_write_on_s3_applies_keep_versions_and_gc_is_refused_while_a_writer_holds_the_lease(corpus, bucket,
                                                                                               s3_client):
    url = f"{bucket}/ds"
    removed = [corpus.write(url, force=index > 0, keep_versions=1).versions_removed for index in range(3)]
    assert removed == [(), ("v1",), ("v2",)] and DatasetRoot(url).versions() == ["v3"]
    assert verify_dataset(url).ok and not _keys(s3_client, bucket, "ds/.kuration-writer.lock")
    with DatasetRoot(url).destination.lease():
        with pytest.raises(LeaseError, match="another writer holds this destination"):
            collect_garbage(url, 1)
