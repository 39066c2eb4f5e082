"""The playwright arm against control: unpaired (different trials, not pairs), per task with
Fisher's exact test and Newcombe's interval (Holm-adjusted over the tasks), and pooled over the
headline tasks with the Cochran-Mantel-Haenszel test stratified by task."""

from __future__ import annotations

from pydantic import BaseModel

from ..stats import cmh_test, fisher_exact_p, holm, newcombe_difference
from .rates import Rate


class UnpairedRow(BaseModel):
    task: str
    arm: str  # the arm compared with the reference
    reference: str
    arm_rate: Rate
    reference_rate: Rate
    difference: float | None  # arm minus reference
    ci_low: float | None
    ci_high: float | None
    fisher_p: float | None
    fisher_p_holm: float | None = None


class StratifiedEffect(BaseModel):
    """Cochran-Mantel-Haenszel over tasks: one arm (or run) against a reference, unpaired."""

    tasks: int
    task_names: list[str]
    statistic: float
    p_value: float
    risk_difference: float | None  # Mantel-Haenszel, arm minus reference
    ci_low: float | None
    ci_high: float | None


def rate_difference(x: Rate, y: Rate) -> dict:
    """x minus y for two independent rates: the difference, Newcombe's interval, Fisher's p."""
    interval = newcombe_difference(x.passes, x.n, y.passes, y.n)
    return dict(difference=(x.rate - y.rate) if x.n and y.n else None, ci_low=interval.low if interval else None,
                ci_high=interval.high if interval else None, fisher_p=fisher_exact_p(x.passes, x.n, y.passes, y.n))


def rates_row(task: str, arm: str, reference: str, arm_rate: Rate, reference_rate: Rate) -> UnpairedRow:
    return UnpairedRow(task=task, arm=arm, reference=reference, arm_rate=arm_rate, reference_rate=reference_rate,
                       **rate_difference(arm_rate, reference_rate))


def adjust_unpaired_rows(rows: list[UnpairedRow]) -> None:
    for row, adjusted in zip(rows, holm([r.fisher_p for r in rows])):
        row.fisher_p_holm = adjusted


def stratified_effect(rows: list[UnpairedRow]) -> StratifiedEffect | None:
    """CMH over the rows' tasks: row 0 the arm (passed, not), row 1 the reference."""
    tables = [[[r.arm_rate.passes, r.arm_rate.n - r.arm_rate.passes],
               [r.reference_rate.passes, r.reference_rate.n - r.reference_rate.passes]] for r in rows]
    result = cmh_test(tables) if rows else None
    if result is None:
        return None
    return StratifiedEffect(
        # the tasks the test used: one where an arm has no trial carries nothing and is left out
        tasks=result.strata, task_names=sorted(r.task for r in rows if r.arm_rate.n and r.reference_rate.n),
        statistic=result.statistic,
        p_value=result.p_value, risk_difference=result.risk_difference, ci_low=result.risk_difference_low,
        ci_high=result.risk_difference_high,
    )
