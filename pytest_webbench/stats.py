"""The run's statistics: pure functions over counts and paired samples, scipy underneath.

Each function states what it assumes; the report repeats those lines next to its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import binomtest

ASSUMPTIONS = {
    "wilson": "Wilson 95% interval: attempts are independent Bernoulli trials with one pass rate per arm and task.",
    "mcnemar": "Exact McNemar: pairs are independent; under no effect a discordant pair is equally likely to favour either arm.",
    "sign": "Sign test on speedups: pairs where both arms passed, ties dropped; under no effect either arm is faster with probability 1/2.",
}


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def wilson(passes: int, n: int, confidence: float = 0.95) -> Interval | None:
    if n == 0:
        return None
    ci = binomtest(passes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(float(ci.low), float(ci.high))


def mcnemar_exact(control_only: int, treatment_only: int) -> float | None:
    """Two-sided exact McNemar p from the discordant pairs (None when there are none)."""
    discordant = control_only + treatment_only
    if discordant == 0:
        return None
    return float(binomtest(treatment_only, discordant, 0.5).pvalue)


def sign_test(treatment_faster: int, control_faster: int) -> float | None:
    n = treatment_faster + control_faster
    if n == 0:
        return None
    return float(binomtest(treatment_faster, n, 0.5).pvalue)
