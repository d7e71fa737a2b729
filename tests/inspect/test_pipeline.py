"""Pipeline composes write_dataset and hours_selection_review: the same dataset and the same
review as calling them directly, and only write_dataset's options."""

from __future__ import annotations

import pytest

from kuration import Pipeline
from kuration.budget import hours_selection_review
from kuration.errors import InputError
from kuration.output.write_dataset import write_dataset
from kuration.pipeline import OPTIONS
from kuration.read.dataset_plan import read_dataset_budget_plan
from tests.output.corpus import snapshot, version_dir


def pipeline_of(corpus) -> Pipeline:
    s = corpus.settings
    return Pipeline(adapter=corpus.adapter, schema=corpus.schema, strategy=s.strategy, segmenter=s.segmenter)


def test_review_writes_the_dataset_and_explains_it_as_the_direct_calls_do(corpus, tmp_path):
    review = pipeline_of(corpus).sample(hours={"train": 40 / 3600, "test": 20 / 3600}, span_seconds=10.0).review(
        path=tmp_path / "via", spec=corpus.spec)
    direct = write_dataset(tmp_path / "direct", schema=corpus.schema, adapter=corpus.adapter,
                           strategy=corpus.settings.strategy, segmenter=corpus.settings.segmenter, spec=corpus.spec,
                           train_hours=40 / 3600, test_hours=20 / 3600, span_seconds=10.0)
    assert review.to_dict() == hours_selection_review(direct).to_dict()
    # from the dataset alone: its current version's plan, through the commit chain
    assert review.to_dict() == hours_selection_review(read_dataset_budget_plan(tmp_path / "via")).to_dict()
    via, direct = version_dir(tmp_path / "via"), version_dir(tmp_path / "direct")
    shards = {k: v for k, v in snapshot(via).items() if k.startswith(("train/", "test/"))}
    assert shards == {k: v for k, v in snapshot(direct).items() if k.startswith(("train/", "test/"))}


def test_a_number_of_hours_is_the_train_budget_and_steps_do_not_mutate(corpus):
    base = pipeline_of(corpus)
    sampled = base.sample(hours=2.5, seed=3)
    assert sampled.options == {"train_hours": 2.5, "seed": 3} and base.options == {}
    assert sampled.with_options(workers=2).options["workers"] == 2 and "workers" not in sampled.options


def test_options_are_write_datasets_and_nothing_else(corpus, tmp_path):
    assert "span_seconds" in OPTIONS and "spec" in OPTIONS and "schema" not in OPTIONS
    with pytest.raises(InputError, match=r"Pipeline.sample: unknown option\(s\) \['span'\]; write_dataset takes"):
        pipeline_of(corpus).sample(hours=1, span=10)
    with pytest.raises(InputError, match=r"hours must name splits among \['train', 'val', 'test'\]"):
        pipeline_of(corpus).sample(hours={"holdout": 1})
    with pytest.raises(InputError, match=r"no budget yet; call .sample\(hours=...\) first"):
        pipeline_of(corpus).review(path=tmp_path / "out", spec=corpus.spec)
    assert not (tmp_path / "out").exists()
