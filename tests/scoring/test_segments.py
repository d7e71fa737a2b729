"""Segmenter: window/stride planning, seconds -> steps, short tracks, validation."""

from __future__ import annotations

import numpy as np
import pytest

from kuration.scoring.segments import Segment, Segmenter, SegmenterError
from tests.scoring._tracks import make_track


def bounds(seg: list[Segment]) -> list[tuple[int, int]]:
    return [(s.start, s.stop) for s in seg]


def test_sliding_windows_in_steps_end_with_an_end_aligned_tail_window():
    track = make_track([True] * 10)
    segs = Segmenter(4, 3, unit="steps").segments(track)
    assert bounds(segs) == [(0, 4), (3, 7), (6, 10)]  # the stride reaches the end: no extra window
    tailed = Segmenter(4, 4, unit="steps").segments(track)
    assert bounds(tailed) == [(0, 4), (4, 8), (6, 10)]  # [8, 10) is covered by a window ending at the last step
    assert [s.index for s in tailed] == [0, 1, 2] and [s.index for s in segs] == [0, 1, 2]
    assert all(s.source_id == "src" and s.entity_id == "a" for s in segs)


@pytest.mark.parametrize(("n", "window", "stride"), [(10, 4, 4), (23, 5, 3), (101, 10, 7), (12, 2, 5), (7, 7, 3)])
def test_every_track_ends_with_a_window_that_ends_at_its_last_step(n, window, stride):
    starts, stops = Segmenter(window, stride, unit="steps").bounds(n)
    assert stops[-1] == n and (stops - starts == window).all()
    assert (np.diff(starts) > 0).all()
    if stride <= window:  # every row is in some window
        covered = np.zeros(n, bool)
        for a, b in zip(starts, stops, strict=True):
            covered[a:b] = True
        assert covered.all()
    regular = np.arange(0, n - window + 1, stride)
    assert starts[: len(regular)].tolist() == regular.tolist()
    assert len(starts) - len(regular) == int(regular[-1] + window < n)


def test_window_equal_to_track_gives_one_segment():
    assert bounds(Segmenter(5, 1, unit="steps").segments(make_track([True] * 5))) == [(0, 5)]


def test_track_shorter_than_a_window_gives_one_whole_segment():
    segs = Segmenter(10, 2, unit="steps").segments(make_track([True, False, True]))
    assert bounds(segs) == [(0, 3)]
    assert segs[0].present_fraction == pytest.approx(2 / 3)


def test_empty_track_gives_no_segments():
    assert Segmenter(2, 1, unit="steps").segments(make_track([])) == []


def test_stride_larger_than_window_leaves_gaps():
    segs = Segmenter(2, 5, unit="steps").segments(make_track([True] * 12))
    assert bounds(segs) == [(0, 2), (5, 7), (10, 12)]


def test_ticks_and_present_fraction():
    track = make_track([True, False, False, True, True, True], ticks=[10, 11, 13, 14, 20, 21])
    segs = Segmenter(3, 3, unit="steps").segments(track)
    assert [(s.start_tick, s.stop_tick) for s in segs] == [(10, 14), (14, 22)]
    assert [s.present_fraction for s in segs] == [pytest.approx(1 / 3), 1.0]
    assert segs[1].n_steps == 3


def test_seconds_convert_with_round_using_the_tracks_rate_when_unset():
    seg = Segmenter(0.36, 0.14)  # 3.6 -> 4 steps, 1.4 -> 1 step at 10 Hz
    assert seg.steps(10) == (4, 1)
    assert bounds(seg.segments(make_track([True] * 6))) == [(0, 4), (1, 5), (2, 6)]
    assert Segmenter(0.25, 0.35, sample_hz=10).steps() == (2, 4)  # 2.5 -> 2 (half to even), 3.5 -> 4
    assert Segmenter(4, 2, unit="seconds", sample_hz=20).steps() == (80, 40)
    assert Segmenter(4, 2, unit="steps", sample_hz=20).steps() == (4, 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 1), {}, r"Segmenter\.window: must be a positive number of seconds, got 0"),
        ((1, -2), {}, r"Segmenter\.stride: must be a positive number"),
        ((float("nan"), 1), {}, r"Segmenter\.window"),
        ((True, 1), {}, r"Segmenter\.window"),
        (("4", 1), {}, r"Segmenter\.window"),
        ((2.5, 1), {"unit": "steps"}, r"Segmenter\.window: 2\.5 is not a whole number of steps"),
        ((1, 1), {"unit": "frames"}, r"Segmenter\.unit: must be one of \['seconds', 'steps'\], got 'frames'"),
        ((1, 1), {"sample_hz": 0}, r"Segmenter\.sample_hz: must be a positive number"),
        ((0.01, 1), {"sample_hz": 20}, r"Segmenter\.window: 0\.01 s at 20 Hz rounds to 0 steps; use at least 0\.05 s"),
        ((1, 0.02), {"sample_hz": 20}, r"Segmenter\.stride: 0\.02 s at 20 Hz rounds to 0 steps"),
    ],
)
def test_validation_errors_name_the_argument(args, kwargs, match):
    with pytest.raises(SegmenterError, match=match):
        Segmenter(*args, **kwargs)


def test_seconds_conversion_checked_against_the_track_rate_at_segment_time():
    with pytest.raises(SegmenterError, match=r"Segmenter\.window: 0\.01 s at 10 Hz rounds to 0 steps"):
        Segmenter(0.01, 0.01).segments(make_track([True] * 3))
    with pytest.raises(SegmenterError, match=r"needs a sample rate"):
        Segmenter(1, 1).steps()


def test_segmenter_rate_must_match_the_track_rate():
    with pytest.raises(SegmenterError, match=r"Segmenter\.sample_hz: 20 Hz but track 'src'/'a' is sampled at 10 Hz"):
        Segmenter(1, 1, sample_hz=20).segments(make_track([True] * 30))


def test_segmenter_error_is_a_value_error():
    with pytest.raises(ValueError):
        Segmenter(-1, 1)


def test_to_dict_from_dict_and_fingerprint():
    seg = Segmenter(4, 2, unit="seconds", sample_hz=20)
    assert seg.to_dict() == {"window": 4.0, "stride": 2.0, "unit": "seconds", "sample_hz": 20.0}
    assert Segmenter.from_dict(seg.to_dict()) == seg
    assert seg.fingerprint() == Segmenter(4.0, 2, sample_hz=20.0).fingerprint()
    assert seg.fingerprint() != Segmenter(4, 2, unit="steps", sample_hz=20).fingerprint()
    assert len(seg.fingerprint()) == 64
    with pytest.raises(SegmenterError, match=r"unknown key\(s\) \['windw'\]"):
        Segmenter.from_dict({"windw": 1, "stride": 1})
    with pytest.raises(SegmenterError, match=r"missing key\(s\) \['stride'\]"):
        Segmenter.from_dict({"window": 1})


def test_bounds_is_a_pure_plan():
    starts, stops = Segmenter(3, 2, unit="steps").bounds(8)
    assert starts.tolist() == [0, 2, 4, 5] and stops.tolist() == [3, 5, 7, 8]
    assert starts.dtype == np.int64
    assert Segmenter(3, 2, unit="steps").bounds(0)[0].size == 0


def test_segment_is_frozen():
    seg = Segmenter(2, 2, unit="steps").segments(make_track([True] * 4))[0]
    with pytest.raises(AttributeError):
        seg.start = 1  # type: ignore[misc]
