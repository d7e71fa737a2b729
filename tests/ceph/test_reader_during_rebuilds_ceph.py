"""The Ceph twin of tests/output/test_reader_during_rebuilds.py: a reader process reads a
dataset root on radosgw in a loop while it is rebuilt thirty times, ten of the rebuilds
SIGKILLed, ten failing and ten succeeding; it never gets an error and reads only versions
that were current, byte for byte (:mod:`tests.output.rebuild_loop`). Each version is
published by radosgw's own conditional put (if-none-match), not moto's."""

from kuration.output.lease import LEASE_FILE
from tests.output.corpus import Corpus
from tests.output.rebuild_loop import SMALL_PLANS, RebuildLoop, rebuild_while_reading


def test_a_reader_in_a_loop_sees_only_whole_current_versions_through_thirty_rebuilds_on_radosgw(ceph, tmp_path):
    """Slow (over a minute): forty forked writers (thirty rebuilds and ten reruns after the
    kills) make about a hundred requests each to the gateway while the reader process
    downloads, verifies and decodes every shard of the current version each pass."""

    def remove_the_killed_writers_lease(root):
        # A killed writer's lease object stays; the operator removes it once sure no writer runs.
        ceph.client.delete_object(Bucket=ceph.name, Key=f"rebuilt/{LEASE_FILE}")

    rebuilds = RebuildLoop(Corpus(tmp_path / "corpus"), f"s3://{ceph.name}/rebuilt", seed=27,
                           after_kill=remove_the_killed_writers_lease, budgets=SMALL_PLANS)
    seen = rebuild_while_reading(rebuilds, tmp_path / "reader.jsonl", pause=0.5)
    assert seen["versions_published"] == 21  # v1, ten successes, ten killed rebuilds finished by their reruns
    assert seen["versions_read"] > 10 and seen["kills_mid_write"] > 0  # the reader read during the rebuilds
