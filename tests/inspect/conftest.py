"""One corpus for the package: two datasets written by the real writer (a plan, and a plan with
a smaller train budget), written once and copied by tests that change them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.output.corpus import Corpus


@pytest.fixture(scope="package")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("inspect-corpus"))


@pytest.fixture(scope="package")
def written(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("written") / "out"
    corpus.write(out)
    return out


@pytest.fixture(scope="package")
def smaller(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("smaller") / "out"
    corpus.write(out, plan=corpus.plan(train_hours=20 / 3600))
    return out
