"""Two experiments side by side (e.g. two models with the runner fixed): unpaired across runs.

Trials of different runs share no pairs, so each arm's pass rate is compared as two independent
binomial rates. The headline (page and pinned tasks both ran) is each run's mean rate over those
tasks, every task weighted equally as in each run's own report, and B - A the mean of the tasks'
differences: for these tasks (the tasks fixed, the attempts random: `suite_rate_difference`, the
primary), and beside it for tasks like these (a t over the tasks' differences,
`task_mean_difference`). Trials pooled over tasks would weigh a task by how many trials it got,
and two runs with the same rate on every task could differ.
Per task: Newcombe's interval and Fisher's exact p (Holm-adjusted over the tasks); and, since the
runs share tasks, a Cochran-Mantel-Haenszel test stratified by task per arm.
"""

from __future__ import annotations

from pydantic import BaseModel

from ..stats import ASSUMPTIONS, holm, task_mean_difference
from ..stats.suite import suite_rate_difference
from .build import HEADLINE_GRADING, Rate, Report
from .rates import mean_over_tasks
from .format import ci, pct, pval, signed_pct
from .unpaired import StratifiedEffect, UnpairedRow, rate_difference, rates_row, stratified_effect


class CompareError(ValueError):
    """Two runs that cannot be compared (they share no task)."""


class RateComparison(BaseModel):
    arm: str
    task: str | None  # None: the headline (page and pinned tasks)
    a: Rate
    b: Rate
    difference: float | None  # b minus a
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    test: str  # "fisher" (with Newcombe's interval): a task; "these tasks": a headline over two or more
    p_holm: float | None = None  # per-task rows: Holm-adjusted over the arm's tasks
    like_these_low: float | None = None  # a headline's interval for tasks like these (t over tasks)
    like_these_high: float | None = None


class Comparison(BaseModel):
    schema_version: int = 4  # 2: stratified (CMH per arm); 3: the headline a mean over tasks; 4: for these tasks, and like these
    a: str
    b: str
    a_label: str
    b_label: str
    rows: list[RateComparison]
    stratified: dict[str, StratifiedEffect] = {}  # arm -> CMH over the shared graded tasks, B against A
    shared_tasks: list[str] = []  # what both runs planned: the only tasks compared
    left_out: list[str] = []  # tasks one run planned and the other did not
    assumption: str = ASSUMPTIONS["compare"]


def _compare(arm: str, task: str | None, a: Rate, b: Rate) -> RateComparison:
    d = rate_difference(b, a)
    return RateComparison(arm=arm, task=task, a=a, b=b, difference=d["difference"], ci_low=d["ci_low"],
                          ci_high=d["ci_high"], p_value=d["fisher_p"], test="fisher")


def _label(report: Report) -> str:
    return f"{report.experiment_id} ({report.runner}, {report.model or 'default model'})"


def _headline(a: Report, b: Report, arm: str, shared: set[str]) -> RateComparison:
    """An arm's headline in each run: the mean of its rates over the headline tasks both ran, every
    task weighted equally; B - A as the mean of the tasks' differences (one task: that task's row)."""
    b_rates = {r.task: r.rate for r in b.by_arm_task if r.arm == arm}
    tasks = [(r.rate, b_rates[r.task]) for r in a.by_arm_task
             if r.arm == arm and r.task in shared and r.task in b_rates and r.grading in HEADLINE_GRADING and not r.placebo
             and r.rate.n and b_rates[r.task].n]
    a_rate = mean_over_tasks([(x.passes, x.n) for x, _ in tasks])
    b_rate = mean_over_tasks([(y.passes, y.n) for _, y in tasks])
    counts = [((y.passes, y.n), (x.passes, x.n)) for x, y in tasks]
    if len(tasks) < 2 or (effect := suite_rate_difference(counts)) is None:
        return _compare(arm, None, a_rate, b_rate)
    like_these = task_mean_difference(counts)
    return RateComparison(arm=arm, task=None, a=a_rate, b=b_rate, difference=effect.estimate, ci_low=effect.low,
                          ci_high=effect.high, p_value=effect.p_value, test="these tasks",
                          like_these_low=like_these.low if like_these else None,
                          like_these_high=like_these.high if like_these else None)


def compare_reports(a: Report, b: Report) -> Comparison:
    """Only what both runs planned is compared; runs that share no task are refused."""
    a_tasks, b_tasks = {r.task for r in a.by_arm_task}, {r.task for r in b.by_arm_task}
    shared = a_tasks & b_tasks
    if not shared:
        raise CompareError(f"{a.experiment_id} (suite {a.suite}) and {b.experiment_id} (suite {b.suite}) share no task: "
                           "there is nothing to compare")
    rows = [_headline(a, b, arm, shared) for arm in a.headline if arm in b.headline]
    b_rows = {(r.arm, r.task): r for r in b.by_arm_task}
    strata: dict[str, list[UnpairedRow]] = {}
    for row in a.by_arm_task:
        if (other := b_rows.get((row.arm, row.task))) is not None:
            rows.append(_compare(row.arm, row.task, row.rate, other.rate))
            if row.grading in HEADLINE_GRADING and not row.placebo:
                strata.setdefault(row.arm, []).append(rates_row(row.task, "B", "A", other.rate, row.rate))
    for arm in {r.arm for r in rows}:
        per_task = [r for r in rows if r.arm == arm and r.task is not None]
        for r, adjusted in zip(per_task, holm([r.p_value for r in per_task])):
            r.p_holm = adjusted
    stratified = {arm: effect for arm, tasks in sorted(strata.items()) if (effect := stratified_effect(tasks))}
    return Comparison(a=a.experiment_id, b=b.experiment_id, a_label=_label(a), b_label=_label(b), rows=rows,
                      stratified=stratified, shared_tasks=sorted(shared), left_out=sorted(a_tasks ^ b_tasks))


def render_comparison(c: Comparison) -> str:
    out = [f"# webbench comparison: {c.a} vs {c.b}", "", f"A = {c.a_label}; B = {c.b_label}.", "",
           f"Compared on the {len(c.shared_tasks)} task(s) both runs planned"
           + (f"; left out, as only one run planned them: {', '.join(c.left_out)}." if c.left_out else "."), "",
           "The headline row is each run's mean rate over the graded tasks both ran, every task weighted equally, "
           "and B - A the mean of the tasks' differences, with its interval and test for these tasks (the tasks "
           "fixed, only the attempts random); the interval for tasks like these (a t over the tasks' differences) "
           "is beneath the table. A task row has Newcombe's interval and Fisher's exact p (Holm-adjusted over the "
           "arm's tasks).", "",
           "| arm | task | A passes | A rate (95% CI) | B passes | B rate (95% CI) | B - A (95% CI) | p (Holm) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in c.rows:
        holm_p = "" if r.task is None else f" ({pval(r.p_holm)})"
        out.append(f"| {r.arm} | {r.task or '**headline** (graded tasks both ran)'} | {r.a.passes}/{r.a.n} | {pct(r.a.rate)} ({ci(r.a)}) "
                   f"| {r.b.passes}/{r.b.n} | {pct(r.b.rate)} ({ci(r.b)}) | {signed_pct(r.difference)} "
                   f"({signed_pct(r.ci_low)} to {signed_pct(r.ci_high)}) | {pval(r.p_value)}{holm_p} |")
    generalised = [r for r in c.rows if r.task is None and r.like_these_low is not None]
    if generalised:
        out += ["", "B - A for tasks like these (the tasks a sample of the ones one cares about; a t over the tasks' "
                "differences):", ""]
        out += [f"- {r.arm}: {signed_pct(r.difference)} (95% CI {signed_pct(r.like_these_low)} to "
                f"{signed_pct(r.like_these_high)})" for r in generalised]
    if c.stratified:
        out += ["", "Stratified by task, over the graded tasks both runs planned, placebo left out:", ""]
        for arm, s in c.stratified.items():
            out.append(f"- {arm}: Mantel-Haenszel B - A {signed_pct(s.risk_difference)} (95% CI {signed_pct(s.ci_low)} to "
                       f"{signed_pct(s.ci_high)}), Cochran-Mantel-Haenszel p = {pval(s.p_value)} over {s.tasks} tasks")
    return "\n".join(out + ["", c.assumption]) + "\n"
