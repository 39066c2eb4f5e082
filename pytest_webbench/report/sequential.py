"""What a sequential run decided and saved, for the report: the rule, each task's decision (or that
it ran to its cap), and the trials not run because their task was decided."""

from __future__ import annotations

from pydantic import BaseModel

from ..design.pairing import TrialKey
from ..results.records import PlannedTrial, RunManifest
from ..results.decisions import TaskDecision, not_run
from ..stats import holm


class TaskStop(BaseModel):
    task: str
    decision: TaskDecision | None  # None: not decided (ran to its cap, or the run is unfinished)
    pairs_run: int  # pairs with at least one trial recorded
    # the decision's anytime p-values, Holm-adjusted over the run's decided tasks (one family per endpoint)
    p_holm: float | None = None
    speed_p_holm: float | None = None


class SequentialSummary(BaseModel):
    rule: str
    max_pairs: int
    tasks: list[TaskStop]
    trials_planned: int  # the plan at its cap: every task at max_pairs
    trials_run: int
    trials_not_run: int  # their task was decided first
    saved_share: float  # not run / planned
    fixed_design_pairs: int  # the fixed design the rule was tuned to replace, pairs per task
    fixed_design_trials: int


def not_run_trials(manifest: RunManifest, decisions: dict[str, TaskDecision], recorded: set[str]) -> set[str]:
    """Planned trials without a record whose task was decided before their round."""
    if manifest.sequential is None:
        return set()
    return {t.trial_id for t in manifest.trials
            if t.trial_id not in recorded and not_run(TrialKey(t.task, t.attempt, t.arm), decisions.get(t.task))}


def summarize(manifest: RunManifest, decisions: dict[str, TaskDecision], planned: list[PlannedTrial],
              recorded: set[str], skipped: set[str]) -> SequentialSummary | None:
    plan = manifest.sequential
    if plan is None:
        return None
    in_plan = list(dict.fromkeys(t.task for t in manifest.trials))  # the tasks this run planned, in order
    attempts_run: dict[str, set[int]] = {task: set() for task in in_plan}
    for t in planned:
        if t.pair_id and t.trial_id in recorded:
            attempts_run[t.task].add(t.attempt)
    tasks = [TaskStop(task=task, decision=decisions.get(task), pairs_run=len(attempts_run[task])) for task in in_plan]
    for stop, adjusted in zip(tasks, holm([t.decision.p_value if t.decision else None for t in tasks])):
        stop.p_holm = adjusted
    for stop, adjusted in zip(tasks, holm([t.decision.speed_p_value if t.decision else None for t in tasks])):
        stop.speed_p_holm = adjusted
    fixed = max(1, manifest.attempts // 2)
    per_pair = len(manifest.arms)
    return SequentialSummary(
        rule=plan.description, max_pairs=plan.max_pairs, tasks=tasks, trials_planned=len(manifest.trials),
        trials_run=len(recorded & {t.trial_id for t in manifest.trials}), trials_not_run=len(skipped),
        saved_share=len(skipped) / len(manifest.trials) if manifest.trials else 0.0,
        fixed_design_pairs=fixed, fixed_design_trials=fixed * per_pair * len(in_plan),
    )
