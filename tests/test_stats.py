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


# -- pass@k, power, comparisons (the pooled effect: test_stats_pooled.py) --------------------------------------------------

from math import isclose, sqrt  # noqa: E402

from scipy.stats import binom as _binom, binomtest as _binomtest  # noqa: E402

from pytest_webbench.stats import (  # noqa: E402
    fisher_exact_p, mcnemar_mde, mcnemar_power, newcombe_difference, pass_at_k, pass_hat_k,
)


def test_pass_at_k_and_pass_hat_k_by_hand():
    # n=5 attempts, 2 passed: pass@2 = 1 - C(3,2)/C(5,2) = 0.7; pass^2 = C(2,2)/C(5,2) = 0.1
    assert isclose(pass_at_k(5, 2, 2), 0.7) and isclose(pass_hat_k(5, 2, 2), 0.1)
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == 0.4  # k = 1: both are the pass rate
    assert pass_at_k(5, 0, 5) == 0 and pass_at_k(5, 1, 5) == 1 and pass_hat_k(5, 4, 5) == 0
    assert pass_at_k(1, 1, 2) is None and pass_hat_k(3, 1, 0) is None  # k beyond the attempts made


def _brute_force_power(n, p01, p10, alpha=0.05):
    psi, total = p01 + p10, 0.0
    for m in range(n + 1):
        rejecting = sum(_binom.pmf(k, m, p10 / psi) for k in range(m + 1) if _binomtest(k, m, 0.5).pvalue <= alpha)
        total += _binom.pmf(m, n, psi) * rejecting
    return total


def test_mcnemar_power_is_the_exact_power():
    for n, p01, p10 in [(20, 0.05, 0.3), (40, 0.15, 0.05), (60, 0.1, 0.1)]:
        assert isclose(mcnemar_power(n, p01, p10), _brute_force_power(n, p01, p10), abs_tol=1e-9)
    # The asymptotic sample size (Connor 1987) for p01=.15, p10=.05 is ~155 pairs (../shared/README.md):
    # ((1.959964*sqrt(.2) + 0.841621*sqrt(.2 - .01))**2 / .01 = 154.6. The exact test needs a few more.
    asymptotic = (1.959964 * sqrt(0.2) + 0.841621 * sqrt(0.19)) ** 2 / 0.01
    assert round(asymptotic) == 155
    assert 0.74 < mcnemar_power(155, 0.15, 0.05) < 0.8 < mcnemar_power(175, 0.15, 0.05)
    assert mcnemar_power(10, 0.0, 0.0) == 0.0


def test_minimum_detectable_effect():
    mde = mcnemar_mde(155, 0.2)
    assert 0.1 <= mde <= 0.11 and mcnemar_power(155, (0.2 - mde) / 2, (0.2 + mde) / 2) >= 0.8
    assert mcnemar_mde(5, 0.0) is None  # five pairs cannot reach p < .05 however they fall
    assert mcnemar_mde(30, 0.1) < mcnemar_mde(15, 0.1)  # more pairs see smaller effects


def test_newcombe_and_fisher_against_published_values():
    # Newcombe (1998), Stat Med 17:873, example (a): 56/70 vs 48/80, method 10: 0.0524 to 0.3339
    interval = newcombe_difference(56, 70, 48, 80)
    assert round(interval.low, 4) == 0.0524 and round(interval.high, 4) == 0.3339
    # Fisher's tea-tasting table [[3,1],[1,3]]: two-sided p = 0.4857
    assert round(fisher_exact_p(3, 4, 1, 4), 4) == 0.4857
    assert newcombe_difference(1, 0, 1, 2) is None and fisher_exact_p(0, 0, 1, 1) is None


def test_clopper_pearson_closed_forms_and_scipy():
    from pytest_webbench.stats import clopper_pearson

    # none or all of n passed: the one-sided limit is (alpha/2)^(1/n) from the far end (0/20: 0.1684)
    assert clopper_pearson(0, 20).high == pytest.approx(1 - 0.025 ** (1 / 20), abs=1e-12) == pytest.approx(0.1684, abs=5e-5)
    assert clopper_pearson(3, 3).low == pytest.approx(0.025 ** (1 / 3), abs=1e-12) and clopper_pearson(3, 3).high == 1.0
    assert clopper_pearson(0, 0) is None
    # scipy's own exact interval (binomtest(...).proportion_ci(method="exact")), Newcombe's (1998) examples among them
    for x, n in [(81, 263), (15, 148), (1, 29), (17, 25), (2, 3), (1, 10), (49, 50)]:
        ours, theirs = clopper_pearson(x, n), _binomtest(x, n).proportion_ci(0.95, method="exact")
        assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high), abs=1e-9), (x, n)
    # never narrower than Wilson's at the same counts
    for x, n in [(1, 3), (2, 3), (5, 10), (40, 50)]:
        assert clopper_pearson(x, n).low <= wilson(x, n).low and clopper_pearson(x, n).high >= wilson(x, n).high


@pytest.mark.parametrize("seconds, usable", [(5.0, True), (1e-6, True), (0.0, False), (-3.0, False),
                                             (math.inf, False), (math.nan, False), (None, False)])
def test_only_a_positive_finite_agent_time_enters_a_speed_comparison(seconds, usable):
    from types import SimpleNamespace

    from pytest_webbench.planning.stopping import PairOutcome
    from pytest_webbench.report.paired import paired_row
    from pytest_webbench.stats import timed

    assert timed(seconds) is usable
    # the other trial took 10 s: an unusable time is no win for either arm, in the report and the rule alike
    assert PairOutcome(True, True, 10.0, seconds).speed_step == (1 if usable else 0)
    pair = [SimpleNamespace(outcome="passed", pair_id="p", answer=None, timings=SimpleNamespace(agent_sec=s)) for s in (10.0, seconds)]
    row = paired_row("t", False, "page", [], [tuple(pair)])
    assert (row.treatment_faster, row.control_faster, len(row.speedups)) == ((1, 0, 1) if usable else (0, 0, 0))
