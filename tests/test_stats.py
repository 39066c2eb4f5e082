"""Statistics against published or hand-computed values."""

import math

import pytest

from pytest_webbench.stats import mcnemar_exact, sign_test, wilson


def test_wilson_matches_the_reference_value():
    ci = wilson(17, 25)  # shared/README: 17/25 -> 0.484 to 0.828
    assert round(ci.low, 3) == 0.484 and round(ci.high, 3) == 0.828


def test_wilson_by_hand_formula():
    k, n, z = 3, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    ci = wilson(k, n)
    assert ci.low == pytest.approx(centre - half, abs=1e-9) and ci.high == pytest.approx(centre + half, abs=1e-9)


def test_wilson_of_nothing_is_none():
    assert wilson(0, 0) is None


def test_exact_mcnemar_reference_value():
    assert mcnemar_exact(2, 9) == pytest.approx(0.0654, abs=5e-5)  # shared/README, = statsmodels exact


def test_exact_mcnemar_hand_computed():
    # b=0, c=5: two-sided p = 2 * 0.5**5
    assert mcnemar_exact(0, 5) == pytest.approx(2 * 0.5**5)
    assert mcnemar_exact(0, 0) is None


def test_sign_test_symmetric_and_hand_computed():
    assert sign_test(6, 0) == pytest.approx(2 * 0.5**6)
    assert sign_test(3, 3) == pytest.approx(1.0)
    assert sign_test(0, 0) is None
