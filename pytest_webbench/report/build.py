"""Builds the report from the experiment directory alone: the manifest and the trial records.

Planned trials without a record count as missing: they stay in every arm's denominator, as
failures, and are shown. Paired tests use only pairs whose two trials both ended (passed or
failed); pairs with an errored or missing member are counted and listed, not tested. The report
holds no clock time and no randomness, so rendering it twice gives the same bytes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field, PrivateAttr

from ..results.harbor_jobs import read_job_problems
from ..results.record_index import RecordScan, scan_records
from ..results.records import RunManifest, TrialRecord, UndeletedBrowser, read_manifest, read_suite_check, read_undeleted_browsers
from ..results.decisions import read_decisions
from ..stats import ASSUMPTIONS, pass_at_k, pass_hat_k
from .paired import PairedRow, PooledEffect, adjust_paired_rows, paired_row, pooled_effect
from .rates import Rate, mean_over_tasks, median_of_present, rate
from .sequential import SequentialSummary, not_run_trials, summarize
from .unpaired import StratifiedEffect, UnpairedRow, adjust_unpaired_rows, stratified_effect, unpaired_row
from .writes import WriteGroupRow, WriteRow, write_groups, write_rows

# 6: each trial list holds its first LISTED trials, with every list's length in listed_totals (the
# trials index in pages/ lists them all). 4: the pooled paired interval is the design-effect Tango score interval (never zero-width), over
# the headline tasks only (task_names), with a sensitivity line; the playwright arm is compared
# with control (Fisher, Newcombe, CMH); per-task p-values carry Holm's adjustment. 3: browsers_not_deleted.
REPORT_SCHEMA = 6
LISTED = 200  # trials a list of the report names; pages/index.html lists every trial
TRIAL_LISTS = ("not_passed", "flagged", "rejected", "cap_hits", "over_spend", "toolset_invalid", "token_disagreements")
HEADLINE_GRADING = ("page", "pinned", "request", "verifier")
FEW_ATTEMPTS = 5  # below this a run screens for large effects only
NOT_A_PASS = ("failed", "errored", "missing")


class ArmTaskRow(BaseModel):
    arm: str
    task: str
    grading: str
    placebo: bool
    passed: int
    failed: int
    errored: int
    missing: int
    rate: Rate
    pass_at_k: dict[int, float] = Field(default_factory=dict)  # over ended trials (passed + failed)
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    median_agent_sec: float | None = None
    median_calls: float | None = None  # browser calls the proxy forwarded, per recorded trial
    shortcut: bool = True  # the batch offers a shortcut here (suite: shortcut, and not a placebo)
    trials: dict[str, str] = Field(default_factory=dict)  # trial id -> outcome, for the report's links


class ArmUsage(BaseModel):
    arm: str
    trials: int
    median_agent_sec: float | None
    median_model_sec: float | None = None  # of the agent's time: waiting on its model (the gateway's requests)
    median_tool_sec: float | None = None  # in browser calls (the proxy's)
    metered_by_gateway: int = 0  # trials whose tokens the gateway counted (the rest: as the runner reported)
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    tokens_reported: int  # trials whose runner reported tokens
    cost_usd: float
    priced: int  # trials whose cost could be priced (model-cost coverage)
    browser_calls: int
    median_browser_calls: float | None
    webmcp: dict[str, int] = Field(default_factory=dict)  # injected/native x tried/completed
    trials_with_rejections: int
    cap_hits: int
    over_spend: int
    toolset_invalid: int  # a trial that used WebMCP tools its arm should not have had
    cli_disagrees: int = 0  # trials whose CLI reported other token counts than the gateway metered


class TrialNote(BaseModel):
    trial_id: str
    arm: str
    task: str
    note: str


class WallRow(BaseModel):
    """One route the hostile runner tried, over the run's trials (runners/hostile.py)."""

    route: str
    held: int = 0
    breached: int = 0
    not_probed: int = 0
    evidence: str = ""  # a breach's evidence (the first), else what a held route answered


def wall_rows(records: Iterable[TrialRecord]) -> list[WallRow]:
    rows: dict[str, WallRow] = {}
    for r in records:
        for w in r.walls or []:
            row = rows.setdefault(w.route, WallRow(route=w.route, evidence=w.evidence))
            if w.status == "breached":
                if not row.breached:
                    row.evidence = f"{r.trial_id}: {w.evidence}"
                row.breached += 1
            elif w.status == "held":
                row.held += 1
            else:
                row.not_probed += 1
    return list(rows.values())


class Report(BaseModel):
    schema_version: int = REPORT_SCHEMA
    experiment_id: str
    suite: str
    runner: str
    model: str | None
    browser: str
    isolation: str | None = None  # the agents' walls, from the manifest
    suite_check: str = "not checked"  # the suite's files hashed at the run's end against the plan's (records.SuiteCheck)
    attempts: int
    arms: list[str]
    complete: bool
    incomplete_because: list[str] = Field(default_factory=list)
    planned_trials: int
    recorded_trials: int
    headline: dict[str, Rate]  # per arm, over headline_tasks
    # the tasks the headline and the pooled effect cover: graded against the page, a pinned value or a submission; placebo left out
    headline_tasks: list[str] = Field(default_factory=list)
    format_only: dict[str, Rate]
    by_arm_task: list[ArmTaskRow]
    paired: list[PairedRow]
    pooled: PooledEffect | None  # over the headline tasks (page and pinned grading), placebo left out
    pooled_format_only: PooledEffect | None = None  # format-only tasks, pooled apart
    playwright_vs_control: list[UnpairedRow] = Field(default_factory=list)
    playwright_pooled: StratifiedEffect | None = None
    sequential: SequentialSummary | None = None  # --sequential: the rule, each task's decision, what it saved
    usage: list[ArmUsage]
    stop_reasons: dict[str, dict[str, int]]  # arm -> reason -> trials that did not pass
    not_passed: list[TrialNote] = Field(default_factory=list)  # failed and errored trials, with why
    flagged: list[TrialNote]
    rejected: list[TrialNote]
    cap_hits: list[TrialNote]
    over_spend: list[TrialNote]
    toolset_invalid: list[TrialNote]
    token_disagreements: list[TrialNote] = Field(default_factory=list)  # the CLI's figures against the gateway's
    walls: list[WallRow] = Field(default_factory=list)  # --runner hostile: which walls this setup keeps
    writes: list[WriteRow] = Field(default_factory=list)  # write tasks: ClawBench's metrics (writes.py)
    write_groups: list[WriteGroupRow] = Field(default_factory=list)  # ... by the tasks' group (ClawBench's metaclass)
    # ClawBench cases whose schema is the package's placeholder: run when asked, counted nowhere
    ungradable_tasks: list[str] = Field(default_factory=list)
    broken_pairs: list[str]
    browsers_not_deleted: list[UndeletedBrowser] = Field(default_factory=list)  # cloud browsers that may still be billed
    problems: list[str]
    assumptions: dict[str, str]
    caveat: str | None
    listed_totals: dict[str, int] = Field(default_factory=dict)  # each trial list's whole length (it names LISTED at most)
    _whole_lists: dict[str, list[TrialNote]] = PrivateAttr(default_factory=dict)  # for the trials index, never written

    def whole_list(self, name: str) -> list[TrialNote]:
        """A trial list in full: as built, or as far as the report holds it (one read from disk)."""
        return self._whole_lists.get(name, getattr(self, name))


def _toolset_invalid(r: TrialRecord) -> str | None:
    invokes = r.calls.webmcp_invokes
    if r.arm == "playwright" and invokes:
        return "invoked WebMCP tools in the playwright arm"
    if r.arm != "treatment" and any(k.startswith("injected:") for k in invokes):
        return "invoked an injected tool outside the treatment arm"
    return None


def _usage(arm: str, records: list[TrialRecord]) -> ArmUsage:
    """One pass over the arm's records (at 100,000 trials a pass per figure cost seconds)."""
    webmcp: dict[str, int] = {}
    agent, model, tool, calls = [], [], [], []
    sums = dict(gateway=0, disagrees=0, input=0, cached=0, output=0, reported=0, priced=0, browser_calls=0,
                rejections=0, cap_hits=0, over_spend=0, toolset_invalid=0)
    cost = 0.0
    for r in records:
        timings, tokens, used = r.timings, r.tokens, r.calls
        for key, count in used.webmcp_invokes.items():
            origin, status = key.split(":", 1) if ":" in key else ("unknown", key)
            webmcp[f"{origin}:tried"] = webmcp.get(f"{origin}:tried", 0) + count
            if status == "completed":
                webmcp[f"{origin}:completed"] = webmcp.get(f"{origin}:completed", 0) + count
        if timings.agent_sec is not None:
            agent.append(timings.agent_sec)
        if timings.model_sec is not None:
            model.append(timings.model_sec)
        if timings.tool_sec is not None:
            tool.append(timings.tool_sec)
        calls.append(used.forwarded)
        sums["gateway"] += tokens.source == "gateway"
        sums["disagrees"] += _cli_disagrees(r) is not None
        sums["input"] += tokens.input or 0
        sums["cached"] += tokens.cached or 0
        sums["output"] += tokens.output or 0
        sums["reported"] += tokens.input is not None or tokens.output is not None
        if tokens.cost_usd is not None:
            sums["priced"] += 1
            cost += tokens.cost_usd
        sums["browser_calls"] += used.forwarded
        sums["rejections"] += used.rejected > 0
        sums["cap_hits"] += used.cap_hit
        sums["over_spend"] += r.stop_reason == "over_spend"
        sums["toolset_invalid"] += _toolset_invalid(r) is not None
    return ArmUsage(
        arm=arm, trials=len(records), median_agent_sec=median_of_present(agent), median_model_sec=median_of_present(model),
        median_tool_sec=median_of_present(tool), metered_by_gateway=sums["gateway"], cli_disagrees=sums["disagrees"],
        input_tokens=sums["input"], cached_tokens=sums["cached"], output_tokens=sums["output"],
        tokens_reported=sums["reported"], cost_usd=round(cost, 6), priced=sums["priced"],
        browser_calls=sums["browser_calls"], median_browser_calls=median_of_present(calls), webmcp=dict(sorted(webmcp.items())),
        trials_with_rejections=sums["rejections"], cap_hits=sums["cap_hits"], over_spend=sums["over_spend"],
        toolset_invalid=sums["toolset_invalid"],
    )


def _cli_disagrees(r: TrialRecord) -> str | None:
    """Where the gateway metered a trial and the CLI's own figures differ from it."""
    cli = r.tokens_cli
    if r.tokens.source != "gateway" or cli is None or cli.input is None:
        return None
    ours, theirs = (r.tokens.input, r.tokens.cached, r.tokens.output), (cli.input, cli.cached, cli.output)
    if ours == theirs:
        return None
    return f"gateway metered input/cached/output {ours}, the CLI reported {theirs}"


def _note(r: TrialRecord, note: str) -> TrialNote:
    return TrialNote(trial_id=r.trial_id, arm=r.arm, task=r.task, note=note)


def _notes(ordered: list[TrialRecord]) -> dict[str, list[TrialNote]]:
    """The report's trial lists, in one pass over the records (in trial-id order)."""
    out: dict[str, list[TrialNote]] = {k: [] for k in TRIAL_LISTS}
    for r in ordered:
        if r.outcome != "passed":
            out["not_passed"].append(_note(r, f"{r.outcome}: {r.stop_reason or ''}: {r.detail[:200]}"))
        if r.flags:
            out["flagged"].append(_note(r, "; ".join(r.flags)))
        if r.calls.rejected:
            out["rejected"].append(_note(r, ", ".join(f"{k} x{v}" for k, v in sorted(r.calls.rejected_rules.items()))
                                         or f"{r.calls.rejected} call(s)"))
        if r.calls.cap_hit:
            out["cap_hits"].append(_note(r, f"{r.calls.forwarded} calls"))
        if r.stop_reason == "over_spend":
            out["over_spend"].append(_note(r, r.detail))
        if note := _toolset_invalid(r):
            out["toolset_invalid"].append(_note(r, note))
        if note := _cli_disagrees(r):
            out["token_disagreements"].append(_note(r, note))
    return out


def build_report(manifest: RunManifest, records: list[TrialRecord], problems: list[str] | None = None,
                 browsers_not_deleted: list[UndeletedBrowser] | None = None, decisions: dict | None = None) -> Report:
    by_id = {r.trial_id: r for r in records}
    # A sequential run's trials after their task was decided are not run: out of every denominator, not missing.
    skipped = not_run_trials(manifest, decisions or {}, set(by_id))
    # an ungradable case (ClawBench's placeholder schema) can only fail: in no denominator, listed apart
    ungradable = {t for t, limits in manifest.task_limits.items() if limits.ungradable}
    planned = [t for t in manifest.trials if t.trial_id not in skipped and t.task not in ungradable]
    if ungradable:
        records = [r for r in records if r.task not in ungradable]
        by_id = {r.trial_id: r for r in records}
    problems = list(problems or [])
    if unplanned := sorted(set(by_id) - {t.trial_id for t in planned}):
        problems.append(f"{len(unplanned)} record(s) of trials the plan does not hold, left out: {', '.join(unplanned[:10])}"
                        + (" ..." if len(unplanned) > 10 else ""))
    arm_order = {a: i for i, a in enumerate(manifest.arms)}
    by_arm_task: dict[tuple[str, str], list[TrialRecord | None]] = {}
    pair_ids_by_task: dict[str, set[str]] = {}
    for t in planned:  # one pass: the report must stay linear in the number of trials
        by_arm_task.setdefault((t.arm, t.task), []).append(by_id.get(t.trial_id))
        if t.pair_id:
            pair_ids_by_task.setdefault(t.task, set()).add(t.pair_id)
    rows: list[ArmTaskRow] = []
    headline_counts: dict[str, list[tuple[int, int]]] = {}  # per arm, (passes, trials) per task
    format_counts: dict[str, list[tuple[int, int]]] = {}
    stop_reasons: dict[str, dict[str, int]] = {}
    for arm, task in sorted(by_arm_task, key=lambda k: (arm_order.get(k[0], 99), k[1])):
        limits = manifest.task_limits[task]
        recs = by_arm_task[(arm, task)]
        counts = {"passed": 0, "failed": 0, "errored": 0}
        reasons: dict[str, int] = {}
        arm_reasons = stop_reasons.setdefault(arm, {})
        for r in recs:  # one pass per row: a run of 100,000 trials has tens of thousands of rows
            if r is not None:
                if r.outcome in counts:
                    counts[r.outcome] += 1
                if r.outcome == "passed":
                    continue
            reason = "missing" if r is None else r.stop_reason or r.outcome
            reasons[reason] = reasons.get(reason, 0) + 1
            arm_reasons[reason] = arm_reasons.get(reason, 0) + 1
        ended = counts["passed"] + counts["failed"]
        ks = [k for k in (1, 2, 3, 5, 10) if k <= ended]
        rows.append(ArmTaskRow(
            arm=arm, task=task, grading=limits.grading, placebo=limits.placebo, missing=sum(r is None for r in recs),
            rate=rate(counts["passed"], len(recs)), stop_reasons=dict(sorted(reasons.items())),
            pass_at_k={k: round(pass_at_k(ended, counts["passed"], k), 6) for k in ks},
            pass_hat_k={k: round(pass_hat_k(ended, counts["passed"], k), 6) for k in ks},
            median_agent_sec=median_of_present(r.timings.agent_sec for r in recs if r is not None), **counts,
            median_calls=median_of_present(r.calls.forwarded for r in recs if r is not None),
            shortcut=limits.shortcut and not limits.placebo,
            trials={r.trial_id: r.outcome for r in recs if r is not None},
        ))
        if limits.placebo:
            continue  # a placebo measures the batch's presence, not the tasks: left out of both summaries
        (format_counts if limits.grading == "format" else headline_counts).setdefault(arm, []).append((counts["passed"], len(recs)))

    paired_rows: list[PairedRow] = []
    pooled_input: dict[str, dict] = {"headline": {}, "format": {}}
    if manifest.paired:
        broken = set(manifest.broken_pairs)
        for task in sorted(pair_ids_by_task):
            pair_ids = sorted(pair_ids_by_task[task] - broken)
            pairs = [(by_id.get(f"{p}-control"), by_id.get(f"{p}-treatment")) for p in pair_ids]
            if not pairs:
                continue
            limits = manifest.task_limits[task]
            paired_rows.append(paired_row(task, limits.placebo, limits.grading, limits.agree_on, pairs))
            if not limits.placebo:
                pooled_input["headline" if limits.grading in HEADLINE_GRADING else "format"][task] = pairs
        adjust_paired_rows(paired_rows)
    playwright_rows = []
    if {"playwright", "control"} <= set(manifest.arms):
        for task in sorted(manifest.task_limits):
            if ("playwright", task) in by_arm_task and ("control", task) in by_arm_task:
                playwright_rows.append(unpaired_row(task, "playwright", "control", by_arm_task[("playwright", task)],
                                                    by_arm_task[("control", task)]))
        adjust_unpaired_rows(playwright_rows)
    headline_playwright = [r for r in playwright_rows if manifest.task_limits[r.task].grading in HEADLINE_GRADING
                           and not manifest.task_limits[r.task].placebo]

    ordered = sorted(records, key=lambda r: r.trial_id)
    by_arm: dict[str, list[TrialRecord]] = {}
    for r in ordered:
        by_arm.setdefault(r.arm, []).append(r)
    incomplete = []
    if missing := len(planned) - sum(t.trial_id in by_id for t in planned):
        incomplete.append(f"{missing} planned trial(s) have no result")
    if errored := sum(r.outcome == "errored" for r in records):
        incomplete.append(f"{errored} trial(s) errored (agent or infrastructure failure)")
    notes = _notes(ordered)
    report = Report(
        experiment_id=manifest.experiment_id, suite=manifest.suite, runner=manifest.runner, model=manifest.model,
        browser=manifest.browser, isolation=manifest.isolation, attempts=manifest.attempts, arms=manifest.arms, complete=not incomplete,
        incomplete_because=incomplete, planned_trials=len(planned), recorded_trials=len(planned) - missing,
        headline={arm: mean_over_tasks(per_task) for arm, per_task in headline_counts.items()},
        headline_tasks=sorted({task for _, task in by_arm_task if manifest.task_limits[task].grading in HEADLINE_GRADING
                               and not manifest.task_limits[task].placebo}),
        format_only={arm: mean_over_tasks(per_task) for arm, per_task in format_counts.items()},
        by_arm_task=rows, paired=paired_rows, pooled=pooled_effect(pooled_input["headline"]),
        pooled_format_only=pooled_effect(pooled_input["format"]), playwright_vs_control=playwright_rows,
        playwright_pooled=stratified_effect(headline_playwright),
        sequential=summarize(manifest, decisions or {}, planned, set(by_id), skipped),
        usage=[_usage(arm, by_arm.get(arm, [])) for arm in manifest.arms],
        stop_reasons={arm: dict(sorted(v.items())) for arm, v in sorted(stop_reasons.items(), key=lambda kv: arm_order.get(kv[0], 99))
                      if v},
        **{name: whole[:LISTED] for name, whole in notes.items()}, listed_totals={name: len(whole) for name, whole in notes.items()},
        walls=wall_rows(ordered), writes=write_rows(manifest, ordered),
        write_groups=write_groups(manifest, ordered), ungradable_tasks=sorted(ungradable),
        broken_pairs=manifest.broken_pairs, browsers_not_deleted=list(browsers_not_deleted or []),
        problems=problems, assumptions=ASSUMPTIONS,
        caveat=(f"With {manifest.attempts} attempt(s) per task and arm this run screens for large effects only: a null "
                "result here is weak evidence of no effect (see the minimum detectable effect)."
                if manifest.attempts < FEW_ATTEMPTS else None),
    )
    report._whole_lists = notes
    return report


def build_report_from_dir(experiment_dir: Path, scan: RecordScan | None = None) -> Report:
    """From the run's records: those of `scan` when given (the report writer's, which repairs
    the index), read from the index and the files otherwise."""
    # Reading 100,000 records makes millions of objects that live to the end: without this the
    # cyclic collector re-scans them again and again (a third of the time at that size).
    with no_cyclic_gc():
        manifest = read_manifest(experiment_dir)
        scan = scan or scan_records(experiment_dir)
        report = build_report(manifest, scan.records, scan.problems + read_job_problems(experiment_dir),
                              list(read_undeleted_browsers(experiment_dir).values()), read_decisions(experiment_dir))
        report.suite_check = read_suite_check(experiment_dir)
        return report


@contextmanager
def no_cyclic_gc():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
