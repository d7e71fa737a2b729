"""MotionDirectionRecipe on hand-made arrays: exact labels, reason bits on the boundaries,
the selected action for known displacements, why chains end, and data shaped unlike the
demo (absent entities, short tails, NaN rows, hostile arrays)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuration.errors import RolloutInputError
from kuration.rollouts import MotionDirectionRecipe, RolloutSourceRef
from kuration.rollouts.demo_recipe import ACTION_IDS, MOTION_REASON_CODES, TARGET_KIND, TERMINATION_REASONS

OOB = 1 << MOTION_REASON_CODES["out_of_bounds"]
BELOW = 1 << MOTION_REASON_CODES["below_ground"]
RESERVE = 1 << MOTION_REASON_CODES["battery_reserve"]


def source(n: int) -> RolloutSourceRef:
    return RolloutSourceRef("train/rec_0_shard0000.npz", "a" * 64, "str:'drone_01'", "train", n)


def arrays(pos, battery=None, present=None, frame=False) -> dict[str, np.ndarray]:
    pos = np.asarray(pos, np.float32)
    n = len(pos)
    out = {"pos": pos, "vel": np.zeros((n, 3), np.float32),
           "battery": np.full(n, 0.9, np.float32) if battery is None else np.asarray(battery, np.float32)}
    if present is not None:
        out["_present"] = np.asarray(present, bool)
    if frame:
        out["frame"] = np.arange(n * 4, dtype=np.uint8).reshape(n, 2, 2)
    return out


def run(recipe: MotionDirectionRecipe, data: dict[str, np.ndarray]):
    """The recipe's chains, one record each (it returns them as batches)."""
    return [record for batch in recipe.records_for_shard(data, source(len(data["pos"])))
            for record in batch.to_records()]


def line(n: int, step=(1.0, 0.0, 0.0), start=(0.0, 0.0, 10.0)) -> np.ndarray:
    return np.asarray(start) + np.arange(n)[:, None] * np.asarray(step)


# -- labels, selection, reason bits ------------------------------------------------------


def test_labels_are_the_one_step_progress_toward_the_recorded_future_position():
    recipe = MotionDirectionRecipe(chain_length=1, horizon=0, stride=10)
    [record] = run(recipe, arrays(line(3)))
    assert record.target.kind == TARGET_KIND and record.target.label_valid
    np.testing.assert_array_equal(record.target.value, [1, 0, 10])  # the state the chain's one step reached
    [step] = record.steps
    labels = dict(zip((name for name in ACTION_IDS), step.shell.labels.tolist(), strict=True))
    root2 = math.sqrt(2)
    expected = {"hover": 0.0, "north": 1 - root2, "northeast": 1 - math.sqrt((1 - 1 / root2) ** 2 + 0.5),
                "east": 1.0, "southeast": 1 - math.sqrt((1 - 1 / root2) ** 2 + 0.5), "south": 1 - root2,
                "southwest": 1 - math.sqrt((1 + 1 / root2) ** 2 + 0.5), "west": -1.0,
                "northwest": 1 - math.sqrt((1 + 1 / root2) ** 2 + 0.5), "climb": 1 - root2, "descend": 1 - root2}
    for name, value in expected.items():
        assert labels[name] == pytest.approx(value, abs=1e-6), name
    assert step.selected_shell_index == ACTION_IDS["east"] and step.reward == pytest.approx(1.0)
    assert step.shell.label_valid.all() and step.shell.valid_action.all() and not step.shell.reason_bits.any()
    np.testing.assert_array_equal(step.shell.action_ids, np.arange(11))
    np.testing.assert_allclose(step.shell.positions[ACTION_IDS["northeast"]], [1 / root2, 1 / root2, 10], atol=1e-6)
    assert step.audit_valid_candidates == 11 and step.audit_selected_margin == 0.0


def test_the_target_is_horizon_steps_after_the_chain_end_and_labels_use_it():
    recipe = MotionDirectionRecipe(chain_length=2, horizon=3, stride=100)
    [record] = run(recipe, arrays(line(8)))
    assert [s.source_row for s in record.steps] == [0, 1]
    np.testing.assert_array_equal(record.target.value, [5, 0, 10])  # end row 2, plus 3
    # from (1,0,10) toward (5,0,10): east gains the full step, west loses it
    second = record.steps[1]
    assert second.shell.labels[ACTION_IDS["east"]] == pytest.approx(1.0)
    assert second.shell.labels[ACTION_IDS["west"]] == pytest.approx(-1.0)


@pytest.mark.parametrize("moved, expected", [
    ((1, 0, 0), "east"), ((0, -2, 0), "south"), ((1, 1, 0), "northeast"), ((-3, 1, 0), "west"),
    ((1, 2, 0), "northeast"), ((0, 0, 0.5), "climb"), ((0, 0, -1), "descend"), ((0.2, 0, -1), "descend"),
    ((0, 0, 0), "hover"),
])
def test_the_selected_action_is_the_shell_candidate_closest_to_the_recorded_displacement(moved, expected):
    [record] = run(MotionDirectionRecipe(chain_length=1, horizon=0), arrays(line(2, moved)))
    assert record.steps[0].selected_shell_index == ACTION_IDS[expected]


def test_a_configured_step_length_makes_a_tiny_recorded_move_a_hover():
    recipe = MotionDirectionRecipe(chain_length=1, horizon=0, step_length_m=10.0)
    [record] = run(recipe, arrays(line(2, (0.1, 0, 0))))
    step = record.steps[0]
    assert step.selected_shell_index == ACTION_IDS["hover"]
    np.testing.assert_allclose(step.shell.positions[ACTION_IDS["east"]], [10, 0, 10])


@pytest.mark.parametrize("x, length, invalid", [(159.0, 1.0, False), (159.0, 1.5, True), (-159.5, 0.5, False),
                                                (-159.5, 0.75, True)])
def test_out_of_bounds_on_the_site_boundary(x, length, invalid):
    heading = "east" if x > 0 else "west"
    recipe = MotionDirectionRecipe(chain_length=1, horizon=0, step_length_m=length)
    # the recorded move is a hover so the chain exists whatever the heading's validity
    [record] = run(recipe, arrays([[x, 0, 10], [x, 0, 10]]))
    shell = record.steps[0].shell
    index = ACTION_IDS[heading]
    assert shell.reason_bits[index] == (OOB if invalid else 0)
    assert shell.valid_action[index] == (not invalid)
    assert math.isnan(shell.labels[index]) == invalid and shell.label_valid[index] == (not invalid)


@pytest.mark.parametrize("z, invalid", [(1.0, False), (0.5, True)])
def test_below_ground_on_the_boundary(z, invalid):
    [record] = run(MotionDirectionRecipe(chain_length=1, horizon=0, step_length_m=1.0), arrays([[0, 0, z], [0, 0, z]]))
    shell = record.steps[0].shell
    assert shell.reason_bits[ACTION_IDS["descend"]] == (BELOW if invalid else 0)
    assert not shell.reason_bits[ACTION_IDS["climb"]]


@pytest.mark.parametrize("battery, low", [(0.15, False), (0.1499, True)])
def test_under_the_battery_reserve_only_hover_and_descend_stay_valid(battery, low):
    [record] = run(MotionDirectionRecipe(chain_length=1, horizon=0, step_length_m=1.0),
                   arrays([[0, 0, 10], [0, 0, 9]], battery=[battery, battery]))
    shell = record.steps[0].shell
    valid = {name for name in ACTION_IDS if shell.valid_action[ACTION_IDS[name]]}
    assert valid == ({"hover", "descend"} if low else set(ACTION_IDS))
    assert {int(b) for b in shell.reason_bits} == ({0, RESERVE} if low else {0})
    assert record.steps[0].selected_shell_index == ACTION_IDS["descend"]
    assert record.steps[0].audit_valid_candidates == (2 if low else 11)


def test_a_candidate_can_carry_several_reasons():
    [record] = run(MotionDirectionRecipe(chain_length=1, horizon=0, step_length_m=1.0),
                   arrays([[160, 160, 0.5], [160, 160, 0.5]], battery=[0.05, 0.05]))
    bits = record.steps[0].shell.reason_bits
    assert bits[ACTION_IDS["northeast"]] == OOB | RESERVE
    assert bits[ACTION_IDS["descend"]] == BELOW
    assert bits[ACTION_IDS["hover"]] == 0
    assert bits[ACTION_IDS["south"]] == RESERVE


def test_the_margin_is_the_best_valid_label_minus_the_selected_one():
    # recorded move east, but the target lies north: north is best, east is selected
    pos = [[0, 0, 10], [1, 0, 10], [1, 5, 10]]
    [record] = run(MotionDirectionRecipe(chain_length=1, horizon=1), arrays(pos))
    step = record.steps[0]
    best = float(np.nanmax(step.shell.labels))
    assert step.selected_shell_index == ACTION_IDS["east"]
    assert step.audit_selected_margin == pytest.approx(best - step.reward) and step.audit_selected_margin > 0


# -- chains ---------------------------------------------------------------------------------


def test_chains_start_every_stride_and_stop_at_chain_length_or_the_track_end():
    records = run(MotionDirectionRecipe(stride=3, chain_length=2, horizon=0), arrays(line(7)))
    assert [([s.source_row for s in r.steps], r.termination_reason) for r in records] == [
        ([0, 1], "chain_length"), ([3, 4], "chain_length")]  # a chain from row 6 has no next state


def test_a_tail_shorter_than_chain_length_ends_as_track_end():
    records = run(MotionDirectionRecipe(stride=3, chain_length=10, horizon=0), arrays(line(5)))
    assert [([s.source_row for s in r.steps], r.termination_reason) for r in records] == [
        ([0, 1, 2, 3], "track_end"), ([3], "track_end")]


def test_an_absent_row_ends_a_chain_and_starts_none():
    present = [True, True, True, False, True, True]
    records = run(MotionDirectionRecipe(stride=3, chain_length=5, horizon=0), arrays(line(6), present=present))
    # row 2 has no next state; the chain from row 3 is not made (absent), and row 5 is the last
    assert [([s.source_row for s in r.steps], r.termination_reason) for r in records] == [([0, 1], "track_end")]


def test_an_entity_absent_throughout_gives_no_records():
    assert run(MotionDirectionRecipe(), arrays(np.zeros((8, 3)), present=np.zeros(8, bool))) == []


@pytest.mark.parametrize("n", [0, 1])
def test_shards_without_a_transition_give_no_records(n):
    assert run(MotionDirectionRecipe(), arrays(line(n))) == []


def test_flying_on_under_the_reserve_ends_the_chain_before_that_step():
    battery = [0.5, 0.5, 0.1, 0.1, 0.1]
    records = run(MotionDirectionRecipe(stride=10, chain_length=10, horizon=0), arrays(line(5), battery=battery))
    [record] = records
    assert [s.source_row for s in record.steps] == [0, 1] and record.termination_reason == "selected_invalid"


def test_a_recording_that_leaves_the_site_ends_as_selected_invalid():
    records = run(MotionDirectionRecipe(stride=10, chain_length=10, horizon=0),
                  arrays(line(5, start=(157.5, 0, 10))))
    [record] = records
    # candidates east of 160 m are out of bounds: rows 0 and 1 reach 158.5 and 159.5, row 2 would leave
    assert [s.source_row for s in record.steps] == [0, 1] and record.termination_reason == "selected_invalid"


def test_nan_positions_end_chains_and_are_never_labelled():
    pos = line(8)
    pos[3] = np.nan
    records = run(MotionDirectionRecipe(stride=3, chain_length=10, horizon=0), arrays(pos))
    assert [([s.source_row for s in r.steps], r.termination_reason) for r in records] == [
        ([0, 1], "non_finite_state"), ([6], "track_end")]
    for record in records:
        assert all(3 not in (s.source_row, s.source_row + 1) for s in record.steps)
        assert np.isfinite(record.target.value).all()


def test_a_nan_battery_or_velocity_is_not_a_state_either():
    data = arrays(line(6))
    data["vel"][2] = np.inf
    records = run(MotionDirectionRecipe(stride=10, chain_length=10, horizon=0), data)
    assert [([s.source_row for s in r.steps], r.termination_reason) for r in records] == [([0], "non_finite_state")]


def test_a_target_past_the_track_is_label_invalid_and_uses_the_last_recorded_position():
    [record] = run(MotionDirectionRecipe(stride=10, chain_length=2, horizon=5), arrays(line(5)))
    assert not record.target.label_valid
    np.testing.assert_array_equal(record.target.value, [4, 0, 10])
    # the labels are still one-step labels against it
    assert record.steps[0].shell.labels[ACTION_IDS["east"]] == pytest.approx(1.0)
    assert record.steps[0].shell.label_valid.all()


def test_a_target_row_where_the_entity_is_absent_is_label_invalid():
    present = [True, True, True, True, False, True]
    [record] = run(MotionDirectionRecipe(stride=10, chain_length=2, horizon=2),
                   arrays(line(6), present=present))
    assert [s.source_row for s in record.steps] == [0, 1] and not record.target.label_valid
    np.testing.assert_array_equal(record.target.value, [3, 0, 10])  # row 4 is absent: row 3 is the last before it


def test_the_state_vector_and_the_payload():
    data = arrays(line(3), frame=True)
    data["vel"][:] = [[1, 2, 3]] * 3
    full = run(MotionDirectionRecipe(stride=10, chain_length=2, horizon=0, field_retention_policy="full"), data)
    compact = run(MotionDirectionRecipe(stride=10, chain_length=2, horizon=0), data)
    step = full[0].steps[1]
    np.testing.assert_array_equal(step.state, np.float32([1, 0, 10, 1, 2, 3, 0.9]))
    assert step.state.dtype == np.float32
    np.testing.assert_array_equal(step.selected_payload, data["frame"][1])
    assert step.selected_payload.dtype == np.uint8
    assert all(s.selected_payload is None for s in compact[0].steps)


def test_a_recipe_without_a_battery_has_no_reserve_rule():
    recipe = MotionDirectionRecipe(battery=None, state_modalities=("pos",), stride=10, chain_length=5, horizon=0)
    data = {"pos": np.asarray(line(4), np.float32)}
    [record] = run(recipe, data)
    assert recipe.required_modalities == ("pos",) and record.termination_reason == "track_end"
    assert record.steps[0].state.shape == (3,)


# -- hostile input --------------------------------------------------------------------------


def _with(**changes):
    data = arrays(line(4), present=[True] * 4)
    data.update(changes)
    return data


@pytest.mark.parametrize("data, message", [
    (_with(pos=np.zeros(4, np.float32)), r"position 'pos' must have shape \[steps, 3\] \(x, y, z\), got \[4\]"),
    (_with(pos=np.zeros((4, 2), np.float32)), r"must have shape \[steps, 3\].*got \[4, 2\]"),
    (_with(pos=np.zeros((4, 3), np.int32)), r"modality 'pos' must be a numpy array of floats, got int32"),
    (_with(pos=np.array([["a"] * 3] * 4)), r"modality 'pos' must be a numpy array of floats, got <U1"),
    (_with(pos=[[0.0] * 3] * 4), r"modality 'pos' must be a numpy array of floats, got list"),
    (_with(battery=np.zeros((4, 1), np.float32)), r"battery 'battery' must have shape \[steps\], got \[4, 1\]"),
    (_with(battery=np.zeros(3, np.float32)), r"modality 'battery' has shape \[3\], expected 4 rows"),
    (_with(vel=np.array([object()] * 4)), r"modality 'vel' must be a numpy array of numbers, got object"),
    (_with(_present=np.ones(4, np.int8)), r"modality '_present' must be a numpy array of bools, got int8"),
    (_with(_present=np.ones((4, 2), bool)), r"_present must have shape \[steps\], got \[4, 2\]"),
    ({"pos": np.zeros((4, 3), np.float32)}, r"no modality 'battery' \(the shard has \['pos'\]\); declare it"),
])
def test_hostile_arrays_are_refused_naming_the_modality(data, message):
    with pytest.raises(RolloutInputError, match=message):
        MotionDirectionRecipe().records_for_shard(data, source(4))


def test_arrays_that_are_not_a_mapping_or_disagree_with_the_source_are_refused():
    with pytest.raises(RolloutInputError, match="arrays must be a mapping of modality -> numpy array, got list"):
        MotionDirectionRecipe().records_for_shard([np.zeros((4, 3))], source(4))  # type: ignore[arg-type]
    with pytest.raises(RolloutInputError, match=r"'pos' has 4 rows but the source records n_states=5"):
        MotionDirectionRecipe().records_for_shard(arrays(line(4)), source(5))
    data = arrays(line(4))
    data["frame"] = np.zeros((4, 2), np.uint16)
    with pytest.raises(RolloutInputError, match="payload 'frame' must be uint8, got uint16"):
        MotionDirectionRecipe(field_retention_policy="full").records_for_shard(data, source(4))


@pytest.mark.parametrize("options, message", [
    (dict(stride=0), r"stride: must be a whole number >= 1, got 0"),
    (dict(chain_length=True), r"chain_length: must be a whole number >= 1, got True"),
    (dict(horizon=-1), r"horizon: must be a whole number >= 0"),
    (dict(step_length_m=0.0), r"step_length_m: must be a positive number, got 0.0"),
    (dict(site_half_extent_m=float("inf")), r"site_half_extent_m: must be a positive number"),
    (dict(battery_reserve=1.5), r"battery_reserve: must be a finite number in \[0.0, 1.0\], got 1.5"),
    (dict(field_retention_policy="most"), r"field_retention_policy: must be one of \['compact', 'full'\]"),
    (dict(state_modalities="pos"), r"state_modalities: must be a non-empty tuple of modality names"),
    (dict(state_modalities=("pos", "pos")), r"names a modality twice"),
    (dict(position="_present"), r"position: must be a modality name"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(RolloutInputError, match=message):
        MotionDirectionRecipe(**options)


# -- the store contract, for any track --------------------------------------------------------


@st.composite
def tracks(draw):
    n = draw(st.integers(0, 24))
    moves = draw(st.lists(st.sampled_from([(0, 0, 0), (1, 0, 0), (0, -1.5, 0), (0.7, 0.7, 0), (0, 0, 1), (0, 0, -1),
                                           (2, 1, -0.5), (0.01, 0, 0)]), min_size=n, max_size=n))
    start = draw(st.tuples(st.floats(-162, 162), st.floats(-162, 162), st.floats(-1, 3)))
    pos = np.asarray(start) + np.cumsum(np.asarray(moves, float).reshape(n, 3), axis=0)
    nan_rows = draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=2)) if n else []
    pos[nan_rows] = np.nan
    battery = np.asarray(draw(st.lists(st.sampled_from([0.9, 0.16, 0.15, 0.1, 0.0]), min_size=n, max_size=n)))
    present = np.asarray(draw(st.lists(st.sampled_from([True, True, True, False]), min_size=n, max_size=n)), bool)
    recipe = MotionDirectionRecipe(stride=draw(st.integers(1, 5)), chain_length=draw(st.integers(1, 6)),
                                   horizon=draw(st.integers(0, 6)),
                                   step_length_m=draw(st.none() | st.sampled_from([0.5, 3.0])))
    return recipe, arrays(pos, battery=battery, present=present)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tracks())
def test_every_record_satisfies_the_store_contract(case):
    recipe, data = case
    for record in run(recipe, data):
        assert record.termination_reason in TERMINATION_REASONS
        assert 1 <= len(record.steps) <= recipe.chain_length
        assert np.isfinite(record.target.value).all()
        rows = [s.source_row for s in record.steps]
        assert rows == list(range(rows[0], rows[0] + len(rows)))
        for step in record.steps:
            shell = step.shell
            assert len({len(shell.action_ids), len(shell.positions), len(shell.valid_action), len(shell.reason_bits),
                        len(shell.labels), len(shell.label_valid)}) == 1
            assert np.array_equal(shell.valid_action, shell.reason_bits == 0)
            invalid = ~shell.valid_action
            assert np.isnan(shell.labels[invalid]).all() and not shell.label_valid[invalid].any()
            assert np.isfinite(shell.labels[shell.label_valid]).all()
            assert np.array_equal(shell.label_valid, shell.valid_action & np.isfinite(shell.labels))
            assert shell.valid_action[step.selected_shell_index]
            assert math.isfinite(step.reward) and step.reward == float(shell.labels[step.selected_shell_index])
            assert np.isfinite(step.state).all() and bool(data["_present"][step.source_row])
            assert step.audit_valid_candidates == int(shell.valid_action.sum())
            assert step.audit_selected_margin is not None and step.audit_selected_margin >= 0
