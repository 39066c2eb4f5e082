"""Binomial building blocks: Wilson, exact McNemar and its power, the sign test, pass@k, and the
unpaired Newcombe interval and Fisher test; pure functions over counts (exact binomial and
hypergeometric sums in distributions.py; scipy is the tests' oracle, not a dependency here).

The count-based functions are cached: a large report asks for the same few (passes, n) pairs
thousands of times.

Each function states what it assumes; the report repeats those lines next to its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import comb

from .distributions import beta_inc, binom_cdf, binom_pmf, binom_sf, binom_two_sided_half, fisher_two_sided, normal_ppf


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@lru_cache(maxsize=65536)
def wilson(passes: int, n: int, confidence: float = 0.95) -> Interval | None:
    """Wilson's score interval (Wilson 1927; Newcombe 1998, method 3), without continuity correction."""
    if n == 0:
        return None
    z = normal_ppf(0.5 + confidence / 2)
    z2 = z * z
    center = (2 * passes + z2) / (2 * (n + z2))
    half = z * math.sqrt(z2 + 4 * passes * (n - passes) / n) / (2 * (n + z2))
    return Interval(0.0 if passes == 0 else center - half, 1.0 if passes == n else center + half)


def _beta_quantile(q: float, a: float, b: float) -> float:
    """x with I_x(a, b) = q, by bisection (I rises with x): 60 halvings reach double precision."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        if beta_inc(a, b, middle) < q:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


@lru_cache(maxsize=65536)
def clopper_pearson(passes: int, n: int, confidence: float = 0.95) -> Interval | None:
    """Clopper and Pearson's (1934) exact interval: the beta quantiles that invert two one-sided
    binomial tests. Its coverage is at least nominal at every n and rate, where Wilson's falls to
    90% at 3 attempts near the ceiling (benchmarks/stats_calibration.py), at the price of width."""
    if n == 0:
        return None
    tail = (1 - confidence) / 2
    low = 0.0 if passes == 0 else _beta_quantile(tail, passes, n - passes + 1)
    high = 1.0 if passes == n else _beta_quantile(1 - tail, passes + 1, n - passes)
    return Interval(low, high)


@lru_cache(maxsize=65536)
def mcnemar_exact(control_only: int, treatment_only: int) -> float | None:
    """Two-sided exact McNemar p from the discordant pairs (None when there are none)."""
    discordant = control_only + treatment_only
    if discordant == 0:
        return None
    return binom_two_sided_half(treatment_only, discordant)


def timed(seconds: float | None) -> bool:
    """An agent time a speed comparison (the sign test's pairs) can use: positive and finite (an odd
    clock's 0, a negative or an infinite time would count as a win)."""
    return seconds is not None and math.isfinite(seconds) and seconds > 0


@lru_cache(maxsize=65536)
def sign_test(treatment_faster: int, control_faster: int) -> float | None:
    n = treatment_faster + control_faster
    if n == 0:
        return None
    return binom_two_sided_half(treatment_faster, n)


# -- pass@k and pass^k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code") ----------

def pass_at_k(n: int, passes: int, k: int) -> float | None:
    """Unbiased chance that at least one of k attempts drawn from the n made passes."""
    if k > n or k < 1:
        return None
    return 1.0 - comb(n - passes, k) / comb(n, k)


def pass_hat_k(n: int, passes: int, k: int) -> float | None:
    """pass^k: chance that all k attempts drawn from the n made pass (reliability, not luck)."""
    if k > n or k < 1:
        return None
    return comb(passes, k) / comb(n, k)


# -- power of the exact McNemar test, and the smallest effect a run could see ------------------------

def mcnemar_power(pairs: int, p_control_only: float, p_treatment_only: float, alpha: float = 0.05) -> float:
    """Exact power: over Binomial(pairs, p01 + p10) discordant counts m, the chance that the
    two-sided exact binomial test of the split rejects at alpha."""
    discordance = p_control_only + p_treatment_only
    if pairs == 0 or discordance <= 0:
        return 0.0
    share = p_treatment_only / discordance
    power = 0.0
    for m in range(pairs + 1):
        # With p = 1/2 the two-sided exact p is min(1, 2 * P(K <= min(k, m - k))): reject iff
        # k <= k_low(m) or k >= m - k_low(m), with k_low the largest k where 2 * cdf(k) <= alpha.
        k_low = _largest_rejected_low(m, alpha)
        if k_low < 0:
            continue
        reject = binom_cdf(k_low, m, share) + binom_sf(m - k_low - 1, m, share)
        power += binom_pmf(m, pairs, discordance) * reject
    return power


@lru_cache(maxsize=65536)
def _largest_rejected_low(m: int, alpha: float) -> int:
    """The largest k with 2 P(K <= k) <= alpha, K ~ Binomial(m, 1/2) (exact); -1 if none."""
    level = Fraction(alpha)  # exact: 2 tail / 2^m <= alpha in integers
    k, tail, whole = -1, 0, 2 ** m
    while k + 1 <= m and 2 * (tail + math.comb(m, k + 1)) * level.denominator <= level.numerator * whole:
        k += 1
        tail += math.comb(m, k)
    return k


@lru_cache(maxsize=65536)
def mcnemar_mde(pairs: int, discordance: float, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest difference in pass rate (treatment-only minus control-only share of pairs) that
    exact McNemar detects with the given power at this many pairs, when a fraction `discordance`
    of pairs disagree (at least the effect itself). None: no effect up to 100 points is detectable."""
    for step in range(1, 201):
        effect = step / 200
        spread = max(discordance, effect)
        if mcnemar_power(pairs, (spread - effect) / 2, (spread + effect) / 2, alpha) >= power:
            return effect
    return None


# -- comparing two independent runs (unpaired) ---------------------------------------------------------

@lru_cache(maxsize=65536)
def newcombe_difference(passes_a: int, n_a: int, passes_b: int, n_b: int, confidence: float = 0.95) -> Interval | None:
    """Interval for rate_a - rate_b from the two Wilson intervals (Newcombe 1998, method 10)."""
    a, b = wilson(passes_a, n_a, confidence), wilson(passes_b, n_b, confidence)
    if a is None or b is None:
        return None
    pa, pb = passes_a / n_a, passes_b / n_b
    d = pa - pb
    return Interval(d - math.sqrt((pa - a.low) ** 2 + (b.high - pb) ** 2), d + math.sqrt((a.high - pa) ** 2 + (pb - b.low) ** 2))


@lru_cache(maxsize=65536)
def fisher_exact_p(passes_a: int, n_a: int, passes_b: int, n_b: int) -> float | None:
    if n_a == 0 or n_b == 0:
        return None
    return fisher_two_sided(passes_a, n_a - passes_a, passes_b, n_b - passes_b)
