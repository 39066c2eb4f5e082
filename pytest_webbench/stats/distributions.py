"""The few distribution functions the report needs, in pure Python.

scipy.stats (and scipy.special, which it loads) takes about a second to import on this machine,
in every `python -m pytest_webbench.report` and every run's report, against a 5 s target for
re-rendering 100,000 trials: so these are written out here, from standard references, and the
tests check each against scipy over grids (scipy stays the oracle, and the calibration benchmark
still uses it). The binomial and hypergeometric ones are exact (integer arithmetic); Student's t
and chi-square use the regularized incomplete beta and gamma functions (Numerical Recipes, 3rd
ed., 6.2 and 6.4: series and Lentz's continued fraction), to about 1e-13.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

_NORMAL = NormalDist()
_EPS = 1e-15
_TINY = 1e-300


def normal_ppf(p: float) -> float:
    return _NORMAL.inv_cdf(p)


# -- binomial (exact) -------------------------------------------------------------------------------

EXACT_UP_TO = 1000  # trials: integer sums up to here; beyond, the incomplete beta (big integers get slow)


def binom_two_sided_half(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of k successes in n at p = 1/2 (McNemar, the sign test):
    the probability of a split at least as uneven, min(1, 2 P(K <= min(k, n - k)))."""
    low = min(k, n - k)
    if 2 * low == n:
        return 1.0
    if n > EXACT_UP_TO:  # P(K <= low) = I_{1/2}(n - low, low + 1)
        return min(1.0, 2 * beta_inc(n - low, low + 1, 0.5))
    tail = sum(math.comb(n, i) for i in range(low + 1))
    return min(1.0, float(Fraction(2 * tail, 2 ** n)))


def binom_pmf(k: int, n: int, p: float) -> float:
    if k < 0 or k > n:
        return 0.0
    if p in (0.0, 1.0):
        return float(k == (n if p == 1.0 else 0))
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(K <= k) for K ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(binom_pmf(i, n, p) for i in range(k + 1)))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(K > k), summed directly (not 1 - cdf, which loses small tails)."""
    if k < 0:
        return 1.0
    return min(1.0, sum(binom_pmf(i, n, p) for i in range(k + 1, n + 1)))


# -- Fisher's exact test (two-sided, as scipy and R define it) --------------------------------------

def fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Table [[a, b], [c, d]]: the probability, with margins fixed, of a table no more likely than
    the one seen. Weights are exact integers, so ties are exact (scipy compares floats with a
    1e-7 relative tolerance for the same end)."""
    row1, col1, n = a + b, a + c, a + b + c + d
    low, high = max(0, col1 - (n - row1)), min(row1, col1)
    if n > EXACT_UP_TO:
        return _fisher_two_sided_logs(a, row1, col1, n, low, high)

    def weight(x: int) -> int:
        return math.comb(row1, x) * math.comb(n - row1, col1 - x)

    seen = weight(a)
    total = math.comb(n, col1)
    extreme = sum(w for w in (weight(x) for x in range(low, high + 1)) if w <= seen)
    return min(1.0, float(Fraction(extreme, total)))


def _fisher_two_sided_logs(a: int, row1: int, col1: int, n: int, low: int, high: int) -> float:
    """The same in floating point (log weights), ties within a relative 1e-7 as scipy has them."""
    def log_weight(x: int) -> float:
        return (math.lgamma(row1 + 1) - math.lgamma(x + 1) - math.lgamma(row1 - x + 1) + math.lgamma(n - row1 + 1)
                - math.lgamma(col1 - x + 1) - math.lgamma(n - row1 - col1 + x + 1))

    log_total = math.lgamma(n + 1) - math.lgamma(col1 + 1) - math.lgamma(n - col1 + 1)
    seen = log_weight(a) + math.log1p(1e-7)
    return min(1.0, sum(math.exp(w - log_total) for x in range(low, high + 1) if (w := log_weight(x)) <= seen))


# -- the regularized incomplete gamma and beta functions ------------------------------------------

def _gamma_p(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x)."""
    if x <= 0:
        return 0.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:  # the series converges fast here
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return min(1.0, total * math.exp(log_front))
    return max(0.0, 1.0 - _gamma_q_fraction(a, x, log_front))


def _gamma_q_fraction(a: float, x: float, log_front: float) -> float:
    """Q(a, x) by Lentz's continued fraction (x >= a + 1)."""
    b = x + 1 - a
    c = 1 / _TINY
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < _EPS:
            break
    return math.exp(log_front) * h


def _beta_fraction(a: float, b: float, x: float) -> float:
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (_TINY if abs(d) < _TINY else d)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                          -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1 + numerator * d
            d = 1 / (_TINY if abs(d) < _TINY else d)
            c = 1 + numerator / c
            c = _TINY if abs(c) < _TINY else c
            h *= d * c
        if abs(d * c - 1) < _EPS:
            break
    return h


def beta_inc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


# -- chi-square and Student's t --------------------------------------------------------------------

def chi2_cdf(x: float, df: float) -> float:
    return _gamma_p(df / 2, x / 2)


def chi2_sf(x: float, df: float) -> float:
    if x <= 0:
        return 1.0
    a, half = df / 2, x / 2
    if half < a + 1:
        return 1.0 - _gamma_p(a, half)
    return _gamma_q_fraction(a, half, -half + a * math.log(half) - math.lgamma(a))


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    tail = 0.5 * beta_inc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1 - tail


def t_ppf(p: float, df: float) -> float:
    """The p quantile, by bisection on t_sf (to a relative 1e-15)."""
    if not 0 < p < 1:
        raise ValueError(f"t_ppf: p must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1 - p, df)
    low, high = 0.0, 1.0
    while t_sf(high, df) > 1 - p:
        low, high = high, high * 2
    for _ in range(200):
        mid = (low + high) / 2
        if t_sf(mid, df) > 1 - p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-15 * max(1.0, high):
            break
    return (low + high) / 2
