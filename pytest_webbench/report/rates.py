"""A pass rate with its exact (Clopper-Pearson) interval, the one shape every table of the report uses."""

from __future__ import annotations

from pydantic import BaseModel

from ..results.records import TrialRecord
from ..stats import clopper_pearson


class Rate(BaseModel):
    passes: int
    n: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


def rate(passes: int, n: int) -> Rate:
    ci = clopper_pearson(passes, n)
    return Rate(passes=passes, n=n, rate=passes / n if n else None,
                ci_low=ci.low if ci else None, ci_high=ci.high if ci else None)


def passed(r: TrialRecord | None) -> bool:
    return r is not None and r.outcome == "passed"
