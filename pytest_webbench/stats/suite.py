"""Intervals for this suite's tasks, as run: the report's primary estimand.

The tasks are the suite's own, fixed; only the attempts are random. An arm's rate is the mean over
the tasks of each task's true pass rate, every task weighted equally; the paired effect is the mean
over the tasks of each task's true difference (treatment - control). Their uncertainty is the
attempts' alone, so both intervals take their variance from within the tasks, never from how much
the tasks differ from one another (that spread is no uncertainty here: the tasks are not a sample).
For tasks like these beyond the suite, pooled.py's t over tasks answers instead, labelled so.

Both are Wald intervals centred on the unbiased estimate (the mean of the tasks' own estimates),
with each task's variance computed from adjusted counts so that a task at 0 or 1 still carries
its uncertainty: the rate's from (passes + 1.5) / (trials + 3), the paired difference's after
Bonett and Price (2012, for one task: discordant counts + 1/2 each, over pairs + 1). The
adjustments were chosen by simulation over a task mix written down first (2-50 tasks, 1-40
attempts, central and skewed rates) and are measured, with unequal and sequentially stopped counts
too, in benchmarks/stats_estimands.py; docs/statistics.md quotes the figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .distributions import normal_ppf

RATE_ADJUSTMENT = 1.5  # added to passes and to failures of each task, for its variance only
PAIRED_ADJUSTMENT = 0.5  # added to each discordant count of each task, for its variance only


@dataclass(frozen=True)
class SuiteEstimate:
    """A mean over this suite's tasks, with its Wald interval and (for a difference) its test of 0."""
    estimate: float
    low: float
    high: float
    standard_error: float
    p_value: float | None  # a difference's test of no mean effect (None for a rate)
    tasks: int
    units: int  # trials (a rate) or pairs (a difference)


def suite_mean_rate(passes_by_task: Sequence[tuple[int, int]], confidence: float = 0.95) -> SuiteEstimate | None:
    """An arm's mean pass rate over this suite's tasks: (passes, trials) per task, tasks without
    trials left out. None without a trial."""
    tasks = [(x, n) for x, n in passes_by_task if n > 0]
    if not tasks:
        return None
    k = len(tasks)
    estimate = sum(x / n for x, n in tasks) / k
    variance = 0.0
    for x, n in tasks:
        p = (x + RATE_ADJUSTMENT) / (n + 2 * RATE_ADJUSTMENT)
        variance += p * (1 - p) / n
    se = math.sqrt(variance) / k
    z = normal_ppf(0.5 + confidence / 2)
    return SuiteEstimate(estimate, max(0.0, estimate - z * se), min(1.0, estimate + z * se), se, None, k,
                         sum(n for _, n in tasks))


def suite_rate_difference(rates_by_task: Sequence[tuple[tuple[int, int], tuple[int, int]]],
                          confidence: float = 0.95) -> SuiteEstimate | None:
    """The mean over this suite's tasks of one run's pass rate minus another's (independent trials,
    no pairs: two runs compared), from ((passes, trials) of x, (passes, trials) of y) per task; each
    side's variance from adjusted counts as in `suite_mean_rate`. Tasks where either side has no
    trial are left out. Its p-value tests a mean difference of 0 (the interval's own Wald z test).
    None without a task."""
    tasks = [(x, y) for x, y in rates_by_task if x[1] > 0 and y[1] > 0]
    if not tasks:
        return None
    k = len(tasks)
    estimate = sum(x[0] / x[1] - y[0] / y[1] for x, y in tasks) / k
    variance = 0.0
    for side in (x for pair in tasks for x in pair):
        p = (side[0] + RATE_ADJUSTMENT) / (side[1] + 2 * RATE_ADJUSTMENT)
        variance += p * (1 - p) / side[1]
    se = math.sqrt(variance) / k
    z = normal_ppf(0.5 + confidence / 2)
    p_value = math.erfc(abs(estimate) / se / math.sqrt(2))
    return SuiteEstimate(estimate, max(-1.0, estimate - z * se), min(1.0, estimate + z * se), se, min(1.0, p_value), k,
                         sum(x[1] + y[1] for x, y in tasks))


def suite_paired_difference(discordant_by_task: Sequence[tuple[int, int, int]],
                            confidence: float = 0.95) -> SuiteEstimate | None:
    """The mean over this suite's tasks of each task's paired difference, from (treatment-only
    pairs, control-only pairs, pairs) per task; tasks without pairs left out. Its p-value tests a
    mean difference of 0 (a Wald z test, the interval's own: p < 1 - confidence exactly when the
    interval leaves 0 out). None without a pair."""
    tasks = [(b, c, n) for b, c, n in discordant_by_task if n > 0]
    if not tasks:
        return None
    k = len(tasks)
    estimate = sum((b - c) / n for b, c, n in tasks) / k
    variance = 0.0
    for b, c, n in tasks:
        pb, pc = (b + PAIRED_ADJUSTMENT) / (n + 2 * PAIRED_ADJUSTMENT), (c + PAIRED_ADJUSTMENT) / (n + 2 * PAIRED_ADJUSTMENT)
        variance += (pb + pc - (pb - pc) ** 2) / n
    se = math.sqrt(variance) / k
    z = normal_ppf(0.5 + confidence / 2)
    p = math.erfc(abs(estimate) / se / math.sqrt(2))
    return SuiteEstimate(estimate, max(-1.0, estimate - z * se), min(1.0, estimate + z * se), se, min(1.0, p), k,
                         sum(n for _, _, n in tasks))


def suite_mde(discordant_by_task: Sequence[tuple[int, int, int]], alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The mean difference the test for these tasks detects with about `power`: the d with
    d = (z(1 - alpha/2) + z(power)) x SE(d), where SE(d) is the standard error an effect d moving
    every task alike would have, each task's discordant share taken as at least d (a task cannot move
    by more than its discordant share: at the observed share alone the figure could be an effect no
    task could show). Approximate (simulated power in docs/statistics.md). None where not even every
    pair favouring one arm would be shown at this design."""
    tasks = [(b, c, n) for b, c, n in discordant_by_task if n > 0]
    if not tasks:
        return None
    best = suite_paired_difference([(n, 0, n) for _, _, n in tasks], 1 - alpha)
    if best is None or best.low <= 0:  # not even every pair one way would be shown: nothing is detectable
        return None
    k, zsum = len(tasks), normal_ppf(1 - alpha / 2) + normal_ppf(power)
    shares = [(b + c + 2 * PAIRED_ADJUSTMENT) / (n + 2 * PAIRED_ADJUSTMENT) for b, c, n in tasks]

    def excess(d: float) -> float:  # z-sum x SE(d) - d: positive below the MDE, negative above it
        return zsum * math.sqrt(sum((max(share, d) - d * d) / n for share, (_, _, n) in zip(shares, tasks))) / k - d

    low, high = 0.0, 1.0  # excess(0) > 0 > excess(1) = -1: bisection finds where they meet
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) > 0 else (low, middle)
    return (low + high) / 2
