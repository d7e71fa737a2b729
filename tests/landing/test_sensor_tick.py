"""``plan_tick``: what one tick of the new-recordings sensor asks for, as plain data (the
sensor's own body only lists, asks the instance and turns this into requests)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kuration.landing.recordings import TickPlan, plan_tick, recording_name


def _tick(listing, partitions=(), *, cursor=None, recorded=None, token="u1", csv=True) -> TickPlan:
    return plan_tick(listing, list(partitions), universe_token=token, universe_csv=csv, cursor=cursor,
                     recorded=recorded or (lambda names: {}), scoring_asset="scored_segments")


def test_a_first_tick_starts_from_what_the_instance_recorded():
    listing = {"a/r1.parquet": "t1", "a/r2.parquet": "t2"}
    asked = []

    def recorded(names):
        asked.append(dict(names))
        return {"recordings": {"a/r1.parquet": "t1", "a/r2.parquet": "t2"}, "universe": "u1"}

    tick = _tick(listing, ["a/r1", "a/r2"], recorded=recorded)
    assert asked == [{"a/r1.parquet": "a/r1", "a/r2.parquet": "a/r2"}]  # source id -> partition name
    assert tick.scoring == () and tick.universe_change is None
    assert tick.skip_reason == "all 2 recording(s) and the universe unchanged since their latest materializations"
    assert json.loads(tick.cursor) == {"recordings": listing, "universe": "u1"}


def test_new_recordings_are_one_run_and_a_rewritten_one_its_own():
    previous = json.dumps({"recordings": {"a/r1.parquet": "t1"}, "universe": "u0"})
    listing = {"a/r1.parquet": "t1b", "a/r2.parquet": "t2", "a/r3.parquet": "t3"}
    tick = _tick(listing, ["a/r1"], cursor=previous, recorded=lambda names: 1 / 0)  # a cursor: nothing asked
    assert tick.partitions.add == ("a/r2", "a/r3") and tick.partitions.replace == ()
    assert tick.universe_change == "universe.csv changed" and tick.universe_run_key == "universe:u1"
    new, rewritten = tick.scoring
    assert (new.partitions, new.change, new.label) == (("a/r2", "a/r3"), "new recording", "2: a/r2, a/r3")
    assert new.run_key.startswith("scored_segments:")
    assert (rewritten.partitions, rewritten.change, rewritten.run_key, rewritten.label) == (
        ("a/r1",), "rewritten", "a/r1.parquet:t1b", "a/r1")
    assert tick.skip_reason == ""
    without_csv = _tick(listing, ["a/r1"], cursor=previous, csv=False)
    assert without_csv.universe_change == "2 recording(s) added, 0 removed"


def test_a_long_run_label_is_cut():
    listing = {f"site/flight_{i:03d}_with_a_long_descriptive_name.parquet": "t" for i in range(40)}
    (run,) = _tick(listing).scoring
    assert len(run.partitions) == 40 and len(run.label) == 200 and run.label.endswith("...")
    assert run.label.startswith("40: site/flight_000_with_a_long_descriptive_name, ")


_IDS = st.sampled_from([f"{site}/r{i}.parquet" for site in ("a", "b") for i in range(4)])


@given(previous=st.dictionaries(_IDS, st.sampled_from(["t0", "t1"]), max_size=8),
       listing=st.dictionaries(_IDS, st.sampled_from(["t0", "t1"]), max_size=8),
       registered=st.lists(_IDS, unique=True, max_size=8))
def test_every_new_or_rewritten_recording_is_asked_for_once(previous, listing, registered):
    partitions = [recording_name(s) for s in registered]
    tick = _tick(listing, partitions, cursor=json.dumps({"recordings": previous, "universe": "u1"}))
    asked = [name for run in tick.scoring for name in run.partitions]
    changed = {s for s in listing if s not in previous or previous[s] != listing[s]}
    assert sorted(asked) == sorted(recording_name(s) for s in changed)
    # each run's partitions are adjacent in the order the partitions will have after this tick
    order = [k for k in partitions if k not in tick.partitions.replace] + list(tick.partitions.add)
    for run in tick.scoring:
        start = order.index(run.partitions[0])
        assert list(run.partitions) == order[start:start + len(run.partitions)]
    assert bool(tick.skip_reason) == (not tick.scoring and tick.universe_change is None)
