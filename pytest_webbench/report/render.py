"""Renders a `Report` as Markdown (report.md) and as the terminal summary's lines."""

from __future__ import annotations

from .build import Report
from .sequential import verdict_words
from .reviews import review_lines, to_check_lines
from .format import TASK_ROWS, ci, num, pct, population_ci, pval, signed_pct


# A sequential run's intervals are fixed-sample ones on data a rule stopped (docs/statistics.md measures them there).
STOPPED_NOTE = ("This run stopped tasks sequentially. The intervals and p-values above are computed as if each task's "
                "number of pairs had been fixed in advance (they do not model the stopping); how often they still cover "
                "under this rule's stopping was measured by simulation: the pooled interval for these tasks 95-100% "
                "(cap 20, benchmarks/stats_estimands.py), an arm's rate per task 97.4% or more, Newcombe's per task "
                "94.1% and the Mantel-Haenszel difference 92.5% (benchmarks/stats_conditions.py; docs/statistics.md).")


def headline_lines(report: Report) -> list[str]:
    lines = [f"webbench {report.experiment_id}: suite {report.suite}, runner {report.runner}, "
             f"{report.recorded_trials}/{report.planned_trials} trials recorded"
             + ("" if report.complete else " (INCOMPLETE: " + "; ".join(report.incomplete_because) + ")")]
    for arm, rate in report.headline.items():
        tasks = rate.tasks or len(report.headline_tasks)
        lines.append(f"  {arm:<11} mean pass rate over {tasks} graded task(s) {pct(rate.rate)} (95% CI for these tasks "
                     f"{ci(rate)}" + (f"; for tasks like these {population_ci(rate)}" if rate.population_low is not None else "")
                     + f"); trials passed: {rate.passes} of {rate.n} ({pct(rate.passes / rate.n if rate.n else None)} of "
                     "trials, not the mean over tasks)" + (", placebo out" if _has_placebo(report) else ""))
    for arm, rate in report.format_only.items():
        lines.append(f"  {arm:<11} {rate.passes}/{rate.n} format-only passes (shape checked, not correctness)")
    if q := report.sequential:
        lines.append(f"  sequential: ran {q.trials_run} of {q.trials_planned} planned trials, {q.trials_not_run} not run "
                     f"(tasks stopped first: {100 * q.saved_share:.1f}% fewer than the cap); stopped: "
                     + ("; ".join(f"{t.task}: {verdict_words(t, q.alpha_per_endpoint, q.max_pairs)}" for t in q.tasks if t.decision)
                        or "none"))
    if (rv := report.reviews) is not None and rv.run is not None:
        cost = "unpriced" if rv.run.cost_usd is None else f"${rv.run.cost_usd:.4f}"
        lines.append(f"  review (a reading aid, not a grade): {rv.run.trials_reviewed} trial(s), {rv.run.pairs_reviewed} pair(s) "
                     f"by {rv.run.model}, {cost}" + (f"; CHECK BY HAND, the reviewer found the arm's rules broken: "
                                                     + ", ".join(t.trial_id for t in rv.to_check) if rv.to_check else ""))
    if report.browsers_not_deleted:
        lines.append(f"  NOT DELETED, may still be billed: {len(report.browsers_not_deleted)} cloud browser(s): "
                     + ", ".join(b.name for b in report.browsers_not_deleted))
    if p := report.pooled:
        lines.append(f"  pooled effect (treatment - control, mean over {p.tasks} graded tasks"
                     f"{', placebo out' if _has_placebo(report) else ''}, {p.pairs} pairs): "
                     f"{signed_pct(p.difference)}, 95% CI for these tasks {signed_pct(p.ci_low)} to {signed_pct(p.ci_high)} "
                     f"(p = {pval(p.p_value)})"
                     + (f", for tasks like these {signed_pct(p.population_low)} to {signed_pct(p.population_high)}"
                        if p.population_low is not None else "")
                     + f"; detectable with about 80% power: {signed_pct(p.mde) if p.mde else 'none at this size'}")
        if s := p.errored_as_failures:
            lines.append(f"  with errored trials counted as failures ({s.pairs} pairs): {signed_pct(s.difference)}, "
                         f"95% CI {signed_pct(s.ci_low)} to {signed_pct(s.ci_high)}")
    return lines


def paired_lines(report: Report) -> list[str]:
    if not report.paired:
        return []
    lines = [f"  {'task':<30} pairs both c-only t-only neither excl McNemar-p speedup"]
    for r in report.paired[:TASK_ROWS]:
        name = r.task + (" (placebo)" if r.placebo else "")
        speed = "–" if r.median_speedup is None else f"{r.median_speedup:.2f}x"
        lines.append(f"  {name[:30]:<30} {r.pairs:>5} {r.both:>4} {r.control_only:>6} {r.treatment_only:>6} "
                     f"{r.neither:>7} {r.excluded:>4} {pval(r.mcnemar_p):>9} {speed:>7}")
    if len(report.paired) > TASK_ROWS:
        lines.append(f"  and {len(report.paired) - TASK_ROWS} more tasks: report.json holds every one")
    return lines


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def _task_table(header: list[str], items: list, row, per_task: int = 1) -> list[str]:
    """A per-task table of the first TASK_ROWS tasks (`per_task` rows each), saying what it left out."""
    shown = items[:TASK_ROWS * per_task]
    out = _table(header, [row(item) for item in shown])
    if len(items) > len(shown):
        out += ["", f"The first {len(shown)} of {len(items)} rows; report.json holds every one."]
    return out


def _names(names: list[str]) -> str:
    return ", ".join(names[:TASK_ROWS]) + (f" and {len(names) - TASK_ROWS} more" if len(names) > TASK_ROWS else "")


def _notes(title: str, report: Report, name: str, empty: str) -> list[str]:
    """One of the report's trial lists (the first LISTED; pages/index.html has every trial)."""
    notes = getattr(report, name)
    out = ["", f"### {title}", ""] + ([f"- `{n.trial_id}` ({n.arm}, {n.task}): {n.note}" for n in notes] if notes else [empty])
    if (more := report.listed_totals.get(name, len(notes)) - len(notes)) > 0:
        out.append(f"- and {more} more: pages/index.html lists every trial")
    return out


def _has_placebo(report: Report) -> bool:
    return any(r.placebo for r in report.by_arm_task)


def model_words(report: Report) -> str:
    """The run's model, or that its runner asks none (the reference, nop and hostile runners)."""
    if report.model:
        return f"model `{report.model}`"
    try:
        from ..runners import runner_spec

        asks = runner_spec(report.runner).uses_gateway
    except Exception:  # noqa: BLE001 - a runner of a user's own, or one no longer known: say what is known
        asks = True
    return "model: its runner's default" if asks else "no model (the runner asks none: its figures say nothing of a model's)"


def render_markdown(report: Report) -> str:
    out = [f"# webbench report: {report.experiment_id}", "",
           f"Suite `{report.suite}`, runner `{report.runner}`, {model_words(report)}, browser "
           f"`{report.browser}`, agents sealed: `{report.isolation or 'unrecorded'}`, suite files at the end: `{report.suite_check}`"
           f"{' (UNSEALED: agents could read the suite and the results and reach the network)' if report.isolation == 'none' else ''}"
           f"{' (UNSEALED network: sandboxed agents could reach the sites around their tools)' if (report.isolation or '').endswith('+open') else ''}, "
           + (f"up to {report.attempts} pairs per task (the sequential cap), " if report.sequential else
              f"{report.attempts} attempt(s) per task and arm, ") + f"arms {', '.join(report.arms)}. "
           f"{report.recorded_trials} of {report.planned_trials} planned trials have a record."]
    if report.suite_check.startswith("changed"):
        out += ["", f"**THE SUITE'S FILES CHANGED DURING THE RUN** ({report.suite_check.split(': ', 1)[1]} hash "
                "differently at its end than when it was planned): later trials may not have measured the planned tasks."]
    if not report.complete:
        out += ["", "**Incomplete run**: " + "; ".join(report.incomplete_because)
                + ". Missing and errored trials count as failures in every pass-rate denominator and are left out "
                  "of the paired tests (counted in their `excluded` column)."]
    if report.caveat:
        out += ["", f"*{report.caveat}*"]
    out += to_check_lines(report.reviews)
    if q := report.sequential:
        out += ["", "## Sequential run: each task stopped when decided", "", q.rule, "",
                f"Ran {q.trials_run} of the {q.trials_planned} trials planned at the cap ({q.max_pairs} pairs per task): "
                f"{q.trials_not_run} not run because their task was decided first ({100 * q.saved_share:.1f}% fewer than "
                f"the cap). The cap buys about the power of {q.fixed_design_pairs} fixed pairs per task, not of {q.max_pairs} "
                f"(docs/statistics.md): {q.fixed_design_trials} trials in a fixed design, and this run used "
                f"{abs(q.trials_run - q.fixed_design_trials)} {'more' if q.trials_run > q.fixed_design_trials else 'fewer'}. "
                "A task runs until both its walks, pass/fail and speed, have stopped; each is tested at "
                f"{q.alpha_per_endpoint:g}, and a task's effect is claimed only where its anytime p survives Holm's "
                "adjustment over the run's tasks. The decision and its anytime p are the rule's; the McNemar and "
                "sign-test p-values in the paired table below are fixed-sample tests of the same pairs, for reference. "
                "A task stopped without an effect shows none, which is no evidence that there is none.", ""]
        if not q.holm_reachable and q.smallest_p is not None:
            decided = sum(1 for t in q.tasks if t.decision) or len(q.tasks)
            out += [f"**No task of this run could have shown an effect**: the smallest anytime p the rule reaches by "
                    f"{q.max_pairs} pairs (every pair one way) is {q.smallest_p:.4g}, and Holm over {decided} tasks would "
                    f"need {decided} x {q.smallest_p:.4g} = {decided * q.smallest_p:.3g} to be at most {q.alpha_per_endpoint:g}. "
                    "Give each task more pairs (--attempts) or run fewer tasks.", ""]
        out += _task_table(["task", "pairs run", "decision", "pass/fail split (c-only / t-only), anytime p (Holm)",
                            "speed (t faster / c faster), anytime p (Holm)"], q.tasks,
                           lambda t: [t.task, str(t.pairs_run),
                        verdict_words(t, q.alpha_per_endpoint, q.max_pairs),
                        "–" if t.decision is None else f"{t.decision.control_only} / {t.decision.treatment_only}, "
                                                       f"{pval(t.decision.p_value)} ({pval(t.p_holm)})",
                        "–" if t.decision is None else f"{t.decision.treatment_faster} / {t.decision.control_faster}, "
                                                       f"{pval(t.decision.speed_p_value)} ({pval(t.speed_p_holm)})"])
    if report.browsers_not_deleted:
        out += ["", "**Cloud browsers that could not be deleted** (they may still be running and billed; delete them "
                "in Kernel's dashboard or API):", ""] + [f"- `{b.name}`: {b.error}" for b in report.browsers_not_deleted]
    out += ["", "## Headline: pass rate on tasks graded against the page, a pinned value or a submission", "",
            f"Tasks ({'placebo left out; ' if _has_placebo(report) else ''}the pooled effect covers the same ones): "
            f"{_names(report.headline_tasks)}. The rate "
            "is the mean of the tasks' rates, every task weighted equally (not the share of trials passed, which is "
            "shown beside it). Two intervals, for two questions: **for these tasks**, this suite's tasks as run (only "
            "the attempts are random; the variance within each task); **for tasks like these**, a population of tasks "
            "this suite's are taken as a sample of (a t interval over the tasks; it needs more tasks than most runs "
            "have, and covers less than 95% at 3-10 tasks with skewed rates: docs/statistics.md). One task: its exact "
            "Clopper-Pearson interval.", ""]
    out += _table(["arm", "tasks", "trials passed", "mean rate over tasks", "95% CI, these tasks", "95% CI, tasks like these"],
                  [[arm, str(r.tasks or len(report.headline_tasks)), f"{r.passes}/{r.n}", pct(r.rate), ci(r), population_ci(r)]
                   for arm, r in report.headline.items()])
    if len({r.tasks for r in report.headline.values()}) > 1:
        out += ["", "The arms ran different tasks (a task no batch covers has no treatment): compare the arms on the "
                "paired rows and the pooled effect, which hold the same tasks on both sides."]
    if report.format_only:
        out += ["", "Format-only tasks (the answer's shape is checked, not its truth), reported apart:", ""]
        out += _table(["arm", "passes", "rate"], [[arm, f"{r.passes}/{r.n}", pct(r.rate)] for arm, r in report.format_only.items()])

    if report.pooled:
        p = report.pooled
        out += ["", "## Pooled paired effect (tasks graded against the page, a pinned value or a submission, placebo left out)", "",
                f"Estimand: {p.estimand}. Tasks: {_names(p.task_names)}. Over {p.pairs} tested pairs in {p.tasks} "
                f"tasks (means over tasks): control {pct(p.control_rate)}, treatment {pct(p.treatment_rate)}, difference "
                f"**{signed_pct(p.difference)}**, 95% CI **{signed_pct(p.ci_low)} to {signed_pct(p.ci_high)}**, "
                f"p = {pval(p.p_value)} (the attempts' variance within each task; stats/suite.py).", "",
                f"For {p.population}: 95% CI {signed_pct(p.population_low)} to {signed_pct(p.population_high)}, "
                f"p = {pval(p.population_p)} (t over the tasks' differences, their spread SD {num(p.between_task_sd, 2)}"
                f"{'; width set by the within-task floor' if p.floored else ''}): a wider question, which few tasks "
                "answer weakly.", "",
                f"Minimum detectable effect (approximate): with {p.pairs} pairs in {p.tasks} tasks and {pct(p.discordance)} "
                f"of them discordant, the test for these tasks at alpha 0.05 has about 80% power for a mean difference of "
                + (f"**{signed_pct(p.mde)}** or more (the mean difference d the z test finds 80% of the time if every "
                   "task moved by d, each task's share of discordant pairs taken as at least d; a fixed-sample figure)."
                   if p.mde else "**none**: this run is too small to detect any effect.")]
        if s := p.errored_as_failures:
            out += ["", f"Sensitivity: counting each errored trial as a failure (its pair kept, {s.pairs} pairs), the "
                        f"difference is {signed_pct(s.difference)}, 95% CI {signed_pct(s.ci_low)} to {signed_pct(s.ci_high)}."]
        if report.sequential:
            out += ["", f"*{STOPPED_NOTE}*"]
    if f := report.pooled_format_only:
        out += ["", f"Format-only tasks ({_names(f.task_names)}), pooled apart (shape checked, not truth): "
                    f"{signed_pct(f.difference)} over {f.pairs} pairs, 95% CI {signed_pct(f.ci_low)} to {signed_pct(f.ci_high)}."]

    out += ["", "## Per arm and task", ""]
    out += _task_table(
        ["arm", "task", "grading", "passed", "failed", "errored", "missing", "rate", "95% CI", "pass@k", "pass^k", "median agent s",
         "median calls", "stop reasons"], report.by_arm_task,
        lambda row: [row.arm, row.task + (" (placebo)" if row.placebo else "" if row.shortcut else " (no shortcut)"), row.grading, str(row.passed), str(row.failed),
          str(row.errored), str(row.missing), pct(row.rate.rate), ci(row.rate),
          " ".join(f"@{k} {pct(v)}" for k, v in row.pass_at_k.items()) or "–",
          " ".join(f"^{k} {pct(v)}" for k, v in row.pass_hat_k.items()) or "–", num(row.median_agent_sec), num(row.median_calls),
          ", ".join(f"{k} {v}" for k, v in row.stop_reasons.items()) or "–"], per_task=len(report.arms))

    if report.paired:
        out += ["", "## Paired control vs treatment, per task", ""]
        out += _task_table(
            ["task", "pairs", "excluded", "both", "control only", "treatment only", "neither", "exact McNemar p (Holm)",
             "median speedup (both passed)", "sign-test p (Holm)", "answer agreement"], report.paired,
            lambda r: [r.task + (" (placebo)" if r.placebo else ""), str(r.pairs), str(r.excluded), str(r.both), str(r.control_only),
              str(r.treatment_only), str(r.neither), f"{pval(r.mcnemar_p)} ({pval(r.mcnemar_p_holm)})",
              "–" if r.median_speedup is None else f"{r.median_speedup:.2f}x ({r.treatment_faster} faster, {r.control_faster} slower)",
              f"{pval(r.sign_p)} ({pval(r.sign_p_holm)})",
              "not defined" if r.agreement is None else f"{r.agreement.passes}/{r.agreement.n} on {', '.join(r.agree_on)}"])
        out += ["", "Speedup is control agent time over treatment agent time (agent-only, harness excluded); "
                "> 1 means treatment was faster (the median of the pairs' ratios, not the ratio of the arms' medians)."
                + (" The placebo task is one no injected tool covers: a difference there is noise or an artefact of "
                   "the batch's presence, and it is left out of the pooled row." if _has_placebo(report) else "")]
    if report.playwright_vs_control:
        out += ["", "## Playwright arm against control (unpaired), per task", ""]
        out += _task_table(
            ["task", "playwright", "control", "difference (95% Newcombe CI)", "Fisher p (Holm)"], report.playwright_vs_control,
            lambda r: [r.task, f"{r.arm_rate.passes}/{r.arm_rate.n}", f"{r.reference_rate.passes}/{r.reference_rate.n}",
                       f"{signed_pct(r.difference)} ({signed_pct(r.ci_low)} to {signed_pct(r.ci_high)})",
                       f"{pval(r.fisher_p)} ({pval(r.fisher_p_holm)})"])
        if w := report.playwright_pooled:
            out += ["", f"Pooled over {w.tasks} graded tasks ({_names(w.task_names)}), stratified by task: "
                        f"Mantel-Haenszel difference {signed_pct(w.risk_difference)}, 95% CI {signed_pct(w.ci_low)} to "
                        f"{signed_pct(w.ci_high)}; Cochran-Mantel-Haenszel p = {pval(w.p_value)}."]
    if report.broken_pairs:
        out += ["", f"Pairs broken by selection (one arm deselected, left out of the paired table): {', '.join(report.broken_pairs)}"]

    if report.walls:
        out += ["", "## The walls of this setup (--runner hostile)", "",
                "Each route the hostile runner tried from inside its trials, on this run's environment and browser: "
                "held where nothing of the harness (its keys, the suite's answers, the results, other trials) was "
                "reached that way."]
        out += _table(["route", "held", "breached", "not probed", "evidence"],
                      [[w.route, str(w.held), str(w.breached), str(w.not_probed), w.evidence[:200].replace("|", "/").replace("\n", " ")]
                       for w in report.walls])
    if report.writes:
        out += ["", "## Write tasks: ClawBench's metrics", "",
                "A write task's submission is the first request its check matched, blocked in the browser. Where the "
                "check's fields decide the grade it is graded by them; elsewhere by the judge's lenient rubric "
                "(ClawBench's reward), with the strict one recorded beside it. Tool calls count every call in the agent's "
                "trajectory (ClawBench's count); browser calls only those the proxy forwarded."]
        out += _table(
            ["arm", "trials", "intercepted", "graded by the check (passed)", "judged", "judge strict", "judge lenient",
             "median tool calls", "median browser calls"],
            [[w.arm, str(w.trials), f"{w.intercepted}/{w.trials}", f"{w.by_check} ({w.by_check_passed})", str(w.judged),
              f"{w.judge_strict}/{w.judged}", f"{w.judge_lenient}/{w.judged}", num(w.median_agent_tool_calls),
              num(w.median_browser_calls)] for w in report.writes])
    if report.write_groups:
        out += ["", "By group (ClawBench's metaclass):", ""]
        out += _table(["group", "arm", "tasks", "trials", "intercepted", "passed"],
                      [[g.group, g.arm, str(g.tasks), str(g.trials), f"{g.intercepted}/{g.trials}", f"{g.passed}/{g.trials}"]
                       for g in report.write_groups])
    if report.clawbench:
        out += ["", "### ClawBench's own figures", "",
                "As ClawBench's rescore.py and analyze.py compute them, over every run of the judged write tasks (an "
                "errored trial is a run that earned 0; a judge that gave no verdict scores 0): a row to set beside a "
                "ClawBench leaderboard row. `python -m pytest_webbench.report clawbench-export RUN_DIR OUT` writes the "
                "runs as ClawBench's folders, for its own tools."]
        out += _table(["arm", "runs", "intercepted", "reward (lenient)", "reward (strict)", "pass/total", "judge errors",
                       "no action but intercepted", "claimed success but failed"],
                      [[c.arm, str(c.runs), f"{c.intercepted} ({100 * c.intercepted_rate:.1f}%)",
                        f"{100 * c.reward_lenient:.1f}%", f"{100 * c.reward_strict:.1f}%", f"{c.match_lenient}/{c.runs}",
                        f"{c.judge_errors_lenient} / {c.judge_errors_strict}", str(c.zero_action_intercepted),
                        f"{c.claimed_but_failed}/{c.claimed_success}"] for c in report.clawbench])
    if report.ungradable_tasks:
        out += ["", f"Ungradable ClawBench cases (their schema is the package's placeholder, which no request matches; "
                    f"run as asked, counted nowhere): {', '.join(report.ungradable_tasks)}"]
    out += review_lines(report.reviews)
    out += ["", "## Usage, tools and validity", ""]
    out += _table(
        ["arm", "trials", "median agent s (model / browser calls)", "input tok", "cached tok", "output tok",
         "tokens reported (by the gateway)", "cost $", "priced",
         "browser calls (median)", "WebMCP injected tried/completed", "WebMCP native tried/completed",
         "trials w/ rejected calls", "call-cap hits", "over spend", "toolset invalid"],
        [[u.arm, str(u.trials), f"{num(u.median_agent_sec)} ({num(u.median_model_sec)} / {num(u.median_tool_sec)})",
          str(u.input_tokens), str(u.cached_tokens), str(u.output_tokens),
          f"{u.tokens_reported}/{u.trials} ({u.metered_by_gateway})", f"{u.cost_usd:.4f}" if u.priced else "unpriced",
          f"{u.priced}/{u.trials}",
          f"{u.browser_calls} ({num(u.median_browser_calls)})",
          f"{u.webmcp.get('injected:tried', 0)}/{u.webmcp.get('injected:completed', 0)}",
          f"{u.webmcp.get('native:tried', 0)}/{u.webmcp.get('native:completed', 0)}",
          str(u.trials_with_rejections), str(u.cap_hits), str(u.over_spend), str(u.toolset_invalid)] for u in report.usage])

    out += ["", "## What stopped the trials that did not pass", ""]
    reasons = sorted({k for v in report.stop_reasons.values() for k in v})
    out += _table(["arm", *reasons], [[arm, *(str(v.get(k, 0)) for k in reasons)] for arm, v in report.stop_reasons.items()]) \
        if reasons else ["Every trial passed."]
    out += _notes("Trials flagged by the trajectory scan (flags never change a score)", report, "flagged", "None flagged.")
    out += _notes("Trials with calls the proxy rejected", report, "rejected", "None.")
    out += _notes("Trials that hit the call cap", report, "cap_hits", "None.")
    out += _notes("Trials over the spend limit (not counted as passes)", report, "over_spend", "None.")
    out += _notes("Trials whose tool use does not fit their arm", report, "toolset_invalid", "None.")
    out += _notes("Trials whose CLI reported other token counts than the model gateway metered (the gateway's are used)",
                  report, "token_disagreements", "None.")
    if report.problems:
        out += ["", "## Problems reading the results", ""] + [f"- {p}" for p in report.problems]
    out += ["", "## What each test assumes", ""] + [f"- {v}" for v in report.assumptions.values()]
    return "\n".join(out) + "\n"
