"""The pooled paired effect over tasks: the mean over tasks of each task's paired difference.

Notation for a pair (one control and one treatment trial of the same task and attempt):
d = treatment_passed - control_passed in {-1, 0, +1}; "control_only" pairs have d = -1,
"treatment_only" pairs d = +1, the rest (both or neither passed) d = 0. Pure functions over those;
coverage and error rates measured in benchmarks/stats_calibration.py, where the pair-weighted
alternatives this replaced (Tango's score interval widened by a design effect) are measured beside
it: they answer a question weighted by pair counts and under-cover when those are unequal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .distributions import t_ppf, t_sf


# -- the mean effect over tasks (the report's estimand) ----------------------------------------------------

@dataclass(frozen=True)
class TaskMeanEffect:
    """The mean over tasks of each task's pass-rate difference (treatment - control), every task
    weighted equally, with its interval and test."""
    estimate: float
    low: float
    high: float
    p_value: float
    standard_error: float
    between_task_sd: float   # spread of the tasks' differences
    floored: bool            # the within-task floor set the width (the tasks' differences barely varied)
    tasks: int
    pairs: int


def _within_task_variance(group: Sequence[int]) -> float:
    """An upper bound on the variance of one task's mean difference, (pi - delta^2) / n <= pi / n,
    with the discordant share pi estimated as (discordant + 1) / (n + 2) so it is never 0."""
    n = len(group)
    discordant = sum(1 for d in group if d != 0)
    return (discordant + 1) / (n + 2) / n


def task_mean_interval(differences_by_task: Sequence[Sequence[int]], confidence: float = 0.95) -> TaskMeanEffect | None:
    """Interval for the mean over tasks of the per-task paired difference, each task weighted equally
    (what "the tools help on this suite" asks, however many pairs each task got).

    A t interval over the tasks' mean differences, t with tasks - 1 degrees of freedom, whose
    variance is the larger of the between-task one (s^2 / K) and a floor from within the tasks
    (sum of each task's variance bound / K^2): with few tasks whose differences happen to agree
    (all 0 at a ceiling) the between-task variance alone would give a zero-width interval. Each
    task's mean is unbiased for its effect whatever its pair count, so unequal counts (a task with
    40 pairs beside four with 3) move the weights of nothing. Assumes tasks are independent draws of
    the tasks one cares about; pairs within a task may be correlated. Coverage is measured in
    benchmarks/stats_calibration.py over equal, unequal and sequentially stopped counts. None with
    fewer than two tasks with pairs."""
    groups = [list(g) for g in differences_by_task if len(g) > 0]
    if len(groups) < 2:
        return None
    return _t_over_tasks([sum(g) / len(g) for g in groups], [_within_task_variance(g) for g in groups],
                         sum(len(g) for g in groups), confidence, -1.0)


def _t_over_tasks(means: list[float], floors: list[float], units: int, confidence: float, lowest: float) -> TaskMeanEffect:
    """The t interval over the tasks' means, its variance floored by the tasks' own (see task_mean_interval)."""
    k = len(means)
    estimate = sum(means) / k
    between = sum((m - estimate) ** 2 for m in means) / (k - 1)
    floor = sum(floors) / k ** 2
    se = math.sqrt(max(between / k, floor))
    critical = t_ppf(0.5 + confidence / 2, k - 1)
    p = 2 * t_sf(abs(estimate) / se, k - 1)
    return TaskMeanEffect(estimate, max(lowest, estimate - critical * se), min(1.0, estimate + critical * se),
                          min(1.0, p), se, math.sqrt(between), floor > between / k, k, units)


def task_mean_rate(passes_by_task: Sequence[tuple[int, int]], confidence: float = 0.95) -> TaskMeanEffect | None:
    """Interval for an arm's mean pass rate over tasks, every task weighted equally: the same t
    interval over the tasks' rates, each task's variance floored at p(1 - p) / n with p taken as
    (passes + 1) / (n + 2), so it is never zero-width at a ceiling. `passes_by_task`: (passes, trials)
    per task; tasks without trials are left out. None without two tasks (use clopper_pearson then).
    Its p_value tests a mean rate of 0 and means nothing here."""
    tasks = [(x, n) for x, n in passes_by_task if n > 0]
    if len(tasks) < 2:
        return None
    return _t_over_tasks([x / n for x, n in tasks], [_rate_floor(x, n) for x, n in tasks], sum(n for _, n in tasks),
                         confidence, 0.0)


def _rate_floor(passes: int, n: int) -> float:
    """A bound on the variance of one task's pass rate, p(1 - p) / n with p taken as (passes + 1) / (n + 2),
    so it is never 0 at a floor or ceiling."""
    p = (passes + 1) / (n + 2)
    return p * (1 - p) / n


def task_mean_difference(rates_by_task: Sequence[tuple[tuple[int, int], tuple[int, int]]],
                         confidence: float = 0.95) -> TaskMeanEffect | None:
    """Interval for the mean over tasks of one arm's (or run's) pass rate minus another's, from
    independent trials (no pairs): `rates_by_task` holds ((passes, trials) of x, (passes, trials)
    of y) per task. The same t interval over the tasks' differences as the paired one, each task's
    variance floored at px(1 - px) / nx + py(1 - py) / ny with p taken as (passes + 1) / (trials + 2),
    so every task weighs the same however many trials it got (a pooled count would weigh them by
    their trials and could show a difference no task has). Tasks where either side has no trial are
    left out; None without two tasks left."""
    tasks = [(x, y) for x, y in rates_by_task if x[1] > 0 and y[1] > 0]
    if len(tasks) < 2:
        return None
    return _t_over_tasks([x[0] / x[1] - y[0] / y[1] for x, y in tasks], [_rate_floor(*x) + _rate_floor(*y) for x, y in tasks],
                         sum(x[1] + y[1] for x, y in tasks), confidence, -1.0)


def mde_task_mean(effect: TaskMeanEffect, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest mean difference the task-mean t test detects with the given power at this run's size
    and spread: (t(1 - alpha/2) + t(power)) x its standard error, t with tasks - 1 degrees of freedom
    (a planning approximation that treats the standard error as known). None beyond 100 points."""
    df = effect.tasks - 1
    mde = (t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * effect.standard_error
    return mde if mde <= 1.0 else None
