"""A pass rate with its exact (Clopper-Pearson) interval, the one shape every table of the report uses."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from statistics import median

from pydantic import BaseModel, ConfigDict

from ..results.records import TrialRecord
from ..stats import clopper_pearson, task_mean_rate
from ..stats.suite import suite_mean_rate


class Rate(BaseModel):
    model_config = ConfigDict(frozen=True)  # rate() hands out one object per (passes, n)

    passes: int
    n: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    tasks: int | None = None  # a mean over tasks: how many (an arm a task does not run has fewer)
    # a mean over tasks: ci_low/ci_high are for this suite's tasks (stats/suite.py), these for tasks like
    # these (the t over tasks, pooled.py; None with one task)
    population_low: float | None = None
    population_high: float | None = None


@lru_cache(maxsize=4096)  # a run of 100,000 trials has ~20,000 rows and a handful of distinct (passes, n)
def rate(passes: int, n: int) -> Rate:
    ci = clopper_pearson(passes, n)
    return Rate(passes=passes, n=n, rate=passes / n if n else None,
                ci_low=ci.low if ci else None, ci_high=ci.high if ci else None)


def mean_over_tasks(per_task: list[tuple[int, int]]) -> Rate:
    """An arm's pass rate as the mean of its tasks' rates, every task weighted equally (the estimand of
    the headline and the pooled effect alike): its interval for this suite's tasks (the attempts'
    variance within each task), and beside it the t over tasks for tasks like these. `passes` and
    `n` stay the totals."""
    passes, n = sum(x for x, _ in per_task), sum(m for _, m in per_task)
    if sum(1 for _, m in per_task if m) < 2:  # one task: its exact interval
        return rate(passes, n).model_copy(update={"tasks": len(per_task)})
    suite = suite_mean_rate(per_task)
    over = task_mean_rate(per_task)
    assert suite is not None
    return Rate(passes=passes, n=n, rate=suite.estimate, ci_low=suite.low, ci_high=suite.high, tasks=len(per_task),
                population_low=over.low if over else None, population_high=over.high if over else None)


def passed(r: TrialRecord | None) -> bool:
    return r is not None and r.outcome == "passed"


def median_of_present(values: Iterable[float | None]) -> float | None:
    """The median of the values that are there (None: no value at all)."""
    present = [v for v in values if v is not None]
    return median(present) if present else None
