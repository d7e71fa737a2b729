"""Typed step projections: codes decoded, reason bits named, unavailable values as None."""

import math

import numpy as np
import pytest

from kuration.errors import RolloutInputError, RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, write_rollout_zarr_store
from tests.rollouts.writer_records import sample_records


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("read_model") / "store.zarr"
    write_rollout_zarr_store(out, sample_records(), discount_gamma=0.9)
    return out


def test_a_step_view_decodes_every_column_of_the_step_and_its_shell(store):
    records = sample_records()
    reader = RolloutZarrStoreReader(store)
    view = reader.step_view(0)  # chain a, step 0: width 5, candidates 0 and 3 invalid, selected 1
    step = records[0].steps[0]
    assert (view.rollout_id, view.step_index, view.source_row) == (0, 0, 0)
    assert view.shard_path == "train/shard_000000.npz"
    assert (view.strategy_id, view.mixture_id, view.termination_reason) == ("greedy", "mix_a", "horizon")
    assert view.state == tuple(float(v) for v in step.state)
    assert view.reward == pytest.approx(step.reward) and not view.terminal and view.next_step_id == 1
    assert view.audit_valid_candidates == 5 and view.audit_selected_margin == 0.0  # measured zero stays 0
    assert [c.valid_action for c in view.candidates] == [False, True, True, False, True]
    assert view.candidates[0].reasons == ("out_of_bounds",) and view.candidates[0].label is None
    assert view.candidates[3].reasons == ("resource_below_reserve", "recipe_other")
    assert view.selected is view.candidates[1] and view.selected.label == pytest.approx(step.shell.labels[1])
    assert [c.action_id for c in view.candidates] == [100, 101, 102, 103, 104]
    assert view.candidates[2].position == tuple(float(v) for v in step.shell.positions[2])


def test_unavailable_values_come_back_as_none_never_as_sentinels(store):
    reader = RolloutZarrStoreReader(store)
    audited_out = reader.step_view(1)  # audit=False, label 1 is NaN on a valid action
    assert audited_out.audit_valid_candidates is None and audited_out.audit_selected_margin is None
    nan_label = audited_out.candidates[1]
    assert nan_label.valid_action and nan_label.label is None and not nan_label.label_valid
    last = reader.step_view(2)  # the chain's last step
    assert last.terminal and last.next_step_id is None
    for step_id in range(int(reader.counts["steps"])):
        view = reader.step_view(step_id)
        for candidate in view.candidates:
            assert candidate.label is None or math.isfinite(candidate.label)
            assert candidate.valid_action or (candidate.label is None and candidate.reasons)


@pytest.mark.parametrize("step_id", [-1, 10**9, 1.0, True, "0", np.float64(0)])
def test_a_step_outside_the_store_or_of_the_wrong_type_is_refused(store, step_id):
    with pytest.raises(RolloutInputError, match="step_view: step_id"):
        RolloutZarrStoreReader(store).step_view(step_id)


def test_a_damaged_link_is_a_store_error_not_an_index_error(store, tmp_path):
    import shutil

    import zarr

    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(store, damaged)
    group = zarr.open_group(damaged, mode="r+")
    group["steps/selected_shell_index"][0] = 9  # outside the 5-wide shell
    with pytest.raises(RolloutStoreError, match=r"selected_shell_index 9 is outside its shell of 5"):
        RolloutZarrStoreReader(damaged).step_view(0)
