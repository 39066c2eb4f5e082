"""Binomial building blocks: Wilson, exact McNemar and its power, the sign test, pass@k, and the
unpaired Newcombe interval and Fisher test; pure functions over counts, scipy underneath.

The count-based functions are cached: a large report asks for the same few (passes, n) pairs
thousands of times, and one scipy binomial test costs about a millisecond here.

Each function states what it assumes; the report repeats those lines next to its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from math import comb

import numpy as np
from scipy.stats import binom, binomtest, fisher_exact

@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@lru_cache(maxsize=65536)
def wilson(passes: int, n: int, confidence: float = 0.95) -> Interval | None:
    if n == 0:
        return None
    ci = binomtest(passes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(float(ci.low), float(ci.high))


@lru_cache(maxsize=65536)
def mcnemar_exact(control_only: int, treatment_only: int) -> float | None:
    """Two-sided exact McNemar p from the discordant pairs (None when there are none)."""
    discordant = control_only + treatment_only
    if discordant == 0:
        return None
    return float(binomtest(treatment_only, discordant, 0.5).pvalue)


@lru_cache(maxsize=65536)
def sign_test(treatment_faster: int, control_faster: int) -> float | None:
    n = treatment_faster + control_faster
    if n == 0:
        return None
    return float(binomtest(treatment_faster, n, 0.5).pvalue)


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
    m = np.arange(pairs + 1)
    # With p = 1/2 the two-sided exact p is min(1, 2 * P(K <= min(k, m - k))): reject iff
    # k <= k_low(m) or k >= m - k_low(m), with k_low the largest k where 2 * cdf(k) <= alpha.
    k_low = binom.ppf(alpha / 2, m, 0.5)
    k_low = np.where(2 * binom.cdf(k_low, m, 0.5) <= alpha, k_low, k_low - 1)
    share = p_treatment_only / discordance
    reject = np.where(
        k_low >= 0, binom.cdf(k_low, m, share) + binom.sf(m - k_low - 1, m, share), 0.0,
    )
    return float(np.sum(binom.pmf(m, pairs, discordance) * reject))


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

def newcombe_difference(passes_a: int, n_a: int, passes_b: int, n_b: int, confidence: float = 0.95) -> Interval | None:
    """Interval for rate_a - rate_b from the two Wilson intervals (Newcombe 1998, method 10)."""
    a, b = wilson(passes_a, n_a, confidence), wilson(passes_b, n_b, confidence)
    if a is None or b is None:
        return None
    pa, pb = passes_a / n_a, passes_b / n_b
    d = pa - pb
    return Interval(d - math.sqrt((pa - a.low) ** 2 + (b.high - pb) ** 2), d + math.sqrt((a.high - pa) ** 2 + (pb - b.low) ** 2))


def fisher_exact_p(passes_a: int, n_a: int, passes_b: int, n_b: int) -> float | None:
    if n_a == 0 or n_b == 0:
        return None
    return float(fisher_exact([[passes_a, n_a - passes_a], [passes_b, n_b - passes_b]]).pvalue)
