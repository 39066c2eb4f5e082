"""The run's statistics: pure functions over counts and paired samples, scipy underneath.

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
from scipy.stats import t as student_t

ASSUMPTIONS = {
    "wilson": "Wilson 95% interval: attempts are independent Bernoulli trials with one pass rate per arm and task.",
    "mcnemar": "Exact McNemar: pairs are independent; under no effect a discordant pair is equally likely to favour either arm.",
    "sign": "Sign test on speedups: pairs where both arms passed, ties dropped; under no effect either arm is faster with probability 1/2.",
    "clustered": "Pooled effect: pairs are independent across tasks but may be correlated within a task (task-clustered CR1 "
                 "standard error, t interval with tasks - 1 degrees of freedom); few tasks make it wide, as it should be.",
    "mde": "Minimum detectable effect: exact McNemar at alpha 0.05 with 80% power, pairs independent, discordance as observed.",
    "compare": "Two runs compared: unpaired (different runs share no pairs); Fisher's exact test and Newcombe's "
               "interval for the difference of two independent binomial rates.",
    "pass_k": "pass@k / pass^k: unbiased estimates from the attempts made (Chen et al. 2021), attempts exchangeable within a task.",
}


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


# -- the pooled paired effect, clustered by task ------------------------------------------------------

@dataclass(frozen=True)
class ClusteredEffect:
    estimate: float  # mean of (treatment passed - control passed) over pairs
    se: float
    low: float
    high: float
    pairs: int
    clusters: int


def clustered_paired_difference(differences_by_task: list[list[int]], confidence: float = 0.95) -> ClusteredEffect | None:
    """Pass-rate difference over pairs with a task-clustered standard error (Miller 2024, "Adding
    Error Bars to Evals", arXiv 2411.00640): CR1 sandwich, var = G/(G-1) * sum_g (sum_i in g (d_i - mean))^2 / n^2,
    and a t interval with G-1 degrees of freedom, since attempts within a task are not independent."""
    groups = [g for g in differences_by_task if g]
    n, clusters = sum(len(g) for g in groups), len(groups)
    if clusters < 2:
        return None
    mean = sum(sum(g) for g in groups) / n
    variance = clusters / (clusters - 1) * sum(sum(d - mean for d in g) ** 2 for g in groups) / n**2
    se = math.sqrt(variance)
    half = float(student_t.ppf(0.5 + confidence / 2, clusters - 1)) * se
    return ClusteredEffect(mean, se, mean - half, mean + half, n, clusters)


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
