"""The S3 twin of tests/output/test_reader_during_rebuilds.py: a reader process reads a
dataset root on S3 (moto on loopback) in a loop while it is rebuilt thirty times, ten of the
rebuilds SIGKILLed, ten failing and ten succeeding; it never gets an error and reads only
versions that were current, byte for byte (:mod:`tests.output.rebuild_loop`). Each version
is published by a conditional put here, not a hard link."""

import pytest

from kuration.output.lease import LEASE_FILE
from tests.output.corpus import Corpus
from tests.output.rebuild_loop import SMALL_PLANS, RebuildLoop, rebuild_while_reading

# The Ceph twin (tests/ceph) is the S3 run of the default suite; this moto one runs under -m soak.
pytestmark = pytest.mark.soak


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("remote-rebuilds-corpus"))


def test_a_reader_in_a_loop_sees_only_whole_current_versions_through_thirty_rebuilds_on_s3(corpus, bucket, s3_client,
                                                                                          tmp_path):
    """Slow (over a minute): forty forked writers (thirty rebuilds and ten reruns after the
    kills) make about a hundred requests each to the one S3 server, which runs in this
    test's process, while the reader process downloads, verifies and decodes every shard of
    the current version each pass. Smaller plans than the local test's keep it to that."""

    def remove_the_killed_writers_lease(root):
        # A killed writer's lease object stays; the operator removes it once sure no writer runs.
        s3_client.delete_object(Bucket=bucket[len("s3://"):], Key=f"dataset/{LEASE_FILE}")

    rebuilds = RebuildLoop(corpus, f"{bucket}/dataset", seed=26, after_kill=remove_the_killed_writers_lease,
                           budgets=SMALL_PLANS)
    seen = rebuild_while_reading(rebuilds, tmp_path / "reader.jsonl", pause=0.5)
    assert seen["versions_published"] == 21  # v1, ten successes, ten killed rebuilds finished by their reruns
    assert seen["versions_read"] > 10 and seen["kills_mid_write"] > 0  # the reader read during the rebuilds
