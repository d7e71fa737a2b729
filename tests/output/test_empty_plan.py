"""The writer refuses a plan that gives it nothing to write (every source not_in_split,
typically: the split's ids are not the recordings'), before touching the destination, and
commits an empty dataset only when asked to (``allow_empty=True``)."""

import pyarrow as pa
import pytest

from kuration.budget import BudgetOptions, plan_budget
from kuration.output.write_dataset import DatasetWriteError, EmptyPlanError, write_dataset
from kuration.pipeline import OPTIONS
from kuration.read import load_committed, verify_dataset
from tests.output.corpus import Corpus

#: A split whose ids were written relative to the landing zone instead of recordings/.
ELSEWHERE = pa.table({"stage": ["train", "test"], "source": ["recordings/a.parquet", "recordings/b.parquet"],
                      "group": ["a", "b"]})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("empty-corpus"))


@pytest.fixture(scope="module")
def empty_plan(corpus):
    options = BudgetOptions(train_hours=40 / 3600, test_hours=20 / 3600, span_seconds=10.0,
                            chunking=corpus.spec.chunking)
    plan = plan_budget(corpus.scored.segments, options, strategy=corpus.settings.strategy, split_assignments=ELSEWHERE)
    assert plan.admitted().num_rows == 0
    return plan


def test_a_plan_that_admits_nothing_is_refused_before_the_destination_is_touched(corpus, empty_plan, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(EmptyPlanError) as caught:
        corpus.write(out, plan=empty_plan)
    message = str(caught.value)
    assert message.startswith("the budget plan admits nothing (train requested 40 seconds, pool 0, admitted 0; ")
    assert "3 scored source(s) are in no split (not_in_split, e.g. ['airfield_north/flight_001.parquet'" in message
    assert message.endswith("or pass allow_empty=True to commit an empty dataset on purpose")
    assert isinstance(caught.value, DatasetWriteError) and not out.exists()


def test_a_refused_empty_plan_leaves_a_committed_dataset_as_it_was(corpus, empty_plan, tmp_path):
    out = tmp_path / "out"
    first = corpus.write(out)
    with pytest.raises(EmptyPlanError):
        corpus.write(out, plan=empty_plan, resume=True, on_other_run="replace")
    assert load_committed(out).record == first.record and verify_dataset(out).ok


def test_allow_empty_commits_an_empty_dataset_that_verifies(corpus, empty_plan, tmp_path):
    out = tmp_path / "out"
    result = corpus.write(out, plan=empty_plan, allow_empty=True)
    assert result.record.state == "committed" and result.manifest["entries"] == []
    assert (result.written, result.reused) == (0, 0)
    assert result.manifest["budget"]["not_in_split"]["sources"] == 3
    dataset = load_committed(out)
    assert dataset.entries == [] and verify_dataset(out).ok


def test_write_dataset_refuses_an_empty_plan_after_planning(corpus, tmp_path):
    """A split naming none of the scored sources is refused earlier (its own error); a split
    naming only sources that admit nothing reaches the empty-plan refusal."""
    out = tmp_path / "out"
    named = pa.table({"stage": ["val"], "source": ["airfield_north/flight_001.parquet"], "group": ["north"]})
    kwargs = dict(schema=corpus.schema, adapter=corpus.adapter, strategy=corpus.settings.strategy,
                  segmenter=corpus.settings.segmenter, spec=corpus.spec, train_hours=40 / 3600,
                  span_seconds=10.0, split_assignments=named)
    with pytest.raises(EmptyPlanError, match=r"admits nothing \(train requested 40 seconds, pool 0, admitted 0;"):
        write_dataset(out, **kwargs)
    assert load_committed(write_dataset(out, allow_empty=True, **kwargs).out).entries == []


def test_the_pipeline_takes_the_new_options():
    assert {"allow_empty", "reuse_shards"} <= set(OPTIONS)
