"""Two experiments side by side (e.g. two models with the runner fixed): unpaired across runs.

Trials of different runs share no pairs, so each arm's pass rate is compared as two independent
binomial rates: the difference with Newcombe's interval and Fisher's exact p, overall (page and
pinned tasks) and per task.
"""

from __future__ import annotations

from pydantic import BaseModel

from ..stats import ASSUMPTIONS, fisher_exact_p, newcombe_difference
from .build import Rate, Report
from .format import ci, pct, pval, signed_pct


class RateComparison(BaseModel):
    arm: str
    task: str | None  # None: the headline (page and pinned tasks)
    a: Rate
    b: Rate
    difference: float | None  # b minus a
    ci_low: float | None
    ci_high: float | None
    fisher_p: float | None


class Comparison(BaseModel):
    schema_version: int = 1
    a: str
    b: str
    a_label: str
    b_label: str
    rows: list[RateComparison]
    assumption: str = ASSUMPTIONS["compare"]


def _compare(arm: str, task: str | None, a: Rate, b: Rate) -> RateComparison:
    interval = newcombe_difference(b.passes, b.n, a.passes, a.n)
    return RateComparison(
        arm=arm, task=task, a=a, b=b, difference=(b.rate - a.rate) if a.n and b.n else None,
        ci_low=interval.low if interval else None, ci_high=interval.high if interval else None,
        fisher_p=fisher_exact_p(b.passes, b.n, a.passes, a.n),
    )


def _label(report: Report) -> str:
    return f"{report.experiment_id} ({report.runner}, {report.model or 'default model'})"


def compare_reports(a: Report, b: Report) -> Comparison:
    rows = [_compare(arm, None, a.headline[arm], b.headline[arm]) for arm in a.headline if arm in b.headline]
    b_rows = {(r.arm, r.task): r for r in b.by_arm_task}
    for row in a.by_arm_task:
        if (other := b_rows.get((row.arm, row.task))) is not None:
            rows.append(_compare(row.arm, row.task, row.rate, other.rate))
    return Comparison(a=a.experiment_id, b=b.experiment_id, a_label=_label(a), b_label=_label(b), rows=rows)


def render_comparison(c: Comparison) -> str:
    out = [f"# webbench comparison: {c.a} vs {c.b}", "", f"A = {c.a_label}; B = {c.b_label}.", "",
           "| arm | task | A passes | A rate (95% CI) | B passes | B rate (95% CI) | B - A (95% Newcombe CI) | Fisher p |",
           "|---|---|---|---|---|---|---|---|"]
    for r in c.rows:
        out.append(f"| {r.arm} | {r.task or '**headline** (page + pinned)'} | {r.a.passes}/{r.a.n} | {pct(r.a.rate)} ({ci(r.a)}) "
                   f"| {r.b.passes}/{r.b.n} | {pct(r.b.rate)} ({ci(r.b)}) | {signed_pct(r.difference)} "
                   f"({signed_pct(r.ci_low)} to {signed_pct(r.ci_high)}) | {pval(r.fisher_p)} |")
    return "\n".join(out + ["", c.assumption]) + "\n"
