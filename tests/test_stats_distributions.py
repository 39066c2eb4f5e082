"""The report's distribution functions (stats/distributions.py), written out so a report loads no
scipy: each checked against published table values and against scipy over grids (scipy, an
independent implementation, is the oracle here; the product never imports it on the report path)."""

from __future__ import annotations

from math import isclose

import pytest
from scipy import stats as sp

from pytest_webbench.stats import distributions as d
from pytest_webbench.stats import wilson


def test_published_values():
    # Student's t table: t(0.975; 4) = 2.776, t(0.975; 1) = 12.706, t(0.95; 10) = 1.812
    assert isclose(d.t_ppf(0.975, 4), 2.7764451052, rel_tol=1e-9)
    assert isclose(d.t_ppf(0.975, 1), 12.7062047362, rel_tol=1e-9)
    assert isclose(d.t_ppf(0.95, 10), 1.8124611228, rel_tol=1e-9)
    # chi-square table: the 95% point of chi2(1) is 3.841, of chi2(10) 18.307
    assert isclose(d.chi2_sf(3.8414588207, 1), 0.05, rel_tol=1e-8)
    assert isclose(d.chi2_cdf(18.3070380533, 10), 0.95, rel_tol=1e-9)
    # Fisher's lady tasting tea, [[3, 1], [1, 3]]: two-sided p = 34/70
    assert isclose(d.fisher_two_sided(3, 1, 1, 3), 34 / 70, rel_tol=1e-12)
    # 1 of 10 at p = 1/2: 2 * 11/1024
    assert isclose(d.binom_two_sided_half(1, 10), 22 / 1024, rel_tol=1e-12)
    assert d.binom_two_sided_half(5, 10) == 1.0
    # Wilson for 0 of 10 (Newcombe 1998, table I): 0 to 0.2775
    assert wilson(0, 10).low == 0 and isclose(wilson(0, 10).high, 0.2775327998, rel_tol=1e-8)


def test_exact_binomial_test_at_one_half_matches_scipy():
    for n in range(1, 81):
        for k in range(n + 1):
            assert isclose(d.binom_two_sided_half(k, n), sp.binomtest(k, n, 0.5).pvalue, rel_tol=1e-9), (k, n)


def test_fisher_matches_scipy_on_every_small_table():
    for n1 in range(0, 13):
        for n2 in range(0, 13):
            for a in range(n1 + 1):
                for c in range(n2 + 1):
                    table = [[a, n1 - a], [c, n2 - c]]
                    assert isclose(d.fisher_two_sided(a, n1 - a, c, n2 - c), sp.fisher_exact(table).pvalue,
                                   rel_tol=1e-9, abs_tol=1e-15), table


def test_wilson_matches_scipy():
    for confidence in (0.9, 0.95, 0.99):
        for n in range(1, 61):
            for k in range(n + 1):
                ours = wilson.__wrapped__(k, n, confidence)
                theirs = sp.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
                assert isclose(ours.low, theirs.low, abs_tol=1e-12) and isclose(ours.high, theirs.high, abs_tol=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 99, 999, 6666])
def test_t_matches_scipy(df):
    for x in [0, 0.01, 0.3, 1, 1.96, 2.5, 4, 10, 40]:
        for t in (x, -x):
            assert isclose(d.t_sf(t, df), sp.t.sf(t, df), rel_tol=1e-10, abs_tol=1e-300), (t, df)
    for p in [1e-6, 0.001, 0.025, 0.1, 0.5, 0.8, 0.9, 0.95, 0.975, 0.999]:
        assert isclose(d.t_ppf(p, df), sp.t.ppf(p, df), rel_tol=1e-9, abs_tol=1e-12), (p, df)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 6, 7, 10, 21, 100, 1000])
def test_chi2_matches_scipy(df):
    for x in [0.0, 1e-4, 0.1, 0.5, 1, 2, 3.84, df / 2, df, df + 3, 2 * df, 5 * df + 20]:
        assert isclose(d.chi2_cdf(x, df), sp.chi2.cdf(x, df), rel_tol=1e-10, abs_tol=1e-15), (x, df)
        assert isclose(d.chi2_sf(x, df), sp.chi2.sf(x, df), rel_tol=1e-10, abs_tol=1e-300), (x, df)


def test_binomial_distribution_matches_scipy():
    for n in (0, 1, 5, 20, 200):
        for p in (0.0, 0.03, 0.5, 0.77, 1.0):
            for k in range(-1, n + 2):
                assert isclose(d.binom_pmf(k, n, p), sp.binom.pmf(k, n, p), rel_tol=1e-9, abs_tol=1e-300)
                assert isclose(d.binom_cdf(k, n, p), sp.binom.cdf(k, n, p), rel_tol=1e-9, abs_tol=1e-15)
                assert isclose(d.binom_sf(k, n, p), sp.binom.sf(k, n, p), rel_tol=1e-9, abs_tol=1e-15)


def test_large_counts_leave_integer_arithmetic_and_still_match_scipy():
    for n, k in [(1001, 480), (5000, 2400), (13000, 6400), (13000, 6500), (100000, 49700), (2001, 0)]:
        assert isclose(d.binom_two_sided_half(k, n), sp.binomtest(k, n, 0.5).pvalue, rel_tol=1e-9, abs_tol=1e-300), (k, n)
    for table in [(600, 400, 520, 480), (3000, 2000, 2950, 2050), (10, 990, 25, 975), (0, 1000, 3, 997)]:
        a, b, c, e = table
        assert isclose(d.fisher_two_sided(a, b, c, e), sp.fisher_exact([[a, b], [c, e]]).pvalue, rel_tol=1e-7), table
