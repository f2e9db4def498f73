"""The benchmark tests' check of a printed figure (tests/helpers.py): it allows what rounding can do to the figure
and to the printed figures it is checked against, and no more."""

from __future__ import annotations

import operator

import pytest

from tests.helpers import assert_printed_result, printed_approx


def test_a_ratio_of_small_rounded_rates_is_checked_within_their_rounding():
    # a slower machine's matrix-product efficiency: 2.049 / 24.4 GFLOP/s = 0.084, printed from 2.0 / 24.4 = 0.0820
    assert_printed_result(0.084, 3, operator.truediv, (2.0, 1), (24.4, 1))
    with pytest.raises(AssertionError, match="not within"):
        assert_printed_result(0.086, 3, operator.truediv, (2.0, 1), (24.4, 1))


def test_exact_inputs_leave_only_the_results_own_rounding():
    assert_printed_result(8.3, 1, lambda rate: 30000 / rate / 60, (60.0, None))  # 8.33 minutes
    with pytest.raises(AssertionError):
        assert_printed_result(8.4, 1, lambda rate: 30000 / rate / 60, (60.0, None))


def test_a_difference_of_rounded_times():
    assert_printed_result(0.012, 3, operator.sub, (0.530, 3), (0.519, 3))  # 0.5304 - 0.5185 = 0.0119
    with pytest.raises(AssertionError):
        assert_printed_result(0.014, 3, operator.sub, (0.530, 3), (0.519, 3))


def test_an_estimates_tolerance_gains_the_rounding_of_its_printed_figure():
    assert 0.031 == printed_approx(1 / 32, 3, rel=0.005)  # 0.03125 within 0.5%, printed to 3 decimals
    assert 0.030 != printed_approx(1 / 32, 3, rel=0.005)
    assert 0.031 != pytest.approx(1 / 32, rel=0.005)  # what the rounding alone fails
