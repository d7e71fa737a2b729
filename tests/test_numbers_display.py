"""How figures read on every page: :func:`kuration.numbers.format_bytes`, :func:`rounded`,
:func:`percent` and the text of :func:`format_number`, :func:`format_hours` and
:func:`format_percent`, the one place metadata, check tables, reports and commands take them from."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.numbers import format_bytes, format_hours, format_number, format_percent, percent, rounded


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


# -- text: the one rule every page prints figures by ---------------------------------------------

@pytest.mark.parametrize(("value", "text"), [
    (4.0119444444444445, "4.01"), (0.5116666666666667, "0.512"), (4.0, "4"), (0.5, "0.5"), (12.849, "12.8"),
    (123.45, "123"), (99.95, "100"), (999.7, "1,000"), (1234.5, "1,234"), (14169.4, "14,169"),
    (5182.259569336778, "5,182"), (-4.0119, "-4.01"), (0.0, "0"), (0.000123456, "0.000123"),
    # integers are exact, with thousands separators
    (3322, "3,322"), (np.int64(2294), "2,294"), (-7, "-7"), (np.float32(0.5), "0.5"),
    # not recorded: an empty cell; an infinity says so
    (None, ""), (math.nan, ""), (math.inf, "inf"), (-math.inf, "-inf"),
])
def test_format_number_is_three_significant_digits_and_whole_from_a_thousand(value, text):
    assert format_number(value) == text


def test_format_number_agrees_with_the_rounded_metadata_value():
    # the figure a table shows and the number Dagster plots are the same number
    for value in (4.0119444444444445, 0.5116666666666667, 1234.5, 999.7, 0.000123456, -12.849):
        assert float(format_number(value).replace(",", "")) == rounded(value)


def test_format_number_takes_more_digits_when_asked():
    assert format_number(5182.259569336778, 6) == "5,182.26" and format_number(0.51166, 6) == "0.51166"
    assert format_number(1234567.8, 6) == "1,234,568"


@pytest.mark.parametrize("bad", [True, np.bool_(False), "4.01", [1]])
def test_format_number_refuses_what_is_no_number(bad):
    with pytest.raises(TypeError, match="is not a number"):
        format_number(bad)


def test_hours_and_percentages_read_the_same_on_every_page():
    assert format_hours(4.0119444444444445) == "4.01 h" and format_hours(4.0) == "4 h"
    assert format_hours(0.5116666666666667) == "0.512 h" and format_hours(1234.5) == "1,234 h"
    assert format_hours(None) == "" and format_hours(math.nan) == ""
    assert format_percent(1.0029861111111111) == "100.3%" and format_percent(0.5) == "50.0%"
    assert format_percent(0) == "0.0%" and format_percent(None) == "" and format_percent(math.nan) == ""
    with pytest.raises(TypeError, match="is not a number"):
        format_percent("50%")


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_format_number_never_writes_an_exponent_for_a_figure_from_a_thousandth_up(value):
    text = format_number(value)
    if abs(value) >= 1e-3:
        assert "e" not in text, text
    assert float(text.replace(",", "")) == rounded(value)


def test_every_page_takes_its_figures_from_kuration_numbers():
    # the three rules there were (kuration.checks.hours, kuration.inspect.figures.hours and
    # the Dagster table cell's own) are one now: none of them formats a number itself
    import inspect as source

    import kuration.checks
    import kuration.inspect.figures
    import kuration_dagster_checks

    assert not hasattr(kuration.checks, "hours")
    assert not hasattr(kuration.inspect.figures, "hours") and not hasattr(kuration.inspect.figures, "percent")
    assert "format_number(" in source.getsource(kuration_dagster_checks._cell)
    assert kuration_dagster_checks.figure_text("test_admitted_hours", 0.5116666666666667) == "0.512 h"
    assert kuration_dagster_checks.figure_text("span_seconds", 1234.5) == "1,234 s"
