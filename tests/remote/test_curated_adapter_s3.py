"""CuratedDatasetAdapter over S3 on loopback: a dataset written to a bucket re-ingests in
place, with the identities of the same bytes written locally, and writes again."""

import numpy as np
import pytest

from kuration.read import verify_dataset
from kuration.sources import CuratedDatasetAdapter, SourceError
from tests.output.corpus import Corpus
from tests.sources.curated_datasets import rewrite


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("curated-s3-corpus"))


def test_a_dataset_in_s3_reingests_and_writes_again(corpus, bucket, s3_client, tmp_path):
    url = f"{bucket}/run1"
    corpus.write(url)
    corpus.write(tmp_path / "local")
    remote, local = CuratedDatasetAdapter(url), CuratedDatasetAdapter(tmp_path / "local")
    ids = remote.list_sources()
    assert ids == local.list_sources() and remote.schema == local.schema
    # identity covers content, not where it lives: the same bytes in S3 and on disk agree
    assert [remote.identity(s) for s in ids] == [local.identity(s) for s in ids]
    for source in ids[:2]:
        a, b = remote.read_ticks(source), local.read_ticks(source)
        np.testing.assert_array_equal(a.tick, b.tick)
        for name in a.columns:
            np.testing.assert_array_equal(a.columns[name], b.columns[name])
    second = rewrite(remote, tmp_path / "second")
    assert verify_dataset(tmp_path / "second").ok and len(second.manifest["entries"])

    entry = remote.curated_source(ids[0]).entries[0]
    assert remote.dataset_url == f"{url}/versions/v1"  # the root's current version
    assert entry["stored_at"] == f"shards/{entry['content_key']}.npz"  # on S3, in the root's shard pool
    key = f"run1/{entry['stored_at']}"
    name = bucket[len("s3://"):]
    data = bytearray(s3_client.get_object(Bucket=name, Key=key)["Body"].read())
    data[-1] ^= 0xFF
    s3_client.put_object(Bucket=name, Key=key, Body=bytes(data))  # out of band, as another process would
    with pytest.raises(SourceError, match="changed or is corrupt"):
        remote.identity(ids[0])
    with pytest.raises(SourceError, match="SHA-256 differs"):
        remote.read_ticks(ids[0])


def test_an_empty_prefix_is_not_a_committed_dataset(bucket, s3_endpoint):
    with pytest.raises(SourceError, match="not a committed dataset"):
        CuratedDatasetAdapter(f"{bucket}/nothing")
