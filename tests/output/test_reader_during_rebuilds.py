"""A reader process reads a dataset root in a loop while it is rebuilt thirty times (issue
25): ten rebuilds SIGKILLed at random moments (each rerun), five refused before the lease,
five failing mid-write and ten succeeding, each writing rebuild with another plan than the
current version's. The reader never gets an error, and every dataset it read is, byte for
byte, a version that was current, read while it was (:mod:`tests.output.rebuild_loop`)."""

import pytest

from tests.output.corpus import Corpus
from tests.output.rebuild_loop import RebuildLoop, rebuild_while_reading


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("rebuilds-corpus"))


def test_a_reader_in_a_loop_sees_only_whole_current_versions_through_thirty_rebuilds(corpus, tmp_path):
    """Slow (about 30 s): forty forked writers (thirty rebuilds and ten reruns after the
    kills) share two cores with the reader process, which verifies and decodes every shard
    of the current version in each of its passes."""
    seen = rebuild_while_reading(RebuildLoop(corpus, str(tmp_path / "dataset"), seed=25), tmp_path / "reader.jsonl")
    assert seen["versions_published"] == 21  # v1, ten successes, ten killed rebuilds finished by their reruns
    assert seen["versions_read"] > 10 and seen["kills_mid_write"] > 0  # the reader read during the rebuilds
