"""How figures read on a dashboard: :func:`kuration.numbers.format_bytes`, :func:`rounded`
and :func:`percent`, the one place metadata, check tables and reports take them from."""

import math

import numpy as np
import pytest

from kuration.numbers import format_bytes, percent, rounded


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (100400600, "95.7 MiB"), (138394520, "132.0 MiB"), (2**40, "1.0 TiB"), (5 * 2**50, "5.0 PiB"),
    # past the largest unit the number grows, it does not overflow into nonsense
    (2**70, "1,024.0 EiB"),
    (np.int64(2048), "2.0 KiB"), (2048.0, "2.0 KiB"),
    (-100400600, "-95.7 MiB"),  # a difference of two sizes keeps its sign
])
def test_format_bytes_in_binary_units(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 10**400, True, "12", None])
def test_format_bytes_refuses_what_is_no_byte_count(bad):
    with pytest.raises(ValueError, match="is not a byte count"):
        format_bytes(bad)


@pytest.mark.parametrize(("value", "shown"), [
    (4.0119444444444445, 4.01), (0.5116666666666667, 0.512), (12.849, 12.8), (4.0, 4.0),
    (0.000123456, 0.000123), (-4.0119, -4.01), (0.0, 0.0), (999.7, 1000.0),
    (1234.5, 1234.0), (14169.4, 14169.0),  # whole numbers from a thousand on, never 1.23e+03
])
def test_rounded_keeps_three_significant_digits(value, shown):
    assert rounded(value) == shown
    assert isinstance(rounded(value), float)


def test_rounded_takes_more_digits_when_asked_and_leaves_non_finite_values():
    assert rounded(2.149819423847487, digits=4) == 2.15 and rounded(4.4763399534663915, digits=4) == 4.476
    assert math.isnan(rounded(math.nan)) and rounded(math.inf) == math.inf


def test_percent_has_one_decimal():
    assert percent(1.0029861111111111) == 100.3 and percent(0.5) == 50.0 and percent(0) == 0.0
    assert math.isnan(percent(math.nan))
