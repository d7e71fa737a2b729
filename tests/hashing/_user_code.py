"""User code shaped like real features and callbacks: nested code objects, set constants,
closures. Imported by the fingerprint tests in this process and in subprocesses."""

import math

import numpy as np


def busiest_entity(track):
    # a generator expression, a lambda and a comprehension: three nested code objects
    counts = sorted((len(v) for v in track.values()), key=lambda n: -n)
    return max([c for c in counts if c > 0] or [0])


def is_weather_tag(tag):
    return tag in {"rain", "gust", "fog", "snow", "hail", "sleet"}  # a frozenset constant


def threshold_feature(limit):
    def above(values):
        return sum(1 for v in values if v > limit)
    return above


def with_nan_default(values, fill=math.nan, scale=np.float32(2.5)):  # noqa: B008 (the numpy default is the state under test)
    return [fill if v is None else v * scale for v in values]


SOURCE_LESS = {}
exec(  # a function with no source file, as a notebook cell or exec would make it
    "def typed_at_a_prompt(values):\n"
    "    return {k for k in ('a', 'b', 'c')} | set(x for x in values if x in {'p', 'q', 'r'})\n",
    SOURCE_LESS,
)
