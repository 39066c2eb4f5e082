"""The paired analysis of control against treatment: per task (McNemar, speed, agreement) and
pooled over the headline tasks (the mean effect over tasks with its interval and MDE, and a
sensitivity line with errored trials counted as failures)."""

from __future__ import annotations

from statistics import median

from pydantic import BaseModel, Field

from ..results.records import TrialRecord
from ..stats import holm, mcnemar_exact, sign_test, task_mean_interval, timed
from ..stats.suite import suite_mde, suite_paired_difference
from .rates import Rate, rate

Pair = tuple[TrialRecord | None, TrialRecord | None]


class PairedRow(BaseModel):
    task: str
    placebo: bool
    grading: str = "pinned"
    pairs: int  # intended pairs (broken-by-selection pairs left out)
    excluded: int  # a member errored or is missing: counted here, left out of the tests
    tested: int
    both: int
    control_only: int
    treatment_only: int
    neither: int
    mcnemar_p: float | None
    mcnemar_p_holm: float | None = None  # Holm-adjusted over the rows of the table
    median_speedup: float | None  # control agent time / treatment agent time, both-pass pairs
    speedups: list[float] = Field(default_factory=list)
    treatment_faster: int
    control_faster: int
    sign_p: float | None
    sign_p_holm: float | None = None  # Holm-adjusted over the rows' sign tests
    agree_on: list[str] = Field(default_factory=list)
    agreement: Rate | None = None  # pairs where both answered and agree on `agree_on`
    discordant: list[str] = Field(default_factory=list)  # pair ids where exactly one arm passed


class PooledSensitivity(BaseModel):
    """The pooled effect again, with an errored trial counted as a failure instead of its pair left out."""

    pairs: int
    difference: float
    ci_low: float | None
    ci_high: float | None


ESTIMAND = ("this suite's tasks as run: the mean over its tasks of each task's true pass-rate difference (treatment - "
            "control), every task weighted equally however many pairs it got; only the attempts are random")
POPULATION = ("tasks like these: the mean difference over a population of tasks of which this suite's are taken as a "
              "random sample")


class PooledEffect(BaseModel):
    estimand: str = ESTIMAND
    tasks: int
    task_names: list[str]  # exactly the tasks it covers: the headline's (page and pinned), placebo left out
    pairs: int
    control_rate: float  # the mean over tasks of each task's rate, as the estimand weighs them
    treatment_rate: float
    difference: float  # the estimand's estimate: treatment minus control, the mean over tasks
    ci_low: float | None  # this suite's tasks (stats/suite.py): the attempts' variance within each task
    ci_high: float | None
    p_value: float | None  # the test of no mean effect the interval inverts
    mde: float | None  # approximate: the mean difference that test detects with 80% power at this run's design
    population: str = POPULATION
    population_low: float | None = None  # tasks like these (t over the tasks' differences, pooled.py)
    population_high: float | None = None
    population_p: float | None = None
    between_task_sd: float | None  # how much the tasks' differences vary
    floored: bool = False  # the within-task floor set the population interval's width
    pair_weighted_difference: float  # over all tested pairs as one sample, for comparison
    discordance: float
    errored_as_failures: PooledSensitivity | None = None


ENDED = ("passed", "failed")


def ended(r: TrialRecord | None) -> bool:
    return r is not None and r.outcome in ENDED


def tested_pairs(pairs: list[Pair]) -> list[tuple[TrialRecord, TrialRecord]]:
    """The pairs whose two trials both ended (passed or failed): the ones the paired tests use."""
    return [(c, t) for c, t in pairs if ended(c) and ended(t)]


def _agreement(task_fields: list[str], pairs: list[tuple[TrialRecord, TrialRecord]]) -> Rate | None:
    if not task_fields:
        return None
    answered = [(c, t) for c, t in pairs if isinstance(c.answer, dict) and isinstance(t.answer, dict)]
    agree = sum(all(c.answer.get(f) == t.answer.get(f) for f in task_fields) for c, t in answered)
    return rate(agree, len(answered))


def paired_row(task: str, placebo: bool, grading: str, agree_on: list[str], pairs: list[Pair]) -> PairedRow:
    tested = tested_pairs(pairs)
    both = c_only = t_only = t_fast = c_fast = 0
    speedups: list[float] = []
    discordant: list[str] = []
    for c, t in tested:  # one pass (a run of 100,000 trials has thousands of rows)
        c_passed, t_passed = c.outcome == "passed", t.outcome == "passed"
        if c_passed and t_passed:
            both += 1
            c_sec, t_sec = c.timings.agent_sec, t.timings.agent_sec
            if timed(c_sec) and timed(t_sec):
                speedups.append(round(c_sec / t_sec, 6))
                t_fast += t_sec < c_sec
                c_fast += c_sec < t_sec
        elif c_passed:
            c_only += 1
        elif t_passed:
            t_only += 1
        if c_passed != t_passed and c.pair_id:
            discordant.append(c.pair_id)
    return PairedRow(
        task=task, placebo=placebo, grading=grading, pairs=len(pairs), excluded=len(pairs) - len(tested),
        tested=len(tested), both=both, control_only=c_only, treatment_only=t_only, neither=len(tested) - both - c_only - t_only,
        mcnemar_p=mcnemar_exact(c_only, t_only), median_speedup=median(speedups) if speedups else None,
        speedups=sorted(speedups), treatment_faster=t_fast, control_faster=c_fast, sign_p=sign_test(t_fast, c_fast),
        agree_on=agree_on, agreement=_agreement(agree_on, tested), discordant=sorted(discordant),
    )


def adjust_paired_rows(rows: list[PairedRow]) -> None:
    """Holm over the table's tasks, one family per test: the McNemar tests, and the sign tests."""
    for row, adjusted in zip(rows, holm([r.mcnemar_p for r in rows])):
        row.mcnemar_p_holm = adjusted
    for row, adjusted in zip(rows, holm([r.sign_p for r in rows])):
        row.sign_p_holm = adjusted


def _discordant(differences: list[int]) -> tuple[int, int, int]:
    """(treatment-only, control-only, pairs) of one task's paired differences."""
    return sum(1 for d in differences if d > 0), sum(1 for d in differences if d < 0), len(differences)


def pooled_effect(by_task: dict[str, list[Pair]]) -> PooledEffect | None:
    """Over the given tasks (the caller passes the headline's, placebo left out)."""
    # each pair as (control passed, treatment passed), read once: tested when both ended, recorded when both are there
    tested: dict[str, list[tuple[bool, bool]]] = {}
    recorded: dict[str, list[tuple[bool, bool]]] = {}
    for task, pairs in by_task.items():
        ended_bits, recorded_bits = [], []
        for c, t in pairs:
            if c is None or t is None:
                continue
            bits = (c.outcome == "passed", t.outcome == "passed")
            recorded_bits.append(bits)
            if c.outcome in ENDED and t.outcome in ENDED:
                ended_bits.append(bits)
        if ended_bits:
            tested[task] = ended_bits
        if recorded_bits:
            recorded[task] = recorded_bits
    every = [bits for task_bits in tested.values() for bits in task_bits]
    if not every:
        return None
    n = len(every)
    c_only = sum(1 for c, t in every if c and not t)
    t_only = sum(1 for c, t in every if t and not c)
    groups = [_differences(bits) for bits in tested.values()]
    interval = task_mean_interval(groups)
    suite = suite_paired_difference([_discordant(g) for g in groups])
    recorded_groups = [_differences(bits) for bits in recorded.values()]
    sensitivity = suite_paired_difference([_discordant(g) for g in recorded_groups])
    n_recorded = sum(len(bits) for bits in recorded.values())
    return PooledEffect(
        tasks=len(tested), task_names=sorted(tested), pairs=n,
        control_rate=_task_mean([[int(c) for c, _ in bits] for bits in tested.values()]),
        treatment_rate=_task_mean([[int(t) for _, t in bits] for bits in tested.values()]),
        difference=_task_mean(groups), pair_weighted_difference=(t_only - c_only) / n,
        ci_low=suite.low if suite else None, ci_high=suite.high if suite else None, p_value=suite.p_value if suite else None,
        mde=suite_mde([_discordant(g) for g in groups]) if suite else None,
        population_low=interval.low if interval else None, population_high=interval.high if interval else None,
        population_p=interval.p_value if interval else None, between_task_sd=interval.between_task_sd if interval else None,
        floored=bool(interval and interval.floored), discordance=(c_only + t_only) / n,
        errored_as_failures=None if n_recorded == n or not n_recorded else PooledSensitivity(
            pairs=n_recorded, difference=_task_mean(recorded_groups),
            ci_low=sensitivity.low if sensitivity else None, ci_high=sensitivity.high if sensitivity else None),
    )


def _differences(bits: list[tuple[bool, bool]]) -> list[int]:
    return [int(t) - int(c) for c, t in bits]


def _task_mean(groups: list[list[int]]) -> float:
    return sum(sum(g) / len(g) for g in groups) / len(groups)


__all__ = ["PairedRow", "PooledEffect", "PooledSensitivity", "adjust_paired_rows", "paired_row", "pooled_effect",
           "tested_pairs"]
