"""An importable module that registers a user feature: how worker processes rebuild it."""

from __future__ import annotations

from kuration.scoring.features import register_feature


@register_feature("present_steps_x2")
def present_steps_x2(track, segment) -> float:
    return 2.0 * float(track.present[segment.start:segment.stop].sum())


def score_in_worker(track, segmenter, strategy):
    """Runs in a spawned process: importing this module registered the feature."""
    from kuration.scoring.track import score_track

    return score_track(track, segmenter=segmenter, strategy=strategy).to_pylist()
