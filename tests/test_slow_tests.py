"""The end-of-run list of slow tests without a docstring (tests/slow_tests.py)."""

from tests.slow_tests import SLOW_TEST_SECONDS, documented, undocumented_slow_tests


def _says_why():
    """Builds the demo once for the session."""


def _silent():
    pass


def _blank():
    """   """


def test_a_docstring_with_words_documents_a_test_and_an_item_without_a_function_counts_as_documented():
    assert documented(_says_why) and documented(None)
    assert not documented(_silent) and not documented(_blank)


def test_only_tests_over_the_threshold_without_a_docstring_are_listed_slowest_first():
    seconds = {"a": 31.0, "b": 95.5, "c": 12.0, "d": 40.0, "e": SLOW_TEST_SECONDS, "never_collected": 99.0}
    documented_ids = {"a": False, "b": False, "c": False, "d": True, "e": False}
    assert undocumented_slow_tests(seconds, documented_ids) == [(95.5, "b"), (31.0, "a")]
    assert undocumented_slow_tests(seconds, documented_ids, threshold=10) == [(95.5, "b"), (31.0, "a"), (30.0, "e"),
                                                                             (12.0, "c")]
    assert undocumented_slow_tests({}, {}) == []
