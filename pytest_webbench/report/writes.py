"""ClawBench's own metrics for a run's write tasks (grading "request"), beside ours: how often a
submission was intercepted at all, how the judge's strict and lenient rubrics saw those it judged,
and the agent's tool calls of every kind (ClawBench's count) apart from its browser calls."""

from __future__ import annotations

from collections.abc import Iterable
from pydantic import BaseModel

from ..results.records import RunManifest, TrialRecord
from .rates import median_of_present


class WriteRow(BaseModel):
    arm: str
    trials: int  # write-task trials that ended (passed or failed; errored ones are not a measure)
    intercepted: int  # a request matching the task's check was blocked and kept
    by_check: int  # graded by the check's own fields (deterministic)
    by_check_passed: int
    judged: int  # graded by the judge
    judge_strict: int  # the strict rubric's matches
    judge_lenient: int  # the lenient one's: ClawBench's reward, and the grade here
    median_agent_tool_calls: float | None  # every tool call in the agent's trajectory (None: no trajectory)
    median_browser_calls: float | None


class WriteGroupRow(BaseModel):
    """A group of write tasks (ClawBench's metaclass: job-search, shopping, ...) in one arm."""

    group: str
    arm: str
    tasks: int
    trials: int
    intercepted: int
    passed: int


def by_arm(manifest: RunManifest, records: Iterable[TrialRecord], tasks: set[str],
           ended_only: bool) -> list[tuple[str, list[TrialRecord]]]:
    """The records of `tasks` per arm, in the run's order of arms (those without any left out);
    `ended_only`: passed and failed trials alone (errored ones are no measure of the agent)."""
    grouped: dict[str, list[TrialRecord]] = {}
    for r in records:
        if r.task in tasks and (not ended_only or r.outcome in ("passed", "failed")):
            grouped.setdefault(r.arm, []).append(r)
    return [(arm, grouped[arm]) for arm in manifest.arms if grouped.get(arm)]


def write_rows(manifest: RunManifest, records: Iterable[TrialRecord]) -> list[WriteRow]:
    writes = {t for t, limits in manifest.task_limits.items() if limits.grading == "request" and not limits.ungradable}
    rows = []
    for arm, recs in by_arm(manifest, records, writes, ended_only=True):
        intercepted = [r for r in recs if r.submissions]
        judged = [r for r in recs if r.judge is not None and r.judge.lenient is not None]
        by_check = [r for r in intercepted if r.judge is None]
        rows.append(WriteRow(
            arm=arm, trials=len(recs), intercepted=len(intercepted), by_check=len(by_check),
            by_check_passed=sum(r.outcome == "passed" for r in by_check), judged=len(judged),
            judge_strict=sum(bool(r.judge.strict and r.judge.strict.match) for r in judged),
            judge_lenient=sum(r.judge.lenient.match for r in judged),
            median_agent_tool_calls=median_of_present(r.agent_tool_calls for r in recs),
            median_browser_calls=median_of_present(r.calls.forwarded for r in recs),
        ))
    return rows


def write_groups(manifest: RunManifest, records: Iterable[TrialRecord]) -> list[WriteGroupRow]:
    groups = {t: limits.group for t, limits in manifest.task_limits.items()
              if limits.grading == "request" and not limits.ungradable and limits.group}
    cells: dict[tuple[str, str], list[TrialRecord]] = {}
    for r in records:
        if r.task in groups and r.outcome in ("passed", "failed"):
            cells.setdefault((groups[r.task], r.arm), []).append(r)
    order = {arm: i for i, arm in enumerate(manifest.arms)}
    return [WriteGroupRow(group=group, arm=arm, tasks=len({r.task for r in recs}), trials=len(recs),
                          intercepted=sum(bool(r.submissions) for r in recs), passed=sum(r.outcome == "passed" for r in recs))
            for (group, arm), recs in sorted(cells.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99)))]
