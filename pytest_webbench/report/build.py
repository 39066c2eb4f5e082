"""Builds the report from the experiment directory alone: the manifest and the trial records.

Planned trials without a record count as missing: they stay in every arm's denominator, as
failures, and are shown. Paired tests use only pairs whose two trials both ended (passed or
failed); pairs with an errored or missing member are counted and listed, not tested. The report
holds no clock time and no randomness, so rendering it twice gives the same bytes.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, Field, PrivateAttr

from ..results.harbor_jobs import read_job_problems
from ..results.record_index import RecordScan, scan_records
from ..results.records import RecordSchema, RunManifest, TrialRecord, read_manifest
from ..results.run_notes import UndeletedBrowser, read_suite_check, read_undeleted_browsers
from ..results.decisions import read_decisions
from ..stats import ASSUMPTIONS
from .arms import ArmTaskRow, ArmUsage, arm_task_rows, arm_usage
from .clawbench_figures import ClawBenchFigures, clawbench_figures
from .paired import PairedRow, PooledEffect, adjust_paired_rows, paired_row, pooled_effect
from .rates import Rate, mean_over_tasks
from .reviews import ReviewSection, review_section
from .sequential import SequentialSummary, not_run_trials, summarize
from .trial_lists import LISTED, NOTE_TEXT, TrialNote, WallRow, listed_trials, trial_notes, wall_rows
from .unpaired import StratifiedEffect, UnpairedRow, adjust_unpaired_rows, rates_row, stratified_effect
from .writes import WriteGroupRow, WriteRow, write_groups, write_rows

# 6: each trial list holds its first LISTED trials, with every list's length in listed_totals (the
# trials index in pages/ lists them all). 5: the pooled paired interval is a t interval over the tasks' differences. 4: the pooled
# paired interval (then Tango's score interval with a design effect, never zero-width) over the headline tasks only (task_names), with a sensitivity line; the playwright arm is compared
# with control (Fisher, Newcombe, CMH); per-task p-values carry Holm's adjustment. 3: browsers_not_deleted.
REPORT_SCHEMA = 6
HEADLINE_GRADING = ("page", "pinned", "request", "verifier")
FEW_ATTEMPTS = 6  # below this a run screens for large effects only: 5 pairs all one way give p = 2 / 2^5 = 0.0625
NOT_A_PASS = ("failed", "errored", "missing")


class Report(BaseModel):
    schema_version: int = REPORT_SCHEMA
    experiment_id: str
    suite: str
    runner: str
    model: str | None
    browser: str
    isolation: str | None = None  # the agents' walls, from the manifest
    suite_check: str = "not checked"  # the suite's files hashed at the run's end against the plan's (run_notes.SuiteCheck)
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
    reviews: ReviewSection | None = None  # --review: what the reviewer read and found, beside the verdicts (reviews.py)
    walls: list[WallRow] = Field(default_factory=list)  # --runner hostile: which walls this setup keeps
    writes: list[WriteRow] = Field(default_factory=list)  # write tasks: ClawBench's metrics (writes.py)
    write_groups: list[WriteGroupRow] = Field(default_factory=list)  # ... by the tasks' group (ClawBench's metaclass)
    clawbench: list[ClawBenchFigures] = Field(default_factory=list)  # ClawBench's own figures, as its tools compute them
    # ClawBench cases whose schema is the package's placeholder: run when asked, counted nowhere
    ungradable_tasks: list[str] = Field(default_factory=list)
    broken_pairs: list[str]
    browsers_not_deleted: list[UndeletedBrowser] = Field(default_factory=list)  # cloud browsers that may still be billed
    problems: list[str]
    assumptions: dict[str, str]
    caveat: str | None
    listed_totals: dict[str, int] = Field(default_factory=dict)  # each trial list's whole length (it names LISTED at most)
    _whole_lists: dict[str, list] = PrivateAttr(default_factory=dict)  # each list's records, for the trials index; never written

    def listed_notes(self, name: str) -> dict[str, str]:
        """A trial list in full, trial id -> note: as built, or as far as the report holds it (one
        read from disk). Plain strings: the trials index of 100,000 trials reads tens of thousands."""
        if name in self._whole_lists:
            text = NOTE_TEXT[name]
            return {r.trial_id: text(r) for r in self._whole_lists[name]}
        return {n.trial_id: n.note for n in getattr(self, name)}

    def listed_ids(self, name: str) -> set[str]:
        """The trial ids of a trial list in full (as listed_notes, without writing the notes)."""
        if name in self._whole_lists:
            return {r.trial_id for r in self._whole_lists[name]}
        return {n.trial_id for n in getattr(self, name)}


def build_report(manifest: RunManifest, records: list[TrialRecord], problems: list[str] | None = None,
                 browsers_not_deleted: list[UndeletedBrowser] | None = None, decisions: dict | None = None) -> Report:
    known = get_args(RecordSchema)
    if foreign := sorted(r.trial_id for r in records if r.experiment_id != manifest.experiment_id or r.schema_version not in known):
        problems = [*(problems or []), f"{len(foreign)} record(s) written by another run or under a schema this version does "
                    f"not know, left out: {', '.join(foreign[:10])}" + (" ..." if len(foreign) > 10 else "")]
        records = [r for r in records if r.experiment_id == manifest.experiment_id and r.schema_version in known]
    by_id = {r.trial_id: r for r in records}
    # A sequential run's trials after their task was decided are not run: out of every denominator, not missing.
    skipped = not_run_trials(manifest, decisions or {}, by_id.keys())
    # an ungradable case (ClawBench's placeholder schema) can only fail: in no denominator, listed apart
    ungradable = {t for t, limits in manifest.task_limits.items() if limits.ungradable}
    planned = [t for t in manifest.trials if t.trial_id not in skipped and t.task not in ungradable]
    if ungradable:
        records = [r for r in records if r.task not in ungradable]
        by_id = {r.trial_id: r for r in records}
    by_arm_task: dict[tuple[str, str], list[TrialRecord | None]] = {}
    pair_ids_by_task: dict[str, set[str]] = {}
    planned_ids: set[str] = set()
    missing = 0
    for t in planned:  # one pass: the report must stay linear in the number of trials
        planned_ids.add(t.trial_id)
        record = by_id.get(t.trial_id)
        missing += record is None
        by_arm_task.setdefault((t.arm, t.task), []).append(record)
        if t.pair_id:
            pair_ids_by_task.setdefault(t.task, set()).add(t.pair_id)
    problems = list(problems or [])
    if unplanned := sorted(by_id.keys() - planned_ids):
        problems.append(f"{len(unplanned)} record(s) of trials the plan does not hold, left out: {', '.join(unplanned[:10])}"
                        + (" ..." if len(unplanned) > 10 else ""))
    table = arm_task_rows(manifest, by_arm_task)

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
        rate_of = {(row.arm, row.task): row.rate for row in table.rows}  # missing and errored trials as not passed
        for task in sorted(manifest.task_limits):
            if ("playwright", task) in by_arm_task and ("control", task) in by_arm_task:
                playwright_rows.append(rates_row(task, "playwright", "control", rate_of[("playwright", task)],
                                                 rate_of[("control", task)]))
        adjust_unpaired_rows(playwright_rows)
    headline_playwright = [r for r in playwright_rows if manifest.task_limits[r.task].grading in HEADLINE_GRADING
                           and not manifest.task_limits[r.task].placebo]

    ordered = sorted(records, key=attrgetter("trial_id"))
    by_arm: dict[str, list[TrialRecord]] = {}
    for r in ordered:
        by_arm.setdefault(r.arm, []).append(r)
    incomplete = []
    if missing:
        incomplete.append(f"{missing} planned trial(s) have no result")
    if errored := sum(r.outcome == "errored" for r in records):
        incomplete.append(f"{errored} trial(s) errored (agent or infrastructure failure)")
    listed = listed_trials(ordered)
    report = Report(
        experiment_id=manifest.experiment_id, suite=manifest.suite, runner=manifest.runner, model=manifest.model,
        browser=manifest.browser, isolation=manifest.isolation, attempts=manifest.attempts, arms=manifest.arms, complete=not incomplete,
        incomplete_because=incomplete, planned_trials=len(planned), recorded_trials=len(planned) - missing,
        headline={arm: mean_over_tasks(per_task) for arm, per_task in table.headline_counts.items()},
        headline_tasks=sorted({task for _, task in by_arm_task if manifest.task_limits[task].grading in HEADLINE_GRADING
                               and not manifest.task_limits[task].placebo}),
        format_only={arm: mean_over_tasks(per_task) for arm, per_task in table.format_counts.items()},
        by_arm_task=table.rows, paired=paired_rows, pooled=pooled_effect(pooled_input["headline"]),
        pooled_format_only=pooled_effect(pooled_input["format"]), playwright_vs_control=playwright_rows,
        playwright_pooled=stratified_effect(headline_playwright),
        sequential=summarize(manifest, decisions or {}, planned, by_id.keys(), skipped),
        usage=[arm_usage(arm, by_arm.get(arm, [])) for arm in manifest.arms], stop_reasons=table.stop_reasons,
        **{name: trial_notes(name, whole[:LISTED]) for name, whole in listed.items()},
        listed_totals={name: len(whole) for name, whole in listed.items()},
        walls=wall_rows(ordered), writes=write_rows(manifest, ordered),
        write_groups=write_groups(manifest, ordered), clawbench=clawbench_figures(manifest, ordered),
        ungradable_tasks=sorted(ungradable),
        broken_pairs=manifest.broken_pairs, browsers_not_deleted=list(browsers_not_deleted or []),
        problems=problems, assumptions=ASSUMPTIONS,
        caveat=(f"With {manifest.attempts} attempt(s) per task and arm this run screens for large effects only: a null "
                "result here is weak evidence of no effect (see the minimum detectable effect), and no task's McNemar or sign "
                "test can reach p < 0.05 with fewer than 6 pairs (all one way give p = 0.0625 at 5)."
                if manifest.attempts < FEW_ATTEMPTS else None),
    )
    report._whole_lists = listed
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
        report.reviews = review_section(experiment_dir)
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
