"""The fixtures the plan-and-preflight tests share (a module that defines its own ``corpus``
overrides this one, as most writer tests do)."""

import pytest

from tests.output.corpus import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The demo corpus of the writer tests (:class:`tests.output.corpus.Corpus`), scored once per module."""
    return Corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def committed(corpus, tmp_path_factory):
    """A dataset of the corpus's default spec, committed once per module: (folder, result)."""
    out = tmp_path_factory.mktemp("committed") / "out"
    return out, corpus.write(out)
