"""Builds the report from the experiment directory alone: the manifest and the trial records.

Planned trials without a record count as missing: they stay in the denominator, as failures.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from pydantic import BaseModel, Field

from ..records import RunManifest, TrialRecord, read_manifest, read_trial_records
from ..stats import ASSUMPTIONS, mcnemar_exact, sign_test, wilson

REPORT_SCHEMA = 1


class Rate(BaseModel):
    passes: int
    n: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


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
    stop_reasons: dict[str, int] = Field(default_factory=dict)


class PairedRow(BaseModel):
    task: str
    placebo: bool
    pairs: int
    both: int
    control_only: int
    treatment_only: int
    neither: int
    mcnemar_p: float | None
    both_pass_pairs: int
    median_speedup: float | None  # control agent time / treatment agent time, both-pass pairs
    treatment_faster: int
    control_faster: int
    sign_p: float | None


class Report(BaseModel):
    schema_version: int = REPORT_SCHEMA
    experiment_id: str
    suite: str
    runner: str
    model: str | None
    attempts: int
    complete: bool
    planned_trials: int
    recorded_trials: int
    headline: dict[str, Rate]  # per arm, tasks graded against the page or a pinned value
    format_only: dict[str, Rate]
    by_arm_task: list[ArmTaskRow]
    paired: list[PairedRow]
    pooled_paired: PairedRow | None
    broken_pairs: list[str]
    rejected_calls: int
    cap_hits: int
    problems: list[str]
    assumptions: dict[str, str]


def _rate(passes: int, n: int) -> Rate:
    ci = wilson(passes, n)
    return Rate(passes=passes, n=n, rate=passes / n if n else None,
                ci_low=ci.low if ci else None, ci_high=ci.high if ci else None)


def _paired_row(task: str, placebo: bool, pairs: list[tuple[TrialRecord | None, TrialRecord | None]]) -> PairedRow:
    def passed(r: TrialRecord | None) -> bool:
        return r is not None and r.outcome == "passed"

    both = sum(passed(c) and passed(t) for c, t in pairs)
    c_only = sum(passed(c) and not passed(t) for c, t in pairs)
    t_only = sum(passed(t) and not passed(c) for c, t in pairs)
    speedups, t_fast, c_fast = [], 0, 0
    for c, t in pairs:
        if passed(c) and passed(t) and c.timings.agent_sec and t.timings.agent_sec:
            speedups.append(c.timings.agent_sec / t.timings.agent_sec)
            t_fast += t.timings.agent_sec < c.timings.agent_sec
            c_fast += c.timings.agent_sec < t.timings.agent_sec
    return PairedRow(
        task=task, placebo=placebo, pairs=len(pairs), both=both, control_only=c_only, treatment_only=t_only,
        neither=len(pairs) - both - c_only - t_only, mcnemar_p=mcnemar_exact(c_only, t_only), both_pass_pairs=both,
        median_speedup=median(speedups) if speedups else None, treatment_faster=t_fast, control_faster=c_fast,
        sign_p=sign_test(t_fast, c_fast),
    )


def build_report(manifest: RunManifest, records: list[TrialRecord], problems: list[str] | None = None) -> Report:
    by_id = {r.trial_id: r for r in records}
    planned = manifest.trials
    rows: list[ArmTaskRow] = []
    headline_counts: dict[str, list[int]] = {}
    format_counts: dict[str, list[int]] = {}
    keys = sorted({(t.arm, t.task) for t in planned}, key=lambda k: (manifest.arms.index(k[0]) if k[0] in manifest.arms else 99, k[1]))
    for arm, task in keys:
        limits = manifest.task_limits[task]
        trials = [t for t in planned if t.arm == arm and t.task == task]
        recs = [by_id.get(t.trial_id) for t in trials]
        counts = {o: sum(1 for r in recs if r is not None and r.outcome == o) for o in ("passed", "failed", "errored")}
        missing = sum(1 for r in recs if r is None)
        reasons: dict[str, int] = {}
        for r in recs:
            reason = "missing" if r is None else r.stop_reason
            if reason:
                reasons[reason] = reasons.get(reason, 0) + 1
        rows.append(ArmTaskRow(
            arm=arm, task=task, grading=limits.grading, placebo=limits.placebo, missing=missing,
            rate=_rate(counts["passed"], len(trials)), stop_reasons=reasons, **counts,
        ))
        target = format_counts if limits.grading == "format" else headline_counts
        acc = target.setdefault(arm, [0, 0])
        acc[0] += counts["passed"]
        acc[1] += len(trials)
    paired_rows, pooled_pairs = [], []
    if manifest.paired:
        for task in sorted({t.task for t in planned}):
            pairs = []
            for pair_id in sorted({t.pair_id for t in planned if t.task == task and t.pair_id}):
                if pair_id in manifest.broken_pairs:
                    continue
                pairs.append((by_id.get(f"{pair_id}-control"), by_id.get(f"{pair_id}-treatment")))
            if pairs:
                placebo = manifest.task_limits[task].placebo
                paired_rows.append(_paired_row(task, placebo, pairs))
                if not placebo:
                    pooled_pairs.extend(pairs)
    pooled = _paired_row("(pooled, placebo left out)", False, pooled_pairs) if pooled_pairs else None
    problems = list(problems or [])
    incomplete = any(r.outcome == "errored" for r in records) or len(by_id) < len(planned)
    return Report(
        experiment_id=manifest.experiment_id, suite=manifest.suite, runner=manifest.runner, model=manifest.model,
        attempts=manifest.attempts, complete=not incomplete, planned_trials=len(planned), recorded_trials=len(by_id),
        headline={arm: _rate(*c) for arm, c in headline_counts.items()},
        format_only={arm: _rate(*c) for arm, c in format_counts.items()},
        by_arm_task=rows, paired=paired_rows, pooled_paired=pooled, broken_pairs=manifest.broken_pairs,
        rejected_calls=sum(r.calls.rejected for r in records), cap_hits=sum(r.calls.cap_hit for r in records),
        problems=problems, assumptions=ASSUMPTIONS,
    )


def build_report_from_dir(experiment_dir: Path) -> Report:
    manifest = read_manifest(experiment_dir)
    records, problems = read_trial_records(experiment_dir)
    return build_report(manifest, records, problems)
